package layout_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Two copies of one namespace, as `unshare --mount` makes them: the same
// lines, numbered anew, the root's parent outside the table.
const (
	copyTable = "612 611 0:77 / / rw,relatime - overlay overlay rw,lowerdir=/l\n" +
		"613 612 0:5 / /proc rw - proc proc rw\n" +
		"614 612 0:78 / /dev rw,nosuid - tmpfs tmpfs rw\n" +
		"615 614 0:79 / /dev/pts rw - devpts devpts rw\n" +
		"616 400 0:80 / /mnt/outside\\040dir rw - tmpfs tmpfs rw\n"
	otherTable = "900 811 0:77 / / rw,relatime - overlay overlay rw,lowerdir=/l\n" +
		"901 900 0:5 / /proc rw - proc proc rw\n" +
		"902 900 0:78 / /dev rw,nosuid - tmpfs tmpfs rw\n" +
		"903 902 0:79 / /dev/pts rw - devpts devpts rw\n" +
		"7 402 0:80 / /mnt/outside\\040dir rw - tmpfs tmpfs rw\n"
)

func TestRebuildMountinfo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		base    string
		ids     [][2]int
		outside []int
		want    string
		err     bool
	}{
		{"itself", copyTable, [][2]int{{612, 5}}, []int{611, 400}, copyTable, false},
		{"another namespace's numbers", copyTable, [][2]int{{900, 4}, {7, 1}}, []int{811, 402}, otherTable, false},
		{"no final newline kept", "1 0 0:1 / / rw - x x rw\n2 1 0:2 / /a rw - x x rw", [][2]int{{5, 2}}, []int{9}, "5 9 0:1 / / rw - x x rw\n6 5 0:2 / /a rw - x x rw", false},
		{"empty lines kept", "1 0 0:1 / / rw - x x rw\n\n2 1 0:2 / /a rw - x x rw\n", [][2]int{{5, 2}}, []int{9}, "5 9 0:1 / / rw - x x rw\n\n6 5 0:2 / /a rw - x x rw\n", false},
		{"too few IDs", copyTable, [][2]int{{900, 4}}, []int{811, 402}, "", true},
		{"too many IDs", copyTable, [][2]int{{900, 6}}, []int{811, 402}, "", true},
		{"too few outside parents", copyTable, [][2]int{{900, 5}}, []int{811}, "", true},
		{"too many outside parents", copyTable, [][2]int{{900, 5}}, []int{811, 402, 3}, "", true},
		{"a copy line without IDs", "x y 0:1 / / rw\n", [][2]int{{1, 1}}, []int{0}, "", true},
	} {
		got, err := layout.RebuildMountinfo([]byte(tc.base), tc.ids, tc.outside)
		if (err != nil) != tc.err || string(got) != tc.want {
			t.Errorf("%s: %q %v, want %q (error %v)", tc.name, got, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, layout.ErrMountinfoRebuild) {
			t.Errorf("%s: error %v is not ErrMountinfoRebuild", tc.name, err)
		}
		// Rebuilds checks without building: true for what Rebuild
		// gives, false for anything else.
		b, berr := layout.NewMountinfoBase([]byte(tc.base))
		if berr != nil {
			continue
		}
		if got := b.Rebuilds([]byte(tc.want), tc.ids, tc.outside); got != !tc.err {
			t.Errorf("%s: Rebuilds(want) %v", tc.name, got)
		}
		for _, other := range []string{tc.want + "\n", strings.TrimSuffix(tc.want, "\n"), strings.Replace(tc.want, "rw", "ro", 1), copyTable, ""} {
			if other != tc.want && b.Rebuilds([]byte(other), tc.ids, tc.outside) {
				t.Errorf("%s: Rebuilds(%q) true", tc.name, other)
			}
		}
	}
}

