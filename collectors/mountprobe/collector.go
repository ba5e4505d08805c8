package mountprobe

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// opMountProbe is the worker operation that stats and statfs()es one
// mountpoint. Both calls run in the same worker item, so a hung mount
// costs one deadline, and the hang evidence shows which call blocked.
const opMountProbe = "mountprobe.probe"

// Options are mountprobe's own settings. The probe deadline is
// the run's --probe-timeout.
type Options struct {
	// MaxWorkers bounds probes running at once that are not stuck.
	// --workers probes run at once normally; a probe still running after
	// SlowAfter no longer counts against either bound, so another probe
	// takes its place at once (the stuck one holds a thread of a worker
	// process, which goes on serving other probes). Network and FUSE
	// mounts, the ones likely to hang, are started up to MaxWorkers at
	// once.
	MaxWorkers int `json:"max_workers"`
	// MaxStuck bounds the probes stuck past SlowAfter that still wait
	// for their deadline, together with the earlier runs' probes found
	// still stuck, so that hung mounts cost about one probe deadline in
	// all, not one per MaxWorkers of them, while a table of thousands of
	// hung mounts cannot leave thousands of requests on sick
	// filesystems. A stuck probe holds a thread, not a process: a worker
	// runs up to isolate.WorkerItems() probes and is retired after 32
	// stuck ones, so 256 stuck probes take about 8 worker processes.
	MaxStuck int `json:"max_stuck"`
	// SlowAfter is when a probe counts as stuck for scheduling.
	SlowAfter time.Duration `json:"slow_after"`
	// MaxPerNamespace bounds the network and FUSE probes of one mount
	// namespace running at once (0: half of MaxWorkers, at least
	// --workers), so that a namespace full of hung mounts cannot take
	// every worker. Probes of the kubelet, runtime and CSI paths of the
	// host are not bounded by it.
	MaxPerNamespace int `json:"max_per_namespace,omitempty"`
	// First lists more paths whose mounts (and the mounts on the way to
	// them) are probed first, like the kubelet, runtime and CSI roots.
	First []string `json:"first,omitempty"`
}

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{MaxWorkers: 32, MaxStuck: 256, SlowAfter: 50 * time.Millisecond}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	fs.IntVar(&opts.MaxWorkers, "mountprobe-max-workers", opts.MaxWorkers,
		"mountprobe: most probes at once, not counting probes stuck on hung mounts (at least --workers)")
	fs.IntVar(&opts.MaxStuck, "mountprobe-max-stuck", opts.MaxStuck,
		"mountprobe: most probes stuck on hung mounts, besides --mountprobe-max-workers: this run's waiting for the probe deadline and earlier runs' still stuck (a mount an earlier run's probe is stuck on is reported hung, not probed again)")
	fs.IntVar(&opts.MaxPerNamespace, "mountprobe-max-per-namespace", opts.MaxPerNamespace,
		"mountprobe: most network and FUSE probes of one mount namespace at once (0: half of --mountprobe-max-workers)")
	fs.StringSliceVar(&opts.First, "mountprobe-first", opts.First,
		"mountprobe: more paths (host paths, comma-separated) whose mounts are probed first, besides the kubelet, runtime and CSI roots")
	fs.DurationVar(&opts.SlowAfter, "mountprobe-slow-after", opts.SlowAfter,
		"mountprobe: a probe not answered after this long counts as stuck for scheduling, and another probe starts in its place")
}

// firstRoots are the host paths whose mounts are probed first: the
// kubelet, the container runtimes and CSI drivers. A hung mount here stops
// pods; one elsewhere (a daemon's private namespace, a user's FUSE mount)
// usually does not. Pod volume paths of a kubelet with another --root-dir
// are recognised by their shape (see kubeletShaped).
var firstRoots = []string{
	"/var/lib/kubelet",
	"/var/lib/containerd", "/run/containerd",
	"/var/lib/docker", "/run/docker",
	"/var/lib/containers", "/run/containers", "/var/lib/crio", "/run/crio",
	"/var/lib/csi-hostpath-data", "/csi",
}

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirMountProbe,
		Description:    "stat + statfs of every mount of every mount namespace, each in an isolated worker with the probe deadline: ok, hung or error, latency, class; hung mounts are skipped by every later collector",
		Requires:       "root: a stat and statfs of every mount, pod volumes included",
		DefaultEnabled: true,
		// A few probe deadlines: probes run concurrently and stuck
		// probes are replaced at once (up to --mountprobe-max-stuck),
		// so even many hung mounts cost about one deadline.
		DefaultTimeout: 20 * time.Second,
		// storageclients finds the filesystems already stuck in the
		// kernel; their mounts are reported hung without a probe.
		After:   []string{layout.DirStorageClients},
		Options: &opts,
		Flags:   flags,
		Files:   files,
		Run:     collect,
	})
	isolate.RegisterOp(opMountProbe, isolate.Typed(probeOp))
	isolate.RegisterOp(opMountEarlier, isolate.Typed(earlierOp))
}

