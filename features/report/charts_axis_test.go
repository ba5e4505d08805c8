package report

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
)

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ raw, want float64 }{
		{0.15, 0.2}, {0.1, 0.1}, {0.26, 0.5}, {0.7, 1}, {1, 1}, {1.2, 2}, {3, 5}, {7, 10}, {31, 50}, {0, 1}, {math.NaN(), 1},
	} {
		if got := niceStep(tc.raw); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("niceStep(%v) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

// Every tick label of the collector chart names the time at its tick (the
// page showed +0.1s at the tick of 0.15 s), and every bar's label fits
// inside the chart (it showed "207 byt").
func TestCollectorChartAxisAndLabels(t *testing.T) {
	start := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	for _, end := range []float64{0.6, 0.15, 3.7, 47, 119.9} {
		m := &bundle.Manifest{StartedAt: start}
		for i, d := range []float64{end, end / 3, end / 7} {
			at := start.Add(time.Duration(float64(i) * float64(time.Millisecond)))
			m.Collectors = append(m.Collectors, bundle.CollectorResult{Name: "c" + strconv.Itoa(i), Status: bundle.StatusTimeout, StartedAt: &at, DurationSeconds: d})
			m.Files = append(m.Files, bundle.FileEntry{Path: "c" + strconv.Itoa(i) + "/f", Collector: "c" + strconv.Itoa(i), Size: 207 << (10 * i)})
		}
		c := collectorChart(m)
		ticks := map[float64]bool{}
		for _, l := range c.Lines {
			if l.Class == "axis" && l.X1 == l.X2 {
				ticks[math.Round(l.X1*1000)/1000] = true
			}
		}
		plotEnd := 0.0
		for _, l := range c.Lines {
			if l.Class == "axis" && l.Y1 == l.Y2 {
				plotEnd = l.X2
			}
		}
		n := 0
		for _, tx := range c.Texts {
			if !strings.HasPrefix(tx.Text, "+") {
				if tx.Class == "note" && tx.Anchor == "start" {
					if right := tx.X + noteCharW*float64(utf8.RuneCountInString(tx.Text)); right > c.W {
						t.Errorf("end %.2fs: label %q ends at %.0f, past the chart's width %.0f", end, tx.Text, right, c.W)
					}
				}
				continue
			}
			n++
			v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(tx.Text, "+"), "s"), 64)
			if err != nil {
				t.Fatalf("tick label %q: %v", tx.Text, err)
			}
			// The label's value, placed on the axis, is where its tick is.
			axisSpan := plotEnd - chartLeft
			if !ticks[math.Round(tx.X*1000)/1000] {
				t.Errorf("end %.2fs: label %q has no tick under it", end, tx.Text)
			}
			scaleEnd := 0.0
			for _, tt := range c.Texts {
				if strings.HasPrefix(tt.Text, "+") && tt.X == plotEnd {
					scaleEnd, _ = strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(tt.Text, "+"), "s"), 64)
				}
			}
			if scaleEnd <= 0 {
				t.Fatalf("end %.2fs: no label at the axis's end", end)
			}
			if want := chartLeft + axisSpan*v/scaleEnd; math.Abs(want-tx.X) > 0.01 {
				t.Errorf("end %.2fs: label %q sits at %.2f, its value belongs at %.2f", end, tx.Text, tx.X, want)
			}
		}
		if n < 3 || n > 11 {
			t.Errorf("end %.2fs: %d tick labels", end, n)
		}
	}
}

// A dirshape report whose roots were all absent does not say it scanned
// them.
func TestDirChartsAllAbsent(t *testing.T) {
	s := &layout.DirShapeReport{}
	for i := 0; i < 10; i++ {
		s.Roots = append(s.Roots, layout.DirShapeRoot{Path: "/r" + strconv.Itoa(i), Status: layout.DirShapeAbsent})
	}
	_, note := largestDirsChart(s, &budget{})
	if strings.Contains(note, "scanned") || !strings.Contains(note, "None of the 10 directories") {
		t.Errorf("all roots absent: %q", note)
	}
	_, note = deletingChart(s, &budget{})
	if strings.Contains(note, "scanned") {
		t.Errorf("all roots absent, .deleting~: %q", note)
	}
}
