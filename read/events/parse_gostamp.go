package events

import (
	"strings"
	"time"
)

// Go's standard log package stamps a record "2006/01/02 15:04:05" (with
// microseconds under log.Lmicroseconds), and the tools that log through
// it (JuiceFS's and geesefs's mount processes, gcsfuse, weed mount) put
// their own level after it: in angle brackets with a process tag before
// it ("juicefs[6] <FATAL>: msg"), as a logger's suffix ("fuse.ERROR
// msg"), or as a bare word ("ERROR msg").

// reGoStamp is the stamp, an optional "name[pid]" tag, and a level in any
// of those forms (each part but the stamp optional).
var reGoStamp = lazy(`^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\s+(?:([A-Za-z][\w.-]*)\[\d+\]:?\s+)?(?:<([A-Za-z]+)>:?\s*|([A-Za-z][\w-]*)\.(ERROR|WARNING|WARN|INFO|DEBUG|FATAL|PANIC|CRITICAL)\s+|\[?(ERROR|WARNING|WARN|INFO|DEBUG|FATAL|PANIC|CRITICAL)\]?:?\s+)?`)

// goStampBody reads a record that opens with Go's log stamp: its time,
// the writer's tag or logger as its component, and its level.
func goStampBody(r *record, b []byte) ([]byte, bool) {
	if len(b) < 19 || b[4] != '/' || b[7] != '/' {
		return nil, false
	}
	m := reGoStamp.FindSubmatch(b)
	if m == nil {
		return nil, false
	}
	if t, err := time.Parse("2006/01/02 15:04:05.999999999", string(m[1])); err == nil && r.ev.Time.IsZero() {
		r.ev.Time = t
	}
	switch {
	case len(m[3]) > 0:
		r.ev.Level = levelWord(string(m[3]))
	case len(m[5]) > 0:
		r.ev.Level = levelWord(string(m[5]))
	case len(m[6]) > 0:
		r.ev.Level = levelWord(string(m[6]))
	}
	if len(m[2]) > 0 {
		r.ev.Component = string(m[2])
	} else if len(m[4]) > 0 {
		r.ev.Component = string(m[4])
	}
	r.msg = string(b[len(m[0]):])
	return nil, true
}

// quotedDeviceName is a kernel block device's bare name a record quotes
// after the word "device" ("multipath device 'dm-76' serial check
// failed", `device "sdb" is busy`), or "": the quotes make the name a
// token of its own, the word says what it names.
func quotedDeviceName(text string) string {
	for from := 0; ; {
		i := strings.Index(text[from:], "device ")
		if i < 0 {
			return ""
		}
		i += from
		from = i + len("device ")
		if !boundaryBefore(text, i) {
			continue
		}
		rest := text[from:]
		rest = strings.TrimLeft(rest, "\\")
		if rest == "" || rest[0] != '\'' && rest[0] != '"' {
			continue
		}
		q := rest[0]
		end := strings.IndexByte(rest[1:], q)
		if end <= 0 {
			continue
		}
		name := strings.TrimRight(rest[1:1+end], "\\")
		if reBareDevice.MatchString(name) {
			return name
		}
	}
}

// reBareDevice is a kernel block device's name alone: a whole device
// (blockDevNames, as multipathd's records are read), a DRBD device, or a
// partition of one.
var reBareDevice = lazy(`^(?:` + blockDevNames + `|drbd\d+)(?:p?\d+)?$`)

// reNamespacedPod is a pod named by its namespace and name after the word
// "pod" ("for pod my-ns/my-app-5b8", "pod default/web-0:"): both DNS-1123
// labels joined by one slash.
var reNamespacedPod = lazy(`\bpod[ \t]+([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)\b`)

// namespacedPodWords: every match of reNamespacedPod holds one.
var namespacedPodWords = []string{"pod ", "pod\t"}

// namespacedPod is the pod a record names as "pod <namespace>/<name>",
// or "".
func namespacedPod(text string) string {
	if !containsAny(text, namespacedPodWords...) {
		return ""
	}
	m := reNamespacedPod.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return m[1]
}

// reSourceFile is a program's source file, with its line: where its
// writer logged from (slog's source=, a caller), never a storage object.
var reSourceFile = lazy(`\.(?:go|rs|py|js|ts|java|c|cc|cpp)(?::\d+)?$`)

// notAnObject drops the keys a record's text gave that are no storage
// object by their form: a source file's location read as a path, a
// bare word ending in a colon read as a server ("server id: 5057161"), a
// field's own name read as a volume ("volume volume-id=7": the word
// before '=' is the key, the value after it the volume).
func notAnObject(text string, k *Keys) {
	if k.Path != "" && reSourceFile.MatchString(k.Path) {
		k.Path = ""
	}
	if strings.HasSuffix(k.Server, ":") && !strings.ContainsAny(k.Server, "./0123456789[") {
		// A word and its colon: a label, where a host has a dot, a
		// digit or a share's slash.
		k.Server = ""
	}
	if k.Volume != "" && strings.Contains(text, " "+k.Volume+"=") && !strings.Contains(text, " "+k.Volume+" ") {
		k.Volume = ""
	}
}
