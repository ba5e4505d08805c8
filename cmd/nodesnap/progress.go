package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/internal/termsafe"
	"github.com/nodesnap/nodesnap/internal/textfit"
)

// progressDisplay shows a run's progress and is told the final result.
type progressDisplay interface {
	update(supervisor.Progress)
	// finish shows each collector's final state (from the manifest, which
	// also knows the ones that never started); m is nil when no bundle
	// was written.
	finish(m *bundle.Manifest)
}

// newProgress picks the display for w: live lines on a terminal, plain
// lines otherwise (a log file, cron's mail, a pod's log).
func newProgress(w io.Writer, names []string, timeout time.Duration) progressDisplay {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb" {
		fd := int(f.Fd())
		return newLiveProgress(w, names, timeout, func() int {
			if wd, _, err := term.GetSize(fd); err == nil && wd > 0 {
				return wd
			}
			return 80
		})
	}
	return &plainDisplay{fn: plainProgress(w)}
}

type plainDisplay struct{ fn func(supervisor.Progress) }

func (p *plainDisplay) update(ev supervisor.Progress) { p.fn(ev) }
func (p *plainDisplay) finish(*bundle.Manifest)       {}

// liveProgress redraws one line per collector in place, so a customer
// sees what is running, for how long, and how each one ended.
type liveProgress struct {
	mu      sync.Mutex
	w       io.Writer
	width   func() int
	timeout time.Duration
	start   time.Time
	rows    []*progressRow
	byName  map[string]*progressRow
	footer  string
	drawn   int // lines on screen from the last redraw
	stop    chan struct{}
	stopped chan struct{}
	closed  bool
}

type progressRow struct {
	name     string
	status   string // "waiting", "running", or a final status
	started  time.Time
	elapsed  time.Duration
	deadline time.Time
	err      string
}

// liveTick is how often elapsed times are redrawn.
const liveTick = 200 * time.Millisecond

func newLiveProgress(w io.Writer, names []string, timeout time.Duration, width func() int) *liveProgress {
	p := &liveProgress{w: w, width: width, timeout: timeout, start: time.Now(), byName: map[string]*progressRow{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
	for _, n := range names {
		p.row(n)
	}
	p.mu.Lock()
	p.redraw()
	p.mu.Unlock()
	go redrawEvery(liveTick, &p.mu, p.redraw, p.stop, p.stopped)
	return p
}

// redrawEvery calls redraw under mu every tick until stop is closed,
// then closes stopped. The live collector and fleet displays share it.
func redrawEvery(tick time.Duration, mu *sync.Mutex, redraw func(), stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			mu.Lock()
			redraw()
			mu.Unlock()
		}
	}
}

// row finds or adds a collector's row; the caller may hold mu or not
// need it (construction).
func (p *liveProgress) row(name string) *progressRow {
	r := p.byName[name]
	if r == nil {
		r = &progressRow{name: name, status: "waiting"}
		p.byName[name] = r
		p.rows = append(p.rows, r)
	}
	return r
}

func (p *liveProgress) update(ev supervisor.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	switch ev.Phase {
	case "start":
		r := p.row(ev.Collector)
		r.status, r.started, r.deadline = "running", time.Now(), ev.Deadline
	case "done":
		r := p.row(ev.Collector)
		// A collector's error can quote the node (a mount point, a
		// process name): shown escaped, never as terminal commands.
		r.status, r.elapsed, r.err = ev.Status, ev.Elapsed, termsafe.Field(ev.Error)
	case "writing":
		p.footer = "writing the bundle…"
	}
	p.redraw()
}

func (p *liveProgress) finish(m *bundle.Manifest) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	if m != nil {
		for _, c := range m.Collectors {
			r := p.row(c.Name)
			r.status, r.elapsed = c.Status, time.Duration(c.DurationSeconds*float64(time.Second))
			r.err = termsafe.Field(human.FirstLine(c.Error))
			if c.HangEvidence != nil && c.HangEvidence.Phase != "interrupted" && c.HangEvidence.Phase != "cut" {
				r.err = termsafe.Field("hung: " + c.HangEvidence.String())
			}
		}
		p.footer = fmt.Sprintf("done in %.1fs: %s", time.Since(p.start).Seconds(), m.Status)
	} else {
		for _, r := range p.rows {
			if r.status == "running" || r.status == "waiting" {
				r.status = "stopped"
			}
		}
		p.footer = "no bundle was written"
	}
	p.redraw()
	p.writeCutReasons()
	p.mu.Unlock()
	<-p.stopped
}

// writeCutReasons prints, below the last frame, the whole reason of every
// collector whose line was cut at the terminal's width: a frame has to fit
// one line per collector, the reason a user needs does not.
func (p *liveProgress) writeCutReasons() {
	width := p.width() - 1
	var cut []*progressRow
	now := time.Now()
	for _, r := range p.rows {
		if r.err != "" && r.status != bundle.StatusOK && utf8.RuneCountInString(r.line(now)) > width {
			cut = append(cut, r)
		}
	}
	if len(cut) == 0 {
		return
	}
	fw := textfit.NewWriter(p.w, width, true)
	fmt.Fprintln(fw, "why:")
	for _, r := range cut {
		fmt.Fprintf(fw, "  %s: %s\n", r.name, r.err)
	}
	_ = fw.Flush()
}

// redraw moves the cursor back over the last frame and rewrites every
// line. Lines are cut to the terminal's width: a wrapped line would throw
// the count of lines to move back over.
func (p *liveProgress) redraw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	width := p.width() - 1
	lines := []string{fmt.Sprintf("nodesnap: collecting, at most %s (%.0fs so far)", p.timeout, time.Since(p.start).Seconds())}
	for _, r := range p.rows {
		lines = append(lines, r.line(time.Now()))
	}
	if p.footer != "" {
		lines = append(lines, p.footer)
	}
	for _, l := range lines {
		b.WriteString("\r\x1b[2K")
		b.WriteString(cutWidth(l, width))
		b.WriteString("\n")
	}
	p.drawn = len(lines)
	io.WriteString(p.w, b.String())
}

func (r *progressRow) line(now time.Time) string {
	mark := map[string]string{
		bundle.StatusOK: "✓", bundle.StatusPartial: "!", bundle.StatusTimeout: "✗", bundle.StatusError: "✗",
		bundle.StatusSkipped: "-", bundle.StatusUnsupported: "-", "running": "…", "waiting": " ", "stopped": "✗",
	}[r.status]
	if mark == "" {
		mark = "?"
	}
	switch r.status {
	case "waiting":
		return fmt.Sprintf(" %s %-12s %s", mark, r.name, r.status)
	case "running":
		s := fmt.Sprintf(" %s %-12s %-11s %6.1fs", mark, r.name, r.status, now.Sub(r.started).Seconds())
		if !r.deadline.IsZero() {
			s += fmt.Sprintf(" (deadline in %.0fs)", max(r.deadline.Sub(now).Seconds(), 0))
		}
		return s
	}
	s := fmt.Sprintf(" %s %-12s %-11s %6.1fs", mark, r.name, r.status, r.elapsed.Seconds())
	if r.err != "" && r.status != bundle.StatusOK {
		s += "  " + r.err
	}
	return s
}

// cutWidth cuts s to n runes (the display's characters are all one cell
// wide).
func cutWidth(s string, n int) string {
	if n <= 1 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
