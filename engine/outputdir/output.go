package outputdir

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// The output directory is a path like any other: it may sit on an NFS or
// FUSE mount that stops answering, or be removed while the run goes on.
// So the supervisor never touches it itself. Every operation on it — the
// stat and statfs before the run, the lock, the staging directory, hashing
// the staged files, writing and renaming the bundle, the obfuscation
// mapping, retention, cleaning up — runs in a worker process (an
// isolate.Pool of size 1) under a deadline. The lock is taken and held by
// a worker of its own, which does nothing else: a writer killed on its
// deadline or by a second interrupt does not drop the lock with it. Both
// die with the supervisor (PDEATHSIG), and the kernel drops the flock.

// OpTimeout bounds each small operation on the output directory
// (stat, statfs, mkdir, remove, the mapping file, retention), and what the
// lock may take past --lock-wait.
const OpTimeout = 5 * time.Second

// WriteGrace is how long past --timeout hashing and writing the bundle may
// go on. Past it the output filesystem is taken as hung: the writer is
// killed, no bundle is written, and the run ends. With the lock released
// (or abandoned) and cleanup bounded too, a run ends within --timeout +
// WriteGrace + 2 s whatever its output directory does.
const WriteGrace = 10 * time.Second

// Options says how to open an output directory.
type Options struct {
	Dir string
	// Lock takes the directory's lock (Acquire), waiting up to
	// LockWait for another run to finish.
	Lock     bool
	LockWait time.Duration
	// MinFree refuses a filesystem with fewer bytes available (0: no check).
	MinFree uint64
	// File, when set, is the exact path the bundle will be written to
	// (--output-file): Open refuses it if it exists, before anything is
	// collected.
	File string
	// Create makes a missing Dir (and its missing parents), mode 0700.
	Create bool
	// TmpDir, when set, holds the staging directory instead of Dir: for
	// an output directory too small for the collected files as well as
	// the bundle. The bundle is still written beside its final name in
	// Dir and renamed into place, so it appears whole or not at all.
	TmpDir string
	// OpTimeout replaces the default OpTimeout (tests).
	OpTimeout time.Duration
}

// Output is a run's handle on its output directory. See Open.
type Output struct {
	dir       string
	tmpDir    string
	opTimeout time.Duration
	pool      *isolate.Pool
	lockPool  *isolate.Pool
	locked    bool

	mu   sync.Mutex
	hung *HungError
}

// HungError says the output directory stopped answering.
type HungError struct {
	Dir      string
	Op       string
	Timeout  time.Duration
	Evidence *layout.HangEvidence
	// Left names what could not be removed (a staging directory).
	Left string
}

func (e *HungError) Error() string {
	s := fmt.Sprintf("the output directory %s stopped answering: %s did not finish within %s (%s); nothing more was written there",
		e.Dir, e.Op, e.Timeout.Round(time.Millisecond), e.Evidence.String())
	if e.Left != "" {
		s += "; " + e.Left + " was left behind (a later run removes it)"
	}
	return s + ". Write elsewhere with --output-dir"
}

// Unwrap makes errors.Is(err, isolate.ErrTimeout) true.
func (e *HungError) Unwrap() error { return isolate.ErrTimeout }

