package collectors

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/procfs"
	"github.com/nodesnap/nodesnap/isolate"
)

// opMountProbe is the worker operation that stats and statfs()es one
// mountpoint. Both calls run in the same worker item, so a hung mount
// costs one deadline, and the hang evidence shows which call blocked.
const opMountProbe = "mountprobe.probe"

// Probe results, as in MountProbe.Result.
const (
	ProbeOK      = "ok"
	ProbeHung    = "hung"
	ProbeError   = "error"
	ProbeSkipped = "skipped"
	// ProbeUnfinished is a probe cut short by the collector's own
	// deadline before its probe deadline passed: neither ok nor proven
	// hung.
	ProbeUnfinished = "unfinished"
)

// MountprobeOptions are mountprobe's own settings. The probe deadline is
// the run's --probe-timeout.
type MountprobeOptions struct {
	// MaxWorkers bounds probes running at once that are not stuck.
	// --workers probes run at once normally; a probe still running after
	// SlowAfter no longer counts against either bound, so a stuck mount
	// is replaced by a fresh worker at once. Network and FUSE mounts, the
	// ones likely to hang, are started up to MaxWorkers at once.
	MaxWorkers int `json:"max_workers"`
	// MaxStuck bounds the probes stuck past SlowAfter that still wait
	// for their deadline (each holds one worker process), so that hung
	// mounts cost about one probe deadline in all, not one per
	// MaxWorkers of them, while a table of thousands of hung mounts
	// cannot start thousands of processes.
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

var mountprobeOpts = MountprobeOptions{MaxWorkers: 32, MaxStuck: 256, SlowAfter: 200 * time.Millisecond}

// mpFirstRoots are the host paths whose mounts are probed first: the
// kubelet, the container runtimes and CSI drivers. A hung mount here stops
// pods; one elsewhere (a daemon's private namespace, a user's FUSE mount)
// usually does not. Pod volume paths of a kubelet with another --root-dir
// are recognised by their shape (see mpKubeletShaped).
var mpFirstRoots = []string{
	"/var/lib/kubelet",
	"/var/lib/containerd", "/run/containerd",
	"/var/lib/docker", "/run/docker",
	"/var/lib/containers", "/run/containers", "/var/lib/crio", "/run/crio",
	"/var/lib/csi-hostpath-data", "/csi",
}

func init() {
	Register(Spec{
		Name:           "mountprobe",
		Description:    "stat + statfs of every mount of every mount namespace, each in an isolated worker with the probe deadline: ok, hung or error, latency, class; hung mounts are skipped by every later collector",
		DefaultEnabled: true,
		// A few probe deadlines: probes run concurrently and stuck
		// workers are replaced at once (up to --mountprobe-max-stuck),
		// so even many hung mounts cost about one deadline.
		DefaultTimeout: 20 * time.Second,
		Options:        &mountprobeOpts,
		Flags: func(fs *pflag.FlagSet) {
			fs.IntVar(&mountprobeOpts.MaxWorkers, "mountprobe-max-workers", mountprobeOpts.MaxWorkers,
				"mountprobe: most probes at once, not counting workers stuck on hung mounts (at least --workers)")
			fs.IntVar(&mountprobeOpts.MaxStuck, "mountprobe-max-stuck", mountprobeOpts.MaxStuck,
				"mountprobe: most probes at once stuck on hung mounts and waiting for the probe deadline, besides --mountprobe-max-workers")
			fs.IntVar(&mountprobeOpts.MaxPerNamespace, "mountprobe-max-per-namespace", mountprobeOpts.MaxPerNamespace,
				"mountprobe: most network and FUSE probes of one mount namespace at once (0: half of --mountprobe-max-workers)")
			fs.StringSliceVar(&mountprobeOpts.First, "mountprobe-first", mountprobeOpts.First,
				"mountprobe: more paths (host paths, comma-separated) whose mounts are probed first, besides the kubelet, runtime and CSI roots")
		},
		Run: collectMountprobe,
	})
	isolate.RegisterOp(opMountProbe, isolate.Typed(mpProbeOp))
}

// MountProbeReport is mountprobe/probes.json.
type MountProbeReport struct {
	StartedAt      time.Time `json:"started_at"`
	DurationMS     float64   `json:"duration_ms"`
	ProbeTimeoutMS int64     `json:"probe_timeout_ms"`
	Workers        int       `json:"workers"`
	MaxWorkers     int       `json:"max_workers"`
	// MaxStuck bounds the probes stuck on hung mounts at once, besides
	// MaxWorkers; PeakStuck is the most there were.
	MaxStuck  int `json:"max_stuck,omitempty"`
	PeakStuck int `json:"peak_stuck,omitempty"`
	// MaxPerNamespace is the bound on one namespace's network and FUSE
	// probes at once; Reserved workers are kept for the probes that
	// come first (kubelet, runtime and CSI paths of the host).
	MaxPerNamespace int                   `json:"max_per_namespace,omitempty"`
	Reserved        int                   `json:"reserved_workers,omitempty"`
	Namespaces      []MountProbeNamespace `json:"namespaces"`
	// Counts is the number of probes per result (ok, hung, error,
	// skipped, unfinished).
	Counts map[string]int `json:"counts"`
	// Probes has one record per distinct mount, network and FUSE first.
	Probes []MountProbe `json:"probes"`
	Notes  []string     `json:"notes,omitempty"`
}

// MountProbeNamespace is one distinct mount namespace whose table was read.
type MountProbeNamespace struct {
	// Inode identifies the namespace (the number in /proc/<pid>/ns/mnt).
	Inode uint64 `json:"inode"`
	// Host is the namespace of pid 1; Self is nodesnap's own.
	Host bool `json:"host,omitempty"`
	Self bool `json:"self,omitempty"`
	// PID is the task whose mountinfo was read and through whose
	// /proc/<pid>/root its mounts were probed.
	PID  int    `json:"pid"`
	Comm string `json:"comm,omitempty"`
	// PIDs are some of the tasks in it (at most 16); Tasks counts all.
	PIDs   []int  `json:"pids"`
	Tasks  int    `json:"tasks"`
	Mounts int    `json:"mounts"`
	Error  string `json:"error,omitempty"`
}

// MountProbe is one mount's probe record.
type MountProbe struct {
	// Mountpoint is the path as the namespace's mountinfo shows it.
	Mountpoint string `json:"mountpoint"`
	// ProbePath is the path that was (or would have been) probed: the
	// mountpoint itself in nodesnap's own namespace, else
	// /proc/<pid>/root/<mountpoint>.
	ProbePath string `json:"probe_path"`
	// Namespaces lists every mount namespace with this same mount
	// (filesystem, root and mountpoint); ProbeNamespace is the one probed.
	Namespaces     []uint64 `json:"namespaces"`
	ProbeNamespace uint64   `json:"probe_namespace"`
	MountID        int      `json:"mount_id"`
	FSType         string   `json:"fstype"`
	Source         string   `json:"source"`
	Dev            string   `json:"dev"`
	Root           string   `json:"root"`
	// Class is network, fuse, block, local or pseudo.
	Class string `json:"class"`
	// First is set for mounts probed first: on a kubelet, runtime or CSI
	// path of the host, or on the way to one.
	First bool `json:"first,omitempty"`
	// Result is ok, hung, error, skipped or unfinished.
	Result string `json:"result"`
	// Probed is false when no probe ran: skipped, or hung inferred from
	// another mount of the same filesystem (HungVia).
	Probed bool   `json:"probed"`
	Errno  string `json:"errno,omitempty"`
	Error  string `json:"error,omitempty"`
	// Diagnosis says in words what the result means.
	Diagnosis  string `json:"diagnosis,omitempty"`
	SkipReason string `json:"skip_reason,omitempty"`
	HungVia    string `json:"hung_via,omitempty"`
	// LatencyMS is stat + statfs time in the worker; for a hung probe,
	// the deadline it missed.
	LatencyMS float64           `json:"latency_ms"`
	StatMS    float64           `json:"stat_ms,omitempty"`
	StatfsMS  float64           `json:"statfs_ms,omitempty"`
	StatDev   string            `json:"stat_dev,omitempty"`
	Statfs    *MountProbeStatfs `json:"statfs,omitempty"`
	FUSE      *MountProbeFUSE   `json:"fuse,omitempty"`
	// BlockedIn is where the hung probe's worker was blocked (the full
	// evidence is in the manifest's hung_mounts).
	BlockedIn string `json:"blocked_in,omitempty"`
	// StartedMS and DoneMS are when the probe started and when its
	// result was known (reported hung, for a hung one), counted from the
	// collector's start: how long a mount waited for its turn.
	StartedMS float64 `json:"started_ms,omitempty"`
	DoneMS    float64 `json:"done_ms,omitempty"`
}

// MountProbeStatfs summarises statfs(2).
type MountProbeStatfs struct {
	TypeMagic     string  `json:"type_magic"`
	BlockSize     int64   `json:"block_size"`
	TotalBytes    uint64  `json:"total_bytes"`
	FreeBytes     uint64  `json:"free_bytes"`
	AvailBytes    uint64  `json:"avail_bytes"`
	UsedPct       float64 `json:"used_pct"`
	Inodes        uint64  `json:"inodes"`
	InodesFree    uint64  `json:"inodes_free"`
	InodesUsedPct float64 `json:"inodes_used_pct"`
	ReadOnly      bool    `json:"read_only,omitempty"`
}

// MountProbeFUSE is what fusectl (/sys/fs/fuse/connections/<minor>) says
// about a FUSE mount's connection: requests queued for, or being served
// by, its daemon.
type MountProbeFUSE struct {
	Conn uint32 `json:"conn"`
	// WaitingBefore is read before any probe ran, WaitingAfter after a
	// hung or failed probe; null when fusectl could not be read.
	WaitingBefore *int `json:"waiting_before"`
	WaitingAfter  *int `json:"waiting_after,omitempty"`
}

type mpRequest struct {
	Path string `json:"path"`
}

// mpResponse is what one probe found. Failures are data here, not
// errors, so that stat's errno and statfs's are both kept.
type mpResponse struct {
	Stat        *isolate.StatResult   `json:"stat,omitempty"`
	StatErr     string                `json:"stat_err,omitempty"`
	StatErrno   int                   `json:"stat_errno,omitempty"`
	StatNS      int64                 `json:"stat_ns"`
	Statfs      *isolate.StatfsResult `json:"statfs,omitempty"`
	StatfsErr   string                `json:"statfs_err,omitempty"`
	StatfsErrno int                   `json:"statfs_errno,omitempty"`
	StatfsNS    int64                 `json:"statfs_ns"`
}

// mpProbeOp runs in a worker: lstat (the mountpoint is crossed, a
// symlink at the end is not followed) then statfs. statfs is tried even
// when stat failed, since their errors can differ.
func mpProbeOp(rq mpRequest) (any, error) {
	var r mpResponse
	t := time.Now()
	var st unix.Stat_t
	if err := unix.Lstat(rq.Path, &st); err != nil {
		r.StatErr, r.StatErrno = err.Error(), mpErrno(err)
	} else {
		s := isolate.StatFromUnix(&st)
		r.Stat = &s
	}
	r.StatNS = time.Since(t).Nanoseconds()
	t = time.Now()
	var sf unix.Statfs_t
	if err := unix.Statfs(rq.Path, &sf); err != nil {
		r.StatfsErr, r.StatfsErrno = err.Error(), mpErrno(err)
	} else {
		r.Statfs = &isolate.StatfsResult{Type: sf.Type, Bsize: sf.Bsize, Blocks: sf.Blocks, Bfree: sf.Bfree,
			Bavail: sf.Bavail, Files: sf.Files, Ffree: sf.Ffree, Flags: sf.Flags, Namelen: sf.Namelen}
	}
	r.StatfsNS = time.Since(t).Nanoseconds()
	return r, nil
}

func mpErrno(err error) int {
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return 0
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
	mounts []procfs.Mount
	// nMounts is len(mounts), kept when mounts is dropped: each item
	// has its own copy of its mount.
	nMounts int
	err     string
}

// mpListNamespaces finds every distinct mount namespace by the ns/mnt
// link of every task (threads can unshare their own). readlink of these
// links takes no lock another process can hold.
func mpListNamespaces(proc string) (map[uint64]*mpNamespace, uint64, uint64, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("listing %s: %w", proc, err)
	}
	nss := map[uint64]*mpNamespace{}
	add := func(ino uint64, tid int) {
		ns := nss[ino]
		if ns == nil {
			ns = &mpNamespace{inode: ino}
			nss[ino] = ns
		}
		ns.pids = append(ns.pids, tid)
	}
	nsOf := func(p string) (uint64, bool) {
		l, err := os.Readlink(p)
		if err != nil {
			return 0, false
		}
		ino, err := procfs.ParseMountNS(l)
		return ino, err == nil
	}
	var hostNS uint64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		base := path.Join(proc, e.Name())
		ino, ok := nsOf(base + "/ns/mnt")
		if !ok {
			continue // exited, or a kernel thread without one
		}
		add(ino, pid)
		if pid == 1 {
			hostNS = ino
		}
		tasks, err := os.ReadDir(base + "/task")
		if err != nil || len(tasks) < 2 {
			continue
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || tid == pid {
				continue
			}
			if tino, ok := nsOf(base + "/task/" + t.Name() + "/ns/mnt"); ok && tino != ino {
				add(tino, tid)
			}
		}
	}
	selfNS, _ := nsOf(path.Join(proc, "self/ns/mnt"))
	if len(nss) == 0 {
		return nil, 0, 0, fmt.Errorf("no readable mount namespace links under %s", proc)
	}
	return nss, hostNS, selfNS, nil
}

