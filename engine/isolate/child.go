package isolate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// ReapGrace is how long a killed child is given to be reaped. A task in
// uninterruptible sleep cannot die until the kernel lets it; past this the
// child is recorded as unreaped and left behind.
const ReapGrace = 2 * time.Second

// Spec describes a child process.
type Spec struct {
	// Path is the program; empty means this binary (with Args after the
	// hidden mode argument).
	Path string
	Args []string
	Env  []string
	Dir  string
	// Stdin, Stdout and Stderr are connected as by os/exec: a non-*os.File
	// writer is fed by a goroutine.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Events, when true, gives the child a pipe on fd 3 for structured
	// messages, readable from Child.Events.
	Events bool

	// newPIDNS starts the child as pid 1 of a new PID namespace.
	newPIDNS bool
}

// Child is a running child process in its own process group.
type Child struct {
	cmd    *exec.Cmd
	Events io.ReadCloser
	done   chan struct{}
	err    error
	start  time.Time
}

// Start launches a child in its own process group. The child is killed by
// the kernel if this process dies (PR_SET_PDEATHSIG), so a crash of the
// supervisor does not leave collectors running.
func Start(spec Spec) (*Child, error) {
	path := spec.Path
	if path == "" {
		p, err := Self()
		if err != nil {
			return nil, fmt.Errorf("finding the nodesnap binary to re-run: %w", err)
		}
		path = p
	}
	cmd := exec.Command(path, spec.Args...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Dir = spec.Dir
	cmd.Stdin = spec.Stdin
	cmd.Stdout = spec.Stdout
	cmd.Stderr = spec.Stderr
	// Do not let a grandchild that inherited our pipes keep Wait from
	// returning: once the child is gone, give the copiers a moment and close.
	cmd.WaitDelay = 500 * time.Millisecond
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.newPIDNS {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	c := &Child{cmd: cmd, done: make(chan struct{})}
	var evW *os.File
	if spec.Events {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("creating a pipe for a child: %w", err)
		}
		cmd.ExtraFiles = []*os.File{w}
		c.Events = r
		evW = w
	}
	c.start = time.Now()
	if err := cmd.Start(); err != nil {
		if evW != nil {
			evW.Close()
			c.Events.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	if evW != nil {
		// Our copy of the write end must go, or the reader never sees EOF.
		evW.Close()
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// PID of the child.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Done is closed when the child has been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Err is the result of Wait; valid after Done is closed.
func (c *Child) Err() error { return c.err }

// ExitCode is the child's exit status, -1 if killed by a signal or not
// reaped.
func (c *Child) ExitCode() int {
	select {
	case <-c.done:
	default:
		return -1
	}
	if c.cmd.ProcessState == nil {
		return -1
	}
	return c.cmd.ProcessState.ExitCode()
}

// MaxRSSKiB is the peak resident memory of the child (and of the largest
// of its own reaped children), once it has been reaped; 0 before. The
// kernel carries ru_maxrss across execve from the image that forked, so
// this is at least the parent's size at the time: children report their
// own peak (OwnPeakRSSKiB) instead, and this is the fallback.
func (c *Child) MaxRSSKiB() int64 {
	select {
	case <-c.done:
	default:
		return 0
	}
	if c.cmd.ProcessState == nil {
		return 0
	}
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}

// Signaled returns the signal that ended the child, if any.
func (c *Child) Signaled() (syscall.Signal, bool) {
	select {
	case <-c.done:
	default:
		return 0, false
	}
	if c.cmd.ProcessState == nil {
		return 0, false
	}
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}

// Kill captures hang evidence (when evidence is true), SIGKILLs the child's
// whole process group, and waits at most ReapGrace for it to be reaped.
func (c *Child) Kill(evidence bool) *layout.HangEvidence {
	return c.KillWithin(evidence, ReapGrace)
}

// KillWithin is Kill waiting at most grace for the reap.
func (c *Child) KillWithin(evidence bool, grace time.Duration) *layout.HangEvidence {
	var h *layout.HangEvidence
	if evidence {
		h = CaptureEvidence(c.PID())
	}
	// The negative pid names the process group: helpers the child started
	// in its group die with it.
	_ = syscall.Kill(-c.PID(), syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(grace):
		if h == nil {
			h = &layout.HangEvidence{PID: c.PID()}
		}
		h.Unreaped = true
		h.Note = "the child did not die within " + grace.String() + " of SIGKILL (uninterruptible sleep); it was left behind"
	}
	return h
}

// Signal sends sig to the child's process group.
func (c *Child) Signal(sig syscall.Signal) {
	_ = syscall.Kill(-c.PID(), sig)
}

// Result of an external command run by Run.
type Result struct {
	ExitCode int                  `json:"exit_code"`
	TimedOut bool                 `json:"timed_out,omitempty"`
	Duration time.Duration        `json:"duration_ns"`
	Evidence *layout.HangEvidence `json:"hang_evidence,omitempty"`
}

// ErrTimeout is wrapped by errors of work that missed its deadline.
var ErrTimeout = errors.New("deadline exceeded")

// ErrNotFound is wrapped when an external program is not installed.
var ErrNotFound = errors.New("program not found")

// Run runs an external program under a deadline, in its own process group.
// Output goes to spec.Stdout/Stderr (callers pass redacting, capped
// writers). On timeout the group is killed, evidence captured, and the
// returned error wraps ErrTimeout.
func Run(ctx context.Context, timeout time.Duration, spec Spec) (Result, error) {
	if spec.Path == "" {
		return Result{}, errors.New("no program given")
	}
	abs, err := exec.LookPath(spec.Path)
	if err != nil {
		return Result{ExitCode: -1}, fmt.Errorf("%s: %w", spec.Path, ErrNotFound)
	}
	c, err := startReaped(spec, abs)
	if err != nil {
		return Result{ExitCode: -1}, err
	}
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-c.done:
		r := Result{ExitCode: c.ExitCode(), Duration: time.Since(c.start)}
		if c.err != nil && r.ExitCode == -1 {
			return r, fmt.Errorf("%s: %w", spec.Path, c.err)
		}
		return r, nil
	case <-timer:
	case <-ctx.Done():
	}
	h := c.Kill(true)
	r := Result{ExitCode: -1, TimedOut: true, Duration: time.Since(c.start), Evidence: h}
	return r, fmt.Errorf("%s did not finish within %s (%s): %w", spec.Path, timeout, h.String(), ErrTimeout)
}

// startReaped starts the program at abs (spec.Path looked up) under a
// reaper in a new PID namespace (see ModeReaper), or, where that cannot
// be done, directly.
func startReaped(spec Spec, abs string) (*Child, error) {
	if !pidnsUnavailable.Load() {
		r := spec
		r.Path = ""
		r.Args = append([]string{ModeReaper, abs, spec.Path}, spec.Args...)
		r.newPIDNS = true
		c, err := Start(r)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EUSERS) {
			return nil, err
		}
		pidnsUnavailable.Store(true)
	}
	return Start(spec)
}

// OwnPeakRSSKiB is this process's own peak resident set size (VmHWM), which
// unlike getrusage's ru_maxrss is not inherited across execve from the
// process that started us. 0 if unknown.
func OwnPeakRSSKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var n int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &n)
			return n
		}
	}
	return 0
}

// HeadBuffer keeps the first Max bytes written to it and drops the rest,
// so a child's chatty stderr or stdout costs bounded memory; what comes
// first (a panic's message, an error's first line) is what is kept. Writes
// always succeed, so the writer is never broken mid-stream.
type HeadBuffer struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

func (h *HeadBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.Max - len(h.buf); room > 0 {
		h.buf = append(h.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// String returns what was kept.
func (h *HeadBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.buf)
}

// Bytes returns a copy of what was kept.
func (h *HeadBuffer) Bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.buf...)
}
