package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/analyze"
	"github.com/nodesnap/nodesnap/bundle"
)

// fleetDir writes a directory as nodesnap fleet leaves it: one bundle per
// node (named after the node), its fleet.json, plus what a page must not
// take for a bundle (a hidden partial file) and, if broken, a file named
// as a bundle that is none (a cut bundle is read as far as it goes).
func fleetDir(t *testing.T, broken bool) string {
	t.Helper()
	dir := t.TempDir()
	for host, scenario := range map[string]string{"node-a": "healthy", "node-b": "incident003-cephfs-hung", "node-c": "incident002-rbd-held-in-namespace"} {
		p := writeBundle(t, fixtureFiles(t, scenario), func(m *bundle.Manifest) { m.Host.Hostname = host })
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "nodesnap-"+host+"-20261121T091814Z.tar.gz"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if broken && host == "node-b" {
			if err := os.WriteFile(filepath.Join(dir, "nodesnap-node-d-20261121T091814Z.tar.gz"), []byte("not a bundle"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, body := range map[string]string{"fleet.json": `{"nodes":4}`, ".nodesnap-node-e.tar.gz": "partial"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFleetPage(t *testing.T) {
	dir := fleetDir(t, true)
	nodes, err := LoadFleet(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 4 {
		t.Fatalf("%d nodes, want 4 (3 bundles and the broken one; not fleet.json nor the hidden file)", len(nodes))
	}
	if nodes[3].Err == nil || !strings.Contains(nodes[3].Path, "node-d") {
		t.Errorf("the broken bundle: %+v", nodes[3])
	}
	var buf bytes.Buffer
	if err := WriteFleet(&buf, dir, nodes); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	doc := checkPage(t, page)
	if !bytes.Contains(page, []byte("Fleet: 3 nodes, 2 with a warning or critical finding")) {
		t.Error("the page's title does not count the nodes")
	}
	// The table: one row per readable node, one column per kind of
	// finding, each cell the node's worst severity of that kind.
	var header []string
	cells := map[string][]string{}
	for _, tr := range elements(doc, "tr") {
		ths, tds := elements(tr, "th"), elements(tr, "td")
		if len(ths) > 2 && textOf(ths[0]) == "node" {
			for _, th := range ths[2:] {
				id, _, _ := strings.Cut(textOf(th), " ")
				header = append(header, strings.TrimSuffix(strings.TrimSuffix(id, "1"), "2"))
			}
		}
		if len(tds) > 2 && len(header) > 0 && len(cells) < 3 {
			for _, td := range tds[2:] {
				cells[textOf(tds[0])] = append(cells[textOf(tds[0])], attr(td, "class"))
			}
		}
	}
	col := -1
	for i, h := range header {
		if strings.HasPrefix(h, "hung-mount") {
			col = i
		}
	}
	if col < 0 || len(cells) != 3 {
		t.Fatalf("no hung-mount column or not 3 rows: header %v, rows %v", header, cells)
	}
	if cells["node-b"][col] != "sev-critical" || cells["node-a"][col] != "sev-none" || cells["node-c"][col] != "sev-none" {
		t.Errorf("hung-mount column: a %s, b %s, c %s; want only node-b critical", cells["node-a"][col], cells["node-b"][col], cells["node-c"][col])
	}
	texts, _ := svgTexts(t, doc, "Nodes per finding")
	hasAll(t, "the nodes-per-finding chart", texts, "hung-mount", "1 node (33%)")
	for _, want := range []string{"Bundles that could not be read", "nodesnap-node-d-20261121T091814Z.tar.gz", "nodesnap report " + filepath.Join(dir, "nodesnap-node-b-20261121T091814Z.tar.gz")} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestFleetErrors(t *testing.T) {
	if _, err := LoadFleet(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no bundle") {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := LoadFleet(context.Background(), filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("missing directory: no error")
	}
	if err := WriteFleet(&bytes.Buffer{}, "d", nil); err == nil {
		t.Error("no nodes: no error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoadFleet(ctx, fleetDir(t, false)); err == nil {
		t.Error("cancelled: no error")
	}
}

// Hostile text in any bundle stays text on the fleet page.
func TestFleetHostile(t *testing.T) {
	dir := t.TempDir()
	s := `"><script>alert(1)</script><svg onload=x>`
	p := writeBundle(t, fixtureFiles(t, "incident003-cephfs-hung"), func(m *bundle.Manifest) { m.Host.Hostname = s; m.Host.Kernel = s })
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.tar.gz"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	nodes, err := LoadFleet(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFleet(&buf, s, nodes); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	if bytes.Contains(buf.Bytes(), []byte("<script>")) {
		t.Error("a bundle's text became markup")
	}
}

// A fleet of 200 nodes, each with 20 findings of long text, stays under
// the report's 2 MiB.
func TestFleetPageBounded(t *testing.T) {
	long := strings.Repeat("ceph mount /var/lib/kubelet/pods/x did not answer <b> ", 40)
	var nodes []FleetNode
	for i := range 200 {
		n := FleetNode{Path: fmt.Sprintf("nodesnap-node%d.tar.gz", i), Host: fmt.Sprintf("node%d", i), Status: "complete", Counts: map[string]int{"critical": 20}}
		for j := range 20 {
			n.Findings = append(n.Findings, analyze.Finding{ID: fmt.Sprintf("finding-%d", j), Severity: analyze.Critical, Title: long, Subject: long, Summary: long})
		}
		nodes = append(nodes, n)
	}
	var buf bytes.Buffer
	if err := WriteFleet(&buf, "fleet", nodes); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	if !bytes.Contains(buf.Bytes(), []byte("summaries are cut short below")) {
		t.Error("the page does not say it cut the summaries")
	}
	t.Logf("%d bytes", buf.Len())
}
