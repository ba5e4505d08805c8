package mountprobe

import (
	"container/heap"
	"context"
	"path"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
)

// Which mount is probed next: tiers (the kubelet's, runtime's and CSI roots first), priority inherited by parents, bounds per namespace and on stuck probes.

// mpPrio orders probes, lowest first: tier 0 is a kubelet, runtime or CSI
// path of the host namespace, 1 the rest of the host namespace, 2 such a
// path in another namespace, 3 the rest; then class (network, FUSE,
// block, local, pseudo); then mountinfo order.
type mpPrio struct{ tier, class, order int }

func (a mpPrio) less(b mpPrio) bool {
	if a.tier != b.tier {
		return a.tier < b.tier
	}
	if a.class != b.class {
		return a.class < b.class
	}
	return a.order < b.order
}

// tierFirst is the tier that may use reserved workers and is not
// bounded per namespace.
const tierFirst = 0

// firstPath reports whether a host path is a kubelet, runtime or CSI
// path, or lies under one of extra.
func firstPath(p string, extra []string) bool {
	for _, r := range firstRoots {
		if mpUnder(p, r) {
			return true
		}
	}
	for _, r := range extra {
		if r != "" && mpUnder(p, path.Clean(r)) {
			return true
		}
	}
	return kubeletShaped(p)
}

// mpUnder reports whether p is root or lies below it.
func mpUnder(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// kubeletShaped recognises the kubelet's own mounts under any --root-dir:
// pods/<uid>/volumes|volume-subpaths|volumeDevices/... and
// plugins/kubernetes.io/... (CSI staging and global mounts).
func kubeletShaped(p string) bool {
	seg := strings.Split(p, "/")
	for i := 0; i+1 < len(seg); i++ {
		switch seg[i] {
		case "pods":
			if i+2 < len(seg) && len(seg[i+1]) >= 32 && strings.Count(seg[i+1], "-") == 4 {
				switch seg[i+2] {
				case "volumes", "volume-subpaths", "volumeDevices":
					return true
				}
			}
		case "plugins":
			if strings.HasPrefix(seg[i+1], "kubernetes.io") {
				return true
			}
		}
	}
	return false
}

// inherit gives every item the priority of its most urgent waiter: a
// parent mount is walked to reach its children and a filesystem's first
// probe stands for its other mounts, so /var/lib/kubelet (local) is
// probed as early as the hung FUSE mount of a pod under it.
func inherit(items []*mpItem) {
	stack := append([]*mpItem(nil), items...)
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range []*mpItem{it.parent, it.devRep} {
			// Each change lowers a key of a finite set: this ends,
			// cycles (a mount moved under its own child) included.
			if d != nil && d != it && it.prio.less(d.prio) {
				d.prio = it.prio
				stack = append(stack, d)
			}
		}
	}
	for _, it := range items {
		it.rec.First = it.prio.tier == tierFirst
	}
}

// mpQueue orders probes by their effective priority (mpPrio).
type mpQueue []*mpItem

func (q mpQueue) Len() int { return len(q) }

func (q mpQueue) Less(i, j int) bool {
	if q[i].prio != q[j].prio {
		return q[i].prio.less(q[j].prio)
	}
	return q[i].order < q[j].order
}

