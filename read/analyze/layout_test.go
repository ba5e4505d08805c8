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

// The tables file: each header names the namespace of the lines after it
// and says whether it is the host's, which is known before mounts.json is
// read. A block device mounted outside the host's namespace is quoted; in
// the host's namespace (outside kubelet and runtime paths) it is not.
func TestReadMountinfoTables(t *testing.T) {
	const boot = "30 22 8:1 / /boot rw,relatime - ext4 /dev/sda1 rw\n"
	data := "==> mnt:[4026531840] pid=1 tid=1 host <==\n" + boot +
		"==> mnt:[4026532601] pid=77 tid=78 <==\n" + boot +
		"==> mnt:[4026532602] pid=80 tid=80 truncated newline-added <==\n" + "31 22 8:2 / /data rw - ext4 /dev/sda2 rw\n" +
		"==> mnt:[bad] pid=1 <==\n" + "32 22 8:3 / /x rw - ext4 /dev/sda3 rw\n"
	const name = "mounts/mountinfo.txt"
	st := newState()
	fn := st.readerFor(name)
	if fn == nil {
		t.Fatalf("no reader for %s", name)
	}
	if err := fn(name, strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns   uint64
		id   int
		line int
		kept bool
	}{
		{4026531840, 30, 2, false},
		{4026532601, 30, 4, true},
		{4026532602, 31, 6, true},
	} {
		l, ok := st.mountinfoLines[nsMount{tc.ns, tc.id}]
		if ok != tc.kept || ok && l.N != tc.line {
			t.Errorf("namespace %d mount %d: kept %v (line %d), want %v (line %d)", tc.ns, tc.id, ok, l.N, tc.kept, tc.line)
		}
		if got := st.mountinfoPath[tc.ns]; got != name {
			t.Errorf("namespace %d: path %q, want %q", tc.ns, got, name)
		}
	}
	if len(st.mountinfoLines) != 2 {
		t.Errorf("kept %d lines, want 2 (none after a malformed header): %+v", len(st.mountinfoLines), st.mountinfoLines)
	}
	for _, other := range []string{"mounts/mountinfo-2.txt", "mounts/ns/mountinfo.txt", "mounts/mountinfo.json"} {
		if got := st.readerFor(other); (got != nil) != (other == "mounts/mountinfo-2.txt") {
			t.Errorf("%s: reader %v", other, got != nil)
		}
	}
}
