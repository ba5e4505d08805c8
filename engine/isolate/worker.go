package isolate

// The worker's side of a Pool: the registry of operations, the wire
// records, and the loop a worker process runs (WorkerMain).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// OpFunc is a per-item operation run inside a worker process. It receives
// the JSON request and returns a JSON-encodable response. It runs on an OS
// thread of its own (locked for its duration), beside the worker's other
// items.
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

// response is an answer, or with Start the announcement that the request
// runs on thread TID.
type response struct {
	ID    uint64          `json:"id"`
	Start bool            `json:"start,omitempty"`
	TID   int             `json:"tid,omitempty"`
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
// thread of the worker that serves it is left where it is blocked (the
// worker goes on serving other items); Evidence says where that is.
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

// WorkerMain serves requests on stdin until it is closed. It is the body of
// the hidden worker mode. Each request runs in a goroutine locked to an OS
// thread of its own, announced before the operation starts (so that the
// parent reads only that thread's state if it hangs); answers go out as
// they come, tagged with the request's id.
func WorkerMain() int {
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	out := make(chan response, 64)
	go func() {
		bw := bufio.NewWriterSize(os.Stdout, 64<<10)
		enc := json.NewEncoder(bw)
		for rs := range out {
			if err := enc.Encode(rs); err != nil {
				os.Exit(1)
			}
			if len(out) == 0 {
				if err := bw.Flush(); err != nil {
					os.Exit(1)
				}
			}
		}
	}()
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			// The pool closed our stdin: threads still stuck in the
			// kernel are its to account for, not ours to wait for.
			return 0
		}
		var rq request
		if jerr := json.Unmarshal(line, &rq); jerr != nil {
			out <- response{ID: rq.ID, Err: "bad request: " + jerr.Error()}
			continue
		}
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			out <- response{ID: rq.ID, Start: true, TID: unix.Gettid()}
			rs := response{ID: rq.ID}
			rs.Resp, rs.Err, rs.Errno = serve(rq)
			out <- rs
		}()
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
