package collectors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/internal/inroot"
	"github.com/nodesnap/nodesnap/redact"
)

// Env is what a collector sees of the world. It exists only inside a
// collector's child process.
type Env struct {
	Common
	name    string
	dir     string
	options json.RawMessage
	red     *redact.Redactor
	events  *eventSink

	// knowsHung: the collector runs after mountprobe (see Spec.After).
	knowsHung bool

	mu        sync.Mutex
	written   int64
	partial   []string
	workers   *isolate.Pool
	host      *hostfs.FS
	openFiles map[string]bool
}

// StandaloneEnv is an Env outside a collector child, for a collector's own
// benchmarks and tests of what it writes: files go to dir through the
// default redactor, and events (notes, file records) are dropped.
func StandaloneEnv(name, dir string, common Common) *Env {
	return &Env{Common: common, name: name, dir: dir, red: redact.Default(), openFiles: map[string]bool{}}
}

// Name of the collector this Env belongs to.
func (e *Env) Name() string { return e.name }

// Options decodes the collector's own options into v.
func (e *Env) Options(v any) error {
	if len(e.options) == 0 {
		return nil
	}
	if err := json.Unmarshal(e.options, v); err != nil {
		return fmt.Errorf("reading %s options: %w", e.name, err)
	}
	return nil
}

// Host is the collector's access to the host's filesystem: every read,
// stat and listing of a host path goes through it (see package hostfs).
func (e *Env) Host() *hostfs.FS {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.host == nil {
		e.host = hostfs.New(hostfs.Config{
			Roots:     hostfs.Roots{Root: e.Root, Proc: e.Proc, Sys: e.Sys},
			Hung:      e.HungMounts,
			Run:       e.DoTimeout,
			KnowsHung: e.knowsHung,
			Collector: e.name,
			OnHungMount: func(seen string, ev *layout.HangEvidence) {
				e.events.send(Event{Type: EventHungMount, Item: &HungItem{Op: "mount", Target: seen, Evidence: ev}})
			},
		})
	}
	return e.host
}

// ProcPath joins elements under the proc root, for the collector's own
// reads of /proc (which cannot meet a user's mount).
func (e *Env) ProcPath(elem ...string) string {
	return filepath.Join(append([]string{e.Proc}, elem...)...)
}

// SysPath joins elements under the sys root.
func (e *Env) SysPath(elem ...string) string {
	return filepath.Join(append([]string{e.Sys}, elem...)...)
}

// boundary is where host paths resolve: --root, with the live kernel's
// /proc and /sys.
func (e *Env) boundary() inroot.Boundary {
	return inroot.Boundary{Root: e.Root, Proc: e.Proc, Sys: e.Sys}
}

// pool is the collector's pool of isolated workers. It is not handed out:
// every item goes through DoTimeout, which records the ones that hang.
func (e *Env) pool() *isolate.Pool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.workers == nil {
		e.workers = isolate.NewPool(e.Workers, e.ProbeTimeout).Confine(e.boundary())
	}
	return e.workers
}

// Do runs one per-item operation in the pool. A hung item is recorded in
// the manifest (with its evidence) and the collector is marked partial;
// the error is returned so the caller can move on. An op on a host path
// goes through Host().Do instead, which also skips hung mounts.
func (e *Env) Do(ctx context.Context, op, target string, req, resp any) error {
	return e.DoTimeout(ctx, e.ProbeTimeout, op, target, req, resp)
}

// DoTimeout is Do with its own deadline (the probe deadline when 0), for an
// item that legitimately takes longer than a probe (a bounded scan of one
// directory tree).
func (e *Env) DoTimeout(ctx context.Context, timeout time.Duration, op, target string, req, resp any) error {
	if timeout <= 0 {
		timeout = e.ProbeTimeout
	}
	err := e.pool().DoTimeout(ctx, timeout, op, req, resp)
	var he *isolate.HungError
	if errors.As(err, &he) {
		e.events.send(Event{Type: EventHungItem, Item: &HungItem{Op: op, Target: target, Evidence: he.Evidence}})
	}
	return err
}

// Redact passes a value the collector does not write to a file through
// the run's redactor (a command line in a JSON record is written through a
// File and needs nothing more).
func (e *Env) Redact(s string) string {
	r, _ := e.red.String(s)
	return r
}

// sendMasked tells the supervisor what the redactor masked since the
// last call, as keyed hashes, in events of a bounded size.
func (e *Env) sendMasked() {
	if e.events == nil {
		return
	}
	m := e.red.TakeMasked()
	for len(m) > 0 {
		n := min(len(m), 4096)
		e.events.send(Event{Type: EventMasked, Masked: m[:n]})
		m = m[n:]
	}
}

