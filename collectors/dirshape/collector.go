package dirshape

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// opDirShapeScan scans one root (or one mount) in a worker: one item per
// root, so a root on a hung filesystem costs one item and the others are
// still scanned.
const opDirShapeScan = "dirshape.scan"

// DirShapeDefaultRoots are scanned when no --dirshape-root is given: the
// kubelet's pod and plugin directories (and, with VolumeMounts, each pod
// or container-runtime volume that is a mount of its own), the container
// runtimes' volume and
// state directories, and the state directories of common CSI drivers and
// local-volume provisioners. Roots that do not exist are reported absent.
var DirShapeDefaultRoots = []string{
	"/var/lib/kubelet/pods",
	"/var/lib/kubelet/plugins",
	"/var/lib/docker/volumes",
	"/var/lib/containerd",
	"/var/lib/containers/storage",
	"/var/lib/csi-hostpath-data",
	"/var/lib/rook",
	"/var/lib/longhorn",
	"/var/openebs",
	"/opt/local-path-provisioner",
}

// Options are dirshape's settings.
type Options struct {
	// Roots are host paths; empty means DirShapeDefaultRoots.
	Roots []string `json:"roots,omitempty"`
	// MaxEntries and MaxTime bound the scan of each root; past either the
	// scan stops and its counts are lower bounds.
	MaxEntries uint64        `json:"max_entries"`
	MaxTime    time.Duration `json:"max_time"`
	// MaxDirTime bounds the reading of one huge directory: past it the
	// directory is left, known by its count so far (a lower bound) and
	// its inode's estimate. Zero: no bound.
	MaxDirTime time.Duration `json:"max_dir_time"`
	// Top is how many of the largest directories are kept per root.
	Top int `json:"top"`
	// MaxDepth bounds how deep a scan descends.
	MaxDepth int `json:"max_depth"`
	// CrossMounts scans every other mount under a root too, each as its
	// own root. Without it no scan enters another mount.
	CrossMounts bool `json:"cross_mounts"`
	// VolumeMounts scans each mount under the kubelet's
	// pods/<uid>/volumes/<plugin>/<volume>, and each Docker, Podman or
	// nerdctl (containerd) volume's _data that is a mount of its own (a
	// local-driver volume on a device), as its own root.
	VolumeMounts bool `json:"volume_mounts"`
}

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{MaxEntries: 10_000_000, MaxTime: 20 * time.Second, MaxDirTime: 500 * time.Millisecond, Top: 20, MaxDepth: 256, VolumeMounts: true}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	fs.StringArrayVar(&opts.Roots, "dirshape-root", opts.Roots, "dirshape: a directory to scan (host path; repeatable; default: the kubelet, runtime and CSI directories)")
	fs.Uint64Var(&opts.MaxEntries, "dirshape-max-entries", opts.MaxEntries, "dirshape: stop scanning a root after this many entries (its counts are then lower bounds)")
	fs.DurationVar(&opts.MaxTime, "dirshape-max-time", opts.MaxTime, "dirshape: stop scanning a root after this long (its counts are then lower bounds)")
	fs.DurationVar(&opts.MaxDirTime, "dirshape-max-dir-time", opts.MaxDirTime, "dirshape: leave a huge directory after reading it this long (its count is then a lower bound, with its inode's estimate; past half of it, its subdirectories are counted, not entered; 0: read it all)")
	fs.IntVar(&opts.Top, "dirshape-top", opts.Top, "dirshape: how many of the largest directories to report per root")
	fs.IntVar(&opts.MaxDepth, "dirshape-max-depth", opts.MaxDepth, "dirshape: deepest level a scan descends to (deeper directories are counted as such, not entered)")
	fs.BoolVar(&opts.CrossMounts, "dirshape-cross-mounts", opts.CrossMounts, "dirshape: also scan the other mounts under each root (each as its own root; hung mounts are never entered)")
	fs.BoolVar(&opts.VolumeMounts, "dirshape-volume-mounts", opts.VolumeMounts, "dirshape: scan each pod volume, and each Docker/Podman/containerd volume, that is a mount of its own")
}

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirDirShape,
		Description:    "bounded directory-shape statistics of the kubelet, runtime and CSI directories: entry counts, largest directories, .deleting~ leftovers, ext4 nlink anomalies; never enters a hung mount",
		Requires:       "root: the kubelet's, runtime's and CSI trees (/var/lib/kubelet, /var/lib/containerd, ...)",
		DefaultEnabled: true,
		DefaultTimeout: 60 * time.Second,
		After:          []string{collectors.MountprobeName},
		// Every run reads the host's mount table through a worker first;
		// a child started early (while mountprobe runs) has it ready.
		PrestartWorker: true,
		Options:        &opts,
		Flags:          flags,
		Files:          files,
		Run:            collect,
	})
	isolate.RegisterOp(opDirShapeScan, isolate.Typed(func(rq DirShapeScanRequest) (any, error) {
		return ScanDirShape(rq), nil
	}))
}

