// Package supervisor runs a collection: it starts each collector in its own
// child process under a deadline, keeps the run's global deadline, turns
// what the children report into the manifest, and writes the bundle
// atomically. It never touches host paths itself: the only files it opens
// are in the output directory the user chose and the /proc entries of its
// own children.
package supervisor

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/isolate"
	"github.com/nodesnap/nodesnap/redact"
)

// Options of one collection run.
type Options struct {
	// OutputDir receives the bundle under its default name, unless
	// OutputFile names it.
	OutputDir  string
	OutputFile string
	// Format is bundle.Gzip or bundle.Zstd.
	Format string
	// Timeout is the global deadline: the bundle is written within it.
	Timeout time.Duration
	// CollectorTimeout, when set, replaces every collector's default.
	CollectorTimeout time.Duration
	Only, Skip       []string
	Concurrency      int
	MaxBundleBytes   int64
	Common           collectors.Common
	CommandLine      []string
	Version          string
	// Progress, when set, is told as collectors start and finish.
	Progress func(Progress)
	// Redaction, when set, adds custom rules and obfuscation to the
	// built-in redaction. It holds the run's obfuscation key: it reaches
	// the children on their stdin, never a file.
	Redaction *redact.Settings
	// HandleSignals makes the run catch SIGINT and SIGTERM: the first
	// stops collection and finishes the bundle with what was gathered,
	// the second abandons it.
	HandleSignals bool
	// Output, when set, is the output directory already opened (and
	// locked) by the caller; otherwise Run opens it, without a lock.
	Output *Output
	// Trigger, when set, is recorded in the manifest: the signal of
	// `nodesnap watch` that started this collection.
	Trigger *bundle.Trigger
}

// Progress is one step of the run, for a progress display.
type Progress struct {
	Collector string
	// Phase is "start", "done", or "writing" (Collector empty).
	Phase    string
	Status   string
	Elapsed  time.Duration
	Error    string
	Deadline time.Time
}

// Result of a run that wrote a bundle.
type Result struct {
	Bundle   bundle.Written
	Manifest *bundle.Manifest
	// Partial is true when any collector ended timeout, error or partial,
	// or the run was interrupted.
	Partial bool
	// MappingFile is the obfuscation mapping written beside the bundle
	// (mode 0600), when obfuscation was on.
	MappingFile string
}

// ErrAborted is returned when a second signal abandoned the run.
var ErrAborted = errors.New("collection abandoned by a second interrupt; no bundle was written")

// Defaults.
const (
	DefaultTimeout        = 2 * time.Minute
	DefaultConcurrency    = 4
	DefaultMaxFileBytes   = 64 << 20
	DefaultMaxCollector   = 256 << 20
	DefaultMaxBundleBytes = 1 << 30
	DefaultProbeTimeout   = 3 * time.Second
	DefaultWorkers        = 8
	DefaultOutputDir      = "/var/tmp"
)

type run struct {
	opts     Options
	out      *Output
	staging  staging
	start    time.Time
	collectD time.Time // collectors must end by then
	abortCtx context.Context
	stopCtx  context.Context

	mu        sync.Mutex
	hung      []bundle.HungItem
	hungSet   map[string]bool
	facts     map[string]string
	results   map[string]*collectorRun
	children  map[*isolate.Child]struct{}
	interrupt *bundle.Interrupt
	mappings  map[string]string
	red       *redact.Redactor
}

type collectorRun struct {
	spec    *collectors.Spec
	res     bundle.CollectorResult
	records map[string]*collectors.FileRecord
	done    chan struct{}
	// cut is set when the run's global deadline (--timeout), not the
	// collector's own, ended it or kept it from starting: evidence lost
	// that the bundle must call partial.
	cut bool
}

