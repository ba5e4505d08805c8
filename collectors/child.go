package collectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/inroot"
	"github.com/nodesnap/nodesnap/redact"
)

// NewRedactor builds the run's redactor from the JSON redaction settings
// the supervisor passes down. It is a variable so the redaction package's
// configuration can be wired in one place.
var NewRedactor = func(raw json.RawMessage) (*redact.Redactor, error) {
	if len(raw) == 0 {
		return redact.Default(), nil
	}
	var s redact.Settings
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("reading the redaction settings: %w", err)
	}
	return s.Build()
}

type eventSink struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (s *eventSink) send(ev Event) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A write error means the supervisor is gone; nothing useful to do.
	_ = s.enc.Encode(ev)
}

// ChildMain is the body of the hidden collector mode: read the ChildConfig
// from stdin, run the collector, report on fd 3. The exit status is 0 when
// the collector returned (whatever its status), 1 when it could not start,
// and 2 when it panicked.
func ChildMain() int {
	// Workers and external programs must not inherit the event pipe: one
	// stuck in the kernel would keep it open after this child is gone.
	unix.CloseOnExec(3)
	evf := os.NewFile(3, "events")
	if evf == nil {
		fmt.Fprintln(os.Stderr, "nodesnap: internal collector mode needs its event pipe")
		return 1
	}
	sink := &eventSink{enc: json.NewEncoder(evf)}
	// The built-in redactor is built while the configuration is awaited;
	// a run with its own redaction settings builds another.
	builtin := make(chan *redact.Redactor, 1)
	go func() { builtin <- redact.Default() }()
	// The prelude comes first, at once: the first worker starts while
	// the supervisor prepares the rest (the output directory, its lock).
	dec := json.NewDecoder(io.LimitReader(os.Stdin, 16<<20))
	var pre ChildPrelude
	if err := dec.Decode(&pre); err != nil || !pre.Prelude {
		sink.send(Event{Type: EventDone, Status: StatusError, Error: "reading collector configuration: no prelude"})
		return 1
	}
	spec, ok := Lookup(pre.Collector)
	if !ok {
		sink.send(Event{Type: EventDone, Status: StatusError, Error: "unknown collector " + pre.Collector})
		return 1
	}
	var pool *isolate.Pool
	if spec.PrestartWorker {
		pool = isolate.NewPool(pre.Workers, pre.ProbeTimeout).Confine(childBoundary(pre.Root, pre.Proc, pre.Sys))
		pool.Prestart()
	}
	var cfg ChildConfig
	if err := dec.Decode(&cfg); err != nil {
		if pool != nil {
			pool.Close()
		}
		sink.send(Event{Type: EventDone, Status: StatusError, Error: "reading collector configuration: " + err.Error()})
		return 1
	}
	if cfg.Collector != pre.Collector || cfg.Common.Root != pre.Root || cfg.Common.Proc != pre.Proc || cfg.Common.Sys != pre.Sys ||
		cfg.Common.Workers != pre.Workers || cfg.Common.ProbeTimeout != pre.ProbeTimeout {
		if pool != nil {
			pool.Close()
		}
		sink.send(Event{Type: EventDone, Status: StatusError, Error: "reading collector configuration: it disagrees with its prelude"})
		return 1
	}
	// The host's /proc and /sys are under the root unless given, and every
	// worker resolves host paths inside that boundary: a worker started
	// ahead of its first item must know it as well as a later one.
	boundary := childBoundary(cfg.Common.Root, cfg.Common.Proc, cfg.Common.Sys)
	cfg.Common.Proc, cfg.Common.Sys = boundary.Proc, boundary.Sys
	var red *redact.Redactor
	var err error
	if len(cfg.Common.Redaction) == 0 {
		red = <-builtin
	} else {
		red, err = NewRedactor(cfg.Common.Redaction)
	}
	if err != nil && pool != nil {
		pool.Close()
	}
	if err != nil {
		sink.send(Event{Type: EventDone, Status: StatusError, Error: "setting up redaction: " + err.Error()})
		return 1
	}
	if k := cfg.Common.SpreadKey; k != nil {
		red.RecordMasked(*k)
	}
	// The redaction settings (the obfuscation key among them) stay with
	// the redactor: a collector sees only Env.Redact.
	cfg.Common.Redaction = nil
	cfg.Common.SpreadKey = nil
	env := &Env{Common: cfg.Common, name: cfg.Collector, dir: cfg.Dir, options: cfg.Options,
		red: red, events: sink, openFiles: map[string]bool{}, knowsHung: spec.knowsHung(), workers: pool}
	// This process's own reads of host paths resolve inside the roots too.
	if err := os.Setenv(inroot.EnvVar, strings.TrimPrefix(env.boundary().Env(), inroot.EnvVar+"=")); err != nil {
		sink.send(Event{Type: EventDone, Status: StatusError, Error: "setting the root boundary: " + err.Error()})
		return 1
	}
	ctx := context.Background()
	if !cfg.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, cfg.Deadline)
		defer cancel()
	}
	status, msg, code := run(ctx, spec, env)
	if env.workers != nil {
		env.workers.Close()
	}
	if msg != "" {
		msg, _ = red.String(msg)
	}
	// Obfuscation tokens this child made, for the mapping file the
	// supervisor writes beside (never inside) the bundle.
	if m := red.Mappings(); len(m) > 0 {
		sink.send(Event{Type: EventMappings, Mappings: m})
	}
	env.sendMasked()
	sink.send(Event{Type: EventDone, Status: status, Error: msg, PeakRSSKiB: isolate.OwnPeakRSSKiB()})
	return code
}

// childBoundary is the root boundary of a child's host paths: /proc and
// /sys under the root unless given.
func childBoundary(root, proc, sys string) inroot.Boundary {
	roots := hostfs.Roots{Root: root}
	if proc == "" {
		proc = roots.Seen("/proc")
	}
	if sys == "" {
		sys = roots.Seen("/sys")
	}
	return inroot.Boundary{Root: root, Proc: proc, Sys: sys}
}

func run(ctx context.Context, spec *Spec, env *Env) (status, msg string, code int) {
	defer func() {
		if r := recover(); r != nil {
			stack := string(debug.Stack())
			status, msg, code = StatusError, fmt.Sprintf("collector panicked: %v\n%s", r, trimStack(stack)), 2
		}
	}()
	err := spec.Run(ctx, env)
	switch {
	case err == nil && len(env.partial) == 0:
		return StatusOK, "", 0
	case err == nil:
		return StatusPartial, strings.Join(env.partial, "; "), 0
	case errors.Is(err, ErrUnsupported):
		return StatusUnsupported, err.Error(), 0
	case errors.Is(err, context.DeadlineExceeded):
		return StatusTimeout, err.Error(), 0
	default:
		return StatusError, err.Error(), 0
	}
}

// trimStack keeps the frames a maintainer needs from a panic's stack.
func trimStack(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 40 {
		lines = lines[:40]
	}
	return strings.Join(lines, "\n")
}
