package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/read/goroutinedump"
)

// The pictures of analyze's Facts: the held-device graph, the directory
// shape and the kubelet's goroutines. Hand-drawn SVG like the other
// charts: boxes, lines and text the template writes attribute by
// attribute.

const (
	// maxGraphRows bounds the holder graph's rows (one a process); the
	// devices past it are counted under the graph.
	maxGraphRows = 80
	graphRowH    = 52.0
	maxBars      = 15
	// ext4DirLimit is the subdirectories an ext4 directory holds before
	// its link count overflows (dir_nlink: st_nlink stays 1): incident
	// 001's signature.
	ext4DirLimit = 64998
)

// Columns of the holder graph: device → namespace → process → pod.
var graphCols = [4]struct{ x, w float64 }{{0, 210}, {250, 230}, {520, 230}, {790, 270}}

// holderGraph draws each held device, the namespaces holding it, their
// processes and the pods those run in. It returns the chart (nil when
// no device is held) and how many devices were left out.
func holderGraph(f *analyze.Facts, bud *budget) (*chart, int) {
	if f == nil || len(f.HeldDevices) == 0 {
		return nil, 0
	}
	c := &chart{W: graphCols[3].x + graphCols[3].w + 4, Label: "Held devices: device, mount namespace, process, pod"}
	heads := []string{"device", "mount namespace", "process", "pod and container"}
	for i, h := range heads {
		c.Texts = append(c.Texts, label{X: graphCols[i].x + 2, Y: 10, Anchor: "start", Class: "head", Text: h})
	}
	y := 26.0
	rows := 0
	left := f.HeldDevicesOmitted
	for di, d := range f.HeldDevices {
		n := 0
		for _, ns := range d.Namespaces {
			n += max(1, len(ns.Holders)) + min(1, ns.HoldersOmitted)
		}
		n += min(1, d.NamespacesOmitted)
		if rows > 0 && rows+n > maxGraphRows {
			left += len(f.HeldDevices) - di
			break
		}
		rows += n
		top := y
		devClass := "node dev"
		if d.OnlyOutsideHostNamespace {
			devClass = "node dev held"
		}
		devLines := []string{d.Name, strings.Join(d.FSTypes, ", ") + " · " + d.Dev}
		if d.Image != "" {
			devLines = append(devLines, d.Image)
		}
		if d.OnlyOutsideHostNamespace {
			devLines = append(devLines, "not mounted on the host")
		}
		devTitle := fmt.Sprintf("%s (%s), sources %s", d.Name, d.Dev, strings.Join(d.Sources, ", "))
		if len(d.KernelThreads) > 0 {
			devTitle += "; kernel threads " + strings.Join(d.KernelThreads, ", ")
		}
		var nsMids []float64
		for _, ns := range d.Namespaces {
			nsTop := y
			hs := max(1, len(ns.Holders))
			for _, h := range ns.Holders {
				pLines := []string{fmt.Sprintf("%s[%d]", h.Comm, h.PID)}
				if len(h.Uses) > 0 {
					pLines = append(pLines, strings.Join(h.Uses, ", "))
				} else {
					pLines = append(pLines, "lives in the namespace")
				}
				box(c, bud, 2, y, graphRowH-6, "node proc", fmt.Sprintf("%s[%d]: %s", h.Comm, h.PID, strings.Join(h.Uses, ", ")), pLines)
				pod := strings.TrimPrefix(h.Pod, "in ")
				podClass := "node pod"
				if pod == "" {
					pod, podClass = "no pod (a host process)", "node nopod"
				}
				podLines := splitPod(pod)
				box(c, bud, 3, y, graphRowH-6, podClass, pod, podLines)
				edge(c, 2, y+(graphRowH-6)/2, y+(graphRowH-6)/2)
				y += graphRowH
			}
			if len(ns.Holders) == 0 {
				y += graphRowH
			}
			if ns.HoldersOmitted > 0 {
				c.Texts = append(c.Texts, label{X: graphCols[2].x + 4, Y: y + 10, Anchor: "start", Class: "note", Text: fmt.Sprintf("… and %d more processes", ns.HoldersOmitted)})
				y += graphRowH
			}
			nsH := float64(hs)*graphRowH - 6
			nsLines := []string{nsName(ns)}
			switch {
			case len(ns.MountPoints) > 0:
				nsLines = append(nsLines, "mounts it at "+ns.MountPoints[0])
			default:
				nsLines = append(nsLines, "a file open on it")
			}
			if ns.ProcessCount > 0 {
				nsLines = append(nsLines, plural(ns.ProcessCount, "process", "processes"))
			}
			nsClass := "node ns"
			if ns.Host {
				nsClass = "node hostns"
			}
			box(c, bud, 1, nsTop, nsH, nsClass, nsName(ns)+"; mount points: "+strings.Join(ns.MountPoints, ", "), nsLines)
			for i := range ns.Holders {
				yy := nsTop + float64(i)*graphRowH + (graphRowH-6)/2
				edge(c, 1, nsTop+nsH/2, yy)
			}
			nsMids = append(nsMids, nsTop+nsH/2)
		}
		if d.NamespacesOmitted > 0 {
			c.Texts = append(c.Texts, label{X: graphCols[1].x + 4, Y: y + 10, Anchor: "start", Class: "note", Text: fmt.Sprintf("… and %d more namespaces", d.NamespacesOmitted)})
			y += graphRowH
		}
		devH := max(y-top-6, graphRowH-6)
		box(c, bud, 0, top, devH, devClass, devTitle, devLines)
		for _, m := range nsMids {
			edge(c, 0, top+devH/2, m)
		}
		y = max(y, top+devH+6) + 10
	}
	c.H = y
	return c, left
}