// Open checks that dir is a directory, takes its lock if asked,
// checks its free space and removes what runs killed outright left there
// — all in a worker, so that a directory on a hung mount costs
// OpTimeout (plus LockWait) and an error, not a frozen run.
func Open(ctx context.Context, o Options) (*Output, error) {
	out := &Output{dir: o.Dir, tmpDir: o.TmpDir, opTimeout: o.OpTimeout}
	if out.opTimeout <= 0 {
		out.opTimeout = OpTimeout
	}
	out.pool = isolate.NewPool(1, out.opTimeout)
	out.lockPool = isolate.NewPool(1, out.opTimeout)
	if o.Lock {
		// The lock's worker starts while the stat runs: two process
		// starts side by side rather than one after the other.
		out.lockPool.Prestart()
	}
	// The stat alone first, under the short deadline: a hung directory
	// costs that, not --lock-wait as well.
	err := out.do(ctx, out.opTimeout, opOutputCheck, openReq{Dir: o.Dir, File: o.File, Create: o.Create, TmpDir: o.TmpDir, SupervisorPID: os.Getpid()}, nil)
	var r openResp
	lockAsked := false
	if err == nil {
		lockAsked = o.Lock
		err = out.doIn(out.lockPool, ctx, o.LockWait+out.opTimeout, opOutputOpen,
			openReq{Dir: o.Dir, Lock: o.Lock, LockWait: o.LockWait, MinFree: o.MinFree, SupervisorPID: os.Getpid()}, &r)
	}
	if err != nil && lockAsked && ctx.Err() != nil && out.Hung() == nil {
		// Interrupted while a worker took the lock: it was killed, and
		// the kernel dropped its flock, but the lock file may be left.
		// A fresh worker removes it if no other run holds it (briefly:
		// the directory answered a moment ago).
		_ = out.pool.DoTimeout(context.Background(), min(out.opTimeout, 2*time.Second), opOutputUnlock, openReq{Dir: o.Dir}, nil)
	}
	if err == nil {
		switch r.Kind {
		case "locked":
			err = &LockedError{Dir: o.Dir, PID: r.PID, Waited: r.Waited}
		case "lowspace":
			err = fmt.Errorf("%w%s", ErrLowSpace, strings.TrimPrefix(r.Msg, ErrLowSpace.Error()))
		}
	}
	if err != nil {
		out.closePools(out.Hung() != nil)
		return nil, err
	}
	out.locked = o.Lock
	return out, nil
}

// Hung is the error of the operation that found the directory hung, or nil.
func (o *Output) Hung() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.hung == nil {
		return nil
	}
	return o.hung
}

func (o *Output) do(ctx context.Context, timeout time.Duration, op string, req, resp any) error {
	return o.doIn(o.pool, ctx, timeout, op, req, resp)
}

func (o *Output) doIn(pool *isolate.Pool, ctx context.Context, timeout time.Duration, op string, req, resp any) error {
	if err := o.Hung(); err != nil {
		return err
	}
	err := pool.DoTimeout(ctx, timeout, op, req, resp)
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("stopped while %s (output directory %s): %w", opWhat[op], o.dir, cerr)
	}
	var he *isolate.HungError
	if errors.As(err, &he) {
		h := &HungError{Dir: o.dir, Op: opWhat[op], Timeout: timeout, Evidence: he.Evidence}
		o.mu.Lock()
		o.hung = h
		o.mu.Unlock()
		return h
	}
	var oe *isolate.OpError
	if errors.As(err, &oe) {
		if oe.Errno != 0 {
			return fmt.Errorf("%s: %w", strings.TrimSuffix(oe.Msg, ": "+oe.Errno.Error()), oe.Errno)
		}
		return errors.New(oe.Msg)
	}
	return err
}

// Close releases the lock and stops the worker, within OpTimeout. On a
// hung directory it gives up at once: the worker dies with this process
// and the kernel drops the lock with it.
func (o *Output) Close() {
	if o == nil {
		return
	}
	hung := o.Hung() != nil
	if o.locked && !hung {
		_ = o.doIn(o.lockPool, context.Background(), o.opTimeout, opOutputRelease, struct{}{}, nil)
	}
	o.closePools(hung)
}

// closePools stops the workers. On a hung directory it waits for them at
// most half a second: one that is closing a file there may never finish,
// and it dies with this process anyway.
func (o *Output) closePools(hung bool) {
	done := make(chan struct{})
	go func() {
		o.pool.Close()
		o.lockPool.Close()
		close(done)
	}()
	if !hung {
		<-done
		return
	}
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
	}
}

// StagingDir is a staging directory and the random token of the marker file
// made in it: a directory made again at the same path (inode numbers are
// reused at once on ext4) does not hold it.
type StagingDir struct {
	Path  string `json:"path"`
	Token string `json:"token"`
}

