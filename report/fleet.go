package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/analyze"
	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/human"
)

// A fleet directory holds one bundle per node (nodesnap fleet writes
// them, with its fleet.json, into one directory). Its page shows which
// node has which finding, then each node's findings in short; the
// evidence is in each bundle's own report.

// Bounds of a fleet page.
const (
	MaxFleetBundles  = 2000
	maxFleetFindings = 100 // per node
	maxFleetColumns  = 40  // finding kinds in the table
	maxFleetListed   = 10  // findings listed in a node's section
)

// FleetNode is what a fleet page keeps of one bundle: no evidence, so a
// thousand nodes stay small.
type FleetNode struct {
	Path        string
	Host        string
	Kernel      string
	CollectedAt time.Time
	Status      string
	Counts      map[string]int
	Findings    []analyze.Finding // without their evidence, at most maxFleetFindings
	More        int               // findings past maxFleetFindings
	// Err is why the bundle could not be read; nothing else is set then.
	Err error
}

// IsBundleName reports whether a file name is a bundle's (.tar.gz,
// .tar.zst, .tgz), not a hidden or temporary file.
func IsBundleName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	for _, ext := range []string{".tar.gz", ".tar.zst", ".tgz"} {
		if strings.HasSuffix(name, ext) && len(name) > len(ext) {
			return true
		}
	}
	return false
}

// HoldsBundles reports whether p is a directory of bundle archives (a
// fleet's), not an extracted bundle: no manifest.json at its top, and at
// least one file named as a bundle.
func HoldsBundles(p string) bool {
	if _, err := os.Lstat(filepath.Join(p, bundle.ManifestName)); err == nil {
		return false
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Type().IsRegular() && IsBundleName(e.Name()) {
			return true
		}
	}
	return false
}

// LoadFleet analyses every bundle directly in dir, in name order. A
// bundle that cannot be read is kept with its error (the page lists it);
// a directory without bundles, or one that cannot be listed, is an
// error.
func LoadFleet(ctx context.Context, dir string) ([]FleetNode, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the fleet directory: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && IsBundleName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s holds no bundle (*.tar.gz, *.tar.zst): give a bundle, or a directory of bundles such as nodesnap fleet writes", dir)
	}
	if len(names) > MaxFleetBundles {
		return nil, fmt.Errorf("%s holds %d bundles, more than the %d one page shows: report on a smaller directory", dir, len(names), MaxFleetBundles)
	}
	sort.Strings(names)
	nodes := make([]FleetNode, 0, len(names))
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := filepath.Join(dir, n)
		rep, err := analyze.AnalyzeFile(ctx, p, analyze.Options{})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			nodes = append(nodes, FleetNode{Path: p, Err: err})
			continue
		}
		nodes = append(nodes, fleetNode(p, rep))
	}
	return nodes, nil
}

func fleetNode(p string, rep *analyze.Report) FleetNode {
	n := FleetNode{Path: p, Host: rep.Hostname, Kernel: rep.Kernel, CollectedAt: rep.CollectedAt, Status: rep.BundleStatus, Counts: rep.Counts}
	fs := rep.Findings
	if len(fs) > maxFleetFindings {
		n.More = len(fs) - maxFleetFindings
		fs = fs[:maxFleetFindings]
	}
	for _, f := range fs {
		f.Evidence, f.Explanation, f.Remediation = nil, "", nil
		f.Summary = human.Cut(f.Summary, 1000)
		n.Findings = append(n.Findings, f)
	}
	return n
}

// fleetPage is what the fleet template shows.
type fleetPage struct {
	Title      string
	Dir        string
	Nodes      int
	Unreadable []fleetBad
	Sick       int // nodes with a warning or critical finding
	Columns    []fleetColumn
	MoreCols   int
	Rows       []fleetRow
	Chart      *chart
	Sections   []fleetSection
	BudgetCut  int
}

type fleetBad struct{ Path, Err string }

type fleetColumn struct {
	ID, Title, Severity string
	Nodes               int
}

type fleetRow struct {
	Anchor, Host, Worst string
	Cells               []fleetCell
}

type fleetCell struct {
	Class, Text string
}

type fleetSection struct {
	Anchor, Host, Bundle, Kernel, Collected, Status, Worst string
	Counts                                                 map[string]int
	Findings                                               []fleetFinding
	More                                                   int
}

type fleetFinding struct {
	Severity, ID, Subject, Summary string
}

// WriteFleet renders a fleet directory's nodes as one HTML document: a
// chart and a table of which node has which finding, then each node in
// short, under the report's rules.
func WriteFleet(w io.Writer, dir string, nodes []FleetNode) error {
	if len(nodes) == 0 {
		return errors.New("no bundles to render")
	}
	var buf bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&buf, "fleet", buildFleetPage(dir, nodes)); err != nil {
		return fmt.Errorf("rendering the fleet report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing the fleet report: %w", err)
	}
	return nil
}

