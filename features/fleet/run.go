package fleet

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

var errGlobalDeadline = errors.New("the run's deadline passed")

// Run collects the selected nodes and writes their bundles and fleet.json
// into o.OutputDir. Cancelling ctx interrupts the run: nodes not finished
// are marked interrupted and the clean-up still runs (until o.Abandon).
// The report is returned whenever the run got as far as choosing nodes,
// also with an error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.Selector != "" {
		if _, err := labels.Parse(o.Selector); err != nil {
			return nil, &UsageError{fmt.Sprintf("-l %q is not a label selector: %v", o.Selector, err)}
		}
	}
	if err := prepareOutputDir(o.OutputDir); err != nil {
		return nil, err
	}
	runID, err := newRunID()
	if err != nil {
		return nil, err
	}
	rep := &Report{Version: o.Version, RunID: runID, Context: o.Context, Namespace: o.Namespace, Image: o.Image,
		Selection: selection(&o), Started: time.Now().UTC()}

	gctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, errGlobalDeadline)
	defer cancel()
	rows, err := selectNodes(gctx, &o)
	if err != nil {
		return nil, err
	}
	rep.Nodes = rows
	// What earlier runs left behind (their client died) and is past its
	// time goes first.
	rep.Swept = sweepExpired(gctx, o.Client, o.Namespace, time.Now())
	c := &created{client: o.Client, ns: o.Namespace, pods: map[string]bool{}, forcePods: map[string]bool{}, secrets: map[string]made{},
		identities: map[string]identity{}, expires: time.Now().Add(o.Timeout + cleanupTimeout).UTC().Format(time.RFC3339)}
	r := &runner{o: &o, runID: runID, rows: rows, c: c, board: newBoard()}
	var names []string
	for _, row := range rows {
		if row.Status == "" {
			names = append(names, row.Node)
		}
	}
	sa, err := setup(gctx, &o, runID, names, c)
	if err == nil && sa == "" && len(names) > 0 {
		// The first node's identity now (--kubelet-pprof): a user who
		// may not create RBAC learns it before any pod, not once per node.
		err = c.nodeIdentity(gctx, &o, runID, names[0], podName(runID, names[0]))
	}
	if err == nil {
		r.sa, rep.ServiceAccount = sa, sa
		if sa == "" {
			rep.ServiceAccount = "one per node, named as its pod"
		}
		if o.Store != nil {
			r.uploads, err = c.makeUploads(gctx, &o, runID, names)
		}
	}
	if err == nil {
		r.collectAll(ctx, gctx)
		if o.Store != nil {
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			err = r.checkStored(sctx)
			scancel()
		}
	} else {
		for i := range rows {
			if rows[i].Status == "" {
				rows[i].Status, rows[i].Reason, rows[i].Phase = StatusFailed, "the run could not start: "+err.Error(), PhaseDone
			}
		}
	}
	// Clean up even when interrupted, until abandoned.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	cctx, acancel := ctxAbandon(cctx, o.Abandon)
	rep.Leftovers = c.cleanup(cctx, runID)
	acancel()
	ccancel()
	rep.Interrupted = ctx.Err() != nil
	rep.Ended = time.Now().UTC()
	if rc, ok := o.Client.(requestCounter); ok {
		rep.APIRequests = rc.Requests()
	}
	rep.finish()
	if werr := writeReport(o.OutputDir, rep); werr != nil {
		err = errors.Join(err, werr)
	}
	if o.Store != nil && len(rep.Nodes) > 0 {
		// Beside the bundles, for fleet analyze of the store.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		if werr := storeReport(sctx, o.Store, runID, rep); werr != nil {
			err = errors.Join(err, werr)
		}
		scancel()
	}
	return rep, err
}

func selection(o *Options) string {
	switch {
	case o.All:
		return "all nodes"
	case o.Selector != "":
		return "nodes labelled " + o.Selector
	}
	return "nodes " + strings.Join(o.Names, ", ")
}

// prepareOutputDir makes the directory, refusing one that already holds
// a fleet run.
func prepareOutputDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the output directory: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ReportFile)); err == nil {
		return &UsageError{fmt.Sprintf("%s already holds a fleet run (%s): choose another --output-dir", dir, ReportFile)}
	}
	return nil
}