// Run collects and writes one bundle.
func Run(parent context.Context, opts Options) (*Result, error) {
	if err := fillDefaults(&opts); err != nil {
		return nil, err
	}
	specs, err := Select(opts.Only, opts.Skip)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		return nil, &UsageError{Msg: "--timeout must be positive"}
	}
	outDir := opts.OutputDir
	if opts.OutputFile != "" {
		outDir = filepath.Dir(opts.OutputFile)
	}
	out := opts.Output
	if out == nil {
		// Checked (and cleaned of what killed runs left) in a worker
		// under a deadline, like every touch of the output directory.
		var err error
		if out, err = OpenOutput(parent, OutputOptions{Dir: outDir}); err != nil {
			return nil, err
		}
		defer out.Close()
	}

	if opts.Common.Self == nil {
		// Who nodesnap itself is, so that no collector counts its own
		// processes, mount namespace or pod as evidence.
		opts.Common.Self = collectors.IdentifySelf()
	}
	r := &run{out: out, opts: opts, start: time.Now(), hungSet: map[string]bool{}, facts: map[string]string{},
		results: map[string]*collectorRun{}, children: map[*isolate.Child]struct{}{}, mappings: map[string]string{}}
	if err := r.setupRedaction(); err != nil {
		return nil, err
	}
	abortCtx, abort := context.WithCancel(parent)
	defer abort()
	stopCtx, stop := context.WithCancel(abortCtx)
	defer stop()
	r.abortCtx, r.stopCtx = abortCtx, stopCtx

	if opts.HandleSignals {
		sigs := make(chan os.Signal, 2)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sigs)
		go func() {
			n := 0
			for {
				select {
				case s := <-sigs:
					n++
					if n == 1 {
						r.mu.Lock()
						r.interrupt = &bundle.Interrupt{Signal: signalName(s), At: time.Now().UTC()}
						r.mu.Unlock()
						stop()
					} else {
						abort()
						return
					}
				case <-abortCtx.Done():
					return
				}
			}
		}()
	}

	names := make([]string, 0, len(specs))
	for _, s := range specs {
		names = append(names, s.Name)
	}
	r.staging, err = out.Staging(abortCtx, names)
	if err != nil {
		if abortCtx.Err() != nil {
			return nil, ErrAborted
		}
		return nil, err
	}
	defer r.cleanup()

	reserve := opts.Timeout / 10
	reserve = min(max(reserve, 2*time.Second), 15*time.Second)
	if reserve > opts.Timeout/2 {
		reserve = opts.Timeout / 2
	}
	r.collectD = r.start.Add(opts.Timeout - reserve)

	r.schedule(specs)

	if abortCtx.Err() != nil {
		r.killAll()
		return nil, ErrAborted
	}
	r.progress(Progress{Phase: "writing"})
	// Hashing and writing get until --timeout + OutputGrace: past it the
	// output filesystem is taken as hung, and the run ends without a
	// bundle rather than not at all.
	writeBy := r.start.Add(opts.Timeout + OutputGrace)
	h, err := out.Hash(abortCtx, max(time.Until(writeBy), time.Second), r.staging, names)
	if err != nil {
		if abortCtx.Err() != nil {
			return nil, ErrAborted
		}
		return nil, err
	}
	m := r.manifest(specs, h)
	w, err := out.Write(abortCtx, max(time.Until(writeBy), time.Second), opts.OutputFile,
		bundle.DefaultName(m.Host.Hostname, r.start, opts.Format), opts.Format, m, r.staging)
	if err != nil {
		if abortCtx.Err() != nil {
			return nil, ErrAborted
		}
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			// The worker said so in words; say it with the error too.
			err = fmt.Errorf("%w%s", bundle.ErrNoSpace, strings.TrimPrefix(err.Error(), bundle.ErrNoSpace.Error()))
		}
		return nil, err
	}
	res := &Result{Bundle: w, Manifest: m, Partial: m.Status != "complete"}
	if len(r.mappings) > 0 {
		for k, v := range r.red.Mappings() {
			r.mappings[k] = v
		}
		res.MappingFile, err = out.Mappings(abortCtx, w.Path, r.mappings)
		if err != nil {
			return res, fmt.Errorf("the bundle was written to %s, but the obfuscation mapping was not: %w", w.Path, err)
		}
	}
	return res, nil
}

// cleanup removes the staging directory, unless the output directory was
// found hung: then it is left, and named in the error the run returns.
func (r *run) cleanup() {
	if err := r.out.Hung(); err != nil {
		var he *OutputHungError
		if errors.As(err, &he) && he.Left == "" {
			he.Left = r.staging.Path
		}
		return
	}
	_ = r.out.Cleanup(context.Background(), r.staging)
}

