package isolate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/inroot"
)

// Pool runs per-item operations in long-lived worker processes. A worker
// serves many items at once, each on an OS thread of its own, so an item
// stuck in the kernel (a stat on a hung mount) holds one thread, not a
// process: hung items cost their deadline and no process start each. A
// worker holding workerStuck abandoned items takes no new ones and is
// killed once its other items have answered; Close kills every worker.
type Pool struct {
	timeout time.Duration
	sem     chan struct{}
	stderr  io.Writer
	// boundary is where the workers' ops resolve host paths.
	boundary *inroot.Boundary

	mu      sync.Mutex
	workers []*worker // live ones taking items, oldest first
	nextID  uint64
	closed  bool
	started int            // workers started, for tests and reports
	ending  sync.WaitGroup // workers being killed
}

// Confine makes every worker started from now on resolve the host paths
// of its ops inside b (see package inroot): --root is a boundary, not a
// prefix.
func (p *Pool) Confine(b inroot.Boundary) *Pool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.boundary = &b
	return p
}

// Bounds per worker process (variables so that tests can lower them).
var (
	// workerItems bounds the items in flight in one worker, abandoned
	// ones included: its threads, and the lines of its note (see
	// note.go), which must fit in NoteSize: 48 lines of 84 bytes each.
	workerItems = 48
	// workerStuck is how many abandoned items (past their deadline, or
	// whose caller gave up) a worker may hold before it is retired.
	workerStuck = 32
)

// NewPool returns a pool running at most size items at once, each
// bounded by timeout.
func NewPool(size int, timeout time.Duration) *Pool {
	if size < 1 {
		size = 1
	}
	return &Pool{timeout: timeout, sem: make(chan struct{}, size), stderr: os.Stderr}
}

// Timeout is the per-item deadline.
func (p *Pool) Timeout() time.Duration { return p.timeout }

// WorkersStarted is how many worker processes the pool has started.
func (p *Pool) WorkersStarted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// WorkerItems is how many items one worker runs at once at most: a note
// line (see AddWorkerNote) of at most NoteSize/WorkerItems()-1 bytes
// always fits.
func WorkerItems() int { return workerItems }

type worker struct {
	ready chan struct{} // closed once the process started, or failed to
	err   error         // why it did not start; read after ready
	child *Child
	inW   *os.File // its stdin; writes serialised by wmu
	outR  *os.File // its stdout, read by one goroutine (route)
	wmu   sync.Mutex
	end   sync.Once
	// routed is closed when route has ended; died is set when the
	// process was found dead but not reapable (see watch).
	routed chan struct{}
	died   atomic.Bool

	// Guarded by Pool.mu.
	calls    map[uint64]*call // in flight, abandoned ones included
	stuck    int              // abandoned calls still running
	retiring bool             // takes no new calls
	gone     bool             // out of Pool.workers
	killed   bool             // its kill has been started
}

// call is one item in flight in a worker.
type call struct {
	ch        chan reply // the answer, or why none will come
	tid       int        // the thread serving it, once announced
	abandoned bool
}

type reply struct {
	r   response
	err error
}

// Do runs op with req in a worker and decodes the answer into resp (which
// may be nil). A hung op returns a *HungError; a failed one an *OpError.
func (p *Pool) Do(ctx context.Context, op string, req, resp any) error {
	return p.DoTimeout(ctx, p.timeout, op, req, resp)
}