func newRunID() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "nodesnap-fleet-" + hex.EncodeToString(b), nil
}

// selectNodes resolves the selection to the nodes' rows, sorted by name.
// A named node that does not exist gets a failed row; a selection that
// matches nothing is ErrNoNodes.
func selectNodes(ctx context.Context, o *Options) ([]NodeResult, error) {
	var rows []NodeResult
	if len(o.Names) > 0 {
		seen := map[string]bool{}
		for _, n := range o.Names {
			if seen[n] {
				continue
			}
			seen[n] = true
			row := NodeResult{Node: n, Phase: PhaseWaiting}
			_, err := o.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				row.Status, row.Reason, row.Phase = StatusFailed, "no node of this name in the cluster (kubectl get nodes lists them)", PhaseDone
			case err != nil:
				return nil, fmt.Errorf("reading node %s: %w", n, err)
			}
			rows = append(rows, row)
		}
	} else {
		list, err := o.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: o.Selector})
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		for _, n := range list.Items {
			rows = append(rows, NodeResult{Node: n.Name, Phase: PhaseWaiting})
		}
		if len(rows) == 0 {
			if o.Selector != "" {
				return nil, fmt.Errorf("%w: no node is labelled %s (kubectl get nodes --show-labels)", ErrNoNodes, o.Selector)
			}
			return nil, fmt.Errorf("%w: the cluster has no node", ErrNoNodes)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Node < rows[j].Node })
	return rows, nil
}

// podName is the run's pod for a node: the run id, the start of the
// node's name and a hash of all of it, at most 63 characters.
func podName(runID, node string) string {
	h := sha256.Sum256([]byte(node))
	short := strings.Trim(strings.ReplaceAll(node, ".", "-"), "-")
	if len(short) > 30 {
		short = strings.TrimRight(short[:30], "-")
	}
	return runID + "-" + short + "-" + hex.EncodeToString(h[:3])
}

type runner struct {
	o     *Options
	runID string
	sa    string
	c     *created
	board *board
	mu    sync.Mutex
	rows  []NodeResult
	// uploads, with Options.Store, say where each node's upload URL is.
	uploads *uploads
}

// update changes a node's row under the lock and reports it.
func (r *runner) update(i int, f func(*NodeResult)) {
	r.mu.Lock()
	f(&r.rows[i])
	row := r.rows[i]
	r.mu.Unlock()
	if r.o.Progress != nil {
		r.o.Progress(row)
	}
}

// collectAll runs every node, at most MaxParallel at once, while one
// watch follows the run's pods for all of them.
func (r *runner) collectAll(ictx, gctx context.Context) {
	pctx, stop := context.WithCancel(gctx)
	defer stop()
	go r.board.follow(pctx, r.o.Client, r.o.Namespace, RunSelector(r.runID))
	select {
	case <-r.board.ready:
	case <-gctx.Done():
	}
	sem := make(chan struct{}, r.o.MaxParallel)
	var wg sync.WaitGroup
	for i := range r.rows {
		if r.rows[i].Status != "" {
			r.update(i, func(*NodeResult) {})
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-gctx.Done():
		}
		if gctx.Err() != nil {
			st, why := r.stopped(ictx, gctx, "waiting for a free slot (--max-parallel)")
			r.update(i, func(n *NodeResult) { n.Status, n.Reason, n.Phase = st, why, PhaseDone })
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			r.collectNode(ictx, gctx, i)
		}(i)
	}
	wg.Wait()
}

// stopped is the status of a node whose run ended under it: interrupted,
// or the global deadline.
func (r *runner) stopped(ictx, gctx context.Context, while string) (Status, string) {
	if ictx.Err() != nil {
		return StatusInterrupted, "the run was interrupted while " + while
	}
	return StatusTimeout, fmt.Sprintf("the run's deadline (--timeout %s) passed while %s", r.o.Timeout, while)
}

