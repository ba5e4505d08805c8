// Package supervisor runs a collection: it starts each collector in its own
// child process under a deadline, keeps the run's global deadline, turns
// what the children report into the manifest, and writes the bundle
// atomically. It never touches host paths itself: the only files it opens
// are in the output directory the user chose and the /proc entries of its
// own children.
package supervisor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/engine/outputdir"
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
	// CaseID and Label go into the bundle's name (naming.Name).
	CaseID, Label string
	// EncryptTo, when set, encrypts the bundle to these recipients
	// (outputdir.ParseRecipients).
	EncryptTo []string
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
	Output *outputdir.Output
	// Prestarted, when set, are the children Prestart started for this
	// run while the caller opened the output directory. Run discards
	// what it does not use.
	Prestarted *Prestarted
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
	Bundle   outputdir.Written
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
	out      *outputdir.Output
	staging  outputdir.StagingDir
	start    time.Time
	collectD time.Time // collectors must end by then
	abortCtx context.Context
	stopCtx  context.Context

	mu      sync.Mutex
	hung    []bundle.HungItem
	hungSet map[string]bool
	// stuck are filesystems and devices found stuck in the kernel (see
	// collectors.EventStuck), passed on to later collectors.
	stuck     []layout.KernelStuck
	facts     map[string]string
	results   map[string]*collectorRun
	children  map[*isolate.Child]struct{}
	interrupt *bundle.Interrupt
	mappings  map[string]string
	// masked are the keyed hashes of the values the collectors masked
	// (never the values), for the last pass (see redact.Spread).
	masked    map[redact.ValueHash]bool
	spreadKey redact.SpreadKey
	red       *redact.Redactor
	// pre are the children started before the output directory was
	// open, handed to their collectors as they start.
	pre *Prestarted
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
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	specs, err := Select(opts.Only, opts.Skip)
	if err != nil {
		return nil, err
	}
	// The first collectors' children start now, each with its first
	// worker, while the output directory is opened: the process starts
	// overlap it instead of following it.
	pre := opts.Prestarted
	if pre == nil {
		pre = prestartSpecs(specs, opts.Common, opts.Concurrency)
	}
	defer pre.Discard()
	outDir := opts.OutputDir
	if opts.OutputFile != "" {
		outDir = filepath.Dir(opts.OutputFile)
	}
	// Who nodesnap itself is, so that no collector counts its own
	// processes, mount namespace or pod as evidence. Found while the
	// output directory is opened: both may start a worker, and the two
	// process starts overlap.
	var self chan *bundle.Self
	if opts.Common.Self == nil {
		self = make(chan *bundle.Self, 1)
		go func() { self <- collectors.IdentifySelf() }()
	}
	out := opts.Output
	if out == nil {
		// Checked (and cleaned of what killed runs left) in a worker
		// under a deadline, like every touch of the output directory.
		var err error
		if out, err = outputdir.Open(parent, outputdir.Options{Dir: outDir, File: opts.OutputFile}); err != nil {
			return nil, err
		}
		defer out.Close()
	}

	if self != nil {
		opts.Common.Self = <-self
	}
	r := &run{out: out, opts: opts, start: time.Now(), hungSet: map[string]bool{}, facts: map[string]string{},
		results: map[string]*collectorRun{}, children: map[*isolate.Child]struct{}{}, mappings: map[string]string{}, masked: map[redact.ValueHash]bool{}, pre: pre}
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
	// Hashing and writing get until --timeout + outputdir.WriteGrace: past it the
	// output filesystem is taken as hung, and the run ends without a
	// bundle rather than not at all.
	writeBy := r.start.Add(opts.Timeout + outputdir.WriteGrace)
	h, err := out.Hash(abortCtx, max(time.Until(writeBy), time.Second), r.staging, names, r.spread())
	if err != nil {
		if abortCtx.Err() != nil {
			return nil, ErrAborted
		}
		return nil, err
	}
	m := r.manifest(specs, h)
	w, err := out.Write(abortCtx, max(time.Until(writeBy), time.Second), outputdir.WriteRequest{
		File:       opts.OutputFile,
		Name:       naming.Name{Host: m.Host.Hostname, Time: r.start, CaseID: opts.CaseID, Label: opts.Label, Format: opts.Format},
		Recipients: opts.EncryptTo,
	}, m, r.staging)
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
	res := &Result{Bundle: w, Manifest: m, Partial: m.Status != bundle.BundleComplete}
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
		var he *outputdir.HungError
		if errors.As(err, &he) && he.Left == "" {
			he.Left = r.staging.Path
		}
		return
	}
	_ = r.out.Cleanup(context.Background(), r.staging)
}

