// Package report renders a bundle's analysis as one self-contained HTML
// file: the node at a glance, the findings with their evidence, the
// explanation and the fix, hung mounts with the kernel stacks of the
// tasks blocked on them, the collectors, and charts drawn as inline SVG.
//
// It is built from the bundle alone: analyze's Report and the bundle's
// manifest, nothing else. Everything the bundle holds is untrusted text:
// the page is rendered with html/template (contextual escaping of every
// value), carries no script, and its Content-Security-Policy forbids
// scripts and any network access, so a browser opening it fetches
// nothing. Long lists are cut at fixed caps, and the page says where.
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Caps keep a report of a large bundle readable and small (a few hundred
// KiB): what is cut is counted on the page.
const (
	maxFindings      = 200
	maxEvidence      = 20 // per finding
	maxLines         = 40 // per evidence item
	maxLineBytes     = 2000
	maxRecordBytes   = 4000
	maxFiles         = 400
	maxCollectors    = 100
	maxHung          = 50
	maxStackFrames   = 48
	maxTimelineLanes = 16
	maxTimelineDots  = 1000
	maxTextBytes     = 8000 // an explanation, a collector's error or stderr
	// maxBundleText bounds all the bundle's text a page quotes (evidence
	// lines, records, explanations, stacks): past it, text is cut to a
	// few words and the page says so.
	maxBundleText = 1 << 20
)

// budget hands out the page's allowance of quoted text.
type budget struct {
	left int
	cut  int // pieces shortened because the budget ran out
}

// take returns s cut to at most n bytes and to what is left of the
// budget (but never below a short prefix, so every item keeps its gist).
func (b *budget) take(s string, n int) string {
	const floor = 80
	lim := n
	if b.left < lim {
		lim = max(b.left, floor)
	}
	out := human.Cut(s, lim)
	if len(s) > lim && lim < n {
		b.cut++
	}
	b.left -= len(out)
	return out
}

// spent reports whether the budget is gone: lists of quoted lines and
// stack frames stop there.
func (b *budget) spent() bool { return b.left <= 0 }

// takeAll is take for each of up to n strings, with a last line saying
// how many more there were.
func (b *budget) takeAll(s []string, n, each int) []string {
	var out []string
	for i, v := range s {
		if i >= n {
			out = append(out, fmt.Sprintf("… and %d more", len(s)-n))
			break
		}
		out = append(out, b.take(v, each))
	}
	return out
}

// Load analyses the bundle at p and reads its manifest: what Write needs.
func Load(ctx context.Context, p string) (*analyze.Report, *bundle.Manifest, error) {
	rep, err := analyze.AnalyzeFile(ctx, p, analyze.Options{Facts: true})
	if err != nil {
		return nil, nil, err
	}
	// AnalyzeFile has read the whole archive, manifest first, so this
	// second read of its first entry cannot fail where the first did not
	// (short of the file changing in between).
	m, _, err := bundle.ReadManifest(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return rep, m, nil
}

// Write renders the report as one HTML document. m may be nil (the
// collector sections are then left out).
func Write(w io.Writer, rep *analyze.Report, m *bundle.Manifest) error {
	if rep == nil {
		return fmt.Errorf("no analysis to render")
	}
	p := buildPage(rep, m)
	var buf bytes.Buffer
	if err := pageTemplate().Execute(&buf, p); err != nil {
		return fmt.Errorf("rendering the report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// page is everything the template shows, already cut to the caps.
type page struct {
	Title       string
	Bundle      string
	Host        string
	Kernel      string
	BootID      string
	CollectedAt string
	Duration    string
	Tool        string
	Status      string
	Interrupted string
	Warnings    []string
	Self        string
	Counts      map[string]int
	Worst       string
	Redactions  string
	FilesRead   int
	BytesRead   string

	Missing  []missing
	Remedies []remedy
	Omitted  []bundle.Omitted
	MoreOmit int

	Findings     []finding
	MoreFindings int
	// Pods are the pods in trouble with their chains (the cluster view).
	Pods      []podRow
	BudgetCut int

	Hung     []hung
	MoreHung int

	Collectors []collectorRow
	Files      []fileRow
	MoreFiles  int
	TotalFiles int

	Timeline       *chart
	TimelineNote   string
	CollectorChart *chart
	NoManifest     bool

	// From analyze's Facts (nil charts when the bundle lacks them).
	HasFacts       bool
	HolderGraph    *chart
	HolderMore     int
	DirsChart      *chart
	DirsNote       string
	DeletingChart  *chart
	DeletingNote   string
	GoroutineChart *chart
	GoroutineNote  string
}

type missing struct {
	Collector string
	Status    string
	Error     string
	Notes     []string
}

type remedy struct {
	Collector string
	Missing   string
	Reason    string
	Fix       []string
}

type finding struct {
	Anchor      string
	N           int
	ID          string
	Severity    string
	Title       string
	Subject     string
	Summary     string
	Explanation string
	Evidence    []evidence
	MoreEvid    int
	Remediation []string
}

type evidence struct {
	Path     string
	FileRef  string // "" when the manifest does not list the path
	What     string
	Lines    []line
	MoreCut  int // lines left out by this report
	More     int // lines the analysis itself did not list
	Record   string
	RecordCt bool
}

type line struct {
	N         int
	Text      string
	Decoded   string
	Truncated bool
}

type hung struct {
	Target    string
	Op        string
	Collector string
	Tasks     []task
	Note      string
	Unreaped  bool
}

type task struct {
	Label   string
	Stack   []string
	MoreFrm int
}

type collectorRow struct {
	Name     string
	Status   string
	Class    string
	Duration string
	Timeout  string
	Files    int
	Size     string
	MaxRSS   string
	Detail   string
}

type fileRow struct {
	Ref       string
	Path      string
	Size      string
	Kind      string
	Flags     string
	Redaction int
}

// statusClass maps a collector status to one of the page's fixed CSS
// classes; anything else (a bundle may say anything) is "other".
func statusClass(s string) string {
	switch s {
	case bundle.StatusOK:
		return "ok"
	case bundle.StatusPartial, bundle.StatusSkipped, bundle.StatusUnsupported:
		return "warn"
	case bundle.StatusTimeout, bundle.StatusError:
		return "bad"
	}
	return "other"
}

func buildPage(rep *analyze.Report, m *bundle.Manifest) *page {
	p := &page{
		Bundle:      rep.Bundle,
		Host:        orUnknown(rep.Hostname),
		Kernel:      rep.Kernel,
		CollectedAt: fmtTime(rep.CollectedAt),
		Tool:        rep.ToolVersion,
		Status:      rep.BundleStatus,
		Counts:      map[string]int{"critical": rep.Counts["critical"], "warning": rep.Counts["warning"], "info": rep.Counts["info"]},
		FilesRead:   rep.FilesRead,
		BytesRead:   human.Bytes(rep.BytesRead),
		NoManifest:  m == nil,
	}
	p.Title = "nodesnap report: " + p.Host
	if w, ok := rep.Worst(); ok {
		p.Worst = w.String()
	}
	fileRefs := map[string]string{}
	bud := &budget{left: maxBundleText}
	if m != nil {
		p.BootID = m.Host.BootID
		p.Duration = fmt.Sprintf("%.1fs", m.DurationSeconds)
		if m.Interrupted != nil {
			p.Interrupted = fmt.Sprintf("interrupted by %s at %s", m.Interrupted.Signal, fmtTime(m.Interrupted.At))
		}
		p.Warnings = bud.takeAll(m.Warnings, 50, 1000)
		p.Self = selfLine(m.Self)
		p.Redactions = redactionLine(m.Redaction)
		for i, f := range m.Files {
			if i < maxFiles {
				fileRefs[f.Path] = fmt.Sprintf("file-%d", i)
			}
		}
		p.Files, p.MoreFiles = fileRows(m.Files, bud)
		p.TotalFiles = len(m.Files)
		p.Collectors = collectorRows(m)
		p.CollectorChart = collectorChart(m)
		for _, c := range m.Collectors {
			if c.Status != bundle.StatusOK && len(p.Missing) < maxCollectors {
				p.Missing = append(p.Missing, missing{Collector: human.Cut(c.Name, 200), Status: human.Cut(c.Status, 100), Error: bud.take(c.Error, maxTextBytes), Notes: bud.takeAll(c.Notes, 20, 2000)})
			}
			for _, r := range c.Remedies {
				if len(p.Remedies) >= maxCollectors {
					break
				}
				p.Remedies = append(p.Remedies, remedy{Collector: human.Cut(c.Name, 200), Missing: bud.take(strings.Join(r.Missing, ", "), 1000), Reason: bud.take(r.Reason, 2000), Fix: bud.takeAll(r.Fix, 20, 1000)})
			}
		}
		for i, o := range m.Omitted {
			if i >= 50 {
				p.MoreOmit = len(m.Omitted) - 50
				break
			}
			p.Omitted = append(p.Omitted, bundle.Omitted{Path: bud.take(o.Path, 1000), Reason: bud.take(o.Reason, 1000)})
		}
		p.Hung, p.MoreHung = hungRows(m, bud)
	}
	fs := rep.Findings
	if len(fs) > maxFindings {
		p.MoreFindings = len(fs) - maxFindings
		fs = fs[:maxFindings]
	}
	for i, f := range fs {
		p.Findings = append(p.Findings, findingRow(i, f, fileRefs, bud))
	}
	p.Pods = podRows(rep, bud)
	p.Timeline, p.TimelineNote = timelineChart(rep, fs)
	if f := rep.Facts; f != nil {
		p.HasFacts = true
		p.HolderGraph, p.HolderMore = holderGraph(f, bud)
		p.DirsChart, p.DirsNote = largestDirsChart(f.DirShape, bud)
		p.DeletingChart, p.DeletingNote = deletingChart(f.DirShape, bud)
		p.GoroutineChart, p.GoroutineNote = goroutineChart(f.KubeletGoroutines, bud)
	}
	p.BudgetCut = bud.cut
	return p
}

func findingRow(i int, f analyze.Finding, refs map[string]string, bud *budget) finding {
	out := finding{
		Anchor:      fmt.Sprintf("finding-%d", i+1),
		N:           i + 1,
		ID:          f.ID,
		Severity:    f.Severity.String(),
		Title:       f.Title,
		Subject:     f.Subject,
		Summary:     bud.take(f.Summary, maxTextBytes),
		Explanation: bud.take(f.Explanation, maxTextBytes),
		Remediation: bud.takeAll(f.Remediation, 30, 2000),
	}
	ev := f.Evidence
	if len(ev) > maxEvidence {
		out.MoreEvid = len(ev) - maxEvidence
		ev = ev[:maxEvidence]
	}
	for _, e := range ev {
		r := evidence{Path: e.Path, FileRef: refs[e.Path], What: e.What, More: e.More}
		ls := e.Lines
		if len(ls) > maxLines {
			r.MoreCut = len(ls) - maxLines
			ls = ls[:maxLines]
		}
		for i, l := range ls {
			if bud.spent() {
				r.MoreCut += len(ls) - i
				break
			}
			text := bud.take(l.Text, maxLineBytes)
			r.Lines = append(r.Lines, line{N: l.N, Text: text, Decoded: bud.take(l.Decoded, maxLineBytes), Truncated: l.Truncated || len(text) < len(l.Text)})
		}
		if e.Record != nil && !bud.spent() {
			if b, err := indentJSON(e.Record); err == nil {
				r.Record = bud.take(string(b), maxRecordBytes)
				r.RecordCt = len(r.Record) < len(b)
			}
		}
		out.Evidence = append(out.Evidence, r)
	}
	return out
}

// hungRows lists the hung mounts of the manifest, then collectors that
// hung as a whole, each with the kernel stacks of its blocked threads.
func hungRows(m *bundle.Manifest, bud *budget) ([]hung, int) {
	var out []hung
	more := 0
	add := func(h hung) {
		if len(out) < maxHung {
			out = append(out, h)
		} else {
			more++
		}
	}
	for _, h := range m.HungMounts {
		add(hungRow(h.Target, h.Op, h.Collector, h.Evidence, bud))
	}
	for _, c := range m.Collectors {
		if c.HangEvidence != nil {
			add(hungRow("", "collector "+c.Name, c.Name, c.HangEvidence, bud))
		}
	}
	return out, more
}

func hungRow(target, op, collector string, ev *layout.HangEvidence, bud *budget) hung {
	h := hung{Target: bud.take(target, 1000), Op: human.Cut(op, 200), Collector: human.Cut(collector, 200)}
	if ev == nil {
		h.Note = "no hang evidence recorded"
		return h
	}
	h.Note, h.Unreaped = bud.take(ev.Note, maxTextBytes), ev.Unreaped
	seen := map[int]bool{}
	var walk func(e *layout.HangEvidence, depth int)
	walk = func(e *layout.HangEvidence, depth int) {
		if e == nil || depth > 4 || len(h.Tasks) >= 8 {
			return
		}
		if b := e.Blocked; b != nil && !seen[b.TID] {
			seen[b.TID] = true
			h.Tasks = append(h.Tasks, taskRow(e.PID, *b, bud))
		}
		for _, t := range e.Tasks {
			if t.State == "D" && !seen[t.TID] && len(h.Tasks) < 8 {
				seen[t.TID] = true
				h.Tasks = append(h.Tasks, taskRow(e.PID, t, bud))
			}
		}
		for _, c := range e.Children {
			walk(c, depth+1)
		}
	}
	walk(ev, 0)
	return h
}

func taskRow(pid int, t layout.TaskEvidence, bud *budget) task {
	label := fmt.Sprintf("pid %d tid %d", pid, t.TID)
	for _, kv := range [][2]string{{"comm", t.Comm}, {"state", t.State}, {"wchan", t.Wchan}, {"syscall", t.Syscall}} {
		if kv[1] != "" {
			label += " · " + kv[0] + " " + kv[1]
		}
	}
	st := t.Stack
	more := 0
	if len(st) > maxStackFrames {
		more = len(st) - maxStackFrames
		st = st[:maxStackFrames]
	}
	var frames []string
	for i, f := range st {
		if bud.spent() {
			more += len(st) - i
			break
		}
		frames = append(frames, bud.take(f, 300))
	}
	return task{Label: human.Cut(label, 400), Stack: frames, MoreFrm: more}
}

func collectorRows(m *bundle.Manifest) []collectorRow {
	sizes := map[string]int64{}
	for _, f := range m.Files {
		sizes[f.Collector] += f.Size
	}
	var out []collectorRow
	for i, c := range m.Collectors {
		if i >= maxCollectors {
			out = append(out, collectorRow{Name: fmt.Sprintf("… and %d more collectors, not listed here", len(m.Collectors)-maxCollectors), Class: "other"})
			break
		}
		detail := c.Error
		if c.HangEvidence != nil {
			detail = "hung: " + c.HangEvidence.String()
		}
		if detail == "" && len(c.HungItems) > 0 {
			detail = fmt.Sprintf("%d item(s) hung, first: %s %s", len(c.HungItems), c.HungItems[0].Op, c.HungItems[0].Target)
		}
		r := collectorRow{
			Name: c.Name, Status: c.Status, Class: statusClass(c.Status),
			Duration: fmt.Sprintf("%.2fs", c.DurationSeconds),
			Files:    len(c.Files), Size: human.Bytes(sizes[c.Name]),
			Detail: human.FirstLine(detail),
		}
		if c.TimeoutSeconds > 0 {
			r.Timeout = fmt.Sprintf("%.0fs", c.TimeoutSeconds)
		}
		if c.MaxRSSKiB > 0 {
			r.MaxRSS = human.Bytes(c.MaxRSSKiB << 10)
		}
		out = append(out, r)
	}
	return out
}

func fileRows(files []bundle.FileEntry, bud *budget) ([]fileRow, int) {
	var out []fileRow
	for i, f := range files {
		if i >= maxFiles {
			return out, len(files) - maxFiles
		}
		var flags []string
		if f.Truncated {
			flags = append(flags, "truncated")
		}
		if f.Incomplete {
			flags = append(flags, "incomplete")
		}
		n := 0
		for _, v := range f.Redactions {
			n += v
		}
		kind := f.Kind
		if f.BinaryReason != "" {
			kind += " (" + f.BinaryReason + ")"
		}
		out = append(out, fileRow{Ref: fmt.Sprintf("file-%d", i), Path: bud.take(f.Path, 1000), Size: human.Bytes(f.Size), Kind: human.Cut(kind, 200), Flags: strings.Join(flags, ", "), Redaction: n})
	}
	return out, 0
}

func selfLine(s *bundle.Self) string {
	if s == nil {
		return ""
	}
	out := fmt.Sprintf("pid %d", s.PID)
	if s.MountNamespace != 0 {
		out += fmt.Sprintf(", mount namespace %d", s.MountNamespace)
	}
	if p := s.Pod; p != nil {
		out += ", pod " + p.UID
		if p.Name != "" {
			out += " (" + p.Namespace + "/" + p.Name + ")"
		}
	}
	return out
}

func redactionLine(r bundle.RedactionSummary) string {
	out := fmt.Sprintf("%d", r.Total)
	if r.Total > 0 {
		keys := make([]string, 0, len(r.Rules))
		for k := range r.Rules {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, r.Rules[k]))
		}
		out += " (" + strings.Join(parts, ", ") + ")"
	}
	if len(r.Obfuscated) > 0 {
		out += "; obfuscated: " + strings.Join(r.Obfuscated, ", ")
	}
	return human.Cut(out, 1000)
}

// indentJSON is json.MarshalIndent without HTML escaping: the template
// escapes, and stacks print "<0>".
func indentJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown host"
	}
	return s
}

// podRow is one pod in trouble and its chain.
type podRow struct {
	Name, Symptom, Unexplained string
	Chain                      []chainRow
}

type chainRow struct {
	N                    int
	Anchor, Summary, How string
}

// maxPodRows bounds the pods listed.
const maxPodRows = 200

func podRows(rep *analyze.Report, bud *budget) []podRow {
	var out []podRow
	for _, pr := range rep.Pods {
		if pr.Symptom == "" || len(out) >= maxPodRows {
			continue
		}
		row := podRow{Name: human.Cut(pr.Namespace+"/"+pr.Name, 300), Symptom: bud.take(pr.Symptom, 500)}
		for _, l := range pr.Chain {
			row.Chain = append(row.Chain, chainRow{N: l.Index, Anchor: fmt.Sprintf("finding-%d", l.Index), Summary: bud.take(l.Summary, 1000), How: bud.take(l.How, 300)})
		}
		if !pr.Explained {
			row.Unexplained = bud.take(strings.Join(pr.Missing, "; "), 2000)
		}
		out = append(out, row)
	}
	return out
}
