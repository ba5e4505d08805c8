package isolate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// OpFunc is a per-item operation run inside a worker process. It receives
// the JSON request and returns a JSON-encodable response.
type OpFunc func(req json.RawMessage) (any, error)

var (
	opsMu sync.RWMutex
	ops   = map[string]OpFunc{}
)

// Typed adapts an operation on a decoded request of type Req to an OpFunc,
// so that each operation does not repeat the decoding. Strings arrive byte
// for byte as the caller sent them, invalid UTF-8 included (see wire.go);
// an OpFunc that decodes its request itself should use UnmarshalWire.
func Typed[Req any](fn func(Req) (any, error)) OpFunc {
	return func(raw json.RawMessage) (any, error) {
		var rq Req
		if err := UnmarshalWire(raw, &rq); err != nil {
			return nil, fmt.Errorf("decoding the request: %w", err)
		}
		return fn(rq)
	}
}

// RegisterOp makes an operation available to workers. Call it from init():
// workers are this same binary, so every registered op exists there too.
func RegisterOp(name string, fn OpFunc) {
	opsMu.Lock()
	defer opsMu.Unlock()
	if _, dup := ops[name]; dup {
		panic("isolate: op registered twice: " + name)
	}
	ops[name] = fn
}

type request struct {
	ID  uint64          `json:"id"`
	Op  string          `json:"op"`
	Req json.RawMessage `json:"req"`
}

type response struct {
	ID    uint64          `json:"id"`
	Resp  json.RawMessage `json:"resp,omitempty"`
	Err   string          `json:"err,omitempty"`
	Errno int             `json:"errno,omitempty"`
}

// OpError is an operation that ran and failed (as opposed to one that hung).
type OpError struct {
	Op    string
	Msg   string
	Errno syscall.Errno
}

func (e *OpError) Error() string { return e.Msg }

// Unwrap exposes the errno so that errors.Is(err, syscall.ENOTCONN) works.
func (e *OpError) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return nil
}

// HungError is an operation that did not answer within its deadline. The
// worker running it was killed; Evidence says where it was blocked.
type HungError struct {
	Op       string
	Timeout  time.Duration
	Evidence *layout.HangEvidence
}

func (e *HungError) Error() string {
	return fmt.Sprintf("%s did not answer within %s (%s)", e.Op, e.Timeout, e.Evidence.String())
}

// Unwrap makes errors.Is(err, ErrTimeout) true.
func (e *HungError) Unwrap() error { return ErrTimeout }

// Pool runs per-item operations in long-lived worker processes. A worker
// serves items one at a time; when an item misses its deadline, that worker
// is killed (and its evidence kept) and a fresh one serves the next item. So
// one hung mount costs one item's deadline and one process, not the run.
type Pool struct {
	timeout time.Duration
	sem     chan struct{}
	mu      sync.Mutex
	idle    []*worker
	all     map[*worker]struct{}
	nextID  uint64
	closed  bool
	stderr  io.Writer
}

// NewPool returns a pool of at most size concurrent workers, each item
// bounded by timeout.
func NewPool(size int, timeout time.Duration) *Pool {
	if size < 1 {
		size = 1
	}
	return &Pool{timeout: timeout, sem: make(chan struct{}, size), all: map[*worker]struct{}{}, stderr: os.Stderr}
}

// Timeout is the per-item deadline.
func (p *Pool) Timeout() time.Duration { return p.timeout }

type worker struct {
	child *Child
	in    *json.Encoder
	inW   io.WriteCloser
	outR  io.Closer
	out   *bufio.Reader
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
	w, err := p.get()
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	p.mu.Unlock()

	type answer struct {
		r   response
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		if err := w.in.Encode(request{ID: id, Op: op, Req: raw}); err != nil {
			ch <- answer{err: fmt.Errorf("sending %s to a worker: %w", op, err)}
			return
		}
		line, err := w.out.ReadBytes('\n')
		if err != nil {
			ch <- answer{err: fmt.Errorf("worker for %s exited: %w", op, err)}
			return
		}
		var r response
		if err := json.Unmarshal(line, &r); err != nil {
			ch <- answer{err: fmt.Errorf("worker for %s sent a bad answer: %w", op, err)}
			return
		}
		ch <- answer{r: r}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-ch:
		if a.err != nil {
			p.discard(w, false)
			return a.err
		}
		p.put(w)
		if a.r.Err != "" {
			return &OpError{Op: op, Msg: unwireString(a.r.Err), Errno: syscall.Errno(a.r.Errno)}
		}
		if resp != nil && len(a.r.Resp) > 0 {
			if err := UnmarshalWire(a.r.Resp, resp); err != nil {
				return fmt.Errorf("decoding %s answer: %w", op, err)
			}
		}
		return nil
	case <-timer.C:
		h := p.discard(w, true)
		return &HungError{Op: op, Timeout: timeout, Evidence: h}
	case <-ctx.Done():
		// The caller gave up (its own deadline, or an interrupted run):
		// the worker may be mid-item, so it goes, but the item did not
		// hang and is not recorded as if it had.
		p.discard(w, false)
		return fmt.Errorf("%s abandoned: %w", op, ctx.Err())
	}
}