func buildFleetPage(dir string, nodes []FleetNode) *fleetPage {
	p := &fleetPage{Dir: human.Cut(dir, 1000), Title: "nodesnap fleet report: " + human.Cut(filepath.Base(dir), 200)}
	// As the report's: at most about 1 MiB of the bundles' text.
	bud := &budget{left: maxBundleText}
	type kind struct {
		id, title string
		worst     analyze.Severity
		nodes     int
	}
	kinds := map[string]*kind{}
	var good []FleetNode
	for _, n := range nodes {
		if n.Err != nil {
			p.Unreadable = append(p.Unreadable, fleetBad{Path: human.Cut(n.Path, 1000), Err: human.Cut(n.Err.Error(), 2000)})
			continue
		}
		good = append(good, n)
		seen := map[string]bool{}
		sick := false
		for _, f := range n.Findings {
			sick = sick || f.Severity >= analyze.Warning
			k := kinds[f.ID]
			if k == nil {
				k = &kind{id: f.ID, title: f.Title, worst: f.Severity}
				kinds[f.ID] = k
			}
			k.worst = max(k.worst, f.Severity)
			if !seen[f.ID] {
				seen[f.ID] = true
				k.nodes++
			}
		}
		if sick {
			p.Sick++
		}
	}
	p.Nodes = len(good)
	var ks []*kind
	for _, k := range kinds {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if a.worst != b.worst {
			return a.worst > b.worst
		}
		if a.nodes != b.nodes {
			return a.nodes > b.nodes
		}
		return a.id < b.id
	})
	if len(ks) > maxFleetColumns {
		p.MoreCols = len(ks) - maxFleetColumns
		ks = ks[:maxFleetColumns]
	}
	var bars []hbar
	for _, k := range ks {
		p.Columns = append(p.Columns, fleetColumn{ID: human.Cut(k.id, 200), Title: human.Cut(k.title, 300), Severity: k.worst.String(), Nodes: k.nodes})
		pct := 100 * float64(k.nodes) / float64(max(len(good), 1))
		bars = append(bars, hbar{Label: k.id, Value: float64(k.nodes), Class: "st-" + map[analyze.Severity]string{analyze.Critical: "bad", analyze.Warning: "warn"}[k.worst],
			Text: fmt.Sprintf("%s (%s) · %s", plural(k.nodes, "node", "nodes"), fmtPct(pct), k.worst), Title: human.Cut(k.id+": "+k.title, 1000)})
	}
	for i := range bars {
		if bars[i].Class == "st-" {
			bars[i].Class = "st-info"
		}
	}
	if len(bars) > maxBars {
		bars = bars[:maxBars]
	}
	p.Chart = barChart("Nodes per finding", bars, 0, "", bud)
	for i, n := range good {
		anchor := fmt.Sprintf("node-%d", i+1)
		host := human.Cut(orUnknown(n.Host), 200)
		row := fleetRow{Anchor: anchor, Host: host, Worst: "none"}
		per := map[string][]analyze.Finding{}
		for _, f := range n.Findings {
			per[f.ID] = append(per[f.ID], f)
		}
		worst := -1
		for _, k := range ks {
			fs := per[k.id]
			if len(fs) == 0 {
				row.Cells = append(row.Cells, fleetCell{Class: "sev-none", Text: "·"})
				continue
			}
			w := analyze.Info
			for _, f := range fs {
				w = max(w, f.Severity)
			}
			text := w.String()
			if len(fs) > 1 {
				text += fmt.Sprintf(" ×%d", len(fs))
			}
			row.Cells = append(row.Cells, fleetCell{Class: "sev-" + w.String(), Text: text})
		}
		for _, f := range n.Findings {
			worst = max(worst, int(f.Severity))
		}
		if worst >= 0 {
			row.Worst = analyze.Severity(worst).String()
		}
		p.Rows = append(p.Rows, row)
		s := fleetSection{Anchor: anchor, Host: host, Bundle: human.Cut(n.Path, 1000), Kernel: human.Cut(n.Kernel, 300), Collected: fmtTime(n.CollectedAt),
			Status: human.Cut(n.Status, 100), Counts: n.Counts, More: n.More, Worst: row.Worst}
		for i, f := range n.Findings {
			if i >= maxFleetListed {
				s.More += len(n.Findings) - maxFleetListed
				break
			}
			s.Findings = append(s.Findings, fleetFinding{Severity: f.Severity.String(), ID: human.Cut(f.ID, 200), Subject: bud.take(f.Subject, 500), Summary: bud.take(f.Summary, 1000)})
		}
		p.Sections = append(p.Sections, s)
	}
	p.BudgetCut = bud.cut
	return p
}