// box draws a node of the graph in column col, its lines of text cut to
// its width and centred vertically.
func box(c *chart, bud *budget, col int, y, h float64, class, title string, lines []string) {
	x, w := graphCols[col].x, graphCols[col].w
	c.Rects = append(c.Rects, rect{X: x, Y: y, W: w, H: h, Class: class, Title: bud.take(title, 600)})
	fit := int((w - 12) / 6.4)
	maxLines := max(1, int((h-4)/14))
	if len(lines) > maxLines {
		lines = lines[:maxLines]
	}
	y0 := y + h/2 - float64(len(lines)-1)*7
	for i, l := range lines {
		cls := "gt"
		if i == 0 {
			cls = "gt b"
		}
		c.Texts = append(c.Texts, label{X: x + 6, Y: y0 + float64(i)*14, Anchor: "start", Class: cls, Text: cutMiddle(l, fit)})
	}
}

// edge joins column col's right side at y1 to the next column's left at
// y2.
func edge(c *chart, col int, y1, y2 float64) {
	c.Lines = append(c.Lines, seg{X1: graphCols[col].x + graphCols[col].w, Y1: y1, X2: graphCols[col+1].x, Y2: y2, Class: "edge"})
}

func nsName(ns analyze.HolderNamespace) string {
	s := "mnt ns " + strconv.FormatUint(ns.Inode, 10)
	switch {
	case ns.Host:
		s += " (host)"
	case ns.Nodesnap != "":
		s += " (nodesnap's)"
	}
	return s
}

// splitPod puts "pod ns/name, container c" on two lines.
func splitPod(p string) []string {
	if a, b, ok := strings.Cut(p, ", "); ok {
		return []string{a, b}
	}
	return []string{p}
}

// hbar is one bar of a horizontal bar chart.
type hbar struct {
	Label string
	Value float64
	Text  string
	Class string
	Title string
}

// barChart draws bars from a common zero, scaled to the largest value or
// to limit (drawn as a dashed line labelled limitText) when that is
// larger.
func barChart(title string, bars []hbar, limit float64, limitText string, bud *budget) *chart {
	if len(bars) == 0 {
		return nil
	}
	top := limit
	for _, b := range bars {
		top = math.Max(top, b.Value)
	}
	if top <= 0 {
		top = 1
	}
	// Narrower than the timeline: room on the right for the numbers.
	const plot, right = 430.0, 290.0
	c := &chart{W: chartLeft + plot + right, H: float64(len(bars))*laneH + 36, Label: title}
	x := func(v float64) float64 { return chartLeft + plot*v/top }
	y0 := 24.0
	for i, b := range bars {
		y := y0 + float64(i)*laneH
		w := math.Max(1.5, x(b.Value)-chartLeft)
		c.Rects = append(c.Rects, rect{X: chartLeft, Y: y, W: w, H: laneH - 6, Class: b.Class, Title: bud.take(b.Title, 600)})
		c.Texts = append(c.Texts, label{X: chartLeft - 8, Y: y + laneH/2 - 2, Anchor: "end", Class: "lbl", Text: cutLeft(b.Label, 46)})
		c.Texts = append(c.Texts, label{X: chartLeft + plot + 8, Y: y + laneH/2 - 2, Anchor: "start", Class: "note", Text: b.Text})
	}
	axisY := y0 + float64(len(bars))*laneH
	c.Lines = append(c.Lines, seg{X1: chartLeft, Y1: y0 - 4, X2: chartLeft, Y2: axisY, Class: "axis"})
	if limit > 0 {
		c.Lines = append(c.Lines, seg{X1: x(limit), Y1: y0 - 8, X2: x(limit), Y2: axisY, Class: "limit"})
		c.Texts = append(c.Texts, label{X: x(limit) - 4, Y: 10, Anchor: "end", Class: "note", Text: limitText})
	}
	return c
}

