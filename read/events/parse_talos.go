package events

import (
	"bytes"
)

// reTalosKern is the prefix `talosctl dmesg` puts before a kernel record:
// the node's name when asked of several nodes, then the facility, the
// level and the record's RFC 3339 time in brackets ("109.200.197.196:
// kern:   alert: [2024-05-13T15:13:11.99476118Z]: XFS (sdb6): ...").
var reTalosKern = lazy(`^(?:[\w.:-]{1,253}: )?kern: {0,8}([a-z]{3,7}): \[(\d{4}-\d\d-\d\dT[0-9:.]{8,19}(?:Z|[+-]\d\d:\d\d)?)\]: `)

// talosKern takes `talosctl dmesg`'s prefix off a record: the record is
// the kernel's, at the level and time the prefix gives. ok is false when
// b does not start with one.
func talosKern(r *record, b []byte) ([]byte, bool) {
	if i := bytes.Index(b[:min(len(b), 270)], []byte("kern:")); i < 0 {
		return b, false
	}
	m := reTalosKern.FindSubmatch(b)
	if m == nil {
		return b, false
	}
	r.ev.Source = "kernel"
	r.ev.Level = levelWord(string(m[1]))
	if t, ok := parseStamp(string(m[2])); ok {
		r.ev.Time, r.ev.Zoned = t, true
	}
	return b[len(m[0]):], true
}