// unit is one root to scan.
type unit struct {
	seen    string // as nodesnap sees it (under --root)
	display string // the host's path
	kind    string
	res     layout.DirShapeRoot
}

type dsCollector struct {
	env        *collectors.Env
	opts       Options
	selfMounts []procfs.Mount
	hostMounts []procfs.Mount
	soft       time.Time
	mu         sync.Mutex
	notes      []string
}

func collect(ctx context.Context, env *collectors.Env) error {
	opts := defaults
	if err := env.Options(&opts); err != nil {
		return err
	}
	if opts.Top <= 0 {
		opts.Top = defaults.Top
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = defaults.MaxDepth
	}
	started := time.Now()
	c := &dsCollector{env: env, opts: opts, soft: time.Now().Add(time.Hour)}
	if dl, ok := ctx.Deadline(); ok {
		c.soft = dl.Add(-min(2*time.Second, time.Until(dl)/4))
	}

	// Our own table says which mounts lie below each root (our path
	// walks cross them); the host's (pid 1's) which volumes the kubelet
	// still has mounted.
	var err error
	c.selfMounts, err = c.readMounts(ctx, "self")
	if err != nil {
		c.notef("nodesnap's own mount table could not be read (%v): mounts below the roots are not listed, and pod volume mounts are not scanned", err)
	}
	c.hostMounts, err = env.Host().HostMounts(ctx)
	if err != nil {
		c.hostMounts = c.selfMounts
	}

	roots := opts.Roots
	if len(roots) == 0 {
		roots = DirShapeDefaultRoots
	}
	units := c.units(roots)
	c.scanAll(ctx, units)

	rep := layout.DirShapeReport{StartedAt: started.UTC(), Settings: layout.DirShapeSettings{
		MaxEntries: opts.MaxEntries, MaxSeconds: opts.MaxTime.Seconds(), MaxDirSeconds: opts.MaxDirTime.Seconds(), Top: opts.Top, MaxDepth: opts.MaxDepth,
		CrossMounts: opts.CrossMounts, VolumeMounts: opts.VolumeMounts}, Roots: []layout.DirShapeRoot{}}
	present := 0
	for _, u := range units {
		r := u.res
		layout.MarkDeletingMounted(r.Deleting, c.mountedUnder)
		rep.DeletingCount += r.DeletingCount
		rep.NlinkAnomalies += len(r.NlinkAnomalies)
		if r.CountsAreLowerBounds {
			rep.LowerBounds++
		}
		if r.Status != layout.DirShapeAbsent {
			present++
		}
		rep.Roots = append(rep.Roots, r)
	}
	rep.DurationMS = shared.Millis(time.Since(started))
	rep.Notes = c.notes
	if err := env.WriteJSON(layout.ShapeFile, rep); err != nil {
		return err
	}
	if err := env.WriteFile("summary.txt", []byte(dsSummary(&rep))); err != nil {
		return err
	}
	if rep.LowerBounds > 0 {
		env.Notef("%d root(s) were not scanned to the end: their counts are lower bounds", rep.LowerBounds)
	}
	if present == 0 && len(opts.Roots) == 0 {
		return fmt.Errorf("none of the kubelet, runtime or CSI directories exist: %w", collectors.ErrUnsupported)
	}
	return nil
}

