package report

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// chart is an inline SVG drawing: plain shapes the template writes out
// attribute by attribute. Classes are the page's own fixed names, never
// text from the bundle; text from the bundle goes only into <text> and
// <title> content, which the template escapes.
type chart struct {
	W, H  float64
	Label string
	Rects []rect
	Dots  []dot
	Lines []seg
	Texts []label
}

type rect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type dot struct {
	X, Y, R float64
	Class   string
	Title   string
}

type seg struct {
	X1, Y1, X2, Y2 float64
	Class          string
}

type label struct {
	X, Y   float64
	Anchor string // start, middle or end
	Class  string
	Text   string
}

const (
	chartLeft  = 350.0 // room for the lane labels
	chartPlot  = 640.0
	chartRight = 110.0
	laneH      = 22.0
	axisH      = 30.0
)

// event is one dated evidence line of a finding.
type event struct {
	lane int
	at   time.Time
	text string
	sev  string
}

// timelineChart draws the dated evidence lines of the findings (kubelet,
// runtime, kernel and CSI driver log lines that carry a time) on one axis,
// one lane per finding ID and log file. It returns nil and a reason when there is
// nothing to draw.
func timelineChart(rep *analyze.Report, fs []analyze.Finding) (*chart, string) {
	var lanes []string
	laneOf := map[string]int{}
	var evs []event
	skippedLanes := 0
	seen := map[string]bool{}
	for _, f := range fs {
		for _, e := range f.Evidence {
			for _, l := range e.Lines {
				at, ok := lineTime(l.Text, rep.CollectedAt)
				if !ok {
					continue
				}
				k := fmt.Sprintf("%s\x00%s\x00%d", f.ID, e.Path, l.N)
				if seen[k] {
					continue
				}
				seen[k] = true
				// One lane per finding and log file: the kernel's and
				// the kubelet's lines of one cause side by side.
				lk := f.ID + " · " + path.Base(e.Path)
				li, ok := laneOf[lk]
				if !ok {
					if len(lanes) >= maxTimelineLanes {
						skippedLanes++
						laneOf[lk] = -1
						continue
					}
					li = len(lanes)
					laneOf[lk] = li
					lanes = append(lanes, lk)
				}
				if li < 0 || len(evs) >= maxTimelineDots {
					continue
				}
				evs = append(evs, event{lane: li, at: at, sev: sevClass(f.Severity), text: fmt.Sprintf("%s line %d: %s", e.Path, l.N, human.Cut(l.Text, 160))})
			}
		}
	}
	if len(evs) == 0 {
		return nil, "No finding's evidence holds a dated log line, so there is no timeline to draw."
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	lo, hi := evs[0].at, evs[len(evs)-1].at
	// The collection itself, when it falls near the logs' window (a
	// bundle of old logs would squash every dot into one corner).
	col := rep.CollectedAt.UTC()
	span := hi.Sub(lo)
	showCol := !col.IsZero() && !col.Before(lo) && col.Sub(hi) <= span/4+10*time.Minute
	if showCol && col.After(hi) {
		hi = col
	}
	if !hi.After(lo) {
		lo, hi = lo.Add(-time.Minute), hi.Add(time.Minute)
	}
	span = hi.Sub(lo)
	x := func(t time.Time) float64 {
		return chartLeft + chartPlot*float64(t.Sub(lo))/float64(span)
	}
	c := &chart{W: chartLeft + chartPlot + chartRight, H: float64(len(lanes))*laneH + axisH + 10, Label: "Timeline of the findings' dated log lines"}
	for i, id := range lanes {
		y := 10 + float64(i)*laneH
		c.Rects = append(c.Rects, rect{X: chartLeft, Y: y, W: chartPlot, H: laneH - 4, Class: "lane"})
		c.Texts = append(c.Texts, label{X: chartLeft - 8, Y: y + laneH/2 + 1, Anchor: "end", Class: "lbl", Text: human.Cut(id, 60)})
	}
	counts := make([]int, len(lanes))
	for _, e := range evs {
		counts[e.lane]++
		y := 10 + float64(e.lane)*laneH + (laneH-4)/2
		c.Dots = append(c.Dots, dot{X: x(e.at), Y: y, R: 4, Class: "ev " + e.sev, Title: e.at.Format("2006-01-02 15:04:05.000Z") + "  " + e.text})
	}
	for i, n := range counts {
		y := 10 + float64(i)*laneH
		c.Texts = append(c.Texts, label{X: chartLeft + chartPlot + 8, Y: y + laneH/2 + 1, Anchor: "start", Class: "note", Text: plural(n, "line", "lines")})
	}
	axisY := 10 + float64(len(lanes))*laneH
	c.Lines = append(c.Lines, seg{X1: chartLeft, Y1: axisY, X2: chartLeft + chartPlot, Y2: axisY, Class: "axis"})
	layout := "15:04:05"
	if span > 36*time.Hour {
		layout = "Jan 02 15:04"
	} else if span < time.Minute {
		layout = "15:04:05.000"
	}
	for i := 0; i <= 4; i++ {
		t := lo.Add(time.Duration(float64(span) * float64(i) / 4))
		xx := x(t)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		c.Lines = append(c.Lines, seg{X1: xx, Y1: axisY, X2: xx, Y2: axisY + 4, Class: "axis"})
		c.Texts = append(c.Texts, label{X: xx, Y: axisY + 17, Anchor: anchor, Class: "note", Text: t.Format(layout)})
	}
	if showCol {
		xx := x(col)
		c.Lines = append(c.Lines, seg{X1: xx, Y1: 4, X2: xx, Y2: axisY, Class: "mark"})
		c.Texts = append(c.Texts, label{X: xx - 3, Y: axisY - 4, Anchor: "end", Class: "note", Text: "collected"})
	}
	note := fmt.Sprintf("%s of %s, %s to %s (UTC; a year-less syslog time is taken in the collection's year). A lane is one finding, by its id, and one log file.",
		plural(len(evs), "dated log line", "dated log lines"), plural(len(lanes), "lane", "lanes"), lo.Format("2006-01-02 15:04:05"), hi.Format("2006-01-02 15:04:05"))
	for _, l := range lanes {
		if strings.HasPrefix(l, "earlier-") {
			note += " Lanes whose id starts with earlier- hold history: lines written by a kubelet that no longer runs, before the running one started, or before the collection's window; they say what happened, not what is wrong now."
			break
		}
	}
	if skippedLanes > 0 || len(evs) >= maxTimelineDots {
		note += fmt.Sprintf(" Cut to %d lanes and %d lines.", maxTimelineLanes, maxTimelineDots)
	}
	return c, note
}

// collectorChart draws each collector as a bar from its start to its end,
// relative to the collection's start, coloured by status.
func collectorChart(m *bundle.Manifest) *chart {
	if len(m.Collectors) == 0 {
		return nil
	}
	sizes := map[string]int64{}
	for _, f := range m.Files {
		sizes[f.Collector] += f.Size
	}
	type bar struct {
		name, status string
		start, dur   float64
	}
	var bars []bar
	end := 0.0
	for i, c := range m.Collectors {
		if i >= maxCollectors {
			break
		}
		s := 0.0
		if c.StartedAt != nil && !m.StartedAt.IsZero() {
			s = math.Max(0, c.StartedAt.Sub(m.StartedAt).Seconds())
		}
		d := math.Max(0, c.DurationSeconds)
		if math.IsNaN(s) || math.IsInf(d, 0) || math.IsNaN(d) {
			s, d = 0, 0
		}
		bars = append(bars, bar{name: c.Name, status: c.Status, start: s, dur: d})
		end = math.Max(end, s+d)
	}
	if end <= 0 {
		end = 1
	}
	// The axis ends on a round tick at or past the last collector's end,
	// and every tick is labelled with the precision its step needs: a tick
	// at 0.15 s reads +0.15s, never +0.1s.
	step := niceStep(end / 4)
	end = math.Ceil(end/step-1e-9) * step
	decimals := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	c := &chart{W: chartLeft + chartPlot + chartRight + 60, H: float64(len(bars))*laneH + axisH + 10, Label: "When each collector ran and how long it took"}
	x := func(s float64) float64 { return chartLeft + chartPlot*s/end }
	for i, b := range bars {
		y := 10 + float64(i)*laneH
		w := math.Max(1.5, x(b.start+b.dur)-x(b.start))
		c.Rects = append(c.Rects, rect{X: x(b.start), Y: y, W: w, H: laneH - 6, Class: "st-" + statusClass(b.status),
			Title: fmt.Sprintf("%s: %s, started at +%.2fs, ran %.2fs, wrote %s", b.name, b.status, b.start, b.dur, human.Bytes(sizes[b.name]))})
		c.Texts = append(c.Texts, label{X: chartLeft - 8, Y: y + laneH/2, Anchor: "end", Class: "lbl", Text: human.Cut(b.name, 40)})
		text := fmt.Sprintf("%.2fs · %s · %s", b.dur, human.Cut(b.status, 20), human.Bytes(sizes[b.name]))
		c.Texts = append(c.Texts, label{X: x(b.start) + w + 6, Y: y + laneH/2, Anchor: "start", Class: "note", Text: text})
		// The chart is as wide as its longest label: a label is never clipped.
		c.W = math.Max(c.W, x(b.start)+w+6+noteCharW*float64(utf8.RuneCountInString(text))+4)
	}
	axisY := 10 + float64(len(bars))*laneH
	c.Lines = append(c.Lines, seg{X1: chartLeft, Y1: axisY, X2: chartLeft + chartPlot, Y2: axisY, Class: "axis"})
	for i := 0; float64(i)*step <= end+step/1e6; i++ {
		s := float64(i) * step
		anchor := "middle"
		if i == 0 {
			anchor = "start"
		}
		c.Lines = append(c.Lines, seg{X1: x(s), Y1: axisY, X2: x(s), Y2: axisY + 4, Class: "axis"})
		c.Texts = append(c.Texts, label{X: x(s), Y: axisY + 17, Anchor: anchor, Class: "note", Text: fmt.Sprintf("+%.*fs", decimals, s)})
	}
	return c
}

// noteCharW is the width of one character of the charts' note text, in the
// SVG's units (its font is 11 px; digits and letters are at most this wide).
const noteCharW = 6.6

// niceStep is the round step (1, 2 or 5 times a power of ten) at or above
// raw: the axis's ticks fall on numbers a reader can check by eye.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// sevClass maps a severity to one of the page's fixed classes.
func sevClass(s analyze.Severity) string {
	switch s {
	case analyze.Critical:
		return "ev-critical"
	case analyze.Warning:
		return "ev-warning"
	}
	return "ev-info"
}