// DoTimeout is Do with a per-call deadline.
func (p *Pool) DoTimeout(ctx context.Context, timeout time.Duration, op string, req, resp any) error {
	raw, err := MarshalWire(req)
	if err != nil {
		return fmt.Errorf("encoding %s request: %w", op, err)
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.sem }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	w, id, c, err := p.assign()
	if err != nil {
		return err
	}
	select {
	case <-w.ready:
	case <-timer.C:
		// Starting a worker took the whole deadline: not the item's
		// fault, and nothing to show of it.
		p.forget(w, id)
		return fmt.Errorf("starting a worker for %s took longer than %s: %w", op, timeout, ErrTimeout)
	case <-ctx.Done():
		p.forget(w, id)
		return fmt.Errorf("%s abandoned: %w", op, ctx.Err())
	}
	if w.err != nil {
		p.forget(w, id)
		return w.err
	}
	if err := p.send(w, request{ID: id, Op: op, Req: raw}, timeout); err != nil {
		var he *HungError
		if errors.As(err, &he) {
			he.Op = op
			return he
		}
		return fmt.Errorf("sending %s to a worker: %w", op, err)
	}
	var a reply
	waited, slow := timeout, 0
wait:
	for {
		select {
		case a = <-c.ch:
		case <-timer.C:
			if slow < maxSlowExtensions && p.running(w, id) {
				// On CPU or waiting for one, not for a file system or
				// a device: a loaded node is slow, not hung.
				slow++
				waited += timeout
				timer.Reset(timeout)
				continue wait
			}
			tid, answered := p.abandon(w, id)
			if answered {
				a = <-c.ch
				break
			}
			return &HungError{Op: op, Timeout: waited, Evidence: itemEvidence(w.child.PID(), tid)}
		case <-ctx.Done():
			// The caller gave up (its own deadline, or an interrupted run):
			// the item did not hang and is not recorded as if it had. Its
			// thread runs on in the worker, which keeps serving.
			if _, answered := p.abandon(w, id); answered {
				a = <-c.ch
				break
			}
			return fmt.Errorf("%s abandoned: %w", op, ctx.Err())
		}
		break
	}
	if a.err != nil {
		return fmt.Errorf("the worker running %s: %w", op, a.err)
	}
	if a.r.Err != "" {
		return &OpError{Op: op, Msg: unwireString(a.r.Err), Errno: syscall.Errno(a.r.Errno)}
	}
	if resp != nil && len(a.r.Resp) > 0 {
		if err := UnmarshalWire(a.r.Resp, resp); err != nil {
			return fmt.Errorf("decoding %s answer: %w", op, err)
		}
	}
	return nil
}

// maxSlowExtensions is how many more deadlines an item gets while the
// thread serving it is running or runnable when its deadline passes: up to
// three deadlines in all. A thread stuck in a file system or a device
// sleeps (D, or S in an interruptible wait) and gets none.
const maxSlowExtensions = 2

// running says whether the thread serving a call (the worker's main
// thread until the worker says which) is in state R: on a CPU or waiting
// for one. Read from our own child's /proc with a deadline.
func (p *Pool) running(w *worker, id uint64) bool {
	p.mu.Lock()
	c := w.calls[id]
	tid := 0
	if c != nil {
		tid = c.tid
	}
	p.mu.Unlock()
	pid := w.child.PID()
	if tid <= 0 {
		tid = pid
	}
	return taskState(readProcBounded(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid), "stat"))) == "R"
}

// itemEvidence is where the thread serving an item is blocked; every
// thread of the worker when it has not said which one serves it.
func itemEvidence(pid, tid int) *layout.HangEvidence {
	var h *layout.HangEvidence
	if tid > 0 {
		h = CaptureTaskEvidence(pid, tid)
	} else {
		h = CaptureEvidence(pid)
		h.Note = "the worker had not yet said which thread serves the item: all its threads are shown"
	}
	h.Phase = "worker"
	return h
}

// Prestart starts a worker in the background when the pool has none, so
// that its process start (the runtime and every package's init: tens of
// milliseconds of CPU) overlaps the caller's own work instead of delaying
// its first item. A worker that failed to start is dropped; the first Do
// then starts another and reports why that one failed.
func (p *Pool) Prestart() {
	p.mu.Lock()
	if p.closed || len(p.workers) > 0 {
		p.mu.Unlock()
		return
	}
	w := &worker{ready: make(chan struct{}), routed: make(chan struct{}), calls: map[uint64]*call{}}
	p.workers = append(p.workers, w)
	p.started++
	p.mu.Unlock()
	go p.start(w)
}