// RecordEnvironment tells the run's last pass what the secret variables of
// an environment hold ("NAME=value" each) when the environment itself is
// not written: a CSI container's, read from its OCI config; the pods' env
// the kubelet collector drops. Only what the redactor would mask in an env
// file is recorded, as keyed hashes, never the values.
func (e *Env) RecordEnvironment(env []string) {
	e.red.RecordEnv(env)
	e.sendMasked()
}

// RedactArgv redacts a command line given as its arguments, once, for
// every file it goes to (a text table and a JSON record alike: see
// redact.Redactor.Argv); the counts go to each of those files with
// File.CountRedactions.
func (e *Env) RedactArgv(argv []string) ([]string, map[string]int) {
	return e.red.Argv(argv)
}

// Notef records a remark in the manifest for this collector. It passes
// through the redactor like everything else.
func (e *Env) Notef(format string, args ...any) {
	s, _ := e.red.String(fmt.Sprintf(format, args...))
	e.events.send(Event{Type: EventNote, Text: s})
}

// Partialf records something the collector could not gather; the
// collector's status becomes "partial".
func (e *Env) Partialf(format string, args ...any) {
	s, _ := e.red.String(fmt.Sprintf(format, args...))
	e.mu.Lock()
	e.partial = append(e.partial, s)
	e.mu.Unlock()
	e.events.send(Event{Type: EventNote, Text: "partial: " + s})
}

// Remedy records evidence the collector could not gather and the commands
// that would let the next run gather it; `nodesnap collect` prints it last.
// missing and reason pass through the redactor; fix lines must be the
// collector's own fixed text (or values already passed through
// Redact), since they are recorded as written: a command such as
// "NODESNAP_KUBELET_TOKEN=$(kubectl ...)" would otherwise lose its $(...).
func (e *Env) Remedy(missing []string, reason string, fix []string) {
	r := bundle.Remedy{Missing: make([]string, 0, len(missing)), Fix: fix}
	for _, m := range missing {
		s, _ := e.red.String(m)
		r.Missing = append(r.Missing, s)
	}
	r.Reason, _ = e.red.String(reason)
	if r.Fix == nil {
		r.Fix = []string{}
	}
	e.events.send(Event{Type: EventRemedy, Remedy: &r})
}

// ReportStuck tells the run that a filesystem or device is already stuck
// in the kernel (stuck requests, and tasks stuck on them): collectors
// that run after this one get it in Common.Stuck, and mountprobe reports
// its mounts hung without sending them a probe.
func (e *Env) ReportStuck(s layout.KernelStuck) {
	e.events.send(Event{Type: EventStuck, Stuck: &s})
}

// Fact reports a value the supervisor uses (such as the host's name).
func (e *Env) Fact(key, value string) {
	e.events.send(Event{Type: EventFact, Key: key, Value: value})
}

// FileOption changes how a File is written.
type FileOption func(*fileOpts)

type fileOpts struct {
	binaryReason string
	max          int64
	hostPath     string
}

// HostPath names the host file a WriteFile copies: a file whose path says
// it is a secret (a bare token file, an ACCESS:SECRET credential file) is
// masked whole or by field before the redactor sees it
// (redact.Redactor.WholeFile), and the manifest counts it so.
func HostPath(p string) FileOption {
	return func(o *fileOpts) { o.hostPath = p }
}

// Binary marks a file as an artifact the redactor cannot read (a pprof
// protobuf, say). Its bytes bypass redaction; the manifest says why. With
// --no-binary such files are dropped.
func Binary(reason string) FileOption {
	return func(o *fileOpts) { o.binaryReason = reason }
}

// MaxBytes sets a cap for this file below the run's per-file cap.
func MaxBytes(n int64) FileOption {
	return func(o *fileOpts) { o.max = n }
}

// File is a file in the bundle being written by a collector. Writes go
// through the redactor, then the caps, then to the staging directory.
type File struct {
	env       *Env
	rel       string
	f         *os.File
	red       *redact.Writer
	capped    *capWriter
	binary    string
	omitted   string
	own       map[string]int
	closeOnce sync.Once
	closeErr  error
}