// stagingMarker is the marker file, beside the collectors' directories.
const stagingMarker = ".staging-id"

// Staging makes the run's staging directory (mode 0700) with one
// directory per collector.
func (o *Output) Staging(ctx context.Context, collectors []string) (StagingDir, error) {
	var s StagingDir
	dir := o.dir
	if o.tmpDir != "" {
		dir = o.tmpDir
	}
	err := o.do(ctx, o.opTimeout, opOutputStaging, stagingReq{Dir: dir, SupervisorPID: os.Getpid(), Collectors: collectors}, &s)
	return s, err
}

// Hash lists and hashes every regular file in each collector's staging
// directory, and checks that the staging directory is still the one made.
// With sp, it first runs the last masking pass over them (Spread).
func (o *Output) Hash(ctx context.Context, timeout time.Duration, s StagingDir, collectors []string, sp *Spread) (HashResult, error) {
	var r HashResult
	err := o.do(ctx, timeout, opOutputHash, hashReq{Staging: s, Collectors: collectors, Spread: sp}, &r)
	return r, err
}

// WriteRequest says what bundle to write and where.
type WriteRequest struct {
	// File is the exact path (--output-file); it is never replaced. When
	// empty, the bundle goes into the output directory under Name, made
	// unique with -2, -3… (Name.Seq).
	File string
	Name naming.Name
	// Recipients, when set, encrypt the bundle to these keys
	// (ParseRecipients): the file written is <name>.age, and the
	// plaintext archive never reaches the disk.
	Recipients []string
}

// Written is a bundle written, and its checksum file.
type Written struct {
	bundle.Written
	// SumFile is the <bundle>.sha256 beside it, or "" and SumError says
	// why it could not be written.
	SumFile  string
	SumError string
}

// Write archives the bundle (bundle.WriteWith) and writes its .sha256
// sidecar, in the worker, within timeout.
func (o *Output) Write(ctx context.Context, timeout time.Duration, rq WriteRequest, m *bundle.Manifest, s StagingDir) (Written, error) {
	var w Written
	raw, err := json.Marshal(m)
	if err != nil {
		return w, fmt.Errorf("encoding the manifest: %w", err)
	}
	err = o.do(ctx, timeout, opOutputWrite, writeReq{WriteRequest: rq, Dir: o.dir, Manifest: raw, Staging: s.Path, Mtime: m.FinishedAt}, &w)
	return w, err
}

// Mappings writes the obfuscation mapping beside the bundle (WriteMappings).
func (o *Output) Mappings(ctx context.Context, bundlePath string, m map[string]string) (string, error) {
	var p string
	err := o.do(ctx, o.opTimeout, opOutputMappings, mappingsReq{Bundle: bundlePath, Mappings: m}, &p)
	return p, err
}

// Cleanup removes the staging directory and what killed runs (or a killed
// writer) left in the output directory.
func (o *Output) Cleanup(ctx context.Context, s StagingDir) error {
	return o.do(ctx, o.opTimeout, opOutputCleanup, cleanupReq{Dir: o.dir, Staging: s.Path, TmpDir: o.tmpDir, SupervisorPID: os.Getpid()}, nil)
}

// Retain is Retain in the worker.
func (o *Output) Retain(ctx context.Context, host string, keep int, current string) ([]string, error) {
	var removed []string
	err := o.do(ctx, o.opTimeout, opOutputRetain, retainReq{Dir: o.dir, Host: host, Keep: keep, Current: current}, &removed)
	return removed, err
}

// Worker side.

const (
	opOutputCheck    = "output.check"
	opOutputOpen     = "output.open"
	opOutputStaging  = "output.staging"
	opOutputHash     = "output.hash"
	opOutputWrite    = "output.write"
	opOutputMappings = "output.mappings"
	opOutputCleanup  = "output.cleanup"
	opOutputRetain   = "output.retain"
	opOutputRelease  = "output.release"
	opOutputUnlock   = "output.unlock"
)

