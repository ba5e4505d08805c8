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
	"github.com/nodesnap/nodesnap/internal/procfs"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Every namespace's raw table is in the tables file mounts.json names,
// after its header, byte for byte as the kernel prints it (rebuilt from
// the copy it names when written by reference, format 4), the host's
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
	if rep.Format != layout.MountsFormat || len(rep.Tables) == 0 {
		t.Errorf("mounts.json of format %d with %d tables, want format %d", rep.Format, len(rep.Tables), layout.MountsFormat)
	}
	byShape := map[string][]string{} // a holder's kernel table without IDs → the tables its namespace names
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
			// Its own mount IDs and parents, whichever namespace's
			// numbers its table carries.
			kms, _ := procfs.ParseMountInfo(want)
			for j := range min(len(kms), len(ns.Mounts)) {
				if got := ns.Mounts[j]; got.ID != kms[j].ID || got.ParentID != kms[j].ParentID || got.MountPoint != kms[j].MountPoint {
					t.Errorf("namespace %d, mount %d: %d %d %s, the kernel says %d %d %s", ns.Inode, j, got.ID, got.ParentID, got.MountPoint, kms[j].ID, kms[j].ParentID, kms[j].MountPoint)
				}
			}
			// The device index names its mounts by its own IDs too.
			ids := map[int]string{}
			for _, m := range kms {
				ids[m.ID] = m.MountPoint
			}
			for _, d := range rep.Devices {
				for _, dn := range d.Namespaces {
					for _, m := range dn.Mounts {
						if mp, ok := ids[m.MountID]; dn.Namespace == ns.Inode && (!ok || mp != m.MountPoint) {
							t.Errorf("device %s, namespace %d: mount %d at %s, the kernel has %q there", d.Dev, ns.Inode, m.MountID, m.MountPoint, mp)
						}
					}
				}
			}
			byShape[withoutIDs(want)] = append(byShape[withoutIDs(want)], ns.Table)
		}
	}
	// Copies of one namespace made at once share one table in mounts.json:
	// holders whose kernel tables are the same but for the IDs name the
	// same table, and others another.
	tables := map[string]string{}
	for shape, names := range byShape {
		for _, n := range names {
			if n == "" || n != names[0] {
				t.Errorf("holders with one table (but for IDs) name tables %q", names)
				break
			}
		}
		if other, ok := tables[names[0]]; ok && other != shape {
			t.Errorf("table %s names two different tables", names[0])
		}
		tables[names[0]] = shape
	}
	// Eight copies made one after the other: only the machine's mounts
	// changing between every two of them would leave none sharing.
	if len(byShape) == 0 || len(byShape) >= len(holders) {
		t.Errorf("%d holders' tables in %d shapes: none shared", len(holders), len(byShape))
	}
	// Format 4: a holder whose table is the same as one written before
	// it (another holder's, but for the IDs) is written as its header
	// alone, and was rebuilt byte for byte above from that copy.
	byRef := 0
	for name, data := range b.Files {
		if !strings.HasPrefix(name, layout.MountinfoTablesPrefix) {
			continue
		}
		layout.EachMountinfoTable(data, func(h layout.MountinfoHeader, _ []byte, _ error) {
			for _, hd := range holders {
				if hd.NSInode == h.Inode && h.SameAs != 0 {
					byRef++
				}
			}
		})
	}
	if byRef == 0 || byRef < len(holders)-len(byShape) {
		t.Errorf("%d of %d holders' tables (in %d shapes) written by reference, want at least %d", byRef, len(holders), len(byShape), max(1, len(holders)-len(byShape)))
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

// withoutIDs is a raw table with each line's mount ID and parent ID given
// as the line numbers they name in it ("-" outside the table).
func withoutIDs(raw []byte) string {
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	at := map[string]int{}
	for i, l := range lines {
		at[strings.SplitN(l, " ", 2)[0]] = i
	}
	var b strings.Builder
	for _, l := range lines {
		f := strings.SplitN(l, " ", 3)
		if len(f) < 3 {
			b.WriteString(l + "\n")
			continue
		}
		if p, ok := at[f[1]]; ok {
			fmt.Fprintf(&b, "%d %s\n", p, f[2])
		} else {
			fmt.Fprintf(&b, "- %s\n", f[2])
		}
	}
	return b.String()
}