func (c *dsCollector) notef(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// readMounts reads a mount table in a worker: the read takes the kernel's
// namespace lock, which an unmount stuck on a dead server can hold.
func (c *dsCollector) readMounts(ctx context.Context, task string) ([]procfs.Mount, error) {
	res, err := c.env.Host().Mountinfo(ctx, task, 32<<20)
	if err != nil {
		return nil, err
	}
	ms, _ := procfs.ParseMountInfo(res.Data)
	return ms, nil
}

// displayPath is the host's path for a path nodesnap sees.
func (c *dsCollector) displayPath(seen string) string {
	if hp, ok := c.env.Host().Host(seen); ok {
		return string(hp)
	}
	return seen
}

// units lists the roots and, as asked, the mounts below them, each to be
// scanned on its own.
func (c *dsCollector) units(roots []string) []*unit {
	var units []*unit
	seen := map[string]bool{}
	add := func(u *unit) {
		if seen[u.seen] {
			return
		}
		seen[u.seen] = true
		u.res = layout.DirShapeRoot{Path: u.display, Kind: u.kind, Largest: []layout.DirShapeDir{}, NlinkAnomalies: []layout.DirShapeDir{}, Deleting: []layout.DeletingGroup{}}
		units = append(units, u)
	}
	for _, r := range roots {
		r = path.Clean("/" + r)
		add(&unit{seen: c.env.Host().Seen(hostfs.Path(r)), display: r, kind: "root"})
	}
	const maxMountUnits = 2000
	n := 0
	for _, r := range roots {
		rs := c.env.Host().Seen(hostfs.Clean(r))
		for _, m := range c.selfMounts {
			rel, ok := strings.CutPrefix(m.MountPoint, strings.TrimSuffix(rs, "/")+"/")
			if !ok || rel == "" || procfs.IsPseudoFS(m.FSType) {
				continue
			}
			kind := ""
			switch {
			case c.opts.VolumeMounts && (isPodVolume(rs, rel) || isRuntimeVolume(rs, rel)):
				kind = "volume_mount"
			case c.opts.CrossMounts:
				kind = "mount"
			default:
				continue
			}
			if n >= maxMountUnits {
				c.notef("more than %d mounts below the roots: the rest were not scanned", maxMountUnits)
				return units
			}
			n++
			add(&unit{seen: m.MountPoint, display: c.displayPath(m.MountPoint), kind: kind})
		}
	}
	return units
}

// isPodVolume reports whether rel, a mountpoint relative to root, is a
// pod volume (or below one): <uid>/volumes/<plugin>/<volume>/..., with
// root the kubelet's pods directory (or the kubelet directory itself).
func isPodVolume(root, rel string) bool {
	parts := strings.Split(rel, "/")
	if path.Base(root) != "pods" {
		if len(parts) == 0 || parts[0] != "pods" {
			return false
		}
		parts = parts[1:]
	}
	return len(parts) >= 4 && parts[1] == "volumes"
}

// isRuntimeVolume reports whether rel, a mountpoint relative to root, is
// a container runtime's named volume (or below one): the _data directory
// of volumes/<name>/_data (Docker: /var/lib/docker/volumes, Podman:
// /var/lib/containers/storage/volumes) or volumes/<namespace>/<name>/_data
// (nerdctl, containerd's Docker-like CLI). A local-driver volume created
// with a device (docker volume create -o device=...) is mounted there.
func isRuntimeVolume(root, rel string) bool {
	parts := strings.Split(strings.Trim(path.Join(root, rel), "/"), "/")
	start := len(strings.Split(strings.Trim(root, "/"), "/"))
	for i := start; i < len(parts); i++ {
		if parts[i] != "_data" {
			continue
		}
		if (i >= 2 && parts[i-2] == "volumes") || (i >= 3 && parts[i-3] == "volumes") {
			return true
		}
	}
	return false
}

// mountOf returns the mount holding p (as nodesnap sees it).
func (c *dsCollector) mountOf(p string) (procfs.Mount, bool) {
	var best procfs.Mount
	found := false
	for _, m := range c.selfMounts {
		mp := m.MountPoint
		if p == mp || mp == "/" || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
			if !found || len(mp) >= len(best.MountPoint) {
				best, found = m, true
			}
		}
	}
	return best, found
}

// mountedUnder lists mountpoints at or below a host path, from the host's
// table and from nodesnap's own (where the same place is under --root).
func (c *dsCollector) mountedUnder(p string) []string {
	var out []string
	check := func(ms []procfs.Mount, q string) {
		for _, m := range ms {
			if m.MountPoint == q || strings.HasPrefix(m.MountPoint, q+"/") {
				out = append(out, m.MountPoint)
			}
		}
	}
	check(c.hostMounts, p)
	if sp := c.env.Host().Seen(hostfs.Path(p)); sp != p || len(out) == 0 {
		check(c.selfMounts, sp)
	}
	sort.Strings(out)
	out = uniq(out)
	return out
}