// mpNamespace is one mount namespace and the tasks in it.
type mpNamespace struct {
	inode uint64
	pids  []int
	rep   int // task whose mountinfo is read ("self" when rep == 0)
	host  bool
	self  bool
	// first: its kubelet, runtime and CSI paths come first. The host's
	// namespace, or nodesnap's own when pid 1's cannot be read.
	first bool
	// prefix is prepended to a mountpoint to reach it from nodesnap:
	// "" in nodesnap's own namespace, /proc/<rep>/root elsewhere.
	prefix string
	// raw is the mount table as read, dropped once its items are built.
	raw []byte
	// mounts are the table's mounts that finding fusectl looks at
	// (fusectl, network and FUSE mounts), not the whole table: each item
	// keeps what it needs of its mount.
	mounts []procfs.Mount
	// nMounts is how many mounts the table lists.
	nMounts int
	err     string
}

// listNamespaces finds every distinct mount namespace and its tasks.
func listNamespaces(fs *hostfs.FS) (map[uint64]*mpNamespace, uint64, uint64, error) {
	found, err := fs.MountNamespaces()
	if err != nil {
		return nil, 0, 0, err
	}
	nss := make(map[uint64]*mpNamespace, len(found.Tasks))
	for ino, pids := range found.Tasks {
		nss[ino] = &mpNamespace{inode: ino, pids: pids}
	}
	return nss, found.Host, found.Self, nil
}

// mpItem is one distinct mount: one record, at most one probe.
type mpItem struct {
	rec layout.MountProbe
	// major and minor are what is kept of the mount beside its record:
	// a copy of the whole parsed line (options and all) cost hundreds of
	// bytes a mount. (Its parent is linked in addTable, from the table.)
	major, minor uint32
	ns           *mpNamespace
	class        procfs.FSClass
	order        int
	hidden       bool // over-mounted in its namespace
	autofs       bool
	// parent is the nearest ancestor mount in the probe namespace: its
	// path is walked to reach this one, so it is probed first. devRep is
	// the first mount of the same filesystem: when it hangs, this one is
	// known hung without spending another deadline.
	parent, devRep *mpItem
	waiters        []*mpItem
	pending        int
	underHung      string // hung mount this one lies under
	hangEvidence   *layout.HangEvidence
	started        time.Time
	state          int
	// own is the item's own priority; prio the effective one, the most
	// urgent of its own and of every item waiting for it.
	own, prio mpPrio
	likely    bool // network or FUSE: likely to hang
	earlier   bool // an earlier run's probe is still stuck on it
	kernel    bool // the kernel's state shows it stuck (Common.Stuck)
}

// mpItem states.
const (
	mpWaiting = iota // dependencies unfinished
	mpReady
	mpRunning
	mpDone
)

func className(c procfs.FSClass) string {
	if c == procfs.ClassOther {
		return "local"
	}
	return c.String()
}

type prober struct {
	env          *collectors.Env
	probeTimeout time.Duration
	base, max    int
	maxStuck     int
	peakStuck    int
	perNS        int
	reserved     int
	first        []string
	slowAfter    time.Duration
	started      time.Time
	fusectl      []string
	notes        []string
	mu           sync.Mutex
	// limitMemory sets the process's soft memory limit as the items are
	// built (nil: left alone, as in tests).
	limitMemory func(int64)
}

// mountprobe's soft memory limit, sized from its tables. Its live data is
// about 0.9 KiB a mount at its peak (the items, and the raw tables while
// they are turned into items), but the collection's GC setting
// (isolate.TuneGC) lets the heap grow to 5x the live data and on to 256
// MiB: 265 MiB peak RSS at 30,000 mounts without a limit of its own. A
// fixed limit either wastes memory on a small table or, below the live
// data of a large one, makes the GC run without pause; this one leaves
// 1 KiB a mount plus 8 MiB (runtime, package data, workers' pipes), at
// least 32 MiB, at most the collection's 256 MiB. While the tables are
// turned into items, the lines of the table being read count as mounts
// and the tables still to read by their bytes (see buildItems). At 30,000
// mounts that is 37 MiB and costs at most 1.5x the time of the collection's
// general limit (test/bench/mountprobe_scale.sh measures both; 1.1-1.5 here).
const (
	memoryFloor    = 32 << 20
	memoryBase     = 8 << 20
	memoryPerMount = 1 << 10
	memoryCeiling  = 256 << 20
)

