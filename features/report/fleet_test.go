package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/read/fleetview"
)

// fleetRecord is the part of fleet.json (package fleet writes it) the
// tests write.
type fleetRecord struct {
	Node      string             `json:"node"`
	Status    string             `json:"status"`
	Reason    string             `json:"reason,omitempty"`
	Bundle    string             `json:"bundle,omitempty"`
	Durations map[string]float64 `json:"durations"`
}

func writeFleetJSON(t *testing.T, dir string, rows []fleetRecord) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"version": "test", "nodes": rows})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fleetDir writes a directory as nodesnap fleet leaves it: one bundle per
// node (named after the node), its fleet.json with a node that has no
// bundle (NotReady), plus what a page must not take for a bundle (a hidden
// partial file) and, if broken, a file named as a bundle that is none (a
// cut bundle is read as far as it goes), which fleet.json lists as ok.
func fleetDir(t *testing.T, broken bool) string {
	t.Helper()
	dir := plainFleetDir(t, broken)
	var rows []fleetRecord
	for _, host := range []string{"node-a", "node-b", "node-c"} {
		rows = append(rows, fleetRecord{Node: host, Status: "ok", Bundle: "nodesnap-" + host + "-20261121T091814Z.tar.gz", Durations: map[string]float64{"total": 12.5}})
	}
	rows[2].Status, rows[2].Reason = "partial", "collector journal timed out"
	if broken {
		rows = append(rows, fleetRecord{Node: "node-d", Status: "ok", Bundle: "nodesnap-node-d-20261121T091814Z.tar.gz", Durations: map[string]float64{"total": 3}})
	}
	rows = append(rows, fleetRecord{Node: "node-e", Status: "node-not-ready", Reason: "the node is NotReady (kubelet stopped posting node status); the pod never ran", Durations: map[string]float64{"total": 60}})
	writeFleetJSON(t, dir, rows)
	return dir
}