// Create opens a new file in the collector's part of the bundle. name is a
// slash-separated relative path.
func (e *Env) Create(name string, opts ...FileOption) (*File, error) {
	var o fileOpts
	for _, fn := range opts {
		fn(&o)
	}
	rel, err := cleanRel(name)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.openFiles[rel] {
		e.mu.Unlock()
		return nil, fmt.Errorf("bundle file %s/%s written twice", e.name, rel)
	}
	e.openFiles[rel] = true
	e.mu.Unlock()
	f := &File{env: e, rel: rel, binary: o.binaryReason}
	if o.binaryReason != "" && e.NoBinary {
		f.omitted = "binary artifact dropped by --no-binary (" + o.binaryReason + ")"
		f.capped = &capWriter{w: io.Discard, max: 0, env: e}
		return f, nil
	}
	full := filepath.Join(e.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
		return nil, fmt.Errorf("creating staging directory: %w", err)
	}
	fh, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating staging file: %w", err)
	}
	f.f = fh
	max := e.MaxFileBytes
	if o.max > 0 && (max <= 0 || o.max < max) {
		max = o.max
	}
	f.capped = &capWriter{w: fh, max: max, env: e}
	if o.binaryReason == "" {
		f.red = e.red.NewWriter(f.capped)
	}
	return f, nil
}

func cleanRel(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return "", fmt.Errorf("bad bundle file name %q", name)
	}
	c := path.Clean(name)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") || c == "manifest.json" {
		return "", fmt.Errorf("bad bundle file name %q", name)
	}
	return c, nil
}

// Write writes p (redacted, unless the file is binary).
func (f *File) Write(p []byte) (int, error) {
	if f.red != nil {
		return f.red.Write(p)
	}
	return f.capped.Write(p)
}

// WriteString writes s.
func (f *File) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// CountRedactions adds n replacements the collector made itself (values
// it knows are secret, such as a pod's environment values) under rule, so
// that the manifest's redaction report counts them with the redactor's.
func (f *File) CountRedactions(rule string, n int) {
	if n <= 0 {
		return
	}
	f.env.mu.Lock()
	defer f.env.mu.Unlock()
	if f.own == nil {
		f.own = map[string]int{}
	}
	f.own[rule] += n
}

// MarkTruncated sets the manifest's truncated flag of a file that holds
// only the newest part of its source: the collector applied the cap
// before the bytes reached the file, so its own cap never saw the excess.
func (f *File) MarkTruncated() { f.capped.truncated = true }

// Truncated reports whether a cap cut this file short.
func (f *File) Truncated() bool { return f.capped.truncated }

// Written is how many bytes reached the file (after redaction and caps).
func (f *File) Written() int64 { return f.capped.n }

// Close flushes, closes and reports the file to the supervisor.
func (f *File) Close() error {
	f.closeOnce.Do(func() {
		rec := &FileRecord{Path: f.rel, Omitted: f.omitted}
		if f.red != nil {
			if err := f.red.Close(); err != nil {
				f.closeErr = fmt.Errorf("writing %s: %w", f.rel, err)
			}
			rec.Redactions = f.red.Counts()
		}
		for rule, n := range f.own {
			if rec.Redactions == nil {
				rec.Redactions = map[string]int{}
			}
			rec.Redactions[rule] += n
		}
		if f.binary != "" {
			rec.Binary = true
			rec.BinaryReason = f.binary
		}
		rec.Truncated = f.capped.truncated
		if f.f != nil {
			if err := f.f.Close(); err != nil && f.closeErr == nil {
				f.closeErr = fmt.Errorf("writing %s: %w", f.rel, err)
			}
		}
		if f.capped.err != nil && f.closeErr == nil {
			f.closeErr = fmt.Errorf("writing %s: %w", f.rel, f.capped.err)
		}
		f.env.events.send(Event{Type: EventFile, File: rec})
		f.env.sendMasked()
	})
	return f.closeErr
}

// WriteFile writes a whole file.
func (e *Env) WriteFile(name string, data []byte, opts ...FileOption) error {
	_, err := e.WriteHostFile(name, data, false, opts...)
	return err
}

