package layout_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

func TestMountinfoHeader(t *testing.T) {
	for _, tc := range []struct {
		line string
		want layout.MountinfoHeader
		ok   bool
	}{
		{"==> mnt:[4026531840] pid=1 tid=1 host <==", layout.MountinfoHeader{Inode: 4026531840, PID: 1, TID: 1, Host: true}, true},
		{"==> mnt:[4026532601] pid=77 tid=78 <==\n", layout.MountinfoHeader{Inode: 4026532601, PID: 77, TID: 78}, true},
		{"==> mnt:[5] pid=2 tid=3 truncated newline-added <==", layout.MountinfoHeader{Inode: 5, PID: 2, TID: 3, Truncated: true, NewlineAdded: true}, true},
		// A word of a later version is ignored.
		{"==> mnt:[5] pid=2 tid=3 root=/x future <==", layout.MountinfoHeader{Inode: 5, PID: 2, TID: 3}, true},
		{"==> mnt:[5] <==", layout.MountinfoHeader{Inode: 5}, true},
		{"==> mnt:[6] pid=9 tid=9 same-as=5 ids=200+3,210+1 outside=22,23 <==", layout.MountinfoHeader{Inode: 6, PID: 9, TID: 9, SameAs: 5, IDs: [][2]int{{200, 3}, {210, 1}}, Outside: []int{22, 23}}, true},
		{"==> mnt:[6] same-as=5 ids=200+3 <==", layout.MountinfoHeader{Inode: 6, SameAs: 5, IDs: [][2]int{{200, 3}}}, true},
		// IDs without a copy mean nothing.
		{"==> mnt:[6] ids=200+3 outside=1 <==", layout.MountinfoHeader{Inode: 6}, true},
		{"==> mnt:[6] same-as=5 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[6] same-as=6 ids=1+1 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[6] same-as=5 ids=1+0 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[6] same-as=5 ids=1-2 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[6] same-as=5 ids=1+1 outside= <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[6] same-as=5 ids=1+1 truncated <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[6] same-as=0 ids=1+1 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[0] pid=1 tid=1 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[x] pid=1 tid=1 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[5] pid=-1 tid=1 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[5] pid=1 tid=z <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[5 pid=1 tid=1 <==", layout.MountinfoHeader{}, false},
		{"==> mnt:[5] pid=1 tid=1", layout.MountinfoHeader{}, false},
		{"22 1 8:1 / / rw - ext4 /dev/sda1 rw", layout.MountinfoHeader{}, false},
		{"", layout.MountinfoHeader{}, false},
	} {
		got, ok := layout.ParseMountinfoHeader([]byte(tc.line))
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v %v, want %+v %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
	// What is formatted parses back to the same header.
	for _, h := range []layout.MountinfoHeader{
		{Inode: 4026531840, PID: 1, TID: 1, Host: true},
		{Inode: 1<<64 - 1, PID: 1 << 22, TID: 1<<22 + 1, Truncated: true, NewlineAdded: true},
		{Inode: 7, PID: 3, TID: 4, SameAs: 1<<64 - 1, IDs: [][2]int{{0, 1}, {4242, 35}}, Outside: []int{1, 0}},
	} {
		line := layout.FormatMountinfoHeader(h)
		got, ok := layout.ParseMountinfoHeader([]byte(line))
		if !ok || !reflect.DeepEqual(got, h) || !layout.IsMountinfoHeader([]byte(line)) || line[len(line)-1] != '\n' {
			t.Errorf("%+v -> %q -> %+v %v", h, line, got, ok)
		}
	}
}

type table struct {
	H    layout.MountinfoHeader
	Data string
}

func TestEachMountinfoTable(t *testing.T) {
	host := layout.MountinfoHeader{Inode: 10, PID: 1, TID: 1, Host: true}
	cut := layout.MountinfoHeader{Inode: 11, PID: 5, TID: 6, Truncated: true, NewlineAdded: true}
	empty := layout.MountinfoHeader{Inode: 12, PID: 7, TID: 7}
	for _, tc := range []struct {
		name string
		file string
		want []table
	}{
		{"tables", layout.FormatMountinfoHeader(host) + "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 22 0:5 / /dev rw - devtmpfs udev rw\n" +
			layout.FormatMountinfoHeader(cut) + "40 1 8:1 / / rw - ext4 /dev/sd\n" +
			layout.FormatMountinfoHeader(empty),
			[]table{{host, "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n23 22 0:5 / /dev rw - devtmpfs udev rw\n"}, {cut, "40 1 8:1 / / rw - ext4 /dev/sd"}, {empty, ""}}},
		{"no header", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", []table{{layout.MountinfoHeader{}, "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"}}},
		{"empty file", "", nil},
		{"no final newline", layout.FormatMountinfoHeader(host) + "22 1 8:1 / / rw", []table{{host, "22 1 8:1 / / rw"}}},
	} {
		var got []table
		layout.EachMountinfoTable([]byte(tc.file), func(h layout.MountinfoHeader, b []byte, err error) {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			got = append(got, table{h, string(b)})
		})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// FuzzMountinfoTables: the header parser and the splitter never panic, a
// parsed header formats back to a line that parses to it, and the tables
// of a file written from any tables come back byte for byte.
func FuzzMountinfoTables(f *testing.F) {
	f.Add([]byte("==> mnt:[4026531840] pid=1 tid=1 host <==\n22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"), []byte("23 22 0:5 / /dev rw"))
	f.Add([]byte("==> mnt:[5] pid=2 tid=3 truncated newline-added <=="), []byte(""))
	f.Add([]byte("==> mnt:[5]]] pid== <==\n==> mnt:[\n"), []byte("\n\n==> x\n"))
	f.Fuzz(func(t *testing.T, file, table []byte) {
		for _, line := range bytes.Split(file, []byte("\n")) {
			if h, ok := layout.ParseMountinfoHeader(line); ok {
				back, ok2 := layout.ParseMountinfoHeader([]byte(layout.FormatMountinfoHeader(h)))
				if !ok2 || !reflect.DeepEqual(back, h) {
					t.Fatalf("%q -> %+v -> %+v %v", line, h, back, ok2)
				}
			}
		}
		layout.EachMountinfoTable(file, func(h layout.MountinfoHeader, b []byte, err error) {
			if h.SameAs != 0 && err == nil {
				// A rebuilt table has the copy's lines, renumbered.
				if _, err := layout.RebuildMountinfo(b, h.IDs, h.Outside); err != nil {
					t.Fatalf("a rebuilt table does not rebuild from itself: %v", err)
				}
			}
		})
		// Mount tables never hold a line starting with the header's
		// opening: the kernel starts each line with a number.
		for _, line := range bytes.Split(table, []byte("\n")) {
			if layout.IsMountinfoHeader(line) {
				return
			}
		}
		tables := [][]byte{table, bytes.ToUpper(table)}
		var w bytes.Buffer
		for i, tb := range tables {
			h := layout.MountinfoHeader{Inode: uint64(i + 1), PID: 1, TID: 1, NewlineAdded: len(tb) > 0 && tb[len(tb)-1] != '\n'}
			w.WriteString(layout.FormatMountinfoHeader(h))
			w.Write(tb)
			if h.NewlineAdded {
				w.WriteByte('\n')
			}
		}
		var got [][]byte
		layout.EachMountinfoTable(w.Bytes(), func(h layout.MountinfoHeader, b []byte, _ error) {
			if int(h.Inode) != len(got)+1 {
				t.Fatalf("table %d has inode %d", len(got)+1, h.Inode)
			}
			got = append(got, bytes.Clone(b))
		})
		if len(got) != len(tables) || !bytes.Equal(got[0], tables[0]) || !bytes.Equal(got[1], tables[1]) {
			t.Fatalf("tables %q came back as %q", tables, got)
		}
	})
}