// largestDirsChart draws dirshape's largest directories by their
// subdirectories, against ext4's limit.
func largestDirsChart(s *layout.DirShapeReport, bud *budget) (*chart, string) {
	if s == nil {
		return nil, ""
	}
	seen := map[string]bool{}
	var dirs []layout.DirShapeDir
	for _, r := range s.Roots {
		for _, d := range append(append([]layout.DirShapeDir{}, r.NlinkAnomalies...), r.Largest...) {
			if !seen[d.Path] {
				seen[d.Path] = true
				dirs = append(dirs, d)
			}
		}
	}
	if len(dirs) == 0 {
		if scanned(s) == 0 {
			return nil, fmt.Sprintf("None of the %s dirshape looked for exists on this node, so there is nothing to draw.", plural(len(s.Roots), "directory", "directories"))
		}
		return nil, fmt.Sprintf("dirshape scanned %s and found no directory worth drawing.", plural(scanned(s), "root", "roots"))
	}
	sort.SliceStable(dirs, func(i, j int) bool {
		if dirs[i].Subdirs != dirs[j].Subdirs {
			return dirs[i].Subdirs > dirs[j].Subdirs
		}
		return dirs[i].Entries > dirs[j].Entries
	})
	more := len(dirs) - maxBars
	if more > 0 {
		dirs = dirs[:maxBars]
	}
	var bars []hbar
	for _, d := range dirs {
		cls := "st-ok"
		switch {
		case d.Subdirs > ext4DirLimit || d.NlinkAnomaly:
			cls = "st-bad"
		case d.Subdirs > ext4DirLimit/2:
			cls = "st-warn"
		}
		atLeast, est := "", ""
		if d.LowerBound() {
			atLeast = "≥ "
			if d.EstimatedEntries > d.Entries {
				est = fmt.Sprintf(" (about %s by its inode)", fmtCount(d.EstimatedEntries))
			}
		}
		pct := 100 * float64(d.Subdirs) / ext4DirLimit
		bars = append(bars, hbar{Label: d.Path, Value: float64(d.Subdirs), Class: cls,
			Text:  fmt.Sprintf("%s%s subdirs, %s of the limit", atLeast, fmtCount(d.Subdirs), fmtPct(pct)),
			Title: fmt.Sprintf("%s: %s%s subdirectories, %s%s entries%s, st_nlink %d, directory size %s", d.Path, atLeast, fmtCount(d.Subdirs), atLeast, fmtCount(d.Entries), est, d.Nlink, human.Bytes(d.InodeSize))})
	}
	note := fmt.Sprintf("The %s with the most subdirectories of the %s dirshape scanned; the dashed line is ext4's limit of 64,998 subdirectories, past which a directory's link count overflows (incident 001). ≥ marks counts of a scan that stopped early.",
		plural(len(bars), "directory", "directories"), plural(scanned(s), "root", "roots"))
	if more > 0 {
		note += fmt.Sprintf(" %d more directories are not drawn.", more)
	}
	return barChart("Largest directories by subdirectories, against ext4's limit", bars, ext4DirLimit, "ext4: 64,998 subdirectories", bud), note
}

