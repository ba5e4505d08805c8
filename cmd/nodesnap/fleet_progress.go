//go:build !nofleet

package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/nodesnap/nodesnap/features/fleet"
)

// fleetProgress shows a fleet run: on a terminal a live line per node
// (as many as fit), elsewhere a line per node as it ends.
type fleetProgress struct {
	mu      sync.Mutex
	w       io.Writer
	live    bool
	quiet   bool
	size    func() (int, int)
	rows    map[string]fleet.NodeResult
	started map[string]time.Time
	drawn   int
	stop    chan struct{}
	done    chan struct{}
}

func newFleetProgress(w io.Writer, quiet bool) *fleetProgress {
	p := &fleetProgress{w: w, quiet: quiet, rows: map[string]fleet.NodeResult{}, started: map[string]time.Time{}}
	if f, ok := w.(*os.File); ok && !quiet && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb" {
		fd := int(f.Fd())
		p.live = true
		p.size = func() (int, int) {
			wd, ht, err := term.GetSize(fd)
			if err != nil || wd <= 0 || ht <= 0 {
				return 80, 24
			}
			return wd, ht
		}
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go redrawEvery(250*time.Millisecond, &p.mu, p.redraw, p.stop, p.done)
	}
	return p
}

func (p *fleetProgress) update(n fleet.NodeResult) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, seen := p.rows[n.Node]
	p.rows[n.Node] = n
	if _, ok := p.started[n.Node]; !ok && n.Phase != fleet.PhaseWaiting {
		p.started[n.Node] = time.Now()
	}
	if !p.live {
		if n.Phase == fleet.PhaseDone && (!seen || prev.Phase != fleet.PhaseDone) {
			fmt.Fprintln(p.w, plainFleetLine(n))
		}
	}
}

func plainFleetLine(n fleet.NodeResult) string {
	s := fmt.Sprintf("nodesnap: %s: %s after %.1fs", n.Node, n.Status, n.Durations.Total)
	if n.Bundle != "" {
		s += ", " + n.Bundle
	}
	if n.Reason != "" {
		s += ": " + n.Reason
	}
	return s
}

// redraw rewrites the live lines: running nodes first, then finished
// ones, as many as the terminal holds, and a count line.
func (p *fleetProgress) redraw() {
	if p.drawn > 0 {
		fmt.Fprintf(p.w, "\x1b[%dA", p.drawn)
	}
	width, height := p.size()
	rows := make([]fleet.NodeResult, 0, len(p.rows))
	for _, r := range p.rows {
		rows = append(rows, r)
	}
	rank := func(r fleet.NodeResult) int {
		switch r.Phase {
		case fleet.PhaseDone:
			return 1
		case fleet.PhaseWaiting:
			return 2
		}
		return 0
	}
	sort.Slice(rows, func(i, j int) bool {
		if a, b := rank(rows[i]), rank(rows[j]); a != b {
			return a < b
		}
		return rows[i].Node < rows[j].Node
	})
	room := max(height-2, 1)
	done := 0
	for _, r := range rows {
		if r.Phase == fleet.PhaseDone {
			done++
		}
	}
	n := 0
	for _, r := range rows {
		if n >= room-1 || r.Phase == fleet.PhaseWaiting {
			break
		}
		var line string
		if r.Phase == fleet.PhaseDone {
			line = fmt.Sprintf("  %-24s %-18s %6.1fs  %s", r.Node, r.Status, r.Durations.Total, firstNonEmpty(r.Bundle, r.Reason))
		} else {
			line = fmt.Sprintf("  %-24s %-18s %6.1fs", r.Node, r.Phase, time.Since(p.started[r.Node]).Seconds())
		}
		fmt.Fprintf(p.w, "\x1b[2K%s\n", clipLine(line, width-1))
		n++
	}
	fmt.Fprintf(p.w, "\x1b[2K%s\n", clipLine(fmt.Sprintf("  %d/%d nodes done", done, len(rows)), width-1))
	n++
	for i := n; i < p.drawn; i++ {
		_, _ = fmt.Fprint(p.w, "\x1b[2K\n")
	}
	if p.drawn > n {
		fmt.Fprintf(p.w, "\x1b[%dA", p.drawn-n)
	}
	p.drawn = n
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// finish stops the live display, leaving its last state on screen.
func (p *fleetProgress) finish() {
	if !p.live {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	p.redraw()
	p.mu.Unlock()
}

// clipLine keeps a live line within the terminal's width n.
func clipLine(s string, n int) string {
	if n <= 1 || len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
