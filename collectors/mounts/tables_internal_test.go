package mounts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
)

// testTable is a table of n lines for namespace ns.
func testTable(ns uint64, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "%d 1 0:%d / /run/ns%d/m%d rw - tmpfs tmpfs rw\n", 100+i, 50+i, ns, i)
	}
	return b.Bytes()
}

// readTables reads back every tables file of dir, in part order.
func readTables(t *testing.T, dir string) (map[uint64][]byte, map[uint64]string, []uint64, []int64) {
	t.Helper()
	tables, where := map[uint64][]byte{}, map[uint64]string{}
	var order []uint64
	var sizes []int64
	for part := 1; ; part++ {
		name := layout.MountinfoTablesPart(part)
		data, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, int64(len(data)))
		layout.EachMountinfoTable(data, func(h layout.MountinfoHeader, b []byte, err error) {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if _, dup := tables[h.Inode]; dup || h.Inode == 0 {
				t.Errorf("%s: table of namespace %d again (or bytes before a header)", name, h.Inode)
			}
			tables[h.Inode], where[h.Inode] = bytes.Clone(b), name
			order = append(order, h.Inode)
		})
	}
	return tables, where, order, sizes
}

func TestMntTables(t *testing.T) {
	cut := []byte("7 1 0:9 / /run/cut rw - tmpfs tmpf") // a table cut at the cap
	for _, tc := range []struct {
		name    string
		cap     int64
		pending int64
		arrive  []int // the order tables arrive in; -i: i is skipped
		sizes   []int // lines per table
		// wantOrder is the order in the files; parts how many files.
		wantOrder []int
		parts     int
	}{
		{"in order", 0, 8 << 20, []int{0, 1, 2, 3}, []int{3, 3, 3, 3}, []int{0, 1, 2, 3}, 1},
		{"out of order, put back", 0, 8 << 20, []int{3, 1, 0, 2}, []int{3, 3, 3, 3}, []int{0, 1, 2, 3}, 1},
		{"a skipped table does not hold the others", 0, 8 << 20, []int{2, -1, 3, 0}, []int{3, 3, 3, 3}, []int{0, 2, 3}, 1},
		{"a table that never comes does not either", 0, 8 << 20, []int{2, 3, 0}, []int{3, 3, 3, 3}, []int{0, 2, 3}, 1},
		{"waiting bytes bounded: the earliest goes first", 0, 1, []int{3, 2, 1, 0}, []int{3, 3, 3, 3}, []int{3, 2, 1, 0}, 1},
		// Each table and its header is about 540 bytes: two per
		// 1,200-byte file.
		{"past the per-file cap, the next file", 1200, 8 << 20, []int{0, 1, 2, 3, 4}, []int{10, 10, 10, 10, 10}, []int{0, 1, 2, 3, 4}, 3},
		{"small tables share files", 6000, 8 << 20, []int{0, 1, 2, 3, 4}, []int{2, 2, 2, 2, 2}, []int{0, 1, 2, 3, 4}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(p int64) { tablesPending = p }(tablesPending)
			tablesPending = tc.pending
			dir := t.TempDir()
			env := collectors.StandaloneEnv("mounts", dir, collectors.Common{MaxFileBytes: tc.cap})
			tw := newMntTables(env, len(tc.sizes))
			data := make([][]byte, len(tc.sizes))
			for i, n := range tc.sizes {
				data[i] = testTable(uint64(1000+i), n)
			}
			data[len(data)-1] = append(data[len(data)-1], cut...)
			for _, i := range tc.arrive {
				if i < 0 {
					tw.skip(-i)
					continue
				}
				tw.put(i, layout.MountinfoHeader{Inode: uint64(1000 + i), PID: 10 + i, TID: 10 + i, Host: i == 0}, data[i], tableShape{}, 0)
			}
			names, err := tw.close()
			if err != nil {
				t.Fatal(err)
			}
			tables, where, order, sizes := readTables(t, dir)
			var want []uint64
			for _, i := range tc.wantOrder {
				want = append(want, uint64(1000+i))
			}
			if fmt.Sprint(order) != fmt.Sprint(want) {
				t.Errorf("tables in the order %v, want %v", order, want)
			}
			for _, i := range tc.wantOrder {
				ns := uint64(1000 + i)
				if !bytes.Equal(tables[ns], data[i]) {
					t.Errorf("table %d came back as\n%q\nwant\n%q", i, tables[ns], data[i])
				}
				if names[i] != where[ns] {
					t.Errorf("table %d: said to be in %q, is in %q", i, names[i], where[ns])
				}
			}
			for i, n := range names {
				if (n == "") == tableWanted(tc.wantOrder, i) {
					t.Errorf("table %d: file %q", i, n)
				}
			}
			if len(sizes) != tc.parts {
				t.Errorf("%d files (sizes %v), want %d", len(sizes), sizes, tc.parts)
			}
			for i, s := range sizes {
				if tc.cap > 0 && s > tc.cap-tc.cap/64 {
					t.Errorf("file %d: %d bytes, past the cap %d", i+1, s, tc.cap)
				}
			}
		})
	}
}

