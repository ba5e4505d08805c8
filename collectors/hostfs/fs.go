package hostfs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// ErrHung is returned, without touching anything, for a path on a mount
// found hung earlier in this run (or one that hung in this collector).
var ErrHung = errors.New("on a mount found hung earlier in this run; not touched")

// Runner runs one worker op on behalf of a target (the path as nodesnap
// reaches it, as recorded in the manifest when the op hangs), under timeout (the probe
// deadline when 0). It records a hung item itself.
type Runner func(ctx context.Context, timeout time.Duration, op, target string, req, resp any) error

// Config builds an FS.
type Config struct {
	Roots
	// Hung are mountpoints found hung earlier in this run, as nodesnap
	// reached them (the form the run records: see OnHungMount).
	Hung []string
	// Run runs worker ops.
	Run Runner
	// OnHungMount tells the run that a mountpoint hangs. It is given the
	// path as nodesnap reached it (what the manifest names and what the
	// next collector's Hung holds); inside an FS only host paths exist.
	OnHungMount func(seen string, ev *layout.HangEvidence)
	// KnowsHung is true when the collector runs after the one that finds
	// hung mounts (it declared the need, or is that collector): only then
	// does checking the hung set mean anything. In tests, a collector that
	// checks without it fails loudly.
	KnowsHung bool
	// Collector names the collector, for that failure.
	Collector string
}

// FS is a collector's access to the host's filesystem.
type FS struct {
	Roots
	run       Runner
	onHung    func(string, *layout.HangEvidence)
	knowsHung bool
	name      string

	mu       sync.Mutex
	hung     map[Path]bool // mounts hung this run
	here     map[Path]bool // paths that hung in this collector
	table    []procfs.Mount
	tableErr error
	tableOK  bool
}

// New returns an FS.
func New(c Config) *FS {
	fs := &FS{Roots: c.Roots, run: c.Run, onHung: c.OnHungMount, knowsHung: c.KnowsHung, name: c.Collector,
		hung: map[Path]bool{}, here: map[Path]bool{}}
	for _, h := range c.Hung {
		if hp, ok := c.Host(h); ok {
			fs.hung[hp] = true
		}
	}
	return fs
}

// IsHung reports whether p is, or lies under, a mount found hung earlier
// in this run, or a path that hung in this collector. The collector must
// declare that it needs mountprobe (Spec.After) for the answer to mean
// anything; in tests, asking without it panics.
func (f *FS) IsHung(p Path) bool {
	f.requireHungKnown(p)
	return f.isHung(Clean(string(p)))
}

func (f *FS) isHung(p Path) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for q := p; ; q = q.Dir() {
		if f.hung[q] || f.here[q] {
			return true
		}
		if q == "/" {
			return false
		}
	}
}

func (f *FS) requireHungKnown(p Path) {
	if !f.knowsHung && userData(p) && testing.Testing() {
		panic(fmt.Sprintf("collector %s checks %s against the hung mounts without declaring After: []string{\"mountprobe\"}", f.name, p))
	}
}