// deletingChart draws the .deleting~ leftovers per directory.
func deletingChart(s *layout.DirShapeReport, bud *budget) (*chart, string) {
	if s == nil {
		return nil, ""
	}
	var gs []layout.DeletingGroup
	var omitted uint64
	for _, r := range s.Roots {
		gs = append(gs, r.Deleting...)
		omitted += r.DeletingGroupsOmitted
	}
	if len(gs) == 0 {
		if scanned(s) == 0 {
			return nil, "" // the largest directories' note says that none exists
		}
		return nil, fmt.Sprintf("No .deleting~ leftovers in the %s dirshape scanned.", plural(scanned(s), "root", "roots"))
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].Count > gs[j].Count })
	more := len(gs) - maxBars
	if more > 0 {
		gs = gs[:maxBars]
	}
	var bars []hbar
	for _, g := range gs {
		bars = append(bars, hbar{Label: g.Parent, Value: float64(g.Count), Class: "st-warn",
			Text:  fmt.Sprintf("%s · %s empty, %s not", fmtCount(g.Count), fmtCount(g.Empty), fmtCount(g.NotEmpty)),
			Title: fmt.Sprintf("%s: %s .deleting~ names (%s empty, %s not empty, %s unknown) of %s", g.Parent, fmtCount(g.Count), fmtCount(g.Empty), fmtCount(g.NotEmpty), fmtCount(g.Unknown), plural(len(g.Originals), "volume", "volumes"))})
	}
	note := fmt.Sprintf("%s .deleting~ names in all: volume directories the kubelet renamed to remove and could not (incident 000).", fmtCount(s.DeletingCount))
	if more > 0 || omitted > 0 {
		note += fmt.Sprintf(" %d more directories are not drawn.", uint64(max(more, 0))+omitted)
	}
	return barChart(".deleting~ leftovers per directory", bars, 0, "", bud), note
}

// goroutineChart draws the kubelet's goroutines by frame.
func goroutineChart(g *analyze.GoroutineCount, bud *budget) (*chart, string) {
	if g == nil {
		return nil, ""
	}
	type fc struct {
		frame string
		n     int
	}
	var fs []fc
	for f, n := range g.ByFrame {
		fs = append(fs, fc{f, n})
	}
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].n != fs[j].n {
			return fs[i].n > fs[j].n
		}
		return fs[i].frame < fs[j].frame
	})
	if len(fs) == 0 {
		return nil, fmt.Sprintf("%s holds no goroutine.", g.Path)
	}
	rest, restN := 0, 0
	if len(fs) > maxBars {
		for _, f := range fs[maxBars:] {
			rest += f.n
			restN++
		}
		fs = fs[:maxBars]
	}
	var bars []hbar
	for _, f := range fs {
		cls := "st-other"
		if !goroutinedump.Stdlib(f.frame) {
			cls = "st-info"
		}
		pct := 100 * float64(f.n) / float64(max(g.Total, 1))
		bars = append(bars, hbar{Label: f.frame, Value: float64(f.n), Class: cls, Text: fmt.Sprintf("%s (%s)", fmtCount(uint64(f.n)), fmtPct(pct)), Title: fmt.Sprintf("%s: %d goroutines", f.frame, f.n)})
	}
	note := fmt.Sprintf("%s goroutines in %s, by their first frame outside Go's standard library (the top frame when there is none).", fmtCount(uint64(g.Total)), g.Path)
	if restN > 0 {
		note += fmt.Sprintf(" %d more frames (%d goroutines) are not drawn.", restN, rest)
	}
	return barChart("The kubelet's goroutines by frame", bars, 0, "", bud), note
}

// fmtCount writes n with thousands separators.
func fmtCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtPct(p float64) string {
	switch {
	case p >= 10:
		return fmt.Sprintf("%.0f%%", p)
	case p >= 0.1:
		return fmt.Sprintf("%.1f%%", p)
	case p > 0:
		return "<0.1%"
	}
	return "0%"
}

// cutLeft keeps the end of s (a path's or a function's last elements say
// most), at most n runes, with "…" in front.
func cutLeft(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// cutMiddle keeps both ends of s, at most n runes.
func cutMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 8 {
		return human.Cut(s, n)
	}
	h := (n - 1) / 2
	return string(r[:h]) + "…" + string(r[len(r)-(n-1-h):])
}

// scanned counts the roots dirshape really scanned: a root that does not
// exist on the node (or is not a directory) was looked for, not scanned.
func scanned(s *layout.DirShapeReport) int {
	n := 0
	for _, r := range s.Roots {
		if r.Status != layout.DirShapeAbsent && r.Status != layout.DirShapeNotDir {
			n++
		}
	}
	return n
}