func uniq(s []string) []string {
	j := 0
	for i, v := range s {
		if i == 0 || v != s[j-1] {
			s[j] = v
			j++
		}
	}
	return s[:j]
}

func (c *dsCollector) scanAll(ctx context.Context, units []*unit) {
	workers := max(c.env.Workers, 1)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for _, u := range units {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.scan(ctx, u)
		}()
	}
	wg.Wait()
}

// scanGrace is added to a scan's own time budget for its worker's hard
// deadline: starting, and sending the answer back.
const scanGrace = 5 * time.Second

func (c *dsCollector) scan(ctx context.Context, u *unit) {
	env := c.env
	r := &u.res
	if m, ok := c.mountOf(u.seen); ok {
		r.Mountpoint, r.FSType = c.displayPath(m.MountPoint), m.FSType
	}
	host, onHost := env.Host().Host(u.seen)
	if onHost && env.Host().IsHung(host) {
		r.Status = layout.DirShapeSkippedHung
		r.CountsAreLowerBounds = true
		r.StopReason = "on or below a mount found hung earlier in this run: not touched"
		return
	}
	remaining := time.Until(c.soft)
	if remaining < time.Second || ctx.Err() != nil {
		r.Status = layout.DirShapeSkippedTimeout
		r.CountsAreLowerBounds = true
		r.StopReason = "the collector's deadline came before this root's turn"
		return
	}
	// One short probe first: a root on a hung filesystem costs one probe
	// deadline, not a scan's.
	var st isolate.StatResult
	err := c.do(ctx, 0, isolate.OpStat, u.seen, isolate.StatRequest{Path: u.seen, Follow: true}, &st)
	var he *isolate.HungError
	switch {
	case errors.As(err, &he):
		c.hung(u, he)
		return
	case errors.Is(err, hostfs.ErrHung):
		r.Status = layout.DirShapeSkippedHung
		r.CountsAreLowerBounds = true
		r.StopReason = "on or below a mount found hung earlier in this run: not touched"
		return
	case errors.Is(err, unix.ENOENT):
		r.Status = layout.DirShapeAbsent
		r.Mountpoint, r.FSType = "", ""
		return
	case err != nil:
		r.Status = layout.DirShapeFailed
		r.Error = err.Error()
		return
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		r.Status = layout.DirShapeNotDir
		return
	}
	budget := c.opts.MaxTime
	if budget <= 0 || budget > remaining-scanGrace {
		budget = max(remaining-scanGrace, remaining/2)
	}
	req := DirShapeScanRequest{Path: u.seen, Display: u.display, MaxEntries: c.opts.MaxEntries, MaxTime: budget, MaxDirTime: c.opts.MaxDirTime,
		Top: c.opts.Top, MaxDepth: c.opts.MaxDepth}
	prefix := strings.TrimSuffix(u.seen, "/") + "/"
	for _, m := range c.selfMounts {
		if strings.HasPrefix(m.MountPoint, prefix) {
			req.Exclude = append(req.Exclude, m.MountPoint)
		}
	}
	hard := min(budget+scanGrace, time.Until(c.soft))
	var res layout.DirShapeRoot
	err = c.do(ctx, hard, opDirShapeScan, u.seen, req, &res)
	switch {
	case errors.As(err, &he):
		c.hung(u, he)
		return
	case err != nil:
		r.Status = layout.DirShapeFailed
		r.Error = err.Error()
		return
	}
	res.Kind, res.Mountpoint, res.FSType = u.kind, r.Mountpoint, r.FSType
	*r = res
}

// do runs a worker op on a root as nodesnap sees it: under the host-access
// policy when it lies under the roots (a mount of nodesnap's own outside
// them is reached directly).
func (c *dsCollector) do(ctx context.Context, timeout time.Duration, op, seen string, req, resp any) error {
	if hp, ok := c.env.Host().Host(seen); ok {
		return c.env.Host().Do(ctx, timeout, op, hp, req, resp)
	}
	return c.env.DoTimeout(ctx, timeout, op, seen, req, resp)
}

// hung records a root whose probe or scan did not answer, and tells the
// run, so later collectors stay out of it.
func (c *dsCollector) hung(u *unit, he *isolate.HungError) {
	r := &u.res
	r.Status = layout.DirShapeHung
	r.CountsAreLowerBounds = true
	r.Error = he.Error()
	r.StopReason = "its filesystem did not answer: nothing was counted"
	if host, ok := c.env.Host().Host(u.seen); ok {
		c.env.Host().ReportHungMount(host, he.Evidence)
	}
	c.env.Partialf("%s did not answer within %s", u.display, he.Timeout)
}