// assign registers a new call on a worker with room, starting one when
// none has.
func (p *Pool) assign() (*worker, uint64, *call, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, 0, nil, errors.New("worker pool is closed")
	}
	var w *worker
	for _, x := range p.workers {
		if !x.retiring && len(x.calls) < workerItems {
			w = x
			break
		}
	}
	fresh := w == nil
	if fresh {
		w = &worker{ready: make(chan struct{}), routed: make(chan struct{}), calls: map[uint64]*call{}}
		p.workers = append(p.workers, w)
		p.started++
	}
	p.nextID++
	id := p.nextID
	c := &call{ch: make(chan reply, 1)}
	w.calls[id] = c
	p.mu.Unlock()
	if fresh {
		p.start(w)
	}
	return w, id, c, nil
}

// send writes one request to the worker. Writes are serialised; one that
// cannot be written within the item's deadline (the worker no longer
// reads its stdin) ends the worker and is a hang of the worker as a whole.
func (p *Pool) send(w *worker, rq request, timeout time.Duration) error {
	line, err := json.Marshal(rq)
	if err != nil {
		p.forget(w, rq.ID)
		return err
	}
	line = append(line, '\n')
	w.wmu.Lock()
	_ = w.inW.SetWriteDeadline(time.Now().Add(timeout))
	_, err = w.inW.Write(line)
	w.wmu.Unlock()
	if err == nil {
		return nil
	}
	p.forget(w, rq.ID)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		h := CaptureEvidence(w.child.PID())
		h.Phase = "worker"
		h.Note = "the worker did not read its requests: it was killed"
		p.retire(w)
		return &HungError{Timeout: timeout, Evidence: h}
	}
	p.retire(w)
	return err
}

// abandon forgets the caller of a call still running: its thread goes on
// in the worker, which counts it as stuck until it answers. It returns
// the call's thread, or answered when the answer is already waiting.
func (p *Pool) abandon(w *worker, id uint64) (tid int, answered bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := w.calls[id]
	if c == nil {
		return 0, true
	}
	c.abandoned = true
	w.stuck++
	if w.stuck >= workerStuck {
		w.retiring = true
	}
	p.maybeEnd(w)
	return c.tid, false
}

// forget removes a call that was never sent.
func (p *Pool) forget(w *worker, id uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(w.calls, id)
	p.maybeEnd(w)
}

// maybeEnd kills a retiring worker once only abandoned calls are left in
// it. p.mu is held.
func (p *Pool) maybeEnd(w *worker) {
	if w.retiring && len(w.calls) == w.stuck && !w.killed {
		p.drop(w)
		w.killed = true
		p.ending.Add(1)
		go func() { defer p.ending.Done(); w.kill() }()
	}
}

// retire takes a worker out of service and kills it.
func (p *Pool) retire(w *worker) {
	p.mu.Lock()
	p.drop(w)
	p.mu.Unlock()
	w.kill()
}

// drop takes w out of the workers given new calls. p.mu is held.
func (p *Pool) drop(w *worker) {
	w.retiring = true
	if w.gone {
		return
	}
	w.gone = true
	for i, x := range p.workers {
		if x == w {
			p.workers = append(p.workers[:i], p.workers[i+1:]...)
			break
		}
	}
}

// kill ends the worker's process group without waiting past
// workerReapGrace for threads stuck in the kernel, and closes its pipes,
// which ends its reader.
func (w *worker) kill() {
	w.end.Do(func() {
		<-w.ready
		if w.child != nil {
			w.child.KillWithin(false, workerReapGrace)
		}
		if w.inW != nil {
			// Pipes to a process that is gone: nothing to report.
			_ = w.inW.Close()
			_ = w.outR.Close()
		}
	})
}

// start launches the worker's process and its reader, then closes ready.
func (p *Pool) start(w *worker) {
	defer close(w.ready)
	c, inW, outR, err := p.spawn()
	if err != nil {
		w.err = err
		p.mu.Lock()
		p.drop(w)
		p.mu.Unlock()
		return
	}
	w.child, w.inW, w.outR = c, inW, outR
	go p.route(w)
	go w.watch()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		// Close ran while it started: it did not see this one.
		p.ending.Add(1)
		go func() { defer p.ending.Done(); w.kill() }()
	}
}

