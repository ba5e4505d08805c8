package mounts_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Every namespace's raw table is in the tables file mounts.json names,
// after its header, byte for byte as the kernel prints it, the host's
// first, and no file per namespace. (Files past the per-file cap:
// TestMntTables.)
func TestMountsTablesFile(t *testing.T) {
	testkit.RequireRoot(t)
	var holders []*testkit.Holder
	for range 8 {
		holders = append(holders, testkit.HoldInPrivateNamespace(t, ""))
	}
	b := supervisortest.Collect(t, "mounts", collectors.Common{ProbeTimeout: 3 * time.Second})
	if b.Res.Status != "ok" {
		t.Fatalf("status %s: %s %v", b.Res.Status, b.Res.Error, b.Res.Notes)
	}
	var rep layout.MountsReport
	supervisortest.Decode(t, b.Contents, layout.MountsPath, &rep)
	if len(rep.Namespaces) == 0 || !rep.Namespaces[0].Host {
		t.Fatalf("first namespace is not the host's")
	}
	first, ok := b.Files["mounts/"+layout.MountinfoTablesFile]
	if !ok || !bytes.HasPrefix(first, []byte(fmt.Sprintf("==> mnt:[%d] ", rep.Namespaces[0].Inode))) {
		t.Errorf("mounts/%s does not start with the host's table: %.100q", layout.MountinfoTablesFile, first)
	}
	for i := range rep.Namespaces {
		ns := &rep.Namespaces[i]
		if ns.Error != "" {
			continue // a process of the machine's that exited meanwhile
		}
		raw := mountsTable(t, b.Files, ns)
		for _, h := range holders {
			if h.NSInode != ns.Inode {
				continue
			}
			want, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/mountinfo", ns.ReadFrom.PID, ns.ReadFrom.TID))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, want) {
				t.Errorf("namespace %d: table differs from the kernel's:\n%s\nwant:\n%s", ns.Inode, raw, want)
			}
			if len(ns.Mounts) != bytes.Count(want, []byte("\n")) {
				t.Errorf("namespace %d: %d mounts parsed from %d lines", ns.Inode, len(ns.Mounts), bytes.Count(want, []byte("\n")))
			}
		}
	}
	for name := range b.Files {
		if strings.HasPrefix(name, layout.MountinfoPath) {
			t.Errorf("%s: one file per namespace is the older layout", name)
		}
	}
	for _, h := range holders {
		if ns := mountsNamespace(&rep, h.NSInode); ns == nil || ns.Mountinfo == "" {
			t.Errorf("holder %d's namespace %d: no table", h.Pid, h.NSInode)
		}
	}
}