// mpItem is one distinct mount: one record, at most one probe.
type mpItem struct {
	rec    MountProbe
	m      procfs.Mount
	ns     *mpNamespace
	class  procfs.FSClass
	order  int
	hidden bool // over-mounted in its namespace
	autofs bool
	// parent is the nearest ancestor mount in the probe namespace: its
	// path is walked to reach this one, so it is probed first. devRep is
	// the first mount of the same filesystem: when it hangs, this one is
	// known hung without spending another deadline.
	parent, devRep *mpItem
	waiters        []*mpItem
	pending        int
	underHung      string // hung mount this one lies under
	hangEvidence   *isolate.HangEvidence
	started        time.Time
	state          int
	// own is the item's own priority; prio the effective one, the most
	// urgent of its own and of every item waiting for it.
	own, prio mpPrio
	likely    bool // network or FUSE: likely to hang
}

// mpPrio orders probes, lowest first: tier 0 is a kubelet, runtime or CSI
// path of the host namespace, 1 the rest of the host namespace, 2 such a
// path in another namespace, 3 the rest; then class (network, FUSE,
// block, local, pseudo); then mountinfo order.
type mpPrio struct{ tier, class, order int }

func (a mpPrio) less(b mpPrio) bool {
	if a.tier != b.tier {
		return a.tier < b.tier
	}
	if a.class != b.class {
		return a.class < b.class
	}
	return a.order < b.order
}