func tableWanted(order []int, i int) bool {
	for _, j := range order {
		if j == i {
			return true
		}
	}
	return false
}

// The tables pass through the redactor like every other file.
func TestMntTablesRedacted(t *testing.T) {
	dir := t.TempDir()
	env := collectors.StandaloneEnv("mounts", dir, collectors.Common{})
	tw := newMntTables(env, 1)
	const secret = "hunter2hunter2"
	line := "40 1 0:60 / /mnt/share rw - cifs //srv/share rw,username=bob,password=" + secret + "\n"
	tw.put(0, layout.MountinfoHeader{Inode: 5, PID: 1, TID: 1}, []byte(line), tableShape{}, 0)
	if _, err := tw.close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, layout.MountinfoTablesFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), secret) || !strings.Contains(string(got), "/mnt/share") {
		t.Errorf("tables file:\n%s", got)
	}
}

// A table the same as one written before but for its IDs is written as
// its header alone and reads back byte for byte; a table of the same
// shape hash whose text the copy does not rebuild (here a forged shape)
// is written in full; past the per-file cap the copy is written again in
// the new file, so that every reference has its copy in its own file.
func TestMntTablesByReference(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cap   int64
		forge bool // table 3 claims table 0's shape
		// rebuilt says tables 1, 2 and 4 were rebuilt from table 0 (the
		// worker's references): not compared again.
		rebuilt bool
		// wantFull is the tables written in full.
		wantFull []int
		parts    int
	}{
		{"references", 0, false, false, []int{0, 3}, 1},
		{"a forged shape is written in full", 0, true, false, []int{0, 3}, 1},
		{"the copy again in each file", 1400, false, false, []int{0, 3, 4}, 2},
		{"rebuilt from the copy's table", 0, false, true, []int{0, 3}, 1},
		{"rebuilt, the copy again in each file", 1400, false, true, []int{0, 3, 4}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			env := collectors.StandaloneEnv("mounts", dir, collectors.Common{MaxFileBytes: tc.cap})
			base := testTable(7, 12)
			data := [][]byte{base, renumbered(t, base, 1000, 5), renumbered(t, base, 2000, 6), testTable(8, 12), renumbered(t, base, 3000, 1)}
			share := newTableShare(len(data))
			tw := newMntTables(env, len(data))
			for i, d := range data {
				s, ok := share.shapeOf(d)
				if !ok {
					t.Fatalf("table %d has no shape", i)
				}
				if i == 3 && tc.forge {
					s0, _ := share.shapeOf(data[0])
					s.hash = s0.hash
				}
				from := 0
				if tc.rebuilt && i != 0 && i != 3 {
					from = 1
				}
				tw.put(i, layout.MountinfoHeader{Inode: uint64(1000 + i), PID: 10 + i, TID: 10 + i}, d, s, from)
			}
			if _, err := tw.close(); err != nil {
				t.Fatal(err)
			}
			tables, _, _, sizes := readTables(t, dir)
			for i, d := range data {
				if !bytes.Equal(tables[uint64(1000+i)], d) {
					t.Errorf("table %d came back as\n%q\nwant\n%q", i, tables[uint64(1000+i)], d)
				}
			}
			var full []int
			for part := 1; part <= len(sizes); part++ {
				raw, err := os.ReadFile(filepath.Join(dir, layout.MountinfoTablesPart(part)))
				if err != nil {
					t.Fatal(err)
				}
				layout.EachMountinfoTable(raw, func(h layout.MountinfoHeader, _ []byte, _ error) {
					if h.SameAs == 0 {
						full = append(full, int(h.Inode-1000))
					}
				})
			}
			if fmt.Sprint(full) != fmt.Sprint(tc.wantFull) || len(sizes) != tc.parts {
				t.Errorf("written in full: %v in %d files (sizes %v), want %v in %d", full, len(sizes), sizes, tc.wantFull, tc.parts)
			}
			if tw.byRef != len(data)-len(tc.wantFull) {
				t.Errorf("%d tables counted as references, want %d", tw.byRef, len(data)-len(tc.wantFull))
			}
		})
	}
}
