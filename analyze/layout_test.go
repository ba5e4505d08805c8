package analyze

import (
	"strings"
	"testing"
)

// Raw mount tables are read under both layouts: ns/<inode>.mountinfo, and
// ns/<inode>/mountinfo of bundles from earlier development builds.
func TestReadMountinfoLayouts(t *testing.T) {
	const line = "36 25 7:3 / /mnt/held rw,relatime - ext4 /dev/loop3 rw\n"
	for _, tc := range []struct {
		name string
		ns   uint64
		read bool
	}{
		{"mounts/ns/4026532601.mountinfo", 4026532601, true},
		{"mounts/ns/4026532601/mountinfo", 4026532601, true},
		{"mounts/ns/notanumber.mountinfo", 0, false},
		{"mounts/ns/4026532601.txt", 0, false},
		{"mounts/mountinfo", 0, false},
	} {
		st := newState()
		fn := st.readerFor(tc.name)
		if fn == nil {
			if tc.read && tc.ns != 0 {
				t.Errorf("%s: no reader", tc.name)
			}
			continue
		}
		if err := fn(tc.name, strings.NewReader(line)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got, ok := st.mountinfoPath[tc.ns]
		if tc.read != (ok && got == tc.name) {
			t.Errorf("%s: recorded for namespace %d: %q (%v), want read=%v", tc.name, tc.ns, got, ok, tc.read)
		}
	}
}