// A table written by reference comes back from EachMountinfoTable as the
// namespace's own text; one that cannot be rebuilt is reported, never
// passed as an empty table.
func TestEachMountinfoTableRebuilds(t *testing.T) {
	first := layout.MountinfoHeader{Inode: 20, PID: 5, TID: 5}
	ref := layout.MountinfoHeader{Inode: 21, PID: 6, TID: 6, SameAs: 20, IDs: [][2]int{{900, 4}, {7, 1}}, Outside: []int{811, 402}}
	bad := layout.MountinfoHeader{Inode: 22, PID: 7, TID: 7, SameAs: 20, IDs: [][2]int{{900, 2}}}
	missing := layout.MountinfoHeader{Inode: 23, PID: 8, TID: 8, SameAs: 99, IDs: [][2]int{{1, 5}}}
	file := layout.FormatMountinfoHeader(first) + copyTable +
		layout.FormatMountinfoHeader(ref) +
		layout.FormatMountinfoHeader(bad) +
		layout.FormatMountinfoHeader(missing)
	got := map[uint64]string{}
	errs := map[uint64]error{}
	layout.EachMountinfoTable([]byte(file), func(h layout.MountinfoHeader, b []byte, err error) {
		got[h.Inode], errs[h.Inode] = string(b), err
	})
	if got[20] != copyTable || errs[20] != nil {
		t.Errorf("the copy: %q %v", got[20], errs[20])
	}
	if got[21] != otherTable || errs[21] != nil {
		t.Errorf("the reference: %q %v, want %q", got[21], errs[21], otherTable)
	}
	for _, ns := range []uint64{22, 23} {
		if got[ns] != "" || !errors.Is(errs[ns], layout.ErrMountinfoRebuild) {
			t.Errorf("namespace %d: %q %v, want ErrMountinfoRebuild", ns, got[ns], errs[ns])
		}
	}
	// A copy after its reference is not used: readers stream the file.
	late := layout.FormatMountinfoHeader(ref) + layout.FormatMountinfoHeader(first) + copyTable
	layout.EachMountinfoTable([]byte(late), func(h layout.MountinfoHeader, b []byte, err error) {
		if h.Inode == 21 && !errors.Is(err, layout.ErrMountinfoRebuild) {
			t.Errorf("a reference before its copy: %q %v", b, err)
		}
	})
}

// FuzzRebuildMountinfo: never panics, and what it rebuilds has the base's
// lines after their IDs, byte for byte, and the base's count of lines.
func FuzzRebuildMountinfo(f *testing.F) {
	f.Add([]byte(copyTable), 900, 4, 7, 1, 811, 402)
	f.Add([]byte("1 0 x\n\n"), 5, 1, 0, 0, 9, -1)
	f.Add([]byte("1 1 x\n1 1 y"), 1, 2, 0, 0, 0, 0)
	f.Fuzz(func(t *testing.T, base []byte, a, an, b, bn, p, q int) {
		ids := [][2]int{{a, an}}
		if bn != 0 {
			ids = append(ids, [2]int{b, bn})
		}
		outside := []int{p}
		if q >= 0 {
			outside = append(outside, q)
		}
		got, err := layout.RebuildMountinfo(base, ids, outside)
		if err != nil {
			return
		}
		mb, err := layout.NewMountinfoBase(base)
		if err != nil {
			t.Fatalf("rebuilt from a base that does not read: %v", err)
		}
		if !mb.Rebuilds(got, ids, outside) || mb.Rebuilds(append(bytes.Clone(got), 'x'), ids, outside) {
			t.Fatalf("Rebuilds disagrees with Rebuild over %q", got)
		}
		gl, bl := bytes.Split(got, []byte("\n")), bytes.Split(base, []byte("\n"))
		if len(gl) != len(bl) {
			t.Fatalf("%d lines rebuilt from %d", len(gl), len(bl))
		}
		for i := range gl {
			_, grest, _ := bytes.Cut(gl[i], []byte(" "))
			_, grest, _ = bytes.Cut(grest, []byte(" "))
			_, brest, _ := bytes.Cut(bl[i], []byte(" "))
			_, brest, _ = bytes.Cut(brest, []byte(" "))
			if !bytes.Equal(grest, brest) {
				t.Fatalf("line %d: %q rebuilt as %q", i, bl[i], gl[i])
			}
		}
	})
}