var phaseWords = map[string]string{
	PhasePending: "the pod was pending", PhaseCollecting: "collecting", PhaseCopying: "copying the bundle",
	PhaseCreating: "creating the pod",
}

func (r *runner) collectNode(ictx, gctx context.Context, i int) {
	o := r.o
	node := r.rows[i].Node
	name := podName(r.runID, node)
	createdAt := time.Now()
	r.update(i, func(n *NodeResult) { n.Phase, n.Pod, n.Started = PhaseCreating, name, createdAt.UTC() })
	nctx, cancel := context.WithTimeout(gctx, o.NodeTimeout)
	defer cancel()
	st, reason := r.drive(ictx, gctx, nctx, i, name, createdAt)
	// Its pod goes now (also when the run was interrupted), each delete
	// with a deadline of its own; the clean-up at the end retries.
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(nctx), 30*time.Second)
	r.c.deletePod(dctx, name)
	dcancel()
	r.update(i, func(n *NodeResult) {
		if n.Status == "" {
			n.Status, n.Reason = st, reason
		}
		n.Phase = PhaseDone
		n.Durations.Total = time.Since(createdAt).Seconds()
	})
}

// drive creates a node's pod and follows it to an end: the bundle saved
// (ok, partial) or a status and reason.
func (r *runner) drive(ictx, gctx, nctx context.Context, i int, name string, createdAt time.Time) (Status, string) {
	o := r.o
	node := r.rows[i].Node
	sa := r.sa
	if sa == "" {
		// The node's own identity: its token reaches this node's kubelet
		// and no other.
		sa = name
		if err := r.c.nodeIdentity(nctx, o, r.runID, node, name); err != nil {
			if nctx.Err() != nil {
				return r.expired(ictx, gctx, PhaseCreating, "")
			}
			return StatusFailed, err.Error()
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: runLabels(r.runID),
			Annotations: map[string]string{NodeAnnotation: node, ExpiresAnnotation: r.c.expires}},
		Spec: podspec.PodSpec(podspec.Options{Image: o.Image, NodeName: node, ServiceAccount: sa,
			CollectTimeout: o.CollectTimeout, HoldFor: o.NodeTimeout + cleanupTimeout, JSONResult: true, Pprof: o.Pprof}),
	}
	// The kubelet ends the pod by itself if this process dies.
	pod.Spec.ActiveDeadlineSeconds = ptr(int64((o.NodeTimeout + cleanupTimeout) / time.Second))
	if r.uploads != nil {
		r.uploads.uploadTo(pod, node)
	}
	if o.PodHook != nil {
		o.PodHook(node, pod)
	}
	r.c.addPod(name)
	if _, err := o.Client.CoreV1().Pods(o.Namespace).Create(nctx, pod, metav1.CreateOptions{}); err != nil {
		if nctx.Err() != nil {
			return r.expired(ictx, gctx, PhaseCreating, "")
		}
		return StatusFailed, "creating the pod: " + err.Error()
	}
	var nodeObj *corev1.Node
	var nodeChecked time.Time
	var v verdict
	for {
		p, changed := r.board.get(name)
		now := time.Now()
		if !v.acked && now.Sub(createdAt) >= o.NotReadyGrace && now.Sub(nodeChecked) >= o.NotReadyGrace {
			nodeChecked = now
			if n, err := o.Client.CoreV1().Nodes().Get(nctx, node, metav1.GetOptions{}); err == nil {
				nodeObj = n
			}
		}
		v = classify(p, nodeObj, createdAt, now, o.NotReadyGrace)
		r.c.setForce(name, !v.acked)
		r.update(i, func(n *NodeResult) {
			n.Phase = v.phase
			if !v.collectStart.IsZero() {
				// The kubelet's times have whole seconds.
				n.Durations.PodStart = max(v.collectStart.Sub(createdAt).Seconds(), 0)
				if !v.collectEnd.IsZero() {
					n.Durations.Collect = v.collectEnd.Sub(v.collectStart).Seconds()
				}
			}
		})
		switch {
		case v.status != "" && v.collectFailed:
			return v.status, v.reason + r.logTail(nctx, name)
		case v.status != "":
			return v.status, v.reason
		case v.ready && o.Store != nil:
			return r.stored(ictx, gctx, nctx, i, name, v.message)
		case v.ready:
			return r.copyBack(ictx, gctx, nctx, i, name)
		}
		select {
		case <-changed:
		case <-nctx.Done():
			if gctx.Err() == nil && !v.acked {
				if ready, why := nodeReadyNow(o, node); !ready {
					return StatusNotReady, fmt.Sprintf("node %s is NotReady (%s); its kubelet never took the pod on", node, why)
				}
			}
			hint := v.hint
			if lerr := r.board.listError(); lerr != "" {
				hint = firstNonEmpty(hint, "listing the run's pods failed: "+lerr)
			}
			return r.expired(ictx, gctx, v.phase, hint)
		}
	}
}