// memoryLimit is the limit for mounts mounts.
func memoryLimit(mounts int) int64 {
	return min(max(memoryBase+int64(mounts)*memoryPerMount, memoryFloor), memoryCeiling)
}

func collect(ctx context.Context, env *collectors.Env) error {
	// The floor until the tables' size is known.
	isolate.LimitMemory(memoryLimit(0))
	opts := defaults
	if err := env.Options(&opts); err != nil {
		return err
	}
	started := time.Now()
	p := &prober{env: env, probeTimeout: env.ProbeTimeout, base: env.Workers, slowAfter: opts.SlowAfter, started: started}
	if p.probeTimeout <= 0 {
		p.probeTimeout = 3 * time.Second
	}
	if p.base < 1 {
		p.base = 1
	}
	p.max = max(opts.MaxWorkers, p.base)
	p.perNS = opts.MaxPerNamespace
	if p.perNS <= 0 {
		p.perNS = max(p.base, p.max/2)
	}
	p.perNS = min(p.perNS, p.max)
	p.maxStuck = max(opts.MaxStuck, 0)
	// Workers only the first tier may use: a probe of the kubelet's
	// mount never waits for a whole probe deadline behind stuck probes
	// of other namespaces.
	p.reserved = min(p.base, p.max-p.base)
	p.first = opts.First
	if p.slowAfter <= 0 {
		p.slowAfter = 50 * time.Millisecond
	}
	// The pool is sized for the maximum; the scheduler below decides how
	// many probes actually run.
	env.Workers = p.max + p.maxStuck
	env.ProbeTimeout = p.probeTimeout

	// Leave time to kill stuck workers (each may take isolate.ReapGrace)
	// and to write the report.
	soft := time.Now().Add(10 * time.Minute)
	if dl, ok := ctx.Deadline(); ok {
		total := time.Until(dl)
		reserve := min(isolate.ReapGrace+time.Second, total/3)
		soft = dl.Add(-reserve)
	}
	pctx, cancel := context.WithDeadline(ctx, soft)
	defer cancel()

	nss, hostNS, selfNS, err := listNamespaces(env.Host())
	if err != nil {
		return fmt.Errorf("finding mount namespaces: %w", err)
	}
	order := p.readTables(pctx, nss, hostNS, selfNS)
	p.limitMemory = isolate.LimitMemory
	items := p.buildItems(order)

	p.fusectl = findFusectl(env, order)
	fuseSeen := false
	for _, it := range items {
		if procfs.IsFUSE(it.rec.FSType) && it.major == 0 {
			fuseSeen = true
			it.rec.FUSE = &layout.MountProbeFUSE{Conn: it.minor, WaitingBefore: p.fuseWaiting(it.minor)}
		}
	}
	for _, ns := range order {
		ns.mounts = nil
	}
	if fuseSeen && len(p.fusectl) == 0 {
		p.notef("fusectl is not mounted (normally at /sys/fs/fuse/connections): the FUSE request queues could not be read")
	}

	earlier := p.findEarlier(pctx, items)
	kernelStuck := p.markKernelStuck(items)
	// MaxStuck bounds the stuck probes of every run together.
	p.maxStuck = max(p.maxStuck-earlier, 0)

	p.schedule(pctx, items)

	rep := layout.MountProbeReport{StartedAt: started.UTC(), ProbeTimeoutMS: p.probeTimeout.Milliseconds(),
		Workers: p.base, MaxWorkers: p.max, MaxStuck: p.maxStuck, PeakStuck: p.peakStuck, EarlierStuck: earlier, MaxPerNamespace: p.perNS, Reserved: p.reserved, Counts: map[string]int{}}
	for _, ns := range order {
		mn := layout.MountProbeNamespace{Inode: ns.inode, Host: ns.host, Self: ns.self, PID: ns.rep, Tasks: len(ns.pids),
			Mounts: ns.nMounts, Error: ns.err}
		mn.PIDs = ns.pids[:min(len(ns.pids), 16)]
		if ns.rep > 0 {
			if r, err := isolate.ReadFileLimited(env.ProcPath(strconv.Itoa(ns.rep), "comm"), 256); err == nil {
				mn.Comm = strings.TrimSpace(string(r.Data))
			}
		}
		rep.Namespaces = append(rep.Namespaces, mn)
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].class != items[j].class {
			return items[i].class < items[j].class
		}
		return items[i].order < items[j].order
	})
	// The records stay in their items (a copy of 30,000 took 10 MB).
	probes := make([]*layout.MountProbe, len(items))
	for i, it := range items {
		rep.Counts[it.rec.Result]++
		probes[i] = &it.rec
	}
	rep.DurationMS = shared.Millis(time.Since(started))
	rep.Notes = p.notes
	if err := writeReport(env, layout.ProbesFile, &rep, probes); err != nil {
		return err
	}
	if err := writeReport(env, "summary.txt", &rep, probes, writeSummary); err != nil {
		return err
	}
	if n := rep.Counts[layout.ProbeHung]; n > 0 {
		env.Notef("%d mount(s) hung: stat/statfs did not answer within %s", n, p.probeTimeout)
	}
	if kernelStuck > 0 {
		env.Notef("%d mount(s) already stuck in the kernel (requests waiting and tasks blocked on them, found by %s) were reported hung without a probe", kernelStuck, layout.DirStorageClients)
	}
	if earlier > 0 {
		env.Notef("%d probe(s) of earlier runs are still stuck on hung mounts: those mounts were reported hung without a new probe, and --mountprobe-max-stuck allowed %d more", earlier, p.maxStuck)
	}
	if n := rep.Counts[layout.ProbeUnfinished]; n > 0 {
		env.Partialf("%d mount(s) could not be probed before the collector's deadline", n)
	}
	for _, ns := range order {
		if ns.err != "" && ns.host {
			env.Partialf("the host's mount table could not be read: %s", ns.err)
		}
	}
	return nil
}

