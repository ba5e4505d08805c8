package supervisor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/human"
)

// The collectors' side of a run: scheduling them (After, --concurrency,
// the global deadline), running each in its child process under its own
// deadline, and turning what the child reports into its result.

// schedule runs the collectors, honouring After and the concurrency limit.
func (r *run) schedule(specs []*collectors.Spec) {
	selected := map[string]*collectorRun{}
	for _, s := range specs {
		cr := &collectorRun{spec: s, records: map[string]*collectors.FileRecord{}, done: make(chan struct{})}
		cr.res = bundle.CollectorResult{Name: s.Name, Status: bundle.StatusSkipped, Files: []string{}}
		selected[s.Name] = cr
	}
	r.results = selected
	sem := newSlots(r.opts.Concurrency)
	depth := depths(specs)
	first := 0
	for _, s := range specs {
		if depth[s.Name] == 0 {
			first++
		}
	}
	sem.expect(first)
	var wg sync.WaitGroup
	for i, s := range specs {
		cr := selected[s.Name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(cr.done)
			var b *blockedWaiter
			if depth[s.Name] > 0 {
				b = sem.block(depth[s.Name], s.DefaultTimeout, i)
			}
			early := false
			for _, dep := range s.After {
				d := selected[dep]
				for waiting := d != nil; waiting; {
					var start chan struct{}
					if b != nil && !early {
						start = b.start
					}
					select {
					case <-d.done:
						waiting = false
					case <-r.stopCtx.Done():
						waiting = false
					case <-start:
						// A place nobody ready takes: this child's
						// process start (and its first worker's) is
						// paid now, beside the collectors it waits for.
						early = true
						r.startEarly(s)
					}
				}
			}
			got := sem.acquireAs(r.stopCtx.Done(), s.DefaultTimeout, i, b)
			if r.stopCtx.Err() != nil {
				if got {
					sem.release()
				}
				cr.res.Status = bundle.StatusSkipped
				cr.res.Error = r.stopReason("before it could start")
				return
			}
			defer sem.release()
			if time.Until(r.collectD) <= 0 {
				cr.res.Status = bundle.StatusSkipped
				cr.res.Error = fmt.Sprintf("cut by --timeout %s: the run's deadline was reached before it could start", r.opts.Timeout)
				cr.cut = true
				return
			}
			r.runOne(cr)
		}()
	}
	wg.Wait()
}

// depths gives each collector the length of the longest chain of selected
// collectors it waits for (After): 0 for one that waits for none.
func depths(specs []*collectors.Spec) map[string]int {
	byName := map[string]*collectors.Spec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	d := map[string]int{}
	var walk func(s *collectors.Spec, seen int) int
	walk = func(s *collectors.Spec, seen int) int {
		if v, ok := d[s.Name]; ok {
			return v
		}
		v := 0
		if seen <= len(specs) { // a cycle (refused by Validate) cannot loop here
			for _, dep := range s.After {
				if o := byName[dep]; o != nil {
					v = max(v, 1+walk(o, seen+1))
				}
			}
		}
		d[s.Name] = v
		return v
	}
	for _, s := range specs {
		walk(s, 0)
	}
	return d
}

// startEarly starts the child of collector s before its turn (it waits
// for others) and keeps it with the prestarted ones, told its prelude;
// runOne gives it its configuration when its turn comes. A child that
// cannot be started now is started, or its error reported, then.
func (r *run) startEarly(s *collectors.Spec) {
	if r.stopCtx.Err() != nil {
		return
	}
	if sp, err := spawn(s, r.opts.Common); err == nil {
		r.pre.add(s.Name, sp)
	}
}

// slots are the run's --concurrency places. A freed place goes to the
// waiting collector with the longest deadline (the order given breaks
// ties): the longest work starts first instead of last, when the
// collectors that wait for mountprobe all become ready at once. On a
// cold cache dirshape and journal are mostly waiting on the disk, and
// started first they overlap that with the others' CPU.
//
// A place free that no ready collector takes starts, ahead of its turn,
// the child of a collector still waiting for others (blocked): the one
// with the fewest collectors ahead of it, then the longest deadline. At
// most one such child per free place (early counts them until their
// collector is ready), so what waits idle stays within --concurrency.
type slots struct {
	mu      sync.Mutex
	free    int
	waiting []*slotWaiter
	blocked []*blockedWaiter
	early   int
	// expected counts the collectors waiting for none that have not
	// asked for their place yet: theirs are not free for early starts.
	expected int
}

