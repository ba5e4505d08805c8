package fleetview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/fleetview"
	"github.com/nodesnap/nodesnap/test/testkit"
	"github.com/nodesnap/nodesnap/test/testkit/bundletest"
)

// makeBundle writes analyze's fixture scenario into a real bundle at out,
// as collected on host with kernel.
func makeBundle(t *testing.T, scenario, host, kernel, out string) {
	t.Helper()
	files := testkit.ReadTree(t, filepath.Join("..", "analyze", "testdata", scenario))
	delete(files, "_manifest.json")
	staging := t.TempDir()
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	m := &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion,
		Tool:          bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		CommandLine:   []string{"nodesnap", "collect"},
		Host:          bundle.Host{Hostname: host, Kernel: kernel},
		StartedAt:     now, FinishedAt: now.Add(time.Second), DurationSeconds: 1,
		Status:     "complete",
		Settings:   bundle.Settings{Root: "/", TimeoutSeconds: 120, MaxFileBytes: 64 << 20, MaxBundleBytes: 1 << 30, Concurrency: 4, Compression: bundle.Gzip},
		Collectors: []bundle.CollectorResult{}, Files: []bundle.FileEntry{},
		Redaction: bundle.RedactionSummary{Rules: map[string]int{}}, HungMounts: []bundle.HungItem{}, Omitted: []bundle.Omitted{},
	}
	cols, order := bundletest.Stage(t, staging, files, m, true)
	for _, c := range order {
		m.Collectors = append(m.Collectors, *cols[c])
	}
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, staging, now); err != nil {
		t.Fatal(err)
	}
}

// Four healthy-looking nodes and one with incident 002 on another kernel:
// the incident's findings name that node alone, and it is the node that
// differs; the node fleet.json lists without a bundle is said so.
func TestLoadFleet(t *testing.T) {
	dir := t.TempDir()
	rows := []map[string]string{}
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d"} {
		makeBundle(t, "healthy", n+".example", "6.1.0", filepath.Join(dir, n+".tar.gz"))
		rows = append(rows, map[string]string{"node": n, "status": "ok", "bundle": n + ".tar.gz"})
	}
	makeBundle(t, "incident002-rbd-held-in-namespace", "node-e.example", "6.8.0", filepath.Join(dir, "node-e.tar.gz"))
	rows = append(rows, map[string]string{"node": "node-e", "status": "ok", "bundle": "node-e.tar.gz"},
		map[string]string{"node": "node-f", "status": "image-pull-failure", "reason": "ImagePullBackOff"})
	b, _ := json.Marshal(map[string]any{"nodes": rows})
	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	v, err := fleetview.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 5 || len(v.Missing) != 1 || v.Missing[0].Name != "node-f" {
		t.Fatalf("%d nodes, missing %+v", len(v.Nodes), v.Missing)
	}
	var incident *fleetview.Group
	for i, g := range v.Findings {
		if strings.HasPrefix(g.ID, "mount-held") || strings.Contains(g.ID, "foreign-namespace") {
			incident = &v.Findings[i]
		}
	}
	if incident == nil {
		var ids []string
		for _, g := range v.Findings {
			ids = append(ids, g.ID+"="+strings.Join(g.Nodes, ","))
		}
		t.Fatalf("no incident 002 finding among %v", ids)
	}
	if strings.Join(incident.Nodes, ",") != "node-e" {
		t.Errorf("%s on %v, want node-e alone", incident.ID, incident.Nodes)
	}
	var e *fleetview.Difference
	for i, d := range v.Differences {
		if d.Node == "node-e" {
			e = &v.Differences[i]
		} else if len(d.Has) > 0 || len(d.Other) > 0 {
			t.Errorf("%s said to differ: %+v", d.Node, d)
		}
	}
	if e == nil || !contains(e.Has, incident.ID) || !strings.Contains(strings.Join(e.Other, ";"), "kernel 6.8.0 (1 of 5 nodes)") {
		t.Errorf("node-e's difference %+v; want %s and its kernel", e, incident.ID)
	}
	var out bytes.Buffer
	if err := fleetview.WriteText(&out, v); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"5 bundles analysed", incident.ID + ": 1 of 5 nodes", "nodes: node-e", "NODES THAT DIFFER", "node-f: no bundle: image-pull-failure: ImagePullBackOff"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := fleetview.WriteJSON(&out, v); err != nil || !json.Valid(out.Bytes()) {
		t.Errorf("JSON: %v", err)
	}
}

// Without fleet.json, every bundle of the directory, named by its host;
// an unreadable one is reported, not fatal; an empty directory is.
func TestLoadPlainDirectory(t *testing.T) {
	dir := t.TempDir()
	makeBundle(t, "healthy", "n1", "6.1.0", filepath.Join(dir, "nodesnap-n1-20261123T100000Z.tar.gz"))
	if err := os.WriteFile(filepath.Join(dir, "broken.tar.gz"), []byte("not gzip"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := fleetview.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, n := range v.Nodes {
		names[n.Name] = n.Error
	}
	if _, ok := names["n1"]; !ok || names["broken"] == "" {
		t.Errorf("nodes %v; want n1 and broken with an error", names)
	}
	if _, err := fleetview.Load(context.Background(), t.TempDir()); err == nil {
		t.Error("an empty directory loaded")
	}
}

func contains(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}

// A fleet.json whose nodes all failed is a view of those nodes and their
// reasons; without fleet.json a hidden (temporary) file is no bundle, a
// .tgz is; evidence is not kept; bounds and cancellation hold.
func TestLoadEdges(t *testing.T) {
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{"nodes": []map[string]any{
		{"node": "n1", "status": "timeout", "reason": "the per-node deadline passed", "durations": map[string]float64{"total": 300}},
		{"node": "n2", "status": "ok", "bundle": "../escape.tar.gz"},
	}})
	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := fleetview.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 0 || len(v.Missing) != 2 || v.Missing[0].FleetStatus != "timeout" || v.Missing[0].Reason != "the per-node deadline passed" || v.Missing[0].Seconds != 300 || v.Missing[1].Bundle != "" {
		t.Errorf("nodes %+v, missing %+v", v.Nodes, v.Missing)
	}

	plain := t.TempDir()
	makeBundle(t, "incident002-rbd-held-in-namespace", "n1", "6.1.0", filepath.Join(plain, "n1.tgz"))
	if err := os.WriteFile(filepath.Join(plain, ".n2.tar.gz.partial.tar.gz"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = fleetview.Load(context.Background(), plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 1 || v.Nodes[0].Name != "n1" || v.Nodes[0].Report == nil {
		t.Fatalf("nodes %+v; want n1 alone, analysed", v.Nodes)
	}
	if len(v.Nodes[0].Report.Findings) == 0 {
		t.Fatal("incident 002 gives no finding")
	}
	for _, f := range v.Nodes[0].Report.Findings {
		if f.Evidence != nil || f.Explanation != "" || f.Remediation != nil {
			t.Errorf("%s kept its evidence, explanation or remedy", f.ID)
		}
	}
	if _, err := fleetview.LoadWith(context.Background(), plain, fleetview.Options{MaxBundles: 0}); err != nil {
		t.Errorf("no bound: %v", err)
	}
	makeBundle(t, "healthy", "n3", "6.1.0", filepath.Join(plain, "n3.tar.gz"))
	if _, err := fleetview.LoadWith(context.Background(), plain, fleetview.Options{MaxBundles: 1}); err == nil || !strings.Contains(err.Error(), "2 bundles, more than the 1") {
		t.Errorf("over the bound: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := fleetview.Load(ctx, plain); err == nil {
		t.Error("cancelled: no error")
	}
}