func (p *prober) notef(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

// readTables reads each namespace's mountinfo through a worker: the read
// takes the kernel's global namespace lock, which an unmount stuck on a
// dead server can hold. The host's table is read first; if that read
// hangs, every other one would too, so they are not attempted.
func (p *prober) readTables(ctx context.Context, nss map[uint64]*mpNamespace, hostNS, selfNS uint64) []*mpNamespace {
	order := make([]*mpNamespace, 0, len(nss))
	for _, ns := range nss {
		sort.Ints(ns.pids)
		ns.rep = ns.pids[0]
		ns.host = ns.inode == hostNS
		ns.self = ns.inode == selfNS
		if ns.self {
			ns.prefix = ""
		} else {
			ns.prefix = p.env.ProcPath(strconv.Itoa(ns.rep), "root")
		}
		ns.first = ns.host || (hostNS == 0 && ns.self)
		order = append(order, ns)
	}
	if hostNS == 0 {
		p.notef("the host's mount namespace (pid 1's) could not be identified: nodesnap's own is probed first in its place")
	}
	rank := func(ns *mpNamespace) int {
		switch {
		case ns.host:
			return 0
		case ns.self:
			return 1
		}
		return 2
	}
	sort.Slice(order, func(i, j int) bool {
		if ri, rj := rank(order[i]), rank(order[j]); ri != rj {
			return ri < rj
		}
		return order[i].rep < order[j].rep
	})
	read := func(ns *mpNamespace) error {
		task := strconv.Itoa(ns.rep)
		if ns.self {
			// Paths relative to our own root: probed as they are.
			task = "self"
		}
		src := p.env.ProcPath(task, "mountinfo")
		res, err := p.env.Host().Mountinfo(ctx, task, 32<<20)
		if err != nil {
			ns.err = fmt.Sprintf("reading %s: %v", src, err)
			return err
		}
		// Parsed by buildItems a part at a time: a parsed table of 30,000
		// mounts is 20 MB.
		ns.raw = res.Data
		if res.Truncated {
			// Mounts past the cut are neither listed nor probed.
			p.env.Partialf("mount namespace %d: mountinfo longer than 32 MiB; the mounts after it were not read or probed", ns.inode)
		}
		return nil
	}
	if len(order) == 0 {
		return order
	}
	if err := read(order[0]); err != nil {
		var he *isolate.HungError
		if errors.As(err, &he) {
			for _, ns := range order[1:] {
				ns.err = "not read: reading the first mount table hung (an unmount stuck on a dead server may hold the kernel's namespace lock)"
			}
			return order
		}
	}
	sem := make(chan struct{}, p.base)
	var wg sync.WaitGroup
	for _, ns := range order[1:] {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = read(ns)
		}()
	}
	wg.Wait()
	return order
}

// safePath reports whether no network or FUSE mount of ns lies on the
// way to mountpoint p (so walking to it cannot wait on a server).
func safePath(ns *mpNamespace, p string) bool {
	for _, m := range ns.mounts {
		c := procfs.Classify(m)
		if c != procfs.ClassNetwork && c != procfs.ClassFUSE {
			continue
		}
		if m.MountPoint == "/" || p == m.MountPoint || strings.HasPrefix(p, m.MountPoint+"/") {
			return false
		}
	}
	return true
}