// Validate fills in the defaults and checks the options, once for
// every caller: collect calls it before it locks the output directory,
// and Run again (it changes nothing the second time). Its errors are
// *UsageError.
func (o *Options) Validate() error {
	if o.OutputDir == "" {
		o.OutputDir = DefaultOutputDir
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return &UsageError{Msg: "--timeout must be positive"}
	}
	for _, t := range []struct{ flag, v string }{{"case-id", o.CaseID}, {"label", o.Label}} {
		if err := naming.CheckTag(t.flag, t.v); err != nil {
			return &UsageError{Msg: err.Error()}
		}
	}
	if len(o.EncryptTo) > 0 {
		if _, err := outputdir.ParseRecipients(o.EncryptTo); err != nil {
			return &UsageError{Msg: err.Error()}
		}
		if o.OutputFile != "" && !strings.HasSuffix(o.OutputFile, ".age") {
			return &UsageError{Msg: "with --encrypt-to, --output-file must end in .age: the file is encrypted, and its name should say so"}
		}
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
	c.MaxFileBytes = cmp.Or(c.MaxFileBytes, DefaultMaxFileBytes)
	c.MaxCollectorBytes = cmp.Or(c.MaxCollectorBytes, DefaultMaxCollector)
	c.ProbeTimeout = cmp.Or(c.ProbeTimeout, DefaultProbeTimeout)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	c.Since = cmp.Or(c.Since, 24*time.Hour)
	return nil
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
	// The key of the hashes of masked values: one per run, never written.
	key, err := redact.NewSpreadKey()
	if err != nil {
		return err
	}
	r.spreadKey = key
	r.opts.Common.SpreadKey = &key
	red, err := collectors.NewRedactor(r.opts.Common.Redaction)
	if err != nil {
		return &UsageError{Msg: err.Error()}
	}
	r.red = red
	return nil
}

// The output directory's worker runs the last pass with the redactor's
// code; outputdir does not import it.
func init() {
	outputdir.Masker = func(pass json.RawMessage, paths []string) (map[string]int, error) {
		var s redact.Spread
		if err := json.Unmarshal(pass, &s); err != nil {
			return nil, fmt.Errorf("reading the last masking pass's request: %w", err)
		}
		return s.MaskFiles(paths)
	}
}

// maxMasked bounds the hashes the supervisor keeps (about 100 bytes each).
const maxMasked = 1 << 20

// spread is the last pass over the staged files: every value a collector
// masked, as hashes, to be masked wherever else it is. Binary artifacts
// are left alone: their bytes are not text, and a change would break them.
func (r *run) spread() *outputdir.Spread {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.masked) == 0 {
		return nil
	}
	sp := redact.Spread{Key: r.spreadKey, Values: make([]redact.ValueHash, 0, len(r.masked))}
	for h := range r.masked {
		sp.Values = append(sp.Values, h)
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return nil // hashes and a key always encode
	}
	s := &outputdir.Spread{Pass: raw, Skip: map[string]bool{}}
	for name, cr := range r.results {
		for rel, rec := range cr.records {
			if rec.Binary {
				s.Skip[name+"/"+rel] = true
			}
		}
	}
	return s
}

// redactString redacts text the supervisor itself records (a child's
// stderr), with the run's own rules.
func (r *run) redactString(s string) string {
	out, _ := r.red.String(s)
	return out
}