func (p *Pool) get() (*worker, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("worker pool is closed")
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	// Real pipes handed to the child as its fds 0 and 1: no copying
	// goroutines that Wait would have to wait for when a worker is killed.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating a pipe for a worker: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("creating a pipe for a worker: %w", err)
	}
	// A worker left stuck in the kernel must not hold our stderr open
	// either: it gets a pipe of its own, copied on.
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("creating a pipe for a worker: %w", err)
	}
	c, err := Start(Spec{Args: []string{ModeWorker}, Env: workerEnv(), Stdin: inR, Stdout: outW, Stderr: errW})
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	go func() {
		_, _ = io.Copy(p.stderr, errR)
		errR.Close()
	}()
	go func() {
		<-c.Done()
		outR.Close()
	}()
	w := &worker{child: c, in: json.NewEncoder(inW), inW: inW, outR: outR, out: bufio.NewReaderSize(outR, 64<<10)}
	p.mu.Lock()
	p.all[w] = struct{}{}
	p.mu.Unlock()
	return w, nil
}

func (p *Pool) put(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		go p.stop(w)
		return
	}
	p.idle = append(p.idle, w)
}

// workerReapGrace is how long a killed worker gets to be reaped. A worker
// stuck uninterruptibly (a FUSE request the daemon already read) cannot die
// until the kernel lets it; waiting the full ReapGrace would hold the
// pool's slot, so hung items would cost their deadline plus that.
const workerReapGrace = 100 * time.Millisecond

func (p *Pool) discard(w *worker, evidence bool) *layout.HangEvidence {
	p.mu.Lock()
	delete(p.all, w)
	p.mu.Unlock()
	h := w.child.KillWithin(evidence, workerReapGrace)
	// Unblock the goroutine reading its answer even if the worker could
	// not be reaped.
	w.inW.Close()
	w.outR.Close()
	if h != nil {
		h.Phase = "worker"
	}
	return h
}

func (p *Pool) stop(w *worker) {
	// Closing stdin asks the worker to exit; kill it if it does not.
	w.inW.Close()
	select {
	case <-w.child.Done():
	case <-time.After(time.Second):
		w.child.Kill(false)
	}
}

// Close stops every worker. Items still running are abandoned.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	ws := make([]*worker, 0, len(p.all))
	for w := range p.all {
		ws = append(ws, w)
	}
	p.all = map[*worker]struct{}{}
	p.idle = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(w) }()
	}
	wg.Wait()
}

// WorkerMain serves requests on stdin until it is closed. It is the body of
// the hidden worker mode.
func WorkerMain() int {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			return 0
		}
		var rq request
		var rs response
		if jerr := json.Unmarshal(line, &rq); jerr != nil {
			rs.Err = "bad request: " + jerr.Error()
		} else {
			rs.ID = rq.ID
			rs.Resp, rs.Err, rs.Errno = serve(rq)
		}
		if err := enc.Encode(rs); err != nil {
			return 1
		}
		if err := out.Flush(); err != nil {
			return 1
		}
	}
}

func serve(rq request) (json.RawMessage, string, int) {
	opsMu.RLock()
	fn := ops[rq.Op]
	opsMu.RUnlock()
	if fn == nil {
		return nil, "unknown operation " + rq.Op, 0
	}
	var (
		v   any
		err error
	)
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("operation %s panicked: %v", rq.Op, r)
			}
		}()
		v, err = fn(rq.Req)
	}()
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return nil, wireString(err.Error()), int(errno)
		}
		return nil, wireString(err.Error()), 0
	}
	raw, merr := MarshalWire(v)
	if merr != nil {
		return nil, "encoding answer: " + merr.Error(), 0
	}
	return raw, "", 0
}

// IsTimeout reports whether err is an operation that missed its deadline.
func IsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }
