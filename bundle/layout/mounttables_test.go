package layout

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/internal/procfs"
)

func TestMountIDRuns(t *testing.T) {
	for _, tc := range []struct {
		ids  []int
		want [][2]int
	}{
		{nil, nil},
		{[]int{45, 46, 47}, [][2]int{{45, 3}}},
		{[]int{26, 21, 22, 23, 30, 31}, [][2]int{{26, 1}, {21, 3}, {30, 2}}},
		{[]int{5, 5}, [][2]int{{5, 1}, {5, 1}}},
	} {
		if got := MountIDRuns(tc.ids); !slices.Equal(got, tc.want) {
			t.Errorf("MountIDRuns(%v) = %v, want %v", tc.ids, got, tc.want)
		}
	}
}

func TestRenumberMounts(t *testing.T) {
	// The table as its first namespace numbers it: 26 is the root (its
	// parent 1 outside), 21 and 23 under it, 24 under 23; 40's parent 99
	// is outside too.
	tids := []int{26, 21, 23, 24, 40}
	tpar := []int{1, 26, 26, 23, 99}
	ids, parents, err := RenumberMounts(tids, tpar, [][2]int{{100, 5}}, []int{7, 8})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{100, 101, 102, 103, 104}; !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	if want := []int{7, 100, 100, 102, 8}; !slices.Equal(parents, want) {
		t.Errorf("parents %v, want %v", parents, want)
	}
	for _, tc := range []struct {
		name  string
		runs  [][2]int
		roots []int
	}{
		{"too few IDs", [][2]int{{100, 4}}, []int{7, 8}},
		{"too many IDs", [][2]int{{100, 5}, {200, 1}}, []int{7, 8}},
		{"a huge run", [][2]int{{100, 1 << 40}}, []int{7, 8}},
		{"a negative run", [][2]int{{100, -1}, {100, 6}}, []int{7, 8}},
		{"too few root parents", [][2]int{{100, 5}}, []int{7}},
		{"too many root parents", [][2]int{{100, 5}}, []int{7, 8, 9}},
	} {
		if _, _, err := RenumberMounts(tids, tpar, tc.runs, tc.roots); !errors.Is(err, ErrMountTable) {
			t.Errorf("%s: err %v, want ErrMountTable", tc.name, err)
		}
	}
}

// A whole format-2 mounts.json reads as format 1: each namespace naming a
// table gets its mounts numbered as its own; a table missing, or numbers
// that do not fit, is an error naming the namespace, and the others are
// still filled.
func TestExpandMountTables(t *testing.T) {
	ms, bad := procfs.ParseMountInfo([]byte("26 1 254:0 / / rw - ext4 /dev/vda rw\n27 26 0:22 / /dev/shm rw - tmpfs tmpfs rw\n"))
	if len(bad) > 0 || len(ms) != 2 {
		t.Fatal("fixture table does not parse")
	}
	table := make([]NamespaceMount, len(ms))
	for i, m := range ms {
		table[i] = NamespaceMount{Mount: m, PropagationType: "private", Class: "block"}
	}
	rep := MountsReport{Format: MountsFormat, Tables: []MountTable{{Hash: "h1", Mounts: table}},
		Namespaces: []MountNamespace{
			{Inode: 1, Host: true, Table: "h1", MountIDs: [][2]int{{26, 2}}, RootParents: []int{1}},
			{Inode: 2, Table: "h1", MountIDs: [][2]int{{300, 2}}, RootParents: []int{299}},
			{Inode: 3, Table: "gone", MountIDs: [][2]int{{400, 2}}, RootParents: []int{399}},
			{Inode: 4, Table: "h1", MountIDs: [][2]int{{500, 3}}, RootParents: []int{499}},
			{Inode: 5, Mounts: table},
		}}
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	var got MountsReport
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	err = ExpandMountTables(&got)
	if err == nil || !strings.Contains(err.Error(), "mount namespace 3") || !strings.Contains(err.Error(), "mount namespace 4") {
		t.Errorf("err %v, want one naming namespaces 3 and 4", err)
	}
	ns := got.Namespaces
	if len(ns[0].Mounts) != 2 || ns[0].Mounts[0].ID != 26 || ns[0].Mounts[1].ParentID != 26 || ns[0].Mounts[0].ParentID != 1 {
		t.Errorf("host namespace: %+v", ns[0].Mounts)
	}
	if len(ns[1].Mounts) != 2 || ns[1].Mounts[0].ID != 300 || ns[1].Mounts[0].ParentID != 299 ||
		ns[1].Mounts[1].ID != 301 || ns[1].Mounts[1].ParentID != 300 || ns[1].Mounts[1].MountPoint != "/dev/shm" {
		t.Errorf("copy: %+v", ns[1].Mounts)
	}
	if len(ns[2].Mounts) != 0 || len(ns[3].Mounts) != 0 {
		t.Errorf("namespaces 3 and 4 got mounts: %d, %d", len(ns[2].Mounts), len(ns[3].Mounts))
	}
	if len(ns[4].Mounts) != 2 || ns[4].Mounts[0].ID != 26 {
		t.Errorf("a namespace with its own mounts changed: %+v", ns[4].Mounts)
	}
	if ns[1].Mounts[0].ID = 1; got.Tables[0].Mounts[0].ID != 26 {
		t.Error("a namespace's mounts are the table's own, not a copy")
	}

	newer := MountsReport{Format: MountsFormat + 1}
	if err := ExpandMountTables(&newer); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("format %d: err %v, want one saying it is newer", newer.Format, err)
	}
}

// Whatever mounts.json holds, expanding it returns (an error at worst),
// allocating no more than its tables hold.
func FuzzExpandMountTables(f *testing.F) {
	f.Add([]byte(`{"format":2,"tables":[{"hash":"a","mounts":[{"mount_id":26,"parent_id":1},{"mount_id":27,"parent_id":26}]}],"namespaces":[{"inode":1,"table":"a","mount_ids":[[100,2]],"root_parents":[9]}]}`))
	f.Add([]byte(`{"format":2,"tables":[{"hash":"a","mounts":[{"mount_id":1,"parent_id":1}]}],"namespaces":[{"inode":1,"table":"a","mount_ids":[[9223372036854775807,1]],"root_parents":[]}]}`))
	f.Add([]byte(`{"tables":[],"namespaces":[{"table":"x","mount_ids":[[0,-5]]}]}`))
	// Format 3: a device naming two namespaces of table a, one twice.
	f.Add([]byte(`{"format":3,"tables":[{"hash":"a","mounts":[{"mount_id":26,"parent_id":1,"major":7,"minor":3,"class":"block"}]}],"namespaces":[{"inode":1,"table":"a","mount_ids":[[100,1]],"root_parents":[9]},{"inode":2,"table":"a","mount_ids":[[200,1]],"root_parents":[9]}],"devices":[{"dev":"7:3","major":7,"minor":3,"namespaces":[],"tables":[{"table":"a","namespaces":[1,2,2]}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var rep MountsReport
		if json.Unmarshal(b, &rep) != nil {
			return
		}
		if err := ExpandMountTables(&rep); err != nil {
			return
		}
		for _, ns := range rep.Namespaces {
			if ns.Table == "" {
				continue
			}
			n := 0
			for _, r := range ns.MountIDs {
				n += r[1]
			}
			if len(ns.Mounts) != n {
				t.Errorf("namespace %d: %d mounts from runs counting %d", ns.Inode, len(ns.Mounts), n)
			}
		}
		for _, d := range rep.Devices {
			if len(d.Tables) > 0 {
				t.Errorf("device %s: its tables left after expanding", d.Dev)
			}
		}
	})
}