func fillDefaults(o *Options) error {
	if o.OutputDir == "" {
		o.OutputDir = DefaultOutputDir
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxBundleBytes == 0 {
		o.MaxBundleBytes = DefaultMaxBundleBytes
	}
	if o.Format == "" {
		o.Format = bundle.Gzip
	}
	if _, err := bundle.Format(o.Format); err != nil {
		return &UsageError{Msg: err.Error()}
	}
	c := &o.Common
	if c.Root == "" {
		c.Root = "/"
	}
	if !filepath.IsAbs(c.Root) {
		return &UsageError{Msg: "--root must be an absolute path"}
	}
	if c.Proc == "" {
		c.Proc = filepath.Join(c.Root, "proc")
	}
	if c.Sys == "" {
		c.Sys = filepath.Join(c.Root, "sys")
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.MaxCollectorBytes == 0 {
		c.MaxCollectorBytes = DefaultMaxCollector
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Since == 0 {
		c.Since = 24 * time.Hour
	}
	return nil
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func uniquePath(p string) string {
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return p
	}
	ext := ""
	base := p
	for _, e := range []string{".tar.gz", ".tar.zst"} {
		if strings.HasSuffix(p, e) {
			ext, base = e, strings.TrimSuffix(p, e)
		}
	}
	for i := 2; ; i++ {
		q := fmt.Sprintf("%s-%d%s", base, i, ext)
		if _, err := os.Lstat(q); errors.Is(err, os.ErrNotExist) {
			return q
		}
	}
}

func signalName(s os.Signal) string {
	if ss, ok := s.(syscall.Signal); ok {
		switch ss {
		case syscall.SIGINT:
			return "SIGINT"
		case syscall.SIGTERM:
			return "SIGTERM"
		}
	}
	return s.String()
}

func (r *run) progress(p Progress) {
	if r.opts.Progress != nil {
		r.opts.Progress(p)
	}
}

// schedule runs the collectors, honouring After and the concurrency limit.
func (r *run) schedule(specs []*collectors.Spec) {
	selected := map[string]*collectorRun{}
	for _, s := range specs {
		cr := &collectorRun{spec: s, records: map[string]*collectors.FileRecord{}, done: make(chan struct{})}
		cr.res = bundle.CollectorResult{Name: s.Name, Status: bundle.StatusSkipped, Files: []string{}}
		selected[s.Name] = cr
	}
	r.results = selected
	sem := make(chan struct{}, r.opts.Concurrency)
	var wg sync.WaitGroup
	for _, s := range specs {
		cr := selected[s.Name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(cr.done)
			for _, dep := range s.After {
				if d := selected[dep]; d != nil {
					select {
					case <-d.done:
					case <-r.stopCtx.Done():
					}
				}
			}
			select {
			case sem <- struct{}{}:
			case <-r.stopCtx.Done():
			}
			if r.stopCtx.Err() != nil {
				cr.res.Status = bundle.StatusSkipped
				cr.res.Error = r.stopReason("before it could start")
				return
			}
			defer func() { <-sem }()
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
		r.progress(Progress{Collector: s.Name, Phase: "done", Status: cr.res.Status, Elapsed: time.Since(started), Error: firstLine(cr.res.Error)})
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
	stderr := &isolate.HeadBuffer{Max: 16 << 10}
	child, err := isolate.Start(isolate.Spec{Args: []string{isolate.ModeCollector, s.Name}, Stdin: bytes.NewReader(in), Stderr: stderr, Events: true})
	if err != nil {
		cr.res.Status, cr.res.Error = bundle.StatusError, err.Error()
		return
	}
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
			cr.res.Error = "collector process panicked: " + firstLine(cr.res.Stderr[strings.Index(cr.res.Stderr, "panic:"):])
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

// setupRedaction builds the run's redactor and the settings every child
// gets. Obfuscation needs a per-run key (made here unless given) and the
// node's own names, which uname tells without touching the host's files.
func (r *run) setupRedaction() error {
	if s := r.opts.Redaction; s != nil {
		if len(s.Options.Obfuscate) > 0 {
			if len(s.Options.Key) == 0 {
				k, err := redact.NewKey()
				if err != nil {
					return err
				}
				s.Options.Key = k
			}
			var uts unix.Utsname
			if unix.Uname(&uts) == nil {
				if h := unix.ByteSliceToString(uts.Nodename[:]); h != "" {
					s.Options.Hostnames = append(s.Options.Hostnames, h)
					if short, _, ok := strings.Cut(h, "."); ok {
						s.Options.Hostnames = append(s.Options.Hostnames, short)
					}
				}
			}
		}
		raw, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("encoding the redaction settings: %w", err)
		}
		r.opts.Common.Redaction = raw
	}
	red, err := collectors.NewRedactor(r.opts.Common.Redaction)
	if err != nil {
		return &UsageError{Msg: err.Error()}
	}
	r.red = red
	return nil
}

// redactString redacts text the supervisor itself records (a child's
// stderr), with the run's own rules.
func (r *run) redactString(s string) string {
	out, _ := r.red.String(s)
	return out
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

// manifest builds the manifest from the results and the staged files the
// output worker found and hashed. A file a collector reported written but
// that is not in staging any more (the output directory was removed during
// the run) is listed as omitted, and makes its collector and the bundle
// partial: a bundle never says complete while missing what it collected.
func (r *run) manifest(specs []*collectors.Spec, h hashResp) *bundle.Manifest {
	end := time.Now()
	m := &bundle.Manifest{
		SchemaVersion:   bundle.SchemaVersion,
		Tool:            bundle.Tool{Name: "nodesnap", Version: r.opts.Version, GoVersion: runtime.Version()},
		CommandLine:     r.opts.CommandLine,
		StartedAt:       r.start.UTC(),
		FinishedAt:      end.UTC(),
		DurationSeconds: end.Sub(r.start).Seconds(),
		Settings: bundle.Settings{
			Root: r.opts.Common.Root, TimeoutSeconds: r.opts.Timeout.Seconds(),
			ProbeTimeoutSeconds: r.opts.Common.ProbeTimeout.Seconds(),
			MaxFileBytes:        r.opts.Common.MaxFileBytes, MaxCollectorBytes: r.opts.Common.MaxCollectorBytes,
			MaxBundleBytes: r.opts.MaxBundleBytes, Concurrency: r.opts.Concurrency,
			SinceSeconds: r.opts.Common.Since.Seconds(), Compression: r.opts.Format,
		},
		Redaction:  bundle.RedactionSummary{Rules: map[string]int{}},
		Collectors: []bundle.CollectorResult{},
		Files:      []bundle.FileEntry{},
		HungMounts: []bundle.HungItem{},
		Omitted:    []bundle.Omitted{},
	}
	if m.CommandLine == nil {
		m.CommandLine = []string{}
	}
	for i, a := range m.CommandLine {
		m.CommandLine[i] = r.redactString(a)
	}
	if m.Tool.Version == "" {
		m.Tool.Version = "dev"
	}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		m.Host.Hostname = unix.ByteSliceToString(uts.Nodename[:])
		m.Host.Kernel = unix.ByteSliceToString(uts.Release[:])
	}
	r.mu.Lock()
	if h := r.facts["hostname"]; h != "" {
		m.Host.Hostname = h
	}
	if k := r.facts["kernel"]; k != "" {
		m.Host.Kernel = k
	}
	if s := r.opts.Redaction; s != nil {
		m.Redaction.Obfuscated = append([]string(nil), s.Options.Obfuscate...)
	}
	if h := m.Host.Hostname; h != "" {
		// With hostname obfuscation on, the manifest and the bundle's
		// name carry the token, like every file does.
		m.Host.Hostname, _ = r.red.String(h)
	}
	m.Host.BootID = r.facts["boot_id"]
	m.Host.MachineID = r.facts["machine_id"]
	m.Interrupted = r.interrupt
	if t := r.opts.Trigger; t != nil {
		// Evidence names mountpoints, pods and hosts: redacted (and
		// obfuscated) like the files that hold the same names.
		tr := *t
		tr.Summary = r.redactString(tr.Summary)
		tr.Evidence = make([]string, len(t.Evidence))
		for i, e := range t.Evidence {
			tr.Evidence[i] = r.redactString(e)
		}
		m.Trigger = &tr
	}
	m.Self = r.opts.Common.Self
	m.HungMounts = append(m.HungMounts, r.hung...)
	r.mu.Unlock()

	var total int64
	var capped []string
	var cut []string
	partial := m.Interrupted != nil
	for _, s := range specs {
		cr := r.results[s.Name]
		switch cr.res.Status {
		case bundle.StatusTimeout, bundle.StatusError, bundle.StatusPartial:
			partial = true
		}
		if cr.cut {
			partial = true
			cut = append(cut, s.Name)
		}
		cappedHere := 0
		found := map[string]bool{}
		for _, hf := range h.Files[s.Name] {
			rel, size, sum := hf.Rel, hf.Size, hf.SHA256
			found[rel] = true
			p := s.Name + "/" + rel
			if r.opts.MaxBundleBytes > 0 && total+size > r.opts.MaxBundleBytes {
				m.Omitted = append(m.Omitted, bundle.Omitted{Path: p, Reason: fmt.Sprintf("the bundle size cap (%d bytes) was reached", r.opts.MaxBundleBytes)})
				capped = append(capped, p)
				cappedHere++
				continue
			}
			total += size
			fe := bundle.FileEntry{Path: p, Collector: s.Name, Size: size, SHA256: sum, Kind: bundle.KindText}
			if rec := cr.records[rel]; rec != nil {
				if rec.Binary {
					fe.Kind, fe.BinaryReason = bundle.KindBinary, rec.BinaryReason
				}
				fe.Truncated = rec.Truncated
				if len(rec.Redactions) > 0 {
					fe.Redactions = rec.Redactions
				}
			} else {
				fe.Incomplete = true
			}
			for rule, n := range fe.Redactions {
				m.Redaction.Rules[rule] += n
				m.Redaction.Total += n
			}
			m.Files = append(m.Files, fe)
			cr.res.Files = append(cr.res.Files, p)
		}
		var vanished []string
		for rel, rec := range cr.records {
			switch {
			case rec.Omitted != "":
				m.Omitted = append(m.Omitted, bundle.Omitted{Path: s.Name + "/" + rel, Reason: rec.Omitted})
			case !found[rel]:
				vanished = append(vanished, s.Name+"/"+rel)
				m.Omitted = append(m.Omitted, bundle.Omitted{Path: s.Name + "/" + rel, Reason: "written by the collector, but gone from the staging directory when the bundle was written (the output directory was removed or changed during the run)"})
			}
		}
		if cappedHere > 0 {
			partial = true
			if cr.res.Status == bundle.StatusOK {
				cr.res.Status = bundle.StatusPartial
			}
			msg := fmt.Sprintf("%d file(s) it wrote were left out: the bundle size cap (--max-bundle-size %d bytes) was reached", cappedHere, r.opts.MaxBundleBytes)
			if cr.res.Error == "" {
				cr.res.Error = msg
			} else {
				cr.res.Error += "; " + msg
			}
		}
		if len(vanished) > 0 {
			sort.Strings(vanished)
			partial = true
			if cr.res.Status == bundle.StatusOK {
				cr.res.Status = bundle.StatusPartial
			}
			msg := fmt.Sprintf("%d file(s) it wrote vanished from the staging directory before the bundle was written, first %s", len(vanished), vanished[0])
			if cr.res.Error == "" {
				cr.res.Error = msg
			} else {
				cr.res.Error += "; " + msg
			}
		}
		m.Collectors = append(m.Collectors, cr.res)
	}
	sort.Slice(m.Omitted, func(i, j int) bool { return m.Omitted[i].Path < m.Omitted[j].Path })
	res := &bundle.Resources{}
	res.SupervisorMaxRSSKiB = isolate.OwnPeakRSSKiB()
	for _, c := range m.Collectors {
		res.LargestChildMaxRSSKiB = max(res.LargestChildMaxRSSKiB, c.MaxRSSKiB)
	}
	m.Resources = res
	if len(capped) > 0 {
		sort.Strings(capped)
		m.Warnings = append(m.Warnings, fmt.Sprintf("the bundle size cap (--max-bundle-size %d bytes) was reached: %d file(s) were left out, first %s (the manifest's omitted list names them all)", r.opts.MaxBundleBytes, len(capped), capped[0]))
	}
	if len(cut) > 0 {
		m.Warnings = append(m.Warnings, fmt.Sprintf("cut by --timeout %s: %s did not get the time they needed; collect again with a longer --timeout", r.opts.Timeout, strings.Join(cut, ", ")))
	}
	if uid := os.Geteuid(); uid != 0 {
		m.Warnings = append(m.Warnings, fmt.Sprintf("nodesnap ran as uid %d, not root: other users' process files, kernel stacks, mount namespaces and root-only logs could not be read, so evidence is missing", uid))
		partial = true
	}
	if h.Replaced {
		m.Warnings = append(m.Warnings, "the staging directory "+r.staging.Path+" was removed or replaced during the run (was the output directory deleted?): files written before that are missing, and listed as omitted")
		partial = true
	}
	m.Status = "complete"
	if partial {
		m.Status = "partial"
	}
	return m
}

// cutShort tells whether a collector whose deadline the run's global
// deadline clamped was cut by it: it was given less than a second, or it
// ended at (or near) that deadline.
func cutShort(started, deadline, ended time.Time) bool {
	return deadline.Sub(started) < time.Second || !ended.Before(deadline.Add(-200*time.Millisecond))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
