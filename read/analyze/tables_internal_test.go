package analyze

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// TablesFromFixture is tablesFromFixture for the package's outside tests.
var TablesFromFixture = tablesFromFixture

// tablesFromFixture builds the mounts/mountinfo.txt of the current layout
// from a fixture's mounts/ns/<inode>.mountinfo files (the host's, named
// by the smallest inode in these fixtures, first and marked).
func tablesFromFixture(name string) ([]byte, error) {
	dir := filepath.Join("testdata", name, "mounts", "ns")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var inodes []uint64
	for _, e := range ents {
		if n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), layout.MountinfoExt), 10, 64); err == nil {
			inodes = append(inodes, n)
		}
	}
	sort.Slice(inodes, func(i, j int) bool { return inodes[i] < inodes[j] })
	var out bytes.Buffer
	for i, ns := range inodes {
		b, err := os.ReadFile(filepath.Join("testdata", name, "mounts", filepath.FromSlash(layout.MountinfoFile(ns))))
		if err != nil {
			return nil, err
		}
		added := len(b) > 0 && b[len(b)-1] != '\n'
		out.WriteString(layout.FormatMountinfoHeader(layout.MountinfoHeader{Inode: ns, PID: 100 + i, TID: 100 + i, Host: i == 0, NewlineAdded: added}))
		out.Write(b)
		if added {
			out.WriteByte('\n')
		}
	}
	return out.Bytes(), nil
}