// HungMounts are the mountpoints known hung, sorted.
func (f *FS) HungMounts() []Path {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Path, 0, len(f.hung))
	for p := range f.hung {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ReportHungMount tells this collector and every later one that the
// mountpoint hangs when touched.
func (f *FS) ReportHungMount(mountpoint Path, ev *layout.HangEvidence) {
	mp := Clean(string(mountpoint))
	f.mu.Lock()
	known := f.hung[mp]
	f.hung[mp] = true
	f.mu.Unlock()
	if !known && f.onHung != nil {
		f.onHung(f.Seen(mp), ev)
	}
}

// ReportHungSeen is ReportHungMount for a mountpoint known only as
// nodesnap reaches it (a mount of nodesnap's own namespace outside
// --root has no host path): the run is told of it all the same, though no
// host path of this FS can lie under it.
func (f *FS) ReportHungSeen(seen string, ev *layout.HangEvidence) {
	if hp, ok := f.Host(seen); ok {
		f.ReportHungMount(hp, ev)
		return
	}
	if f.onHung != nil {
		f.onHung(path.Clean(seen), ev)
	}
}

// Do runs a collector's own worker op on one host path under the common
// policy. req is built by the caller with Seen(p); timeout 0 is the probe
// deadline.
func (f *FS) Do(ctx context.Context, timeout time.Duration, op string, p Path, req, resp any) error {
	p = Clean(string(p))
	f.requireHungKnown(p)
	if f.isHung(p) {
		return fmt.Errorf("%s: %w", p, ErrHung)
	}
	// The manifest names what nodesnap touched, as for hung mounts.
	err := f.run(ctx, timeout, op, f.Seen(p), req, resp)
	var he *isolate.HungError
	if errors.As(err, &he) {
		f.hungHere(ctx, p, he.Evidence)
	}
	return err
}

// hungHere records a path that hung: it is skipped for the rest of this
// collector, and the network or FUSE mount holding it (per the host's
// mount table, read once) is reported to the run. A local filesystem that
// hangs is a disk problem mountprobe reports; one slow item there does not
// condemn the whole mount.
func (f *FS) hungHere(ctx context.Context, p Path, ev *layout.HangEvidence) {
	f.mu.Lock()
	f.here[p] = true
	f.mu.Unlock()
	m, ok := f.containing(ctx, p)
	if !ok {
		return
	}
	if cl := procfs.Classify(m); cl == procfs.ClassNetwork || cl == procfs.ClassFUSE {
		f.ReportHungMount(Clean(m.MountPoint), ev)
	}
}

// HostMounts is the host's mount table (pid 1's mountinfo, whose mount
// points are host paths), read once in a worker and kept.
func (f *FS) HostMounts(ctx context.Context) ([]procfs.Mount, error) {
	f.mu.Lock()
	if f.tableOK {
		defer f.mu.Unlock()
		return f.table, f.tableErr
	}
	f.mu.Unlock()
	r, err := f.Mountinfo(ctx, "1", 64<<20)
	var ms []procfs.Mount
	if err == nil {
		ms, _ = procfs.ParseMountInfo(r.Data)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.table, f.tableErr, f.tableOK = ms, err, true
	return ms, err
}

// HungHere are the paths that hung in this collector, sorted.
func (f *FS) HungHere() []Path {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Path, 0, len(f.here))
	for p := range f.here {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// containing is the innermost mount of the host's table holding p, "/"
// excepted.
func (f *FS) containing(ctx context.Context, p Path) (procfs.Mount, bool) {
	table, _ := f.HostMounts(ctx)
	var best procfs.Mount
	found := false
	for _, m := range table {
		mp := Clean(m.MountPoint)
		if mp != "/" && p.Under(mp) && (!found || len(mp) >= len(Clean(best.MountPoint))) {
			best, found = m, true
		}
	}
	return best, found
}

// Read reads at most max bytes (1 MiB when max <= 0) from the start of
// the regular file p: a device, FIFO or socket named where a file is
// meant is refused, never opened for reading (isolate.OpenRegular).
func (f *FS) Read(ctx context.Context, p Path, max int64) (isolate.ReadFileResult, error) {
	var r isolate.ReadFileResult
	err := f.Do(ctx, 0, isolate.OpReadFile, p, isolate.ReadFileRequest{Path: f.Seen(p), Max: max, Regular: true}, &r)
	return r, err
}

// Tail reads the last max bytes of the regular file p (a log).
func (f *FS) Tail(ctx context.Context, p Path, max int64) (isolate.ReadFileResult, error) {
	var r isolate.ReadFileResult
	err := f.Do(ctx, 0, isolate.OpReadFile, p, isolate.ReadFileRequest{Path: f.Seen(p), Max: max, Tail: true}, &r)
	return r, err
}

// Stat stats p, following symbolic links.
func (f *FS) Stat(ctx context.Context, p Path) (isolate.StatResult, error) {
	var st isolate.StatResult
	err := f.Do(ctx, 0, isolate.OpStat, p, isolate.StatRequest{Path: f.Seen(p), Follow: true}, &st)
	return st, err
}

// Lstat stats p itself.
func (f *FS) Lstat(ctx context.Context, p Path) (isolate.StatResult, error) {
	var st isolate.StatResult
	err := f.Do(ctx, 0, isolate.OpStat, p, isolate.StatRequest{Path: f.Seen(p)}, &st)
	return st, err
}

// List lists the directory p with getdents only, at most max entries
// (10,000 when max <= 0), sorted by name. Entry types are the kernel's
// d_type: no entry is stat()ed, since an lstat of a mountpoint enters the
// mount.
func (f *FS) List(ctx context.Context, p Path, max int) (Listing, error) {
	var r Listing
	if err := f.Do(ctx, 0, OpList, p, ListRequest{Path: f.Seen(p), Max: max}, &r); err != nil {
		return Listing{}, err
	}
	return r, nil
}

// Glob expands a pattern of host paths in a worker, at most max matches,
// and returns them in host form.
func (f *FS) Glob(ctx context.Context, pattern Path, max int) ([]Path, bool, error) {
	// The fixed part of the pattern is what may be on a hung mount.
	fixed := pattern
	for strings.ContainsAny(string(fixed), "*?[\\") {
		fixed = fixed.Dir()
	}
	var r GlobResult
	if err := f.Do(ctx, 0, OpGlob, fixed, GlobRequest{Pattern: f.Seen(pattern), Max: max}, &r); err != nil {
		return nil, false, err
	}
	out := make([]Path, 0, len(r.Matches))
	for _, m := range r.Matches {
		if hp, ok := f.Host(m); ok {
			out = append(out, hp)
		}
	}
	return out, r.Truncated, nil
}

// Mountinfo reads /proc/<task>/mountinfo ("self", "1", "<pid>/task/<tid>")
// in a worker, at most max bytes (32 MiB when max <= 0): a mount table
// read takes the namespace's lock, which a stuck mount operation can hold.
func (f *FS) Mountinfo(ctx context.Context, task string, max int64) (isolate.ReadFileResult, error) {
	if max <= 0 {
		max = 32 << 20
	}
	return f.Read(ctx, Path("/proc/"+task+"/mountinfo"), max)
}