// expect sets how many collectors waiting for none are still to ask.
func (s *slots) expect(n int) {
	s.mu.Lock()
	s.expected = n
	s.mu.Unlock()
}

type blockedWaiter struct {
	depth  int
	weight time.Duration
	order  int
	start  chan struct{} // closed: start the child now
}

type slotWaiter struct {
	weight time.Duration
	order  int
	ready  chan struct{}
}

func newSlots(n int) *slots { return &slots{free: max(n, 1)} }

// acquire waits for a place, or for done; it reports whether it got one.
func (s *slots) acquire(done <-chan struct{}, weight time.Duration, order int) bool {
	return s.acquireAs(done, weight, order, nil)
}

// acquireAs is acquire for a collector of the run: b is its blocked
// entry (nil for one waiting for none, counted by expect), left in the
// same step as it asks for a place, so that no early start takes the
// place it is about to get.
func (s *slots) acquireAs(done <-chan struct{}, weight time.Duration, order int, b *blockedWaiter) bool {
	w := &slotWaiter{weight: weight, order: order, ready: make(chan struct{})}
	s.mu.Lock()
	if b == nil && s.expected > 0 {
		s.expected--
	}
	if b != nil {
		s.unblockLocked(b)
	}
	s.waiting = append(s.waiting, w)
	s.grant()
	s.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-done:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.waiting {
		if o == w {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return false
		}
	}
	return true // granted meanwhile: the caller gives it back
}

func (s *slots) release() {
	s.mu.Lock()
	s.free++
	s.grant()
	s.mu.Unlock()
}

// block registers a collector waiting for others; it leaves the list
// when it asks for its place (acquireAs).
func (s *slots) block(depth int, weight time.Duration, order int) *blockedWaiter {
	b := &blockedWaiter{depth: depth, weight: weight, order: order, start: make(chan struct{})}
	s.mu.Lock()
	s.blocked = append(s.blocked, b)
	s.grant()
	s.mu.Unlock()
	return b
}

func (s *slots) unblockLocked(b *blockedWaiter) {
	for i, o := range s.blocked {
		if o == b {
			s.blocked = append(s.blocked[:i], s.blocked[i+1:]...)
			return
		}
	}
	s.early-- // its child was started early
}

// grant hands free places to the heaviest waiters, then starts early the
// children of blocked collectors for the places still free; s.mu is held.
func (s *slots) grant() {
	for s.free > 0 && len(s.waiting) > 0 {
		best := 0
		for i, w := range s.waiting {
			if b := s.waiting[best]; w.weight > b.weight || (w.weight == b.weight && w.order < b.order) {
				best = i
			}
		}
		w := s.waiting[best]
		s.waiting = append(s.waiting[:best], s.waiting[best+1:]...)
		s.free--
		close(w.ready)
	}
	for s.free-s.early-s.expected > 0 && len(s.blocked) > 0 {
		best := 0
		for i, w := range s.blocked {
			b := s.blocked[best]
			if w.depth < b.depth || (w.depth == b.depth && (w.weight > b.weight || (w.weight == b.weight && w.order < b.order))) {
				best = i
			}
		}
		b := s.blocked[best]
		s.blocked = append(s.blocked[:best], s.blocked[best+1:]...)
		s.early++
		close(b.start)
	}
}

func (r *run) stopReason(when string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.interrupt != nil {
		return fmt.Sprintf("collection was interrupted by %s %s", r.interrupt.Signal, when)
	}
	return "collection was stopped " + when
}

// childGrace is how long after its own deadline a child gets to report
// before it is killed: enough to flush and say "timeout" itself.
const childGrace = time.Second