var opWhat = map[string]string{
	opOutputCheck:    "checking that it is a directory",
	opOutputOpen:     "waiting for its lock (or checking its free space)",
	opOutputStaging:  "creating the staging directory",
	opOutputHash:     "hashing the staged files",
	opOutputWrite:    "writing the bundle",
	opOutputMappings: "writing the obfuscation mapping",
	opOutputCleanup:  "removing the staging directory",
	opOutputRetain:   "removing older bundles (--keep)",
	opOutputRelease:  "releasing its lock",
	opOutputUnlock:   "removing the lock file of an interrupted start",
}

type openReq struct {
	Dir           string        `json:"dir"`
	Create        bool          `json:"create,omitempty"`
	File          string        `json:"file,omitempty"`
	TmpDir        string        `json:"tmp_dir,omitempty"`
	Lock          bool          `json:"lock,omitempty"`
	LockWait      time.Duration `json:"lock_wait,omitempty"`
	MinFree       uint64        `json:"min_free,omitempty"`
	SupervisorPID int           `json:"supervisor_pid"`
}

type openResp struct {
	Kind   string        `json:"kind,omitempty"` // "", "locked" or "lowspace"
	PID    int           `json:"pid,omitempty"`
	Waited time.Duration `json:"waited,omitempty"`
	Msg    string        `json:"msg,omitempty"`
}

type stagingReq struct {
	Dir           string   `json:"dir"`
	SupervisorPID int      `json:"supervisor_pid"`
	Collectors    []string `json:"collectors"`
}

type hashReq struct {
	Staging    StagingDir `json:"staging"`
	Collectors []string   `json:"collectors"`
	Spread     *Spread    `json:"spread,omitempty"`
}

type writeReq struct {
	WriteRequest
	Dir      string          `json:"dir"`
	Manifest json.RawMessage `json:"manifest"`
	Staging  string          `json:"staging"`
	Mtime    time.Time       `json:"mtime"`
}

type mappingsReq struct {
	Bundle   string            `json:"bundle"`
	Mappings map[string]string `json:"mappings"`
}

type cleanupReq struct {
	Dir           string `json:"dir"`
	Staging       string `json:"staging"`
	TmpDir        string `json:"tmp_dir,omitempty"`
	SupervisorPID int    `json:"supervisor_pid"`
}

type retainReq struct {
	Dir     string `json:"dir"`
	Host    string `json:"host"`
	Keep    int    `json:"keep"`
	Current string `json:"current"`
}

// heldLock is the lock the worker took for its supervisor.
var heldLock *Lock