func dsSummary(r *layout.DirShapeReport) string {
	var b strings.Builder
	perDir := ""
	if r.Settings.MaxDirSeconds > 0 {
		perDir = fmt.Sprintf("; a huge directory left after %gs", r.Settings.MaxDirSeconds)
	}
	fmt.Fprintf(&b, "dirshape: %d root(s) in %.2fs (each bounded by %d entries and %gs%s; top %d directories)\n",
		len(r.Roots), r.DurationMS/1000, r.Settings.MaxEntries, r.Settings.MaxSeconds, perDir, r.Settings.Top)
	fmt.Fprintf(&b, ".deleting~ leftovers: %d; ext4 nlink anomalies: %d; roots with lower-bound counts: %d\n",
		r.DeletingCount, r.NlinkAnomalies, r.LowerBounds)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	var absent []string
	for _, x := range r.Roots {
		if x.Status == layout.DirShapeAbsent {
			absent = append(absent, x.Path)
		}
	}
	if len(absent) > 0 {
		fmt.Fprintf(&b, "absent: %s\n", strings.Join(absent, ", "))
	}
	for _, x := range r.Roots {
		if x.Status == layout.DirShapeAbsent {
			continue
		}
		fmt.Fprintf(&b, "\n%s  [%s", x.Path, x.Kind)
		if x.FSType != "" {
			fmt.Fprintf(&b, ", %s on %s", x.FSType, x.Mountpoint)
		}
		fmt.Fprintf(&b, "]  %s\n", x.Status)
		if x.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", x.Error)
		}
		switch x.Status {
		case layout.DirShapeNotDir, layout.DirShapeFailed, layout.DirShapeSkippedHung, layout.DirShapeHung, layout.DirShapeSkippedTimeout:
			if x.StopReason != "" {
				fmt.Fprintf(&b, "  %s\n", x.StopReason)
			}
			continue
		}
		if x.CountsAreLowerBounds {
			fmt.Fprintf(&b, "  COUNTS ARE LOWER BOUNDS: %s\n", x.StopReason)
		}
		fmt.Fprintf(&b, "  entries %d (dirs %d, files %d, symlinks %d, other %d), empty dirs %d, max depth %d\n",
			x.Entries, x.Dirs, x.Files, x.Symlinks, x.Other, x.EmptyDirs, x.MaxDepth)
		fmt.Fprintf(&b, "  %.0f entries/s over %.1fms; %d mount(s) below not entered; %d unreadable\n",
			x.EntriesPerSecond, x.DurationMS, x.MountsNotEntered, x.Unreadable)
		for _, d := range x.NlinkAnomalies {
			fmt.Fprintf(&b, "  NLINK ANOMALY: %s has %d subdirectories but st_nlink %d (ext4 dir_nlink overflow)\n", d.Path, d.Subdirs, d.Nlink)
		}
		if len(x.Largest) > 0 {
			fmt.Fprintf(&b, "  largest directories (entries, subdirs, inode size, nlink):\n")
			for _, d := range x.Largest {
				more := ""
				if d.LowerBound() {
					more = "  (not read to the end: at least)"
				}
				if d.EstimatedEntries > 0 {
					more += fmt.Sprintf("  [about %d by its inode: %s]", d.EstimatedEntries, d.EstimateBasis)
				}
				fmt.Fprintf(&b, "    %10d %10d %12d %6d  %s%s\n", d.Entries, d.Subdirs, d.InodeSize, d.Nlink, d.Path, more)
			}
		}
		for _, g := range x.Deleting {
			fmt.Fprintf(&b, "  .deleting~ in %s: %d (empty %d, not empty %d, unknown %d)\n", g.Parent, g.Count, g.Empty, g.NotEmpty, g.Unknown)
			for _, o := range g.Originals {
				state := "exists: unknown"
				if o.Exists != nil {
					state = fmt.Sprintf("exists: %v", *o.Exists)
				}
				mounted := "not mounted"
				if o.Mounted {
					mounted = "STILL MOUNTED at " + strings.Join(o.Mounts, ", ")
				}
				fmt.Fprintf(&b, "    original %s: %d leftover(s), %s, %s\n", o.Name, o.Count, state, mounted)
			}
		}
	}
	return b.String()
}