// mpTierFirst is the tier that may use reserved workers and is not
// bounded per namespace.
const mpTierFirst = 0

// mpFirstPath reports whether a host path is a kubelet, runtime or CSI
// path, or lies under one of extra.
func mpFirstPath(p string, extra []string) bool {
	for _, r := range mpFirstRoots {
		if mpUnder(p, r) {
			return true
		}
	}
	for _, r := range extra {
		if r != "" && mpUnder(p, path.Clean(r)) {
			return true
		}
	}
	return mpKubeletShaped(p)
}

// mpUnder reports whether p is root or lies below it.
func mpUnder(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// mpKubeletShaped recognises the kubelet's own mounts under any --root-dir:
// pods/<uid>/volumes|volume-subpaths|volumeDevices/... and
// plugins/kubernetes.io/... (CSI staging and global mounts).
func mpKubeletShaped(p string) bool {
	seg := strings.Split(p, "/")
	for i := 0; i+1 < len(seg); i++ {
		switch seg[i] {
		case "pods":
			if i+2 < len(seg) && len(seg[i+1]) >= 32 && strings.Count(seg[i+1], "-") == 4 {
				switch seg[i+2] {
				case "volumes", "volume-subpaths", "volumeDevices":
					return true
				}
			}
		case "plugins":
			if strings.HasPrefix(seg[i+1], "kubernetes.io") {
				return true
			}
		}
	}
	return false
}

// mpItem states.
const (
	mpWaiting = iota // dependencies unfinished
	mpReady
	mpRunning
	mpDone
)

func mpClassName(c procfs.FSClass) string {
	if c == procfs.ClassOther {
		return "local"
	}
	return c.String()
}

type mpProber struct {
	env          *Env
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
}

// mpMemoryLimit is mountprobe's soft memory limit. Its live data is about
// a kilobyte a mount, but the collection's GC setting (isolate.TuneGC)
// let the heap grow to 5x that and on to the 256 MiB limit: 265 MiB peak
// RSS at 30,000 mounts, 70 MiB with this limit (and probes.json
// streamed); 32 MiB gave the same peak, so the rest is live data.
const mpMemoryLimit = 40 << 20

func collectMountprobe(ctx context.Context, env *Env) error {
	isolate.LimitMemory(mpMemoryLimit)
	opts := MountprobeOptions{MaxWorkers: 32, MaxStuck: 256, SlowAfter: 200 * time.Millisecond}
	if err := env.Options(&opts); err != nil {
		return err
	}
	started := time.Now()
	p := &mpProber{env: env, probeTimeout: env.ProbeTimeout, base: env.Workers, slowAfter: opts.SlowAfter, started: started}
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
		p.slowAfter = 200 * time.Millisecond
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

	nss, hostNS, selfNS, err := mpListNamespaces(env.Proc)
	if err != nil {
		return fmt.Errorf("finding mount namespaces: %w", err)
	}
	order := p.readTables(pctx, nss, hostNS, selfNS)
	items := p.buildItems(order)

	p.fusectl = mpFindFusectl(env, order)
	fuseSeen := false
	for _, it := range items {
		if procfs.IsFUSE(it.m.FSType) && it.m.Major == 0 {
			fuseSeen = true
			it.rec.FUSE = &MountProbeFUSE{Conn: it.m.Minor, WaitingBefore: p.fuseWaiting(it.m.Minor)}
		}
	}
	for _, ns := range order {
		ns.nMounts, ns.mounts = len(ns.mounts), nil
	}
	if fuseSeen && len(p.fusectl) == 0 {
		p.notef("fusectl is not mounted (normally at /sys/fs/fuse/connections): the FUSE request queues could not be read")
	}

	p.schedule(pctx, items)

	rep := MountProbeReport{StartedAt: started.UTC(), ProbeTimeoutMS: p.probeTimeout.Milliseconds(),
		Workers: p.base, MaxWorkers: p.max, MaxStuck: p.maxStuck, PeakStuck: p.peakStuck, MaxPerNamespace: p.perNS, Reserved: p.reserved, Counts: map[string]int{}}
	for _, ns := range order {
		mn := MountProbeNamespace{Inode: ns.inode, Host: ns.host, Self: ns.self, PID: ns.rep, Tasks: len(ns.pids),
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
	probes := make([]*MountProbe, len(items))
	for i, it := range items {
		rep.Counts[it.rec.Result]++
		probes[i] = &it.rec
	}
	rep.DurationMS = mpMS(time.Since(started))
	rep.Notes = p.notes
	if err := mpWriteReport(env, "probes.json", &rep, probes); err != nil {
		return err
	}
	if err := mpWriteReport(env, "summary.txt", &rep, probes, mpWriteSummary); err != nil {
		return err
	}
	if n := rep.Counts[ProbeHung]; n > 0 {
		env.Notef("%d mount(s) hung: stat/statfs did not answer within %s", n, p.probeTimeout)
	}
	if n := rep.Counts[ProbeUnfinished]; n > 0 {
		env.Partialf("%d mount(s) could not be probed before the collector's deadline", n)
	}
	for _, ns := range order {
		if ns.err != "" && ns.host {
			env.Partialf("the host's mount table could not be read: %s", ns.err)
		}
	}
	return nil
}

// mpWriteReport writes probes.json (or, with another writer, the
// summary) one probe at a time: encoded whole, the report of 30,000
// mounts took 12 MB, and json's buffers and the indentation three times
// that, which made mountprobe's peak.
func mpWriteReport(env *Env, name string, rep *MountProbeReport, probes []*MountProbe, write ...func(io.Writer, *MountProbeReport, []*MountProbe) error) error {
	f, err := env.Create(name)
	if err != nil {
		return err
	}
	enc := mpEncodeReport
	if len(write) > 0 {
		enc = write[0]
	}
	werr := enc(f, rep, probes)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("writing %s: %w", name, werr)
	}
	return cerr
}

// mpEncodeReport writes rep as indented JSON with probes as its Probes,
// last and one at a time.
func mpEncodeReport(w io.Writer, rep *MountProbeReport, probes []*MountProbe) error {
	// The outer Probes, nil and omitted, hides the report's own.
	head, err := json.MarshalIndent(struct {
		*MountProbeReport
		Probes *int `json:"probes,omitempty"`
	}{MountProbeReport: rep}, "", "  ")
	if err != nil {
		return err
	}
	head = bytes.TrimSuffix(bytes.TrimRight(head, "\n"), []byte("\n}"))
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(head)
	bw.WriteString(",\n  \"probes\": [")
	for i, p := range probes {
		b, err := json.MarshalIndent(p, "    ", "  ")
		if err != nil {
			return err
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(b)
	}
	if len(probes) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]\n}\n")
	return bw.Flush()
}

func (p *mpProber) notef(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, fmt.Sprintf(format, args...))
}

