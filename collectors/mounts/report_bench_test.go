package mounts

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// benchReport is the report of a node with n single-task namespaces, each
// a copy of the host's table from testdata (as `unshare --mount` makes),
// with the tables and the device index as the collector builds them.
func benchReport(b *testing.B, n int) (*layout.MountsReport, [][]byte) {
	b.Helper()
	host, err := os.ReadFile(filepath.Join("testdata", "mounts", "host.mountinfo"))
	if err != nil {
		b.Fatal(err)
	}
	rep := &layout.MountsReport{HostNamespace: 4026531840, Processes: n + 1, Tasks: n + 1}
	var tables [][]byte
	for i := 0; i <= n; i++ {
		// Each namespace numbers its mounts anew: its own IDs, its
		// parents numbered the same way (the root's parent outside).
		var t strings.Builder
		for _, l := range strings.SplitAfter(string(host), "\n") {
			id, rest, ok1 := strings.Cut(l, " ")
			parent, rest, ok2 := strings.Cut(rest, " ")
			n, err1 := strconv.Atoi(id)
			p, err2 := strconv.Atoi(parent)
			if ok1 && ok2 && err1 == nil && err2 == nil {
				fmt.Fprintf(&t, "%d %d %s", i*100000+n, i*100000+p, rest)
			}
		}
		data := []byte(t.String())
		tables = append(tables, data)
		ms, _ := procfs.ParseMountInfo(data)
		ns := layout.MountNamespace{Inode: uint64(4026531840 + i), Host: i == 0, Mountinfo: layout.MountinfoTablesFile,
			ReadFrom: layout.TaskRef{PID: 1000 + i, TID: 1000 + i}, ProcessCount: 1, TaskCount: 1,
			Processes: []layout.NamespaceProcess{{PID: 1000 + i, Comm: "sleep", Threads: 1}}}
		for _, m := range ms {
			ns.Mounts = append(ns.Mounts, layout.NamespaceMount{Mount: m, PropagationType: PropagationType(m.Propagation), Class: procfs.Classify(m).String()})
		}
		rep.Namespaces = append(rep.Namespaces, ns)
	}
	rep.Devices = BuildMountDeviceIndex(rep.Namespaces)
	return rep, tables
}

// shareTables makes rep format 2 as the collector does: each distinct
// table once.
func shareTables(b *testing.B, rep *layout.MountsReport, tables [][]byte) {
	b.Helper()
	share := newTableShare(len(tables))
	for i, t := range tables {
		if s, ok := share.shapeOf(t); ok && !share.known(i, s) {
			share.keep(i, rep.Namespaces[i].Mounts, true)
		}
	}
	var err error
	rep.Format = layout.MountsFormat
	if rep.Tables, err = share.finish(rep.Namespaces); err != nil {
		b.Fatal(err)
	}
}

// What the collector writes at 1,000 single-task namespaces once the
// tables are read: the tables file and mounts.json through the redactor
// (Write), and mounts.json's JSON alone (Encode).
//
// Format1 is mounts.json with every namespace's mounts in it (before
// 2026-12-07), Format2 each distinct table once, Format3 also the device
// index naming a shared table's namespaces instead of repeating them
// (mounts.json of format 4 is format 3's). Write writes the raw tables as
// this code does: since format 4, a copy's table as its header alone.
func BenchmarkMountsWrite1000(b *testing.B) {
	rep1, tables := benchReport(b, 1000)
	rep2, _ := benchReport(b, 1000)
	shareTables(b, rep2, tables)
	rep3, _ := benchReport(b, 1000)
	shareTables(b, rep3, tables)
	layout.CompactDeviceIndex(rep3)
	for _, f := range []struct {
		name string
		rep  *layout.MountsReport
	}{{"Format1", rep1}, {"Format2", rep2}, {"Format3", rep3}} {
		b.Run(f.name, func(b *testing.B) { benchWrite(b, f.rep, tables) })
	}
}

func benchWrite(b *testing.B, rep *layout.MountsReport, tables [][]byte) {
	var size countWriter
	if err := encodeReport(&size, rep); err != nil {
		b.Fatal(err)
	}
	b.Run("Encode", func(b *testing.B) {
		for b.Loop() {
			if err := encodeReport(io.Discard, rep); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size), "json-bytes")
	})
	// Format 4: a table the same as one written before is written as
	// its header (the shapes are computed as the tables arrive).
	share := newTableShare(len(tables))
	shapes := make([]tableShape, len(tables))
	for i, t := range tables {
		shapes[i], _ = share.shapeOf(t)
	}
	b.Run("Write", func(b *testing.B) {
		for b.Loop() {
			dir := b.TempDir()
			env := collectors.StandaloneEnv("mounts", dir, collectors.Common{MaxFileBytes: 64 << 20})
			tw := newMntTables(env, len(tables))
			for i, t := range tables {
				tw.put(i, layout.MountinfoHeader{Inode: uint64(4026531840 + i), PID: 1000 + i, TID: 1000 + i, Host: i == 0}, t, shapes[i], 0)
			}
			if _, err := tw.close(); err != nil {
				b.Fatal(err)
			}
			if err := writeReport(env, rep); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// countWriter counts the bytes written to it.
type countWriter int

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

// Making the device index and naming the shared tables' namespaces in it,
// as the collector does before writing, at 1,000 namespaces.
func BenchmarkMountsDeviceIndex1000(b *testing.B) {
	rep, tables := benchReport(b, 1000)
	shareTables(b, rep, tables)
	for b.Loop() {
		rep.Devices = BuildMountDeviceIndex(rep.Namespaces)
		layout.CompactDeviceIndex(rep)
	}
}
