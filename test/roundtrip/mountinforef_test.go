package roundtrip_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Incident 002 held by three copies of one namespace (mounts.json format
// 4): the copies after the first are written in mountinfo.txt as their
// header alone, and analyze quotes each holder's line of the device as
// the kernel prints it in that holder's namespace, its own IDs and all.
func TestRealMountinfoByReferenceQuoted(t *testing.T) {
	loop, holders, res, c := collectIncident002(t)
	dev := fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
	// Each holder's line of the device, as its namespace's kernel table
	// has it.
	want := map[uint64]string{}
	for _, h := range holders {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", h.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.Contains(l, " "+dev+" / "+loop.Mountpoint+" ") {
				want[h.NSInode] = l
			}
		}
		if want[h.NSInode] == "" {
			t.Fatalf("holder %d: no line of %s in its mountinfo", h.Pid, dev)
		}
	}
	byRef := 0
	layout.EachMountinfoTable(c.Files["mounts/"+layout.MountinfoTablesFile], func(h layout.MountinfoHeader, b []byte, err error) {
		if _, ok := want[h.Inode]; !ok {
			return
		}
		if err != nil {
			t.Errorf("namespace %d: %v", h.Inode, err)
		}
		if h.SameAs != 0 {
			byRef++
		}
		if !bytes.Contains(b, []byte(want[h.Inode]+"\n")) {
			t.Errorf("namespace %d's table lacks its line %q", h.Inode, want[h.Inode])
		}
	})
	if byRef == 0 {
		t.Errorf("none of the three copies' tables written by reference")
	}
	r, err := analyze.AnalyzeFile(context.Background(), res.Bundle.Path, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := bySubject(t, r, "mount-held-in-foreign-namespace", dev)
	quoted := map[string]bool{}
	for _, e := range evidenceFrom(f, "mounts/"+layout.MountinfoTablesFile) {
		for _, l := range e.Lines {
			quoted[l.Text] = true
		}
	}
	for ns, l := range want {
		if !quoted[l] {
			t.Errorf("namespace %d: its line %q not quoted; quoted %v", ns, l, quoted)
		}
	}
}
