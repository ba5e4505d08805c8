// Package fleetview reads many bundles of one fleet together: for each
// finding, the nodes that have it; and the nodes that differ from the
// rest. It depends only on analyze and bundle, so that any front end (the
// text of `nodesnap fleet analyze`, an HTML report) can use it.
package fleetview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// Node is one bundle of the directory and its analysis.
type Node struct {
	// Name is the node's name from fleet.json, else the bundle's hostname.
	Name   string `json:"node"`
	Bundle string `json:"bundle"`
	// Status is the bundle's own (complete, partial).
	Status string `json:"bundle_status,omitempty"`
	Kernel string `json:"kernel,omitempty"`
	// Error says why the bundle could not be analysed.
	Error string `json:"error,omitempty"`
	// FleetStatus, Reason and Seconds are the node's row of fleet.json
	// (ok, partial, timeout, …; why; the whole node's time), when the
	// directory has one.
	FleetStatus string  `json:"status,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"`
	// Report is the analysis, without the findings' evidence,
	// explanations and remedies (each bundle's own report has them), so
	// that a thousand nodes stay small.
	Report *analyze.Report `json:"-"`
}

// Group is one finding ID and the nodes that have it.
type Group struct {
	ID       string           `json:"id"`
	Severity analyze.Severity `json:"severity"`
	Title    string           `json:"title"`
	// Nodes have at least one finding of this ID; Subjects lists, per
	// node, what they are about (a device, a mountpoint), when any.
	Nodes    []string            `json:"nodes"`
	Subjects map[string][]string `json:"subjects,omitempty"`
	// Summary is one node's summary, as an example.
	Summary string `json:"summary"`
}

// Difference is a node that is not like the rest.
type Difference struct {
	Node string `json:"node"`
	// Has lists finding IDs this node has and most nodes do not; Lacks
	// those most nodes have and it does not; Other says how else it
	// differs (its kernel, a partial bundle).
	Has   []string `json:"has,omitempty"`
	Lacks []string `json:"lacks,omitempty"`
	Other []string `json:"other,omitempty"`
}

// View is the whole directory.
type View struct {
	Dir         string       `json:"dir"`
	Nodes       []Node       `json:"nodes"`
	Findings    []Group      `json:"findings"`
	Differences []Difference `json:"differences"`
	// Missing are nodes fleet.json lists without a bundle, with why.
	Missing []Node `json:"missing,omitempty"`
}

// fleetRow is what is read of fleet.json (package fleet writes it).
type fleetRow struct {
	Node      string `json:"node"`
	Status    string `json:"status"`
	Reason    string `json:"reason"`
	Bundle    string `json:"bundle"`
	Object    string `json:"object"`
	Durations struct {
		Total float64 `json:"total"`
	} `json:"durations"`
}

// FleetFile is the name of a fleet directory's run record.
const FleetFile = "fleet.json"

// ErrNoBundles: the directory holds no bundle.
var ErrNoBundles = errors.New("no bundle")

// bundleExts are the names of bundle archives.
var bundleExts = []string{".tar.gz", ".tar.zst", ".tgz"}

// IsBundleName reports whether a file name is a bundle's (.tar.gz,
// .tar.zst, .tgz), not a hidden or temporary file.
func IsBundleName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	for _, ext := range bundleExts {
		if strings.HasSuffix(name, ext) && len(name) > len(ext) {
			return true
		}
	}
	return false
}

// Options bound a Load.
type Options struct {
	// MaxBundles, when above 0, refuses a directory of more bundles
	// before any is read.
	MaxBundles int
}

// Load analyses every bundle of dir: those fleet.json names, or, without
// one, every bundle in it (IsBundleName). Bundles are read two at a time,
// each in one streaming pass.
func Load(ctx context.Context, dir string) (*View, error) {
	return LoadWith(ctx, dir, Options{})
}