// WriteHostFile is WriteFile for a copy of a host file that the read may
// already have cut (cut): the manifest marks it truncated either way, and
// the result says whether the copy in the bundle is short, by the read or by
// a cap.
func (e *Env) WriteHostFile(name string, data []byte, cut bool, opts ...FileOption) (truncated bool, err error) {
	var o fileOpts
	for _, fn := range opts {
		fn(&o)
	}
	var whole map[string]int
	if o.hostPath != "" && o.binaryReason == "" {
		data, whole = e.red.WholeFile(o.hostPath, data)
	}
	f, err := e.Create(name, opts...)
	if err != nil {
		return false, err
	}
	if cut {
		f.MarkTruncated()
	}
	for rule, n := range whole {
		f.CountRedactions(rule, n)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil {
		return f.Truncated(), werr
	}
	return f.Truncated(), cerr
}

// WriteJSON writes v as indented JSON.
func (e *Env) WriteJSON(name string, v any) error {
	f, err := e.Create(name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	werr := enc.Encode(v)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("writing %s: %w", name, werr)
	}
	return cerr
}

// Budget is how many bytes the next file of a source may take to stay
// whole: want, within the per-file cap and what is left of the collector's
// cap once reserve bytes are set aside (for an index written last), less
// 1/64 for redaction markers, which can be longer than what they replace.
// A source that keeps the newest part of a log reads this many bytes from
// its end instead of having its newest lines cut by the cap.
func (e *Env) Budget(want, reserve int64) int64 {
	b := want
	if fc := e.MaxFileBytes; fc > 0 {
		b = min(b, fc-fc/64)
	}
	if cc := e.MaxCollectorBytes; cc > 0 {
		e.mu.Lock()
		left := cc - e.written - reserve
		e.mu.Unlock()
		b = min(b, left-left/64)
	}
	return max(b, 0)
}

// capWriter enforces the per-file and per-collector byte caps. Past a cap
// it drops bytes and remembers that it did; the write still "succeeds" so
// producers (external commands) are not broken mid-stream.
type capWriter struct {
	w         io.Writer
	max       int64
	n         int64
	truncated bool
	env       *Env
	err       error
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := len(p)
	allow := int64(len(p))
	if c.max > 0 && c.n+allow > c.max {
		allow = c.max - c.n
	}
	c.env.mu.Lock()
	if c.env.MaxCollectorBytes > 0 && c.env.written+allow > c.env.MaxCollectorBytes {
		allow = c.env.MaxCollectorBytes - c.env.written
	}
	if allow < 0 {
		allow = 0
	}
	c.env.written += allow
	c.env.mu.Unlock()
	if allow < int64(len(p)) {
		c.truncated = true
	}
	if allow > 0 {
		m, err := c.w.Write(p[:allow])
		c.n += int64(m)
		if err != nil {
			c.err = err
			return m, err
		}
	}
	return n, nil
}

// Command runs an external program under a deadline in the isolation
// layer, its standard output written to the bundle file out (redacted) and
// its standard error kept, redacted and bounded, in out+".stderr" when not
// empty. A missing program returns an error wrapping ErrUnsupported.
func (e *Env) Command(ctx context.Context, timeout time.Duration, out string, name string, args ...string) (isolate.Result, error) {
	f, err := e.Create(out)
	if err != nil {
		return isolate.Result{}, err
	}
	stderr := &isolate.HeadBuffer{Max: 64 << 10}
	res, rerr := isolate.Run(ctx, timeout, isolate.Spec{Path: name, Args: args, Stdout: f, Stderr: stderr,
		Env: append(CommandEnv(), "LC_ALL=C", "SYSTEMD_PAGER=", "PAGER=cat", "SYSTEMD_COLORS=0", "NO_COLOR=1")})
	cerr := f.Close()
	if s := stderr.String(); s != "" {
		_ = e.WriteFile(out+".stderr", []byte(s))
	}
	if errors.Is(rerr, isolate.ErrNotFound) {
		return res, fmt.Errorf("%w: %w", ErrUnsupported, rerr)
	}
	if rerr != nil {
		if res.TimedOut {
			e.events.send(Event{Type: EventHungItem, Item: &HungItem{Op: "exec", Target: name + " " + strings.Join(args, " "), Evidence: res.Evidence}})
		}
		return res, rerr
	}
	if res.ExitCode != 0 {
		return res, fmt.Errorf("%s exited with status %d: %s", name, res.ExitCode, human.FirstLine(stderr.String()))
	}
	return res, cerr
}

// Exec runs a program in the isolation layer under timeout, its standard
// output into stdout, with nodesnap's environment less its secrets (see
// CommandEnv) plus extra. A program that misses its deadline is recorded
// in the manifest with where it hung. The returned standard error, at
// most stderrMax bytes, has passed through the redactor.
func (e *Env) Exec(ctx context.Context, timeout time.Duration, prog string, args []string, stdout io.Writer, stderrMax int, extra ...string) (isolate.Result, string, error) {
	stderr := &isolate.HeadBuffer{Max: stderrMax}
	res, err := isolate.Run(ctx, timeout, isolate.Spec{Path: prog, Args: args, Stdout: stdout, Stderr: stderr,
		Env: append(CommandEnv(), extra...)})
	if res.TimedOut {
		e.events.send(Event{Type: EventHungItem, Item: &HungItem{Op: "exec", Target: prog + " " + strings.Join(args, " "), Evidence: res.Evidence}})
	}
	return res, e.Redact(stderr.String()), err
}

// CommandEnv is nodesnap's environment less its own secrets (a kubelet
// token given by environment variable): external programs never see them.
func CommandEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if strings.HasPrefix(upper, "NODESNAP_") && (strings.Contains(upper, "TOKEN") || strings.Contains(upper, "SECRET") || strings.Contains(upper, "PASSWORD")) {
			continue
		}
		out = append(out, kv)
	}
	return out
}
