package layout

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/internal/procfs"
)

// deviceTablesReport is a host and three copies of one namespace that
// share a table (a loop device 7:3 mounted only in the copies, and the
// root 254:0 everywhere), the third copy's entry under 7:3 changed so
// that its table no longer says all of it.
func deviceTablesReport() *MountsReport {
	mount := func(id, parent int, major, minor uint32, mp, class string) NamespaceMount {
		return NamespaceMount{Mount: procfs.Mount{ID: id, ParentID: parent, Major: major, Minor: minor, Root: "/", MountPoint: mp,
			FSType: "ext4", Source: "/dev/x", Propagation: procfs.Propagation{Shared: 3}}, PropagationType: "shared", Class: class}
	}
	rep := &MountsReport{HostNamespace: 1}
	host := MountNamespace{Inode: 1, Host: true, ProcessCount: 1, Processes: []NamespaceProcess{{PID: 1, Comm: "init", Threads: 1}},
		Mounts: []NamespaceMount{mount(20, 1, 254, 0, "/", "block"), mount(21, 20, 0, 22, "/proc", "pseudo")}}
	rep.Namespaces = append(rep.Namespaces, host)
	for k := range 3 {
		base := 100 + 10*k
		ns := MountNamespace{Inode: uint64(10 + k), ProcessCount: 1, Processes: []NamespaceProcess{{PID: 50 + k, Comm: "copy", Threads: 1}},
			Mounts: []NamespaceMount{mount(base, 9, 254, 0, "/", "block"), mount(base+1, base, 7, 3, "/held", "block"),
				mount(base+2, base, 7, 3, "/held2", "block"), mount(base+3, base, 0, 22, "/proc", "pseudo")},
			Table: "t1", MountIDs: [][2]int{{base, 4}}, RootParents: []int{9}}
		rep.Namespaces = append(rep.Namespaces, ns)
	}
	rep.Tables = []MountTable{{Hash: "t1", Mounts: rep.Namespaces[1].Mounts}}
	rep.Devices = buildIndex(rep.Namespaces)
	rep.Devices[1].Namespaces[2].Mounts[0].MountPoint = "/elsewhere"
	return rep
}

// buildIndex is the collector's device index, written out here.
func buildIndex(nss []MountNamespace) []MountDevice {
	var out []MountDevice
	for _, dev := range [][2]uint32{{254, 0}, {7, 3}} {
		d := MountDevice{Dev: procfs.Mount{Major: dev[0], Minor: dev[1]}.Dev(), Major: dev[0], Minor: dev[1]}
		for i := range nss {
			if ms := deviceMountsOf(nss[i].Mounts, dev[0], dev[1]); len(ms) > 0 {
				d.Namespaces = append(d.Namespaces, DeviceNamespaceOf(&nss[i], ms))
				d.InHostNamespace = d.InHostNamespace || nss[i].Host
			}
		}
		d.OnlyOutsideHostNamespace = !d.InHostNamespace
		out = append(out, d)
	}
	return out
}

func TestDeviceTablesRoundTrip(t *testing.T) {
	rep := deviceTablesReport()
	want, err := json.Marshal(rep.Devices)
	if err != nil {
		t.Fatal(err)
	}
	CompactDeviceIndex(rep)
	// 254:0: the host in full, the three copies by their table; 7:3: the
	// changed copy in full, the other two by their table.
	if d := rep.Devices[0]; len(d.Namespaces) != 1 || !d.Namespaces[0].Host || len(d.Tables) != 1 || !reflect.DeepEqual(d.Tables[0].Namespaces, []uint64{10, 11, 12}) {
		t.Errorf("254:0 compacted to %+v", d)
	}
	if d := rep.Devices[1]; len(d.Namespaces) != 1 || d.Namespaces[0].Namespace != 12 || len(d.Tables) != 1 || !reflect.DeepEqual(d.Tables[0].Namespaces, []uint64{10, 11}) {
		t.Errorf("7:3 compacted to %+v", d)
	}
	// As a reader has it: the copies' mounts only in their table.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back MountsReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for i := range back.Namespaces {
		if back.Namespaces[i].Table != "" {
			back.Namespaces[i].Mounts = nil
		}
	}
	back.Format = MountsFormat
	if err := ExpandMountTables(&back); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(back.Devices)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("expanded device index differs:\n%s\nwant\n%s", got, want)
	}
}

// A device index whose tables' names do not fit is an error, and no entry
// is made up for the names that do not fit.
func TestDeviceTablesHostile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(d *MountDevice)
		want  string
		count int // entries under the device after expanding
	}{
		{"an unknown namespace", func(d *MountDevice) { d.Tables[0].Namespaces = append(d.Tables[0].Namespaces, 999) }, "not one of table", 3},
		{"a namespace of another table", func(d *MountDevice) { d.Tables[0].Table = "t2" }, "not one of table", 1},
		{"a namespace twice", func(d *MountDevice) { d.Tables[0].Namespaces = append(d.Tables[0].Namespaces, 10) }, "listed twice", 3},
		{"a namespace listed in full too", func(d *MountDevice) { d.Tables[0].Namespaces = append(d.Tables[0].Namespaces, 12) }, "listed twice", 3},
		{"a namespace not mounting it", func(d *MountDevice) { d.Dev, d.Major, d.Minor = "7:9", 7, 9 }, "does not mount it", 1},
	} {
		rep := deviceTablesReport()
		CompactDeviceIndex(rep)
		tc.edit(&rep.Devices[1])
		err := ExpandDeviceTables(rep)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
		if n := len(rep.Devices[1].Namespaces); n != tc.count {
			t.Errorf("%s: %d entries, want %d", tc.name, n, tc.count)
		}
	}
}

// A device whose entries are not in the namespaces' order is left whole:
// expanding would reorder it.
func TestDeviceTablesOutOfOrder(t *testing.T) {
	rep := deviceTablesReport()
	d := &rep.Devices[0]
	d.Namespaces[1], d.Namespaces[2] = d.Namespaces[2], d.Namespaces[1]
	CompactDeviceIndex(rep)
	if len(rep.Devices[0].Tables) != 0 || len(rep.Devices[0].Namespaces) != 4 {
		t.Errorf("out-of-order device compacted: %+v", rep.Devices[0])
	}
	if len(rep.Devices[1].Tables) != 1 {
		t.Errorf("the other device not compacted: %+v", rep.Devices[1])
	}
}
