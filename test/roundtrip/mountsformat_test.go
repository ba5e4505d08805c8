package roundtrip_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The real collector's mounts.json (format 3: copies of a namespace share
// one table, and the device index names them by it) and the same file written out as format 1 (every namespace
// with its own mounts, as bundles before 2026-12-07 hold it) read to the
// same analysis, incident 002 named in both: a loop device mounted on the
// host, copied into three private namespaces, unmounted on the host.
func TestRealMountsFormat2ReadsAsFormat1(t *testing.T) {
	loop, holders, _, c := collectIncident002(t)
	v2 := c.Files[layout.MountsPath]
	var rep layout.MountsReport
	if err := json.Unmarshal(v2, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Format != layout.MountsFormat || len(rep.Tables) == 0 || len(rep.Tables) >= len(rep.Namespaces) {
		t.Fatalf("mounts.json of format %d, %d tables for %d namespaces: the holders' copies share none", rep.Format, len(rep.Tables), len(rep.Namespaces))
	}
	// Format 3: the loop device's holders, copies of one namespace, are
	// named by their table, not written out.
	dev := fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
	named := 0
	for _, d := range rep.Devices {
		for _, g := range d.Tables {
			if d.Dev == dev {
				named += len(g.Namespaces)
			}
		}
	}
	if named < 2 {
		t.Errorf("the loop device names %d of its holders by their table, want at least 2 of 3", named)
	}
	if err := layout.ExpandMountTables(&rep); err != nil {
		t.Fatal(err)
	}
	rep.Format, rep.Tables = 0, nil
	for i := range rep.Namespaces {
		ns := &rep.Namespaces[i]
		ns.Table, ns.MountIDs, ns.RootParents = "", nil, nil
	}
	v1, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for name, b := range c.Files {
		files[name] = b
	}
	report := func(mountsJSON []byte) (*analyze.Report, []byte) {
		files[layout.MountsPath] = mountsJSON
		r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
		if err != nil {
			t.Fatal(err)
		}

		r.Bundle, r.BytesRead = "", 0
		b, err := json.MarshalIndent(r, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return r, b
	}
	r1, b1 := report(v1)
	r2, b2 := report(v2)
	if !bytes.Equal(b1, b2) {
		t.Errorf("format 2 reads differently from format 1:\n%s\nformat 1:\n%s", b2, b1)
	}
	for _, r := range []*analyze.Report{r1, r2} {
		f := bySubject(t, r, "mount-held-in-foreign-namespace", dev)
		for _, h := range holders {
			wantIn(t, "summary", f.Summary+f.Explanation, fmt.Sprint(h.NSInode))
		}
	}
}

// collectIncident002 builds incident 002 — a loop-backed ext4 mounted on
// the host, copied into three private namespaces, unmounted on the host —
// and collects processes, mounts and open files: the device, its three
// holders, the run and the bundle's contents.
func collectIncident002(t *testing.T) (*testkit.Loop, []*testkit.Holder, *supervisor.Result, *bundle.Contents) {
	t.Helper()
	testkit.RequireRoot(t)
	loop := testkit.LoopExt4(t, 16)
	var holders []*testkit.Holder
	for range 3 {
		holders = append(holders, testkit.HoldInPrivateNamespace(t, loop.Mountpoint))
	}
	if err := unix.Unmount(loop.Mountpoint, 0); err != nil {
		t.Fatalf("unmount %s on the host: %v", loop.Mountpoint, err)
	}
	res, err := supervisor.Run(context.Background(), supervisor.Options{OutputDir: t.TempDir(), Only: []string{"processes", "mounts", "openfiles"},
		Timeout: 90 * time.Second, Common: collectors.Common{ProbeTimeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := bundle.ReadAll(context.Background(), res.Bundle.Path, 0)
	if err != nil {
		t.Fatal(err)
	}
	return loop, holders, res, c
}