// readTables reads each namespace's mountinfo through a worker: the read
// takes the kernel's global namespace lock, which an unmount stuck on a
// dead server can hold. The host's table is read first; if that read
// hangs, every other one would too, so they are not attempted.
func (p *mpProber) readTables(ctx context.Context, nss map[uint64]*mpNamespace, hostNS, selfNS uint64) []*mpNamespace {
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
		src := p.env.ProcPath(strconv.Itoa(ns.rep), "mountinfo")
		if ns.self {
			// Paths relative to our own root: probed as they are.
			src = p.env.ProcPath("self", "mountinfo")
		}
		var res isolate.ReadFileResult
		err := p.env.Do(ctx, isolate.OpReadFile, src, isolate.ReadFileRequest{Path: src, Max: 32 << 20}, &res)
		if err != nil {
			ns.err = fmt.Sprintf("reading %s: %v", src, err)
			return err
		}
		mounts, bad := procfs.ParseMountInfo(res.Data)
		ns.mounts = mounts
		if len(bad) > 0 {
			p.notef("mount namespace %d: %d mountinfo line(s) could not be parsed (first: %v)", ns.inode, len(bad), bad[0])
		}
		if res.Truncated {
			p.notef("mount namespace %d: mountinfo longer than 32 MiB; the rest was not read", ns.inode)
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

// buildItems turns the namespaces' tables into one item per distinct
// mount (same filesystem, root and mountpoint in several namespaces is one
// mount) and links each to the mounts that must be probed before it.
func (p *mpProber) buildItems(order []*mpNamespace) []*mpItem {
	type nsID struct {
		ns *mpNamespace
		id int
	}
	byKey := map[string]*mpItem{}
	byNSID := map[nsID]*mpItem{}
	var items []*mpItem
	for _, ns := range order {
		// The mount visible at a path is the one no other mount at the
		// same path sits on.
		under := map[string]map[int]bool{} // mountpoint -> IDs something is mounted on there
		for _, m := range ns.mounts {
			if under[m.MountPoint] == nil {
				under[m.MountPoint] = map[int]bool{}
			}
		}
		ids := map[int]procfs.Mount{}
		for _, m := range ns.mounts {
			ids[m.ID] = m
		}
		for _, m := range ns.mounts {
			if pm, ok := ids[m.ParentID]; ok && pm.MountPoint == m.MountPoint && pm.ID != m.ID {
				under[m.MountPoint][pm.ID] = true
			}
		}
		for _, m := range ns.mounts {
			key := m.Dev() + "\x00" + m.Root + "\x00" + m.MountPoint
			if it := byKey[key]; it != nil {
				it.rec.Namespaces = append(it.rec.Namespaces, ns.inode)
				byNSID[nsID{ns, m.ID}] = it
				continue
			}
			it := &mpItem{m: m, ns: ns, class: procfs.Classify(m), order: len(items)}
			it.hidden = under[m.MountPoint][m.ID]
			it.autofs = m.FSType == "autofs"
			it.rec = MountProbe{
				Mountpoint: m.MountPoint, ProbePath: ns.prefix + m.MountPoint,
				Namespaces: []uint64{ns.inode}, ProbeNamespace: ns.inode, MountID: m.ID,
				FSType: m.FSType, Source: m.Source, Dev: m.Dev(), Root: m.Root,
				Class: mpClassName(it.class),
			}
			if ns.prefix != "" && m.MountPoint == "/" {
				it.rec.ProbePath = ns.prefix + "/"
			}
			byKey[key] = it
			byNSID[nsID{ns, m.ID}] = it
			items = append(items, it)
		}
	}
	for _, it := range items {
		it.likely = it.class == procfs.ClassNetwork || it.class == procfs.ClassFUSE
		first := mpFirstPath(it.m.MountPoint, p.first)
		if it.ns.self && !first {
			if hp, ok := mpUnroot(p.env.Root, it.m.MountPoint); ok {
				first = mpFirstPath(hp, p.first)
			}
		}
		tier := 3
		switch {
		case it.ns.first && first:
			tier = 0
		case it.ns.first:
			tier = 1
		case first:
			tier = 2
		}
		it.own = mpPrio{tier: tier, class: int(it.class), order: it.order}
		it.prio = it.own
	}
	// Dependencies, in the namespace each item is probed through. The
	// probe of a filesystem (a FUSE connection, a device) that stands
	// for all its mounts, in every namespace, is its most urgent mount's.
	byPrio := append([]*mpItem(nil), items...)
	sort.SliceStable(byPrio, func(i, j int) bool { return byPrio[i].own.less(byPrio[j].own) })
	devRep := map[string]*mpItem{}
	for _, it := range byPrio {
		if it.hidden || it.autofs {
			continue
		}
		if pm, ok := byNSID[nsID{it.ns, it.m.ParentID}]; ok && pm != it {
			it.parent = pm
		}
		if r := devRep[it.rec.Dev]; r != nil {
			it.devRep = r
		} else {
			devRep[it.rec.Dev] = it
		}
	}
	mpInherit(items)
	return items
}

// mpInherit gives every item the priority of its most urgent waiter: a
// parent mount is walked to reach its children and a filesystem's first
// probe stands for its other mounts, so /var/lib/kubelet (local) is
// probed as early as the hung FUSE mount of a pod under it.
func mpInherit(items []*mpItem) {
	stack := append([]*mpItem(nil), items...)
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range []*mpItem{it.parent, it.devRep} {
			// Each change lowers a key of a finite set: this ends,
			// cycles (a mount moved under its own child) included.
			if d != nil && d != it && it.prio.less(d.prio) {
				d.prio = it.prio
				stack = append(stack, d)
			}
		}
	}
	for _, it := range items {
		it.rec.First = it.prio.tier == mpTierFirst
	}
}

// mpFindFusectl lists mounts of fusectl, the FUSE control filesystem:
// /sys/fs/fuse/connections normally, then wherever the mount tables show
// one (it has a single superblock, so every mount shows every connection)
// as long as no network or FUSE mount lies on its path.
func mpFindFusectl(env *Env, order []*mpNamespace) []string {
	std := env.SysPath("fs/fuse/connections")
	var out []string
	for _, ns := range order {
		for _, m := range ns.mounts {
			if m.FSType != "fusectl" {
				continue
			}
			p := ns.prefix + m.MountPoint
			if p == std {
				out = append([]string{std}, out...)
			} else if mpSafePath(ns, m.MountPoint) && len(out) < 8 {
				out = append(out, p)
			}
		}
	}
	return out
}

// mpSafePath reports whether no network or FUSE mount of ns lies on the
// way to mountpoint p (so walking to it cannot wait on a server).
func mpSafePath(ns *mpNamespace, p string) bool {
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

// fuseWaiting reads a FUSE connection's count of requests waiting for its
// daemon (queued plus being served), from the first fusectl mount that
// answers. fusectl is a kernel pseudo filesystem: reading it cannot block
// on the daemon.
func (p *mpProber) fuseWaiting(conn uint32) *int {
	for _, dir := range p.fusectl {
		r, err := isolate.ReadFileLimited(path.Join(dir, strconv.FormatUint(uint64(conn), 10), "waiting"), 64)
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(r.Data)))
		if err != nil {
			continue
		}
		return &n
	}
	return nil
}