func init() {
	isolate.RegisterOp(opOutputCheck, isolate.Typed(func(rq openReq) (any, error) {
		if err := checkOutputDir(rq.Dir, rq.Create); err != nil {
			return nil, err
		}
		if rq.File != "" && taken(rq.File) {
			return nil, fmt.Errorf("%s already exists; nodesnap never overwrites a file: remove it or choose another --output-file", rq.File)
		}
		if rq.TmpDir != "" {
			if err := checkDir(rq.TmpDir, "--tmp-dir"); err != nil {
				return nil, err
			}
			cleanStale(rq.TmpDir, rq.SupervisorPID)
		}
		return nil, nil
	}))
	isolate.RegisterOp(opOutputOpen, isolate.Typed(func(rq openReq) (any, error) {
		if rq.Lock {
			l, err := Acquire(context.Background(), rq.Dir, rq.LockWait)
			var le *LockedError
			if errors.As(err, &le) {
				return openResp{Kind: "locked", PID: le.PID, Waited: le.Waited}, nil
			}
			if err != nil {
				return nil, err
			}
			heldLock = l
			_ = l.SetHolder(rq.SupervisorPID)
		}
		if err := CheckFree(rq.Dir, rq.MinFree); err != nil {
			if errors.Is(err, ErrLowSpace) {
				heldLock.Release()
				heldLock = nil
				return openResp{Kind: "lowspace", Msg: err.Error()}, nil
			}
			return nil, err
		}
		cleanStale(rq.Dir, rq.SupervisorPID)
		return openResp{}, nil
	}))
	isolate.RegisterOp(opOutputUnlock, isolate.Typed(func(rq openReq) (any, error) {
		if l, err := Acquire(context.Background(), rq.Dir, 0); err == nil {
			l.Release()
		}
		return nil, nil
	}))
	isolate.RegisterOp(opOutputRelease, isolate.Typed(func(struct{}) (any, error) {
		heldLock.Release()
		heldLock = nil
		return nil, nil
	}))
	isolate.RegisterOp(opOutputStaging, isolate.Typed(func(rq stagingReq) (any, error) {
		p, err := os.MkdirTemp(rq.Dir, fmt.Sprintf("%s%d-staging-", bundle.TempPrefix, rq.SupervisorPID))
		if err != nil {
			return nil, fmt.Errorf("creating the staging directory in %s: %w", rq.Dir, err)
		}
		if err := os.Chmod(p, 0o700); err != nil {
			os.RemoveAll(p)
			return nil, fmt.Errorf("securing the staging directory: %w", err)
		}
		for _, c := range rq.Collectors {
			if err := os.Mkdir(filepath.Join(p, c), 0o700); err != nil {
				os.RemoveAll(p)
				return nil, fmt.Errorf("creating the staging directory of %s: %w", c, err)
			}
		}
		var rnd [16]byte
		_, _ = rand.Read(rnd[:])
		tok := hex.EncodeToString(rnd[:])
		if err := os.WriteFile(filepath.Join(p, stagingMarker), []byte(tok), 0o600); err != nil {
			os.RemoveAll(p)
			return nil, fmt.Errorf("creating the staging directory: %w", err)
		}
		return StagingDir{Path: p, Token: tok}, nil
	}))
	isolate.RegisterOp(opOutputHash, isolate.Typed(hashStaged))
	isolate.RegisterOp(opOutputWrite, isolate.Typed(func(rq writeReq) (any, error) {
		var m bundle.Manifest
		if err := json.Unmarshal(rq.Manifest, &m); err != nil {
			return nil, fmt.Errorf("decoding the manifest: %w", err)
		}
		return writeBundle(rq, &m)
	}))
	isolate.RegisterOp(opOutputMappings, isolate.Typed(func(rq mappingsReq) (any, error) {
		return WriteMappings(rq.Bundle, rq.Mappings)
	}))
	isolate.RegisterOp(opOutputCleanup, isolate.Typed(func(rq cleanupReq) (any, error) {
		if rq.Staging != "" {
			if err := os.RemoveAll(rq.Staging); err != nil {
				return nil, fmt.Errorf("removing the staging directory: %w", err)
			}
		}
		cleanStale(rq.Dir, rq.SupervisorPID)
		if rq.TmpDir != "" {
			cleanStale(rq.TmpDir, rq.SupervisorPID)
		}
		return nil, nil
	}))
	isolate.RegisterOp(opOutputRetain, isolate.Typed(func(rq retainReq) (any, error) {
		removed, err := Retain(rq.Dir, rq.Host, rq.Keep, rq.Current)
		if removed == nil {
			removed = []string{}
		}
		if err != nil {
			return nil, err
		}
		return removed, nil
	}))
}

// hashStaged runs in the worker: see Output.Hash.
func hashStaged(rq hashReq) (any, error) {
	r := HashResult{Files: map[string][]HashedFile{}}
	if b, err := os.ReadFile(filepath.Join(rq.Staging.Path, stagingMarker)); err != nil || string(b) != rq.Staging.Token {
		r.Replaced = true
	}
	var masked map[string]int
	if rq.Spread != nil && !r.Replaced {
		var err error
		if masked, err = maskStaged(rq); err != nil {
			return nil, err
		}
	}
	for _, c := range rq.Collectors {
		root := filepath.Join(rq.Staging.Path, c)
		var files []HashedFile
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			size, sum, err := bundle.HashFile(p)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return fmt.Errorf("reading staged file %s: %w", p, err)
			}
			rel, _ := filepath.Rel(root, p)
			files = append(files, HashedFile{Rel: filepath.ToSlash(rel), Size: size, SHA256: sum, Masked: masked[p]})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing staged files of %s: %w", c, err)
		}
		sort.Slice(files, func(i, j int) bool { return files[i].Rel < files[j].Rel })
		r.Files[c] = files
	}
	return r, nil
}