// plainFleetDir is fleetDir without fleet.json: bundles copied by hand.
func plainFleetDir(t *testing.T, broken bool) string {
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
	}
	if broken {
		if err := os.WriteFile(filepath.Join(dir, "nodesnap-node-d-20261121T091814Z.tar.gz"), []byte("not a bundle"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".nodesnap-node-x.tar.gz"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tableRows returns the rows (cells' text) of the table right under the
// heading with id.
func tableRows(t *testing.T, page []byte, id string) [][]string {
	t.Helper()
	start := bytes.Index(page, []byte(`id="`+id+`"`))
	if start < 0 {
		return nil
	}
	rest := page[start:]
	end := bytes.Index(rest, []byte("</table>"))
	if end < 0 {
		t.Fatalf("no table after #%s", id)
	}
	doc, err := html.Parse(bytes.NewReader(rest[:end+len("</table>")]))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, tr := range elements(doc, "tr") {
		var cells []string
		for _, td := range elements(tr, "td") {
			cells = append(cells, textOf(td)+"|"+attr(td, "class"))
		}
		if cells != nil {
			rows = append(rows, cells)
		}
	}
	return rows
}

func TestFleetPage(t *testing.T) {
	dir := fleetDir(t, true)
	v, err := LoadFleet(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 4 || len(v.Missing) != 1 {
		t.Fatalf("%d nodes, %d without a bundle; want 4 (3 bundles and the broken one; not the hidden file) and node-e", len(v.Nodes), len(v.Missing))
	}
	if v.Nodes[3].Report != nil || v.Nodes[3].Error == "" || v.Nodes[3].Name != "node-d" {
		t.Errorf("the broken bundle: %+v", v.Nodes[3])
	}
	var buf bytes.Buffer
	if err := WriteFleet(&buf, v); err != nil {
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
		if len(ths) > 2 && textOf(ths[0]) == "node" && textOf(ths[1]) == "worst" {
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

	// The nodes that differ, as fleetview finds them: node-b alone has the
	// hung mount.
	diffs := tableRows(t, page, "f-differ")
	var b []string
	for _, r := range diffs {
		if strings.HasPrefix(r[0], "node-b|") {
			b = r
		}
	}
	if b == nil || !strings.Contains(b[1], "hung-mount") {
		t.Errorf("nodes that differ: %v; want node-b with hung-mount", diffs)
	}
	if len(diffs) != len(v.Differences) {
		t.Errorf("%d rows of nodes that differ, fleetview found %d", len(diffs), len(v.Differences))
	}
}

// fleet.json's row of every node is on the page: those without a good
// bundle first, with their status and reason, then the rest.
func TestFleetPageCollectionRows(t *testing.T) {
	dir := fleetDir(t, true)
	v, err := LoadFleet(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFleet(&buf, v); err != nil {
		t.Fatal(err)
	}
	page := buf.Bytes()
	checkPage(t, page)
	rows := tableRows(t, page, "f-collection")
	var got []string
	for _, r := range rows {
		if len(r) != 5 {
			t.Fatalf("collection row %v: want node, status, reason, bundle, time", r)
		}
		node, _, _ := strings.Cut(r[0], "|")
		got = append(got, node+" "+r[1])
	}
	want := []string{"node-e node-not-ready|st-bad", "node-c partial|st-warn", "node-d ok|st-bad", "node-a ok|st-ok", "node-b ok|st-ok"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("collection rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(rows) > 0 && (!strings.HasPrefix(rows[0][2], "the node is NotReady (kubelet stopped posting node status)") || !strings.HasPrefix(rows[0][4], "60.0 s")) {
		t.Errorf("node-e's row %v: want its reason and time", rows[0])
	}
	if !bytes.Contains(page, []byte("3 node(s) of the collection have no good bundle or only a partial one")) {
		t.Error("the page does not say up front that some nodes have no good bundle")
	}

	// Without fleet.json there is no such table (and no hidden file taken
	// for a bundle).
	v, err = LoadFleet(context.Background(), plainFleetDir(t, false))
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := WriteFleet(&buf, v); err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 3 || bytes.Contains(buf.Bytes(), []byte(`id="f-collection"`)) {
		t.Errorf("a directory without fleet.json: %d nodes, collection table %v", len(v.Nodes), bytes.Contains(buf.Bytes(), []byte(`id="f-collection"`)))
	}
}

// A fleet.json whose nodes all failed is a page of reasons, not an error.
func TestFleetPageNoBundle(t *testing.T) {
	dir := t.TempDir()
	writeFleetJSON(t, dir, []fleetRecord{
		{Node: "n1", Status: "image-pull-failure", Reason: "ErrImagePull: ghcr.io/nodesnap/nodesnap:v9 not found"},
		{Node: "n2", Status: "timeout", Reason: "the per-node deadline (5m0s) passed"},
	})
	if !HoldsBundles(dir) {
		t.Fatal("a directory with fleet.json is not taken for a fleet's")
	}
	v, err := LoadFleet(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFleet(&buf, v); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	rows := tableRows(t, buf.Bytes(), "f-collection")
	if len(rows) != 2 || !strings.HasPrefix(rows[0][2], "ErrImagePull") || !strings.HasPrefix(rows[1][1], "timeout|st-bad") {
		t.Errorf("collection rows %v", rows)
	}
	if !bytes.Contains(buf.Bytes(), []byte("No bundle could be analysed.")) {
		t.Error("the page does not say no bundle was analysed")
	}
}

func TestFleetErrors(t *testing.T) {
	if _, err := LoadFleet(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no bundle") {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := LoadFleet(context.Background(), filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("missing directory: no error")
	}
	if err := WriteFleet(&bytes.Buffer{}, &fleetview.View{Dir: "d"}); err == nil {
		t.Error("no nodes: no error")
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "fleet.json"), []byte(`{"nodes":4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFleet(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "fleet.json") {
		t.Errorf("a fleet.json that is none: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoadFleet(ctx, fleetDir(t, false)); err == nil {
		t.Error("cancelled: no error")
	}
}

// Hostile text in any bundle or in fleet.json stays text on the fleet page.
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
	writeFleetJSON(t, dir, []fleetRecord{{Node: s, Status: "ok", Bundle: "x.tar.gz"}, {Node: s + "2", Status: s, Reason: s}})
	v, err := LoadFleet(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	v.Dir = s
	var buf bytes.Buffer
	if err := WriteFleet(&buf, v); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	if bytes.Contains(buf.Bytes(), []byte("<script>")) || bytes.Contains(buf.Bytes(), []byte("<svg onload")) {
		t.Error("a bundle's or fleet.json's text became markup")
	}
	if len(tableRows(t, buf.Bytes(), "f-collection")) != 2 {
		t.Error("the hostile fleet.json rows are not on the page")
	}
}

// A fleet of 200 nodes, each with 20 findings of long text, and a
// thousand nodes without a bundle with long reasons, stays under the
// report's 2 MiB.
func TestFleetPageBounded(t *testing.T) {
	long := strings.Repeat("ceph mount /var/lib/kubelet/pods/x did not answer <b> ", 40)
	var nodes, missing []fleetview.Node
	for i := range 200 {
		rep := &analyze.Report{Hostname: fmt.Sprintf("node%d", i), BundleStatus: "complete", Counts: map[string]int{"critical": 20}}
		for j := range 20 {
			rep.Findings = append(rep.Findings, analyze.Finding{ID: fmt.Sprintf("finding-%d", j+i%3), Severity: analyze.Critical, Title: long, Subject: long, Summary: long})
		}
		nodes = append(nodes, fleetview.Node{Name: rep.Hostname, Bundle: fmt.Sprintf("nodesnap-node%d.tar.gz", i), Status: "complete", Kernel: fmt.Sprintf("6.%d", i%2),
			FleetStatus: "ok", Report: rep})
	}
	for i := range 1000 {
		missing = append(missing, fleetview.Node{Name: fmt.Sprintf("gone%d", i), FleetStatus: "timeout", Reason: long})
	}
	v := fleetview.New("fleet", nodes, missing)
	var buf bytes.Buffer
	if err := WriteFleet(&buf, v); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	for _, want := range []string{"summaries are cut short below", "more nodes (fleet.json has them all)", `id="f-differ"`} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
	t.Logf("%d bytes", buf.Len())
}

// Any fleet.json gives an error or a page under the report's rules,
// never a panic or markup from its text.
func FuzzFleetJSON(f *testing.F) {
	f.Add([]byte(`{"nodes":[{"node":"n1","status":"timeout","reason":"<script>x</script>","durations":{"total":3}}]}`))
	f.Add([]byte(`{"nodes":[{"node":"n1","status":"ok","bundle":"n1.tar.gz"},{"node":"n2","status":"ok","bundle":"../x.tar.gz"}]}`))
	f.Add([]byte(`{"nodes":4}`))
	f.Add([]byte(`{"nodes":[{"node":"","status":"","bundle":".tar.gz"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "fleet.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		v, err := LoadFleet(context.Background(), dir)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteFleet(&buf, v); err != nil {
			return
		}
		checkPage(t, buf.Bytes())
		if bytes.Contains(bytes.ToLower(buf.Bytes()), []byte("<script")) {
			t.Error("fleet.json's text became markup")
		}
	})
}

// Two bundles of one host (two collections, no fleet.json): each node's
// section keeps an anchor of its own, so the table's links and the page's
// ids stay unique.
func TestFleetPageSameHostTwice(t *testing.T) {
	var nodes []fleetview.Node
	for i := range 2 {
		rep := &analyze.Report{Hostname: "node-a", BundleStatus: "complete",
			Findings: []analyze.Finding{{ID: "mount-hung", Severity: analyze.Critical, Summary: "hung"}}}
		nodes = append(nodes, fleetview.Node{Name: "node-a", Bundle: fmt.Sprintf("nodesnap-node-a-%d.tar.gz", i), Status: "complete", Report: rep})
	}
	p := buildFleetPage(fleetview.New("fleet", nodes, nil))
	if len(p.Sections) != 2 || len(p.Rows) != 2 {
		t.Fatalf("%d sections, %d rows, want 2 of each", len(p.Sections), len(p.Rows))
	}
	if p.Sections[0].Anchor == p.Sections[1].Anchor {
		t.Errorf("both sections have anchor %q", p.Sections[0].Anchor)
	}
	for i := range p.Rows {
		if p.Rows[i].Anchor != p.Sections[i].Anchor {
			t.Errorf("row %d links to %q, its section is %q", i, p.Rows[i].Anchor, p.Sections[i].Anchor)
		}
	}
	var buf bytes.Buffer
	if err := WriteFleet(&buf, fleetview.New("fleet", nodes, nil)); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
}