// nodeReadyNow reads a node's readiness with a short deadline of its own.
func nodeReadyNow(o *Options, node string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := o.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return true, "" // unknown: do not claim NotReady
	}
	return nodeReady(n)
}

// expired is the status of a node whose deadline (its own, the run's) or
// the run itself ended while in phase.
func (r *runner) expired(ictx, gctx context.Context, phase, hint string) (Status, string) {
	while := phaseWords[phase]
	if while == "" {
		while = phase
	}
	if hint != "" {
		while += " (" + hint + ")"
	}
	if gctx.Err() != nil {
		return r.stopped(ictx, gctx, while)
	}
	msg := fmt.Sprintf("the per-node deadline (--node-timeout %s) passed while %s", r.o.NodeTimeout, while)
	if phase == PhasePending {
		msg += "; " + PendingHint
	}
	return StatusTimeout, msg
}

// HostCollectCommand collects a node from a shell on it: what works where
// the node's kubelet starts no pod.
const HostCollectCommand = "sudo nodesnap collect"

// PendingHint says what a collection pod that never started means.
const PendingHint = "the node's kubelet never started the collection pod, as a kubelet whose sync loop is stuck (a hung mount, incident 003) starts none: collect on the node itself with `" + HostCollectCommand + "`"

// logTail is the end of the collect container's log, for the reason of a
// failed collection.
func (r *runner) logTail(ctx context.Context, pod string) string {
	b, err := r.o.PodIO.Logs(ctx, r.o.Namespace, pod, podspec.CollectContainer, resultLogLimit)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return "; its log ends: " + strings.Join(lines, " | ")
}

// copyBack reads collect's result and copies the bundle it names.
func (r *runner) copyBack(ictx, gctx, nctx context.Context, i int, pod string) (Status, string) {
	o := r.o
	start := time.Now()
	r.update(i, func(n *NodeResult) { n.Phase = PhaseCopying })
	log, err := o.PodIO.Logs(nctx, o.Namespace, pod, podspec.CollectContainer, resultLogLimit)
	if err != nil {
		if nctx.Err() != nil {
			return r.expired(ictx, gctx, PhaseCopying, "")
		}
		return StatusFailed, "reading the collection's result from its log: " + err.Error()
	}
	res, err := ParseCollectResult(log)
	if err != nil {
		return StatusFailed, err.Error()
	}
	r.update(i, func(n *NodeResult) {
		n.NodePath, n.SHA256, n.Size = firstNonEmpty(res.HostPath, res.Path), res.SHA256, res.Size
	})
	file, err := fetch(nctx, o, pod, r.rows[i].Node, res)
	copySecs := time.Since(start).Seconds()
	if err != nil {
		r.update(i, func(n *NodeResult) { n.Durations.Copy = copySecs })
		if nctx.Err() != nil && !errors.Is(err, ErrChecksum) {
			return r.expired(ictx, gctx, PhaseCopying, "")
		}
		return StatusFailed, err.Error()
	}
	st, reason := StatusOK, ""
	if res.Status != bundle.BundleComplete {
		st = StatusPartial
		reason = "the bundle is " + res.Status
		if len(res.Missing) > 0 {
			reason += ": " + strings.Join(res.Missing, "; ")
		}
	}
	r.update(i, func(n *NodeResult) {
		n.Bundle, n.Missing, n.Durations.Copy = file, res.Missing, copySecs
		n.Status, n.Reason = st, reason
	})
	return st, reason
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// board holds the run's pods as one watch reports them; each node's
// goroutine waits on it for a change. It holds only what classify reads
// of a pod (its status), and a pod only until it is deleted: the run
// keeps at most --max-parallel pods at once, so the board stays that
// small whatever the number of nodes.
type board struct {
	mu      sync.Mutex
	pods    map[string]*corev1.Pod
	changed chan struct{}
	// lastErr is the last list's or watch's error ("" once one
	// succeeds), for the reason of nodes that time out meanwhile.
	lastErr string
	// ready is closed once the watch is up (or its first attempt failed):
	// pods are created after it, so that none of their changes is missed.
	ready     chan struct{}
	readyOnce sync.Once
}

func (b *board) listError() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

func newBoard() *board {
	return &board{pods: map[string]*corev1.Pod{}, changed: make(chan struct{}), ready: make(chan struct{})}
}

// get returns a pod as last seen (nil: not seen) and a channel closed at
// the next change.
func (b *board) get(name string) (*corev1.Pod, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pods[name], b.changed
}

// notify wakes the waiting nodes; it is called with b.mu held.
func (b *board) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

func (b *board) setErr(err error) {
	b.mu.Lock()
	b.lastErr = err.Error()
	b.mu.Unlock()
}

// slim is what the board keeps of a pod.
func slim(p *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, ResourceVersion: p.ResourceVersion,
		DeletionTimestamp: p.DeletionTimestamp}, Status: p.Status}
}