func (r *run) runOne(cr *collectorRun) {
	s := cr.spec
	timeout := s.DefaultTimeout
	if r.opts.CollectorTimeout > 0 {
		timeout = r.opts.CollectorTimeout
	}
	started := time.Now()
	deadline := started.Add(timeout)
	hardStop := deadline.Add(childGrace)
	// clamped: the run's global deadline comes before the collector's
	// own; what ends it then is --timeout, whatever the collector says.
	clamped := false
	if hardStop.After(r.collectD) {
		clamped = true
		hardStop = r.collectD
		deadline = r.collectD.Add(-childGrace)
	}
	st := started.UTC()
	cr.res.StartedAt = &st
	cr.res.TimeoutSeconds = timeout.Seconds()
	r.progress(Progress{Collector: s.Name, Phase: "start", Deadline: hardStop})
	defer func() {
		cr.res.DurationSeconds = time.Since(started).Seconds()
		r.progress(Progress{Collector: s.Name, Phase: "done", Status: cr.res.Status, Elapsed: time.Since(started), Error: human.FirstLine(cr.res.Error)})
	}()

	// Made with the staging directory, in the output worker.
	dir := filepath.Join(r.staging.Path, s.Name)
	common := r.opts.Common
	r.mu.Lock()
	for m := range r.hungSet {
		common.HungMounts = append(common.HungMounts, m)
	}
	r.mu.Unlock()
	sort.Strings(common.HungMounts)
	r.mu.Lock()
	common.Stuck = append([]layout.KernelStuck(nil), r.stuck...)
	r.mu.Unlock()
	cfg := collectors.ChildConfig{Collector: s.Name, Dir: dir, Deadline: deadline, Common: common}
	if s.Options != nil {
		raw, err := json.Marshal(s.Options)
		if err != nil {
			cr.res.Status, cr.res.Error = bundle.StatusError, "encoding its options: "+err.Error()
			return
		}
		cfg.Options = raw
	}
	in, err := json.Marshal(cfg)
	if err != nil {
		cr.res.Status, cr.res.Error = bundle.StatusError, "encoding its configuration: "+err.Error()
		return
	}
	sp := r.pre.take(s.Name)
	if sp == nil {
		if sp, err = spawn(s, r.opts.Common); err != nil {
			cr.res.Status, cr.res.Error = bundle.StatusError, err.Error()
			return
		}
	}
	sp.configure(in)
	child, stderr := sp.child, sp.stderr
	r.mu.Lock()
	r.children[child] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.children, child)
		r.mu.Unlock()
	}()

	var done *collectors.Event
	eventsDone := make(chan struct{})
	go func() {
		defer close(eventsDone)
		sc := bufio.NewScanner(child.Events)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev collectors.Event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			switch ev.Type {
			case collectors.EventDone:
				e := ev
				r.mu.Lock()
				done = &e
				r.mu.Unlock()
			default:
				r.handleEvent(cr, ev)
			}
		}
	}()

	timer := time.NewTimer(time.Until(hardStop))
	defer timer.Stop()
	var killed *layout.HangEvidence
	reason := ""
	select {
	case <-child.Done():
	case <-timer.C:
		killed = child.Kill(true)
		reason = "timeout"
	case <-r.stopCtx.Done():
		killed = child.Kill(true)
		reason = "stopped"
	}
	// The pipe closes when the child is gone; an unreaped child keeps it
	// open, so do not wait forever for the reader.
	select {
	case <-eventsDone:
	case <-time.After(500 * time.Millisecond):
	}
	child.Events.Close()

	r.mu.Lock()
	d := done
	r.mu.Unlock()
	if tail := stderr.String(); tail != "" {
		cr.res.Stderr = r.redactString(tail)
	}
	switch {
	case reason == "timeout":
		cr.res.Status = bundle.StatusTimeout
		cr.res.HangEvidence = killed
		cr.res.Error = fmt.Sprintf("did not finish within %s; killed (%s)", hardStop.Sub(started).Round(time.Millisecond), killed.String())
		if killed != nil {
			killed.Phase = "collector"
		}
	case reason == "stopped":
		cr.res.Status = bundle.StatusError
		// Where it was when the signal came: not a hang, and marked so.
		if killed != nil {
			killed.Phase = "interrupted"
		}
		cr.res.HangEvidence = killed
		cr.res.Error = r.stopReason("while it was running; what it wrote so far is kept")
	case d != nil:
		cr.res.Status = d.Status
		cr.res.Error = d.Error
		if code := child.ExitCode(); code != 0 {
			cr.res.ExitCode = &code
		}
	default:
		code := child.ExitCode()
		cr.res.ExitCode = &code
		cr.res.Status = bundle.StatusError
		if sig, ok := child.Signaled(); ok {
			cr.res.Error = fmt.Sprintf("collector process was killed by signal %s without reporting", sig)
		} else if strings.Contains(stderr.String(), "panic:") {
			cr.res.Error = "collector process panicked: " + human.FirstLine(cr.res.Stderr[strings.Index(cr.res.Stderr, "panic:"):])
		} else {
			cr.res.Error = fmt.Sprintf("collector process exited with status %d without reporting", code)
		}
	}
	if cr.res.Status == "" {
		cr.res.Status = bundle.StatusError
	}
	if clamped && reason != "stopped" && (cr.res.Status != bundle.StatusOK || len(cr.res.HungItems) > 0) && cutShort(started, deadline, time.Now()) {
		// The global deadline left it too little time, or ended it: what
		// it said about itself ("no journald", "no answer", an item
		// "hung") is a symptom of the cut, not the cause. Its words are
		// kept as a note.
		if cr.res.Error != "" {
			cr.res.Notes = append(cr.res.Notes, "its own report after the cut: "+r.redactString(cr.res.Error))
		}
		cr.res.Status = bundle.StatusTimeout
		cr.res.Error = fmt.Sprintf("cut by --timeout %s: the run's deadline left it %s of its own %s; what it wrote so far is kept",
			r.opts.Timeout, max(deadline.Sub(started), 0).Round(time.Millisecond), timeout)
		cr.cut = true
		if killed != nil {
			killed.Phase = "cut"
		}
	}
	cr.res.MaxRSSKiB = child.MaxRSSKiB()
	if d != nil && d.PeakRSSKiB > 0 {
		cr.res.MaxRSSKiB = d.PeakRSSKiB
	}
}