func (q mpQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

func (q *mpQueue) Push(x any) { *q = append(*q, x.(*mpItem)) }

func (q *mpQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// schedule probes every item, honouring dependencies and the concurrency
// rules (see Options), until all are done or ctx ends.
func (p *prober) schedule(ctx context.Context, items []*mpItem) {
	var ready mpQueue
	remaining := len(items)
	var finish func(it *mpItem)
	// resolve decides an item whose dependencies are all done: skip it,
	// infer its result, or queue its probe.
	resolve := func(it *mpItem) {
		switch {
		case it.parent != nil && (it.parent.rec.Result == layout.ProbeHung || it.parent.underHung != ""):
			it.underHung = it.parent.underHung
			if it.underHung == "" {
				it.underHung = it.parent.rec.ProbePath
			}
			it.rec.Result = layout.ProbeSkipped
			it.rec.SkipReason = "lies under hung mount " + it.underHung + ": not touched"
			finish(it)
		case it.devRep != nil && it.devRep.rec.Result == layout.ProbeHung && (it.devRep.rec.Probed || it.devRep.earlier || it.devRep.kernel):
			it.rec.Result = layout.ProbeHung
			it.rec.HungVia = it.devRep.rec.ProbePath
			it.rec.Diagnosis = "same filesystem (device " + it.rec.Dev + ") as " + it.devRep.rec.ProbePath + ", which hung; not probed again"
			it.rec.LatencyMS = it.devRep.rec.LatencyMS
			it.rec.DoneMS = shared.Millis(time.Since(p.started))
			p.reportHung(it)
			finish(it)
		default:
			it.state = mpReady
			heap.Push(&ready, it)
		}
	}
	finish = func(it *mpItem) {
		it.state = mpDone
		remaining--
		for _, w := range it.waiters {
			w.pending--
			if w.pending == 0 && w.state == mpWaiting {
				resolve(w)
			}
		}
	}
	for _, it := range items {
		switch {
		case it.hidden:
			it.rec.Result = layout.ProbeSkipped
			it.rec.SkipReason = "over-mounted: another mount at the same path hides it, so no path reaches it"
		case it.autofs:
			it.rec.Result = layout.ProbeSkipped
			it.rec.SkipReason = "autofs trigger: touching it would mount what is behind it"
		}
		for _, d := range []*mpItem{it.parent, it.devRep} {
			if d != nil && d != it {
				d.waiters = append(d.waiters, it)
				it.pending++
			}
		}
	}
	for _, it := range items {
		if (it.earlier || it.kernel) && it.state == mpWaiting {
			it.rec.DoneMS = shared.Millis(time.Since(p.started))
			p.reportHung(it)
			finish(it)
		}
	}
	for _, it := range items {
		if it.rec.Result == layout.ProbeSkipped && it.state == mpWaiting {
			finish(it)
		}
	}
	for _, it := range items {
		if it.state == mpWaiting && it.pending == 0 {
			resolve(it)
		}
	}

	done := make(chan *mpItem, len(items))
	running := map[*mpItem]bool{}
	perNS := map[*mpNamespace]int{}
	slowNS := map[*mpNamespace]int{}
	tick := time.NewTicker(max(p.slowAfter/2, 10*time.Millisecond))
	defer tick.Stop()
	complete := func(it *mpItem) {
		delete(running, it)
		perNS[it.ns]--
		if it.rec.Result == layout.ProbeHung {
			p.reportHung(it)
		}
		finish(it)
	}
	var deferred []*mpItem
	for remaining > 0 {
		now := time.Now()
		slow := 0
		clear(slowNS)
		for r := range running {
			if now.Sub(r.started) >= p.slowAfter {
				slow++
				slowNS[r.ns]++
			}
		}
		p.peakStuck = max(p.peakStuck, slow)
		// Start the most urgent probes the rules allow; one that may
		// not start yet does not hold back the others behind it.
		// The per-namespace bound holds while namespaces compete: when
		// the network and FUSE probes waiting are all of one namespace,
		// it may use every unreserved worker.
		var sole *mpNamespace
		for _, it := range ready {
			if it.likely && it.prio.tier != tierFirst {
				if sole == nil {
					sole = it.ns
				} else if sole != it.ns {
					sole = nil
					break
				}
			}
		}
		likelyLeft := countLikely(ready)
		// Stuck probes count against MaxStuck only: they hold a thread
		// of a worker process but not a slot, so hung mounts cost one
		// deadline together.
		for ready.Len() > 0 && ctx.Err() == nil && len(running)-slow < p.max && slow <= p.maxStuck && len(running) < p.max+p.maxStuck {
			it := heap.Pop(&ready).(*mpItem)
			active, activeNS := len(running)-slow, perNS[it.ns]-slowNS[it.ns]
			if !it.likely && active >= p.base {
				// No mount unlikely to hang may start now, and the
				// queue puts the likely ones first within a tier:
				// stop unless a likely one waits further on. Without
				// this, each probe's answer re-sorted the whole queue
				// (30,000 mounts took 200 s).
				deferred = append(deferred, it)
				if likelyLeft == 0 {
					break
				}
				continue
			}
			if it.likely {
				likelyLeft--
			}
			ok := p.mayStart(it, active, activeNS)
			if !ok && it.ns == sole && it.likely && active < p.max-p.reserved {
				ok = true
			}
			// While namespaces compete, one namespace's stuck probes
			// take at most three quarters of MaxStuck.
			if ok && it.likely && it.prio.tier != tierFirst && it.ns != sole && slowNS[it.ns] >= max(1, p.maxStuck*3/4) {
				ok = false
			}
			if !ok {
				deferred = append(deferred, it)
				continue
			}
			it.state = mpRunning
			it.started = now
			running[it] = true
			perNS[it.ns]++
			go func() {
				p.probe(ctx, it)
				done <- it
			}()
		}
		for _, it := range deferred {
			heap.Push(&ready, it)
		}
		deferred = deferred[:0]
		if len(running) == 0 {
			if ctx.Err() != nil {
				break
			}
			if ready.Len() == 0 {
				// Nothing runs and nothing is ready, yet items wait:
				// their dependencies form a cycle (a mount moved under
				// its own descendant). Release the earliest one.
				var first *mpItem
				for _, it := range items {
					if it.state == mpWaiting && (first == nil || it.order < first.order) {
						first = it
					}
				}
				if first == nil {
					break
				}
				first.pending = 0
				first.state = mpReady
				heap.Push(&ready, first)
				continue
			}
		}
		select {
		case it := <-done:
			complete(it)
		case <-tick.C:
		case <-ctx.Done():
			// The pool ends running probes itself when ctx ends.
			if len(running) > 0 {
				complete(<-done)
			}
		}
	}
	for _, it := range items {
		if it.rec.Result == "" {
			it.rec.Result = layout.ProbeUnfinished
			it.rec.SkipReason = "not probed: the collector's deadline came first"
		}
	}
}

// countLikely counts the mounts likely to hang (network, FUSE) that
// wait in q.
func countLikely(q mpQueue) int {
	n := 0
	for _, it := range q {
		if it.likely {
			n++
		}
	}
	return n
}

// mayStart applies the concurrency rules to the most urgent ready probe
// not yet started, given how many probes run that are not stuck past
// SlowAfter (in all, and in its namespace); stuck ones are bounded by
// MaxStuck alone:
//   - a mount unlikely to hang starts only while fewer than --workers
//     probes run that are not stuck, so stuck ones are replaced;
//   - network and FUSE probes outside the first tier (kubelet, runtime
//     and CSI paths of the host, and the mounts on the way to them) do
//     not use the reserved workers, and one namespace runs at most perNS
//     of them;
//   - outside the first tier, one namespace runs at most perNS +
//     --workers probes in all.
//
// Other mounts may use reserved workers: they start only while few
// probes are not stuck, and mostly answer in a millisecond, so they do
// not keep a first-tier probe waiting, and a namespace's healthy mounts
// are not starved by its hung ones.
func (p *prober) mayStart(it *mpItem, running, inNS int) bool {
	if !it.likely && running >= p.base {
		return false
	}
	if it.prio.tier == tierFirst {
		return true
	}
	if it.likely {
		return running < p.max-p.reserved && inNS < p.perNS
	}
	return inNS < p.perNS+p.base
}