// watchTimeout is how long one watch request lasts at most (the API
// server's own limit is longer); it is spread so that many runs do not
// come back at once.
func watchTimeout() *int64 {
	return ptr(int64(240 + mrand.IntN(120)))
}

// follow lists the run's pods once and then watches them, continuing
// each watch where the last one ended: a request per few minutes,
// whatever the number of nodes. A watch the server says is too old (410
// Gone) starts again from a list.
func (b *board) follow(ctx context.Context, cs Client, ns, selector string) {
	defer b.readyOnce.Do(func() { close(b.ready) })
	rv := ""
	retry := time.Duration(0)
	pause := func(err error) bool {
		b.setErr(err)
		b.readyOnce.Do(func() { close(b.ready) })
		retry = min(max(retry*2, 250*time.Millisecond), 10*time.Second)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(retry):
			return true
		}
	}
	for ctx.Err() == nil {
		if rv == "" {
			list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				if ctx.Err() != nil || !pause(fmt.Errorf("listing the run's pods: %w", err)) {
					return
				}
				continue
			}
			m := make(map[string]*corev1.Pod, len(list.Items))
			for i := range list.Items {
				m[list.Items[i].Name] = slim(&list.Items[i])
			}
			b.mu.Lock()
			b.pods, b.lastErr = m, ""
			b.notify()
			b.mu.Unlock()
			rv = list.ResourceVersion
		}
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: rv,
			AllowWatchBookmarks: true, TimeoutSeconds: watchTimeout()})
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				rv = ""
			}
			if ctx.Err() != nil || !pause(fmt.Errorf("watching the run's pods: %w", err)) {
				return
			}
			continue
		}
		b.readyOnce.Do(func() { close(b.ready) })
		rv = b.drain(ctx, w, rv)
		retry = 0
	}
}

// drain applies a watch's events to the board until the watch ends, and
// returns the resource version to continue from ("" to list again).
func (b *board) drain(ctx context.Context, w watch.Interface, rv string) string {
	defer w.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return rv
		}
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			b.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(b.pods, p.Name)
			} else {
				b.pods[p.Name] = slim(p)
			}
			b.lastErr = ""
			b.notify()
			b.mu.Unlock()
			rv = p.ResourceVersion
		case watch.Bookmark:
			if p, isPod := ev.Object.(*corev1.Pod); isPod {
				rv = p.ResourceVersion
			}
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			b.setErr(fmt.Errorf("watching the run's pods: %w", err))
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				return ""
			}
			return rv
		}
	}
}