// LoadWith is Load with bounds. A directory whose fleet.json lists nodes
// but none with a bundle is a view of those nodes (Missing), not an error:
// the reasons are the answer.
func LoadWith(ctx context.Context, dir string, opt Options) (*View, error) {
	var nodes, missing []Node
	raw, err := os.ReadFile(filepath.Join(dir, FleetFile))
	switch {
	case err == nil:
		var rep struct {
			Nodes []fleetRow `json:"nodes"`
		}
		if err := json.Unmarshal(raw, &rep); err != nil {
			return nil, fmt.Errorf("%s is not a fleet record nodesnap fleet collect wrote: %w", filepath.Join(dir, FleetFile), err)
		}
		for _, r := range rep.Nodes {
			n := Node{Name: r.Node, Bundle: r.Bundle, FleetStatus: r.Status, Reason: r.Reason, Seconds: r.Durations.Total}
			if r.Bundle == "" || filepath.Base(r.Bundle) != r.Bundle || !IsBundleName(r.Bundle) {
				n.Bundle, n.Error = "", r.Status+": "+r.Reason
				if r.Bundle == "" && r.Object != "" {
					// fleet collect --to: the bundle is in the store.
					n.Error = r.Status + ": the bundle is in the object store at " + r.Object + " (nodesnap fleet analyze with the s3:// location reads it)"
				}
				missing = append(missing, n)
				continue
			}
			nodes = append(nodes, n)
		}
	case errors.Is(err, os.ErrNotExist):
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("reading the fleet directory: %w", err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() && IsBundleName(e.Name()) {
				nodes = append(nodes, Node{Bundle: e.Name()})
			}
		}
	default:
		return nil, fmt.Errorf("reading the fleet record: %w", err)
	}
	if len(nodes) == 0 && len(missing) == 0 {
		return nil, fmt.Errorf("%w in %s (neither fleet.json's nor any *.tar.gz, *.tar.zst or *.tgz): give a directory nodesnap fleet collect wrote, or one of bundles", ErrNoBundles, dir)
	}
	if opt.MaxBundles > 0 && len(nodes) > opt.MaxBundles {
		return nil, fmt.Errorf("%s holds %d bundles, more than the %d allowed here: use a smaller directory", dir, len(nodes), opt.MaxBundles)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func(n *Node) {
			defer wg.Done()
			defer func() { <-sem }()
			n.fill(analyze.AnalyzeFile(ctx, filepath.Join(dir, n.Bundle), analyze.Options{}))
		}(&nodes[i])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range nodes {
		if nodes[i].Name == "" {
			nodes[i].Name = nodes[i].Bundle
			for _, ext := range bundleExts {
				nodes[i].Name = strings.TrimSuffix(nodes[i].Name, ext)
			}
		}
	}
	return New(dir, nodes, missing), nil
}

// New is the view of nodes already analysed (Report set, or Error) and of
// nodes without a bundle: nodes sorted by name, findings grouped, the
// nodes that differ found.
func New(dir string, nodes, missing []Node) *View {
	v := &View{Dir: dir, Nodes: slices.Clone(nodes), Missing: slices.Clone(missing)}
	sort.SliceStable(v.Nodes, func(i, j int) bool { return v.Nodes[i].Name < v.Nodes[j].Name })
	sort.SliceStable(v.Missing, func(i, j int) bool { return v.Missing[i].Name < v.Missing[j].Name })
	v.group()
	return v
}

// group fills Findings and Differences from the nodes' reports.
func (v *View) group() {
	byID := map[string]*Group{}
	var analysed []Node
	for _, n := range v.Nodes {
		if n.Report == nil {
			continue
		}
		analysed = append(analysed, n)
		seen := map[string]bool{}
		for _, f := range n.Report.Findings {
			g := byID[f.ID]
			if g == nil {
				g = &Group{ID: f.ID, Severity: f.Severity, Title: f.Title, Summary: f.Summary, Subjects: map[string][]string{}}
				byID[f.ID] = g
			}
			g.Severity = max(g.Severity, f.Severity)
			if !seen[f.ID] {
				seen[f.ID] = true
				g.Nodes = append(g.Nodes, n.Name)
			}
			if f.Subject != "" {
				g.Subjects[n.Name] = append(g.Subjects[n.Name], f.Subject)
			}
		}
	}
	for _, g := range byID {
		if len(g.Subjects) == 0 {
			g.Subjects = nil
		}
		v.Findings = append(v.Findings, *g)
	}
	sort.Slice(v.Findings, func(i, j int) bool {
		a, b := v.Findings[i], v.Findings[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if len(a.Nodes) != len(b.Nodes) {
			return len(a.Nodes) > len(b.Nodes)
		}
		return a.ID < b.ID
	})
	v.Differences = differences(analysed, v.Findings)
}

// differences names, for each node, the findings it shares with fewer
// than half of the nodes and those more than half have and it lacks; and
// a kernel or bundle status unlike most nodes'. With fewer than three
// nodes there is no "rest" to differ from.
func differences(nodes []Node, groups []Group) []Difference {
	total := len(nodes)
	if total < 3 {
		return nil
	}
	diffs := map[string]*Difference{}
	get := func(n string) *Difference {
		if diffs[n] == nil {
			diffs[n] = &Difference{Node: n}
		}
		return diffs[n]
	}
	for _, g := range groups {
		has := map[string]bool{}
		for _, n := range g.Nodes {
			has[n] = true
		}
		switch {
		case len(g.Nodes)*2 < total:
			for _, n := range g.Nodes {
				d := get(n)
				d.Has = append(d.Has, g.ID)
			}
		case len(g.Nodes)*2 > total:
			for _, n := range nodes {
				if !has[n.Name] {
					d := get(n.Name)
					d.Lacks = append(d.Lacks, g.ID)
				}
			}
		}
	}
	for _, attr := range []struct {
		what string
		of   func(Node) string
	}{{"kernel", func(n Node) string { return n.Kernel }}, {"bundle", func(n Node) string { return n.Status }}} {
		count := map[string]int{}
		for _, n := range nodes {
			count[attr.of(n)]++
		}
		for _, n := range nodes {
			if val := attr.of(n); val != "" && count[val]*2 < total {
				d := get(n.Name)
				d.Other = append(d.Other, fmt.Sprintf("%s %s (%d of %d nodes)", attr.what, val, count[val], total))
			}
		}
	}
	out := make([]Difference, 0, len(diffs))
	for _, d := range diffs {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// Worst is the highest severity of any finding, and whether there is one.
func (v *View) Worst() (analyze.Severity, bool) {
	if len(v.Findings) == 0 {
		return analyze.Info, false
	}
	return v.Findings[0].Severity, true
}

// fill keeps a node's analysis without what a fleet view does not show
// (each finding's evidence, explanation and remedy), or its error.
func (n *Node) fill(rep *analyze.Report, err error) {
	if err != nil {
		n.Error = err.Error()
		return
	}
	for i := range rep.Findings {
		f := &rep.Findings[i]
		f.Evidence, f.Explanation, f.Remediation = nil, "", nil
	}
	n.Report, n.Status, n.Kernel = rep, rep.BundleStatus, rep.Kernel
	if n.Name == "" {
		n.Name = rep.Hostname
	}
}