// mpQueue orders probes by their effective priority (mpPrio).
type mpQueue []*mpItem

func (q mpQueue) Len() int { return len(q) }
func (q mpQueue) Less(i, j int) bool {
	if q[i].prio != q[j].prio {
		return q[i].prio.less(q[j].prio)
	}
	return q[i].order < q[j].order
}
func (q mpQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *mpQueue) Push(x any)   { *q = append(*q, x.(*mpItem)) }
func (q *mpQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// schedule probes every item, honouring dependencies and the concurrency
// rules (see MountprobeOptions), until all are done or ctx ends.
func (p *mpProber) schedule(ctx context.Context, items []*mpItem) {
	var ready mpQueue
	remaining := len(items)
	var finish func(it *mpItem)
	// resolve decides an item whose dependencies are all done: skip it,
	// infer its result, or queue its probe.
	resolve := func(it *mpItem) {
		switch {
		case it.parent != nil && (it.parent.rec.Result == ProbeHung || it.parent.underHung != ""):
			it.underHung = it.parent.underHung
			if it.underHung == "" {
				it.underHung = it.parent.rec.ProbePath
			}
			it.rec.Result = ProbeSkipped
			it.rec.SkipReason = "lies under hung mount " + it.underHung + ": not touched"
			finish(it)
		case it.devRep != nil && it.devRep.rec.Result == ProbeHung && it.devRep.rec.Probed:
			it.rec.Result = ProbeHung
			it.rec.HungVia = it.devRep.rec.ProbePath
			it.rec.Diagnosis = "same filesystem (device " + it.rec.Dev + ") as " + it.devRep.rec.ProbePath + ", which hung; not probed again"
			it.rec.LatencyMS = it.devRep.rec.LatencyMS
			it.rec.DoneMS = mpMS(time.Since(p.started))
			p.reportHung(it)
			finish(it)
		default:
			it.state = mpReady
			heap.Push(&ready, it)
		}
	}
	finish = func(it *mpItem) {
		it.state = mpDone
		remaining--
		for _, w := range it.waiters {
			w.pending--
			if w.pending == 0 && w.state == mpWaiting {
				resolve(w)
			}
		}
	}
	for _, it := range items {
		switch {
		case it.hidden:
			it.rec.Result = ProbeSkipped
			it.rec.SkipReason = "over-mounted: another mount at the same path hides it, so no path reaches it"
		case it.autofs:
			it.rec.Result = ProbeSkipped
			it.rec.SkipReason = "autofs trigger: touching it would mount what is behind it"
		}
		for _, d := range []*mpItem{it.parent, it.devRep} {
			if d != nil && d != it {
				d.waiters = append(d.waiters, it)
				it.pending++
			}
		}
	}
	for _, it := range items {
		if it.rec.Result == ProbeSkipped && it.state == mpWaiting {
			finish(it)
		}
	}
	for _, it := range items {
		if it.state == mpWaiting && it.pending == 0 {
			resolve(it)
		}
	}

	done := make(chan *mpItem, len(items))
	running := map[*mpItem]bool{}
	perNS := map[*mpNamespace]int{}
	slowNS := map[*mpNamespace]int{}
	tick := time.NewTicker(max(p.slowAfter/2, 10*time.Millisecond))
	defer tick.Stop()
	complete := func(it *mpItem) {
		delete(running, it)
		perNS[it.ns]--
		if it.rec.Result == ProbeHung {
			p.reportHung(it)
		}
		finish(it)
	}
	var deferred []*mpItem
	for remaining > 0 {
		now := time.Now()
		slow := 0
		clear(slowNS)
		for r := range running {
			if now.Sub(r.started) >= p.slowAfter {
				slow++
				slowNS[r.ns]++
			}
		}
		p.peakStuck = max(p.peakStuck, slow)
		// Start the most urgent probes the rules allow; one that may
		// not start yet does not hold back the others behind it.
		// The per-namespace bound holds while namespaces compete: when
		// the network and FUSE probes waiting are all of one namespace,
		// it may use every unreserved worker.
		var sole *mpNamespace
		for _, it := range ready {
			if it.likely && it.prio.tier != mpTierFirst {
				if sole == nil {
					sole = it.ns
				} else if sole != it.ns {
					sole = nil
					break
				}
			}
		}
		likelyLeft := mpCountLikely(ready)
		// Stuck probes count against MaxStuck only: they hold a worker
		// but not a slot, so hung mounts cost one deadline together.
		for ready.Len() > 0 && ctx.Err() == nil && len(running)-slow < p.max && slow <= p.maxStuck && len(running) < p.max+p.maxStuck {
			it := heap.Pop(&ready).(*mpItem)
			active, activeNS := len(running)-slow, perNS[it.ns]-slowNS[it.ns]
			if !it.likely && active >= p.base {
				// No mount unlikely to hang may start now, and the
				// queue puts the likely ones first within a tier:
				// stop unless a likely one waits further on. Without
				// this, each probe's answer re-sorted the whole queue
				// (30,000 mounts took 200 s).
				deferred = append(deferred, it)
				if likelyLeft == 0 {
					break
				}
				continue
			}
			if it.likely {
				likelyLeft--
			}
			ok := p.mayStart(it, active, activeNS)
			if !ok && it.ns == sole && it.likely && active < p.max-p.reserved {
				ok = true
			}
			// While namespaces compete, one namespace's stuck probes
			// take at most three quarters of MaxStuck.
			if ok && it.likely && it.prio.tier != mpTierFirst && it.ns != sole && slowNS[it.ns] >= max(1, p.maxStuck*3/4) {
				ok = false
			}
			if !ok {
				deferred = append(deferred, it)
				continue
			}
			it.state = mpRunning
			it.started = now
			running[it] = true
			perNS[it.ns]++
			go func() {
				p.probe(ctx, it)
				done <- it
			}()
		}
		for _, it := range deferred {
			heap.Push(&ready, it)
		}
		deferred = deferred[:0]
		if len(running) == 0 {
			if ctx.Err() != nil {
				break
			}
			if ready.Len() == 0 {
				// Nothing runs and nothing is ready, yet items wait:
				// their dependencies form a cycle (a mount moved under
				// its own descendant). Release the earliest one.
				var first *mpItem
				for _, it := range items {
					if it.state == mpWaiting && (first == nil || it.order < first.order) {
						first = it
					}
				}
				if first == nil {
					break
				}
				first.pending = 0
				first.state = mpReady
				heap.Push(&ready, first)
				continue
			}
		}
		select {
		case it := <-done:
			complete(it)
		case <-tick.C:
		case <-ctx.Done():
			// The pool ends running probes itself when ctx ends.
			if len(running) > 0 {
				complete(<-done)
			}
		}
	}
	for _, it := range items {
		if it.rec.Result == "" {
			it.rec.Result = ProbeUnfinished
			it.rec.SkipReason = "not probed: the collector's deadline came first"
		}
	}
}

// mpCountLikely counts the mounts likely to hang (network, FUSE) that
// wait in q.
func mpCountLikely(q mpQueue) int {
	n := 0
	for _, it := range q {
		if it.likely {
			n++
		}
	}
	return n
}

// mayStart applies the concurrency rules to the most urgent ready probe
// not yet started, given how many probes run that are not stuck past
// SlowAfter (in all, and in its namespace); stuck ones are bounded by
// MaxStuck alone:
//   - a mount unlikely to hang starts only while fewer than --workers
//     probes run that are not stuck, so stuck ones are replaced;
//   - network and FUSE probes outside the first tier (kubelet, runtime
//     and CSI paths of the host, and the mounts on the way to them) do
//     not use the reserved workers, and one namespace runs at most perNS
//     of them;
//   - outside the first tier, one namespace runs at most perNS +
//     --workers probes in all.
//
// Other mounts may use reserved workers: they start only while few
// probes are not stuck, and mostly answer in a millisecond, so they do
// not keep a first-tier probe waiting, and a namespace's healthy mounts
// are not starved by its hung ones.
func (p *mpProber) mayStart(it *mpItem, running, inNS int) bool {
	if !it.likely && running >= p.base {
		return false
	}
	if it.prio.tier == mpTierFirst {
		return true
	}
	if it.likely {
		return running < p.max-p.reserved && inNS < p.perNS
	}
	return inNS < p.perNS+p.base
}

// reportHung tells the run that a mount hangs. Later collectors may name
// a path as nodesnap sees it (with the --root prefix), as the host sees
// it, or through /proc/<pid>/root: each form that applies is reported.
func (p *mpProber) reportHung(it *mpItem) {
	paths := []string{it.rec.ProbePath}
	switch {
	case it.ns.self:
		if hp, ok := mpUnroot(p.env.Root, it.rec.Mountpoint); ok {
			paths = append(paths, hp)
		}
	case it.ns.host:
		paths = append(paths, it.rec.Mountpoint, p.env.HostPath(it.rec.Mountpoint))
	}
	seen := map[string]bool{}
	for _, q := range paths {
		if !seen[q] {
			seen[q] = true
			p.env.ReportHungMount(q, it.hangEvidence)
		}
	}
}

// mpUnroot turns a path as nodesnap sees it into the host's path by
// removing the --root prefix; ok is false when p is not under root.
func mpUnroot(root, p string) (string, bool) {
	if root == "" || root == "/" {
		return p, false
	}
	root = path.Clean(root)
	if p == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok {
		return "/" + rest, true
	}
	return p, false
}

// probe runs one probe and fills the record.
func (p *mpProber) probe(ctx context.Context, it *mpItem) {
	it.rec.Probed = true
	start := time.Now()
	it.rec.StartedMS = mpMS(start.Sub(p.started))
	var res mpResponse
	err := p.env.Do(ctx, opMountProbe, it.rec.ProbePath, mpRequest{Path: it.rec.ProbePath}, &res)
	elapsed := time.Since(start)
	it.rec.DoneMS = mpMS(time.Since(p.started))
	var he *isolate.HungError
	switch {
	case errors.As(err, &he):
		if ctx.Err() != nil && elapsed < p.probeTimeout {
			it.rec.Result = ProbeUnfinished
			it.rec.SkipReason = fmt.Sprintf("cut short after %s by the collector's deadline", elapsed.Round(time.Millisecond))
			return
		}
		it.rec.Result = ProbeHung
		it.rec.LatencyMS = mpMS(he.Timeout)
		it.hangEvidence = he.Evidence
		it.rec.BlockedIn = mpBlockedIn(he.Evidence)
		it.rec.Diagnosis = fmt.Sprintf("stat/statfs did not answer within %s", p.probeTimeout)
		if it.rec.FUSE != nil {
			it.rec.FUSE.WaitingAfter = p.fuseWaiting(it.rec.FUSE.Conn)
			if w := it.rec.FUSE.WaitingBefore; w != nil && *w > 0 {
				it.rec.Diagnosis += fmt.Sprintf("; its FUSE daemon is alive but not answering: %d request(s) were already waiting before the probe", *w)
			} else {
				it.rec.Diagnosis += "; its FUSE daemon is alive (the connection is open) but does not answer"
			}
		}
		return
	case err != nil:
		it.rec.Result = ProbeError
		it.rec.Error = err.Error()
		var oe *isolate.OpError
		if errors.As(err, &oe) && oe.Errno != 0 {
			it.rec.Errno = unix.ErrnoName(oe.Errno)
		}
		return
	}
	it.rec.StatMS = float64(res.StatNS) / 1e6
	it.rec.StatfsMS = float64(res.StatfsNS) / 1e6
	it.rec.LatencyMS = it.rec.StatMS + it.rec.StatfsMS
	if res.Stat != nil {
		it.rec.StatDev = fmt.Sprintf("%d:%d", unix.Major(res.Stat.Dev), unix.Minor(res.Stat.Dev))
	}
	if s := res.Statfs; s != nil {
		it.rec.Statfs = mpStatfs(s)
	}
	errno, msg := res.StatErrno, res.StatErr
	if msg == "" {
		errno, msg = res.StatfsErrno, res.StatfsErr
	}
	if msg == "" {
		it.rec.Result = ProbeOK
		if f := it.rec.FUSE; f != nil && f.WaitingBefore != nil && *f.WaitingBefore > 0 {
			it.rec.Diagnosis = fmt.Sprintf("its FUSE daemon answered, but %d request(s) were already waiting on it: slow, or stuck on some requests", *f.WaitingBefore)
		}
		return
	}
	it.rec.Result = ProbeError
	it.rec.Error = msg
	if errno != 0 {
		it.rec.Errno = unix.ErrnoName(unix.Errno(errno))
	}
	it.rec.Diagnosis = mpDiagnose(unix.Errno(errno), it)
	if it.rec.FUSE != nil {
		it.rec.FUSE.WaitingAfter = p.fuseWaiting(it.rec.FUSE.Conn)
	}
}

// mpBlockedIn summarises where a hung probe's worker was blocked: the
// thread in uninterruptible sleep, or else the one not parked in a Go
// runtime wait (newer kernels name the futex wait futex_do_wait, which
// the evidence's own summary does not know yet).
func mpBlockedIn(h *isolate.HangEvidence) string {
	if h == nil {
		return ""
	}
	parked := func(w string) bool {
		return w == "" || w == "0" || strings.HasPrefix(w, "futex") || strings.Contains(w, "epoll") || strings.Contains(w, "ep_poll") ||
			strings.Contains(w, "nanosleep") || strings.HasPrefix(w, "pipe_") || strings.HasSuffix(w, "pipe_read")
	}
	if b := h.Blocked; b != nil && (b.State == "D" || !parked(b.Wchan)) {
		return h.String()
	}
	for _, t := range h.Tasks {
		if !parked(t.Wchan) {
			top := ""
			if len(t.Stack) > 0 {
				top = " in " + t.Stack[0]
			}
			return fmt.Sprintf("pid %d tid %d state %s wchan %s%s", h.PID, t.TID, t.State, t.Wchan, top)
		}
	}
	return h.String()
}

// mpDiagnose says what a failed probe usually means.
func mpDiagnose(e unix.Errno, it *mpItem) string {
	fuse := procfs.IsFUSE(it.m.FSType)
	switch e {
	case unix.ENOTCONN:
		if fuse {
			return "FUSE daemon gone: its connection was aborted or its server exited (Transport endpoint is not connected); the mount stays until unmounted"
		}
		return "Transport endpoint is not connected: the filesystem lost its server"
	case unix.ESTALE:
		return "Stale file handle: the export, volume or directory behind this mount was removed or replaced on the server"
	case unix.EIO:
		return "Input/output error: the device or server failed the request"
	case unix.EACCES, unix.EPERM:
		if fuse {
			return "permission denied: a FUSE mount without allow_other answers only its owner (not by itself a fault of the filesystem)"
		}
		return "permission denied to nodesnap"
	case unix.ENOENT:
		if it.ns.prefix != "" {
			return "not found: the mount or the process it was reached through (pid " + strconv.Itoa(it.ns.rep) + ") went away during the run"
		}
		return "not found: unmounted during the run"
	case unix.ENODEV, unix.ENXIO:
		return "device gone: the block device or FUSE connection behind this mount no longer exists"
	case unix.EHOSTDOWN, unix.EHOSTUNREACH, unix.ETIMEDOUT, unix.ECONNREFUSED, unix.ECONNRESET:
		return "the filesystem's server cannot be reached"
	case unix.ECONNABORTED:
		return "the FUSE connection was aborted while the probe waited"
	}
	return ""
}

// mpFSMagic names the statfs f_type values most often seen on nodes.
var mpFSMagic = map[int64]string{
	0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
	0x794C7630: "overlay", 0x6969: "nfs", 0x65735546: "fuse", 0x00C36400: "ceph",
	0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x9FA0: "proc", 0x62656572: "sysfs",
	0x63677270: "cgroup2", 0x27E0EB: "cgroup", 0x1CD1: "devpts", 0x73717368: "squashfs",
	0x2FC12FC1: "zfs", 0x858458F6: "ramfs", 0x6E736673: "nsfs", 0x19800202: "mqueue",
	0xCAFE4A11: "bpf", 0x74726163: "tracefs", 0x64626720: "debugfs",
}

func mpStatfs(s *isolate.StatfsResult) *MountProbeStatfs {
	f := &MountProbeStatfs{BlockSize: s.Bsize, Inodes: s.Files, InodesFree: s.Ffree,
		ReadOnly: s.Flags&unix.ST_RDONLY != 0}
	f.TypeMagic = fmt.Sprintf("0x%x", uint64(s.Type))
	if n := mpFSMagic[s.Type]; n != "" {
		f.TypeMagic += " (" + n + ")"
	}
	if s.Bsize > 0 {
		bs := uint64(s.Bsize)
		f.TotalBytes, f.FreeBytes, f.AvailBytes = s.Blocks*bs, s.Bfree*bs, s.Bavail*bs
	}
	if s.Blocks > 0 {
		f.UsedPct = mpRound1(100 * float64(s.Blocks-s.Bfree) / float64(s.Blocks))
	}
	if s.Files > 0 && s.Files >= s.Ffree {
		f.InodesUsedPct = mpRound1(100 * float64(s.Files-s.Ffree) / float64(s.Files))
	}
	return f
}

func mpRound1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func mpMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// mpWriteSummary writes summary.txt.
func mpWriteSummary(w io.Writer, r *MountProbeReport, probes []*MountProbe) error {
	b := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(b, "mountprobe: %d distinct mounts in %d mount namespace(s), probed in %.2fs (probe deadline %s, %d-%d workers)\n",
		len(probes), len(r.Namespaces), r.DurationMS/1000, time.Duration(r.ProbeTimeoutMS)*time.Millisecond, r.Workers, r.MaxWorkers)
	keys := []string{ProbeOK, ProbeHung, ProbeError, ProbeSkipped, ProbeUnfinished}
	var parts []string
	for _, k := range keys {
		if n := r.Counts[k]; n > 0 || k == ProbeOK || k == ProbeHung || k == ProbeError {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(b, "results: %s\n", strings.Join(parts, ", "))
	for _, n := range r.Notes {
		fmt.Fprintf(b, "note: %s\n", n)
	}
	section := func(title, result string) {
		first := true
		for _, p := range probes {
			if p.Result != result {
				continue
			}
			if first {
				fmt.Fprintf(b, "\n%s\n", title)
				first = false
			}
			fmt.Fprintf(b, "  %s  [%s %s %s dev %s, ns %d]\n", p.ProbePath, p.Class, p.FSType, p.Source, p.Dev, p.ProbeNamespace)
			if p.Errno != "" || p.Error != "" {
				fmt.Fprintf(b, "      error: %s %s\n", p.Errno, p.Error)
			}
			if p.Diagnosis != "" {
				fmt.Fprintf(b, "      %s\n", p.Diagnosis)
			}
			if p.BlockedIn != "" {
				fmt.Fprintf(b, "      blocked: %s\n", p.BlockedIn)
			}
			if p.FUSE != nil {
				fmt.Fprintf(b, "      fuse connection %d: waiting before %s, after %s\n", p.FUSE.Conn, mpIntOrUnknown(p.FUSE.WaitingBefore), mpIntOrUnknown(p.FUSE.WaitingAfter))
			}
			if p.SkipReason != "" {
				fmt.Fprintf(b, "      %s\n", p.SkipReason)
			}
		}
	}
	section("HUNG (later collectors do not touch these paths):", ProbeHung)
	section("ERRORS:", ProbeError)
	section("UNFINISHED:", ProbeUnfinished)
	fmt.Fprintf(b, "\nALL MOUNTS (network, fuse, block, local, pseudo):\n")
	fmt.Fprintf(b, "  %-10s %9s  %-7s %-16s %-9s %s\n", "RESULT", "LATENCY", "CLASS", "FSTYPE", "DEV", "MOUNTPOINT")
	for _, p := range probes {
		lat := "-"
		if p.Probed || p.Result == ProbeHung {
			lat = fmt.Sprintf("%.2fms", p.LatencyMS)
		}
		res := p.Result
		if p.Errno != "" {
			res += " " + p.Errno
		}
		fmt.Fprintf(b, "  %-10s %9s  %-7s %-16s %-9s %s", res, lat, p.Class, p.FSType, p.Dev, p.ProbePath)
		if n := len(p.Namespaces); n > 1 {
			fmt.Fprintf(b, "  (in %d namespaces)", n)
		}
		b.WriteByte('\n')
	}
	return b.Flush()
}

func mpIntOrUnknown(p *int) string {
	if p == nil {
		return "unknown"
	}
	return strconv.Itoa(*p)
}