// checkOutputDir makes sure the output directory exists and is a
// directory, making it first (mode 0700: bundles hold a node's secrets
// until redacted, and their names say which node) when create is set. It
// runs in the output worker.
func checkOutputDir(dir string, create bool) error {
	_, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if !create {
			return fmt.Errorf("output directory %s does not exist; create it (mkdir -m 0700 %s) or choose another with --output-dir", dir, dir)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating the output directory: %w; create it yourself (mkdir -m 0700 %s) or choose another with --output-dir", err, dir)
		}
		// The umask may have taken bits away; 0700 exactly.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("creating the output directory: %w", err)
		}
	}
	if err := checkDir(dir, "output directory"); err != nil {
		return fmt.Errorf("%w; choose another with --output-dir", err)
	}
	return nil
}

// checkDir makes sure dir is a directory; what names it in messages.
func checkDir(dir, what string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s %s is not a directory", what, dir)
	}
	return nil
}

// cleanStale removes StagingDir directories and temporary files left in dir
// by nodesnap processes that are gone (a run killed with SIGKILL, a
// writer killed on a deadline): their names carry the pid. It runs in the
// output worker; self is the supervisor's pid, whose files are in use.
func cleanStale(dir string, self int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, bundle.TempPrefix) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(strings.TrimPrefix(name, bundle.TempPrefix), "%d-", &pid); err != nil || pid <= 0 {
			continue
		}
		if pid == self || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		os.RemoveAll(filepath.Join(dir, name))
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// writeBundle runs in the worker: see Output.Write. A name in the output
// directory is taken only when neither it nor its sidecar exists, and the
// bundle is placed without replacing anything, so two writers (or a file
// planted in a shared directory) never overwrite each other.
func writeBundle(rq writeReq, m *bundle.Manifest) (Written, error) {
	var w Written
	o := bundle.WriteOptions{NoReplace: true}
	if len(rq.Recipients) > 0 {
		rs, err := ParseRecipients(rq.Recipients)
		if err != nil {
			return w, err
		}
		o.Encrypt = encryptor(rs)
	}
	n := rq.Name
	n.Encrypted = len(rq.Recipients) > 0
	for tries := 0; ; tries++ {
		out := rq.File
		if out == "" {
			out = filepath.Join(rq.Dir, n.String())
			if taken(out) || taken(out+SumSuffix) {
				if tries >= maxNameTries {
					return w, fmt.Errorf("writing the bundle: %s and %d names after it are taken", out, maxNameTries)
				}
				n.Seq = max(n.Seq+1, 2)
				continue
			}
		}
		bw, err := bundle.WriteWith(context.Background(), out, n.Format, m, rq.Staging, rq.Mtime, o)
		if errors.Is(err, os.ErrExist) && rq.File == "" && tries < maxNameTries {
			n.Seq = max(n.Seq+1, 2)
			continue
		}
		if err != nil {
			if errors.Is(err, os.ErrExist) {
				return w, fmt.Errorf("%s already exists; nodesnap never overwrites a file: remove it or choose another --output-file", out)
			}
			return w, err
		}
		w.Written = bw
		if w.SumFile, err = WriteSum(bw); err != nil {
			// The bundle is whole and in place; the checksum is
			// printed anyway. Say what is missing, do not fail.
			w.SumError = err.Error()
		}
		return w, nil
	}
}

// maxNameTries bounds the -N tried for a bundle's name.
const maxNameTries = 1000

func taken(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}