func (p *Pool) spawn() (*Child, *os.File, *os.File, error) {
	// Real pipes handed to the child as its fds 0 and 1: no copying
	// goroutines that Wait would have to wait for when a worker is killed.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating a pipe for a worker: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, fmt.Errorf("creating a pipe for a worker: %w", err)
	}
	// A worker left stuck in the kernel must not hold our stderr open
	// either: it gets a pipe of its own, copied on.
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, nil, nil, fmt.Errorf("creating a pipe for a worker: %w", err)
	}
	env := workerEnv()
	if p.boundary != nil {
		env = append(env, p.boundary.Env())
	}
	c, err := Start(Spec{Args: []string{ModeWorker}, Env: env, Stdin: inR, Stdout: outW, Stderr: errW})
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, nil, nil, err
	}
	go func() {
		_, _ = io.Copy(p.stderr, errR)
		errR.Close()
	}()
	go func() {
		// A worker reaped (not one left stuck): end its reader.
		<-c.Done()
		outR.Close()
	}()
	return c, inW, outR, nil
}

// route is the only reader of a worker's answers: it hands each to the
// call of its id, and when the worker ends, tells every call still
// waiting.
func (p *Pool) route(w *worker) {
	defer close(w.routed)
	br := bufio.NewReaderSize(w.outR, 64<<10)
	var err error
	for {
		var line []byte
		line, err = br.ReadBytes('\n')
		if err != nil && w.died.Load() {
			err = errors.New("the worker process died (killed, or crashed); a thread of it stuck in the kernel keeps it from being reaped")
			break
		}
		if err != nil {
			err = fmt.Errorf("worker exited: %w", err)
			break
		}
		var r response
		if jerr := json.Unmarshal(line, &r); jerr != nil {
			err = fmt.Errorf("worker sent a bad answer: %w", jerr)
			break
		}
		p.mu.Lock()
		c := w.calls[r.ID]
		switch {
		case c == nil:
			// Not ours (an id the worker could not read): ignored.
		case r.Start:
			c.tid = r.TID
		default:
			delete(w.calls, r.ID)
			if c.abandoned {
				w.stuck--
			} else {
				c.ch <- reply{r: r}
			}
			p.maybeEnd(w)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.drop(w)
	for id, c := range w.calls {
		if !c.abandoned {
			c.ch <- reply{err: err}
		}
		delete(w.calls, id)
	}
	w.stuck = 0
	p.mu.Unlock()
	w.kill()
}

// workerWatchEvery is how often watch looks at a worker's main thread.
const workerWatchEvery = 200 * time.Millisecond

// watch ends the reader of a worker whose process died but cannot be
// reaped: a thread stuck uninterruptibly in the kernel (a FUSE request its
// daemon has read) outlives an exit, even SIGKILL from the OOM killer, and
// keeps the process's pipes open, so no end of file says it is gone.
// Without this, items in flight would wait out their deadline to be
// reported as hangs, and new ones would be sent to the dead worker. The
// main thread of a Go program exits only with the whole process: once it
// is a zombie, the worker is dead.
func (w *worker) watch() {
	t := time.NewTicker(workerWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-w.routed:
			return
		case <-w.child.Done():
			return
		case <-t.C:
		}
		select {
		case <-w.child.Done():
			return // reaped: its pid may be another process's now
		default:
		}
		if mainThreadExited(w.child.PID()) {
			w.died.Store(true)
			_ = w.outR.Close() // ends route, which tells every caller
			return
		}
	}
}

// mainThreadExited reports whether the main thread of our child pid is a
// zombie (or gone). Its stat takes no lock of the process's memory.
func mainThreadExited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	st := taskState(string(b))
	return st == "Z" || st == "X"
}

// workerReapGrace is how long a killed worker gets to be reaped. A worker
// stuck uninterruptibly (a FUSE request the daemon already read) cannot die
// until the kernel lets it; waiting the full ReapGrace would hold up Close.
const workerReapGrace = 100 * time.Millisecond

// Close kills every worker. Items still running are abandoned: their
// callers get an error.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	ws := p.workers
	p.workers = nil
	for _, w := range ws {
		// killed: a caller abandoning an item later must not start a
		// kill of its own (and add to p.ending while Close waits on it).
		w.gone, w.retiring, w.killed = true, true, true
	}
	p.mu.Unlock()
	for _, w := range ws {
		p.ending.Add(1)
		go func() { defer p.ending.Done(); w.kill() }()
	}
	p.ending.Wait()
}