func (r *run) handleEvent(cr *collectorRun, ev collectors.Event) {
	switch ev.Type {
	case collectors.EventFile:
		if ev.File != nil {
			cr.records[ev.File.Path] = ev.File
		}
	case collectors.EventNote:
		if len(cr.res.Notes) < 1000 {
			cr.res.Notes = append(cr.res.Notes, ev.Text)
		}
	case collectors.EventHungItem:
		if ev.Item != nil && len(cr.res.HungItems) < 1000 {
			cr.res.HungItems = append(cr.res.HungItems, bundle.HungItem{Op: ev.Item.Op, Target: r.redactString(ev.Item.Target), Evidence: ev.Item.Evidence})
		}
	case collectors.EventHungMount:
		if ev.Item != nil {
			r.mu.Lock()
			if !r.hungSet[ev.Item.Target] {
				r.hungSet[ev.Item.Target] = true
				r.hung = append(r.hung, bundle.HungItem{Op: ev.Item.Op, Target: r.redactString(ev.Item.Target), Collector: cr.spec.Name, Evidence: ev.Item.Evidence})
			}
			r.mu.Unlock()
		}
	case collectors.EventStuck:
		if ev.Stuck != nil {
			r.mu.Lock()
			if len(r.stuck) < 1000 {
				r.stuck = append(r.stuck, *ev.Stuck)
			}
			r.mu.Unlock()
		}
	case collectors.EventMasked:
		r.mu.Lock()
		for _, h := range ev.Masked {
			if len(r.masked) < maxMasked {
				r.masked[h] = true
			}
		}
		r.mu.Unlock()
	case collectors.EventMappings:
		r.mu.Lock()
		for k, v := range ev.Mappings {
			r.mappings[k] = v
		}
		r.mu.Unlock()
	case collectors.EventRemedy:
		if ev.Remedy != nil && len(cr.res.Remedies) < 20 {
			cr.res.Remedies = append(cr.res.Remedies, *ev.Remedy)
		}
	case collectors.EventFact:
		r.mu.Lock()
		r.facts[ev.Key] = ev.Value
		r.mu.Unlock()
	}
}

// killAll kills every running child (an abort).
func (r *run) killAll() {
	r.mu.Lock()
	cs := make([]*isolate.Child, 0, len(r.children))
	for c := range r.children {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	for _, c := range cs {
		c.Kill(false)
	}
}

// cutShort tells whether a collector whose deadline the run's global
// deadline clamped was cut by it: it was given less than a second, or it
// ended at (or near) that deadline.
func cutShort(started, deadline, ended time.Time) bool {
	return deadline.Sub(started) < time.Second || !ended.Before(deadline.Add(-200*time.Millisecond))
}
