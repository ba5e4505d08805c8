package openfiles

// The openfiles collector: an lsof built from /proc by readlink only, and
// the answer to "who keeps this device or mount busy": every process
// holding a file, a working directory, a root, an executable or a mapping
// on it, and the kernel threads named after it (jbd2/rbd3-8, rbd3-tasks,
// loop0, kdmflush/253:0) that are all lsof showed in incident 002.
//
// Nothing is stat()ed: the target of /proc/<pid>/fd/N, cwd, root and exe
// is read with readlink, which prints the path the kernel keeps without
// asking the filesystem (so a target on a hung FUSE or NFS mount costs
// nothing). The mount and device of an fd come from its fdinfo mnt_id and
// the mountinfo of the process's namespace; cwd, root and exe are placed on
// a mount by their path in that namespace; mapped files carry their device
// in /proc/<pid>/maps. maps is the one file that takes the target
// process's mmap lock, so it is read in an isolated worker per process.

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/blockdev"
	"github.com/nodesnap/nodesnap/collectors/internal/jsonlines"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// Options are the openfiles collector's flags.
type Options struct {
	// Maps reads /proc/<pid>/maps (in isolated workers) for mapped files.
	Maps bool `json:"maps"`
	// MaxFDs bounds the fds listed per process in processes.jsonl; all
	// fds are still counted and attributed to holders.
	MaxFDs int `json:"max_fds"`
}

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{Maps: true, MaxFDs: 4096}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	fs.BoolVar(&opts.Maps, "openfiles-maps", opts.Maps, "openfiles: read each process's memory maps for mapped files (each read in an isolated worker)")
	fs.IntVar(&opts.MaxFDs, "openfiles-max-fds", opts.MaxFDs, "openfiles: fds listed per process (all are counted and attributed)")
}

// opOpenFilesMaps reads and condenses one process's maps in a worker.
const opOpenFilesMaps = "openfiles.maps"

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirOpenFiles,
		Description:    "lsof from /proc by readlink only (fds with fdinfo, cwd, root, exe, mapped files); holders per device and per mountpoint; kernel threads per device",
		Requires:       "root: /proc/<pid>/fd, cwd, root, exe and maps of other users' processes",
		DefaultEnabled: true,
		PrestartWorker: true, // every run reads through a worker
		DefaultTimeout: 60 * time.Second,
		Options:        &opts,
		Flags:          flags,
		Files:          files,
		Run:            collect,
	})
	isolate.RegisterOp(opOpenFilesMaps, isolate.Typed(openFilesMapsOp))
	isolate.RegisterOp(opOpenFilesMapsBatch, isolate.Typed(openFilesMapsBatchOp))
}

// ofNamespace is one mount namespace's table, for placing paths on mounts.
type ofNamespace struct {
	inode   uint64
	mounts  []procfs.Mount
	byPoint map[string]int // mount point → the last (topmost) mount there
}

// mountFor returns the index of the mount holding an absolute path: the
// longest mount point that is a prefix of it.
func (n *ofNamespace) mountFor(p string) int {
	if n == nil || len(n.byPoint) == 0 || !strings.HasPrefix(p, "/") {
		return -1
	}
	for q := path.Clean(p); ; q = path.Dir(q) {
		if i, ok := n.byPoint[q]; ok {
			return i
		}
		if q == "/" {
			return -1
		}
	}
}

// MountForPath returns the index in mounts (one namespace's mountinfo, in
// order) of the mount holding the absolute path p: the last mount at the
// longest mount point that is a prefix of p; -1 if none. This is how cwd,
// root, exe and mapped files are placed on mounts without stat().
func MountForPath(mounts []procfs.Mount, p string) int {
	return newOFNamespace(0, mounts).mountFor(p)
}

func newOFNamespace(inode uint64, mounts []procfs.Mount) *ofNamespace {
	n := &ofNamespace{inode: inode, mounts: mounts, byPoint: make(map[string]int, len(mounts))}
	for i, m := range mounts {
		n.byPoint[m.MountPoint] = i
	}
	return n
}

// mountRef is a mount found by its ID.
type mountRef struct {
	ns *ofNamespace
	i  int
}

func (r mountRef) mount() *procfs.Mount { return &r.ns.mounts[r.i] }

// ofScanner holds what every per-process scan reads.
type ofScanner struct {
	env      *collectors.Env
	proc     string
	opts     Options
	spaces   map[uint64]*ofNamespace
	byID     map[int]mountRef
	pidNS    map[int]uint64
	threads  map[int][]ofTaskNS // tasks outside their process's namespace
	devs     *blockdev.Cache
	devsMu   sync.Mutex
	mapsMax  int64
	maps     *ofLimiter
	mapsDead bool // the worker pool cannot start: stop trying
	prefetch *mapsPrefetch
	mu       sync.Mutex
}

type ofTaskNS struct {
	tid int
	ns  uint64
}

// result is one process's scan.
type result struct {
	proc    *layout.OpenFilesProcess
	kthread *layout.KernelThreadRef
	gone    bool
	// uses are the process's holdings, for the summaries.
	uses []ofUse
}

// ofUse is one holding: a file on a device/mount, or a device node.
type ofUse struct {
	tid     int
	ns      uint64
	what    string // cwd, root, exe, mem, fd N, fd N (device node)
	path    string
	dev     string
	major   uint32
	minor   uint32
	mount   *mountRef
	devNode bool
	// unknownMount is an fd's mount ID found in no namespace's table.
	unknownMount int
}

func collect(ctx context.Context, env *collectors.Env) error {
	opts := defaults
	if err := env.Options(&opts); err != nil {
		return err
	}
	if opts.MaxFDs <= 0 {
		opts.MaxFDs = defaults.MaxFDs
	}
	// Stop scanning a little before the deadline so the summary is still
	// written.
	scanCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		scanCtx, cancel = context.WithDeadline(ctx, dl.Add(-min(3*time.Second, time.Until(dl)/5)))
		defer cancel()
	}
	s := &ofScanner{env: env, proc: env.ProcPath(), opts: opts, spaces: map[uint64]*ofNamespace{},
		byID: map[int]mountRef{}, pidNS: map[int]uint64{}, threads: map[int][]ofTaskNS{},
		devs: blockdev.NewCache(env.Sys), mapsMax: 64 << 20}
	sum := layout.OpenFilesSummary{Devices: []layout.DeviceHolders{}, Mounts: []layout.MountHolders{}}
	host, err := shared.HostNamespace(env)
	if err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	sum.HostNamespace = host

	pids, err := hostfs.ListPIDs(s.proc)
	if err != nil {
		return fmt.Errorf("listing processes in %s: %w", s.proc, err)
	}
	// The maps are read in batches from now on: the workers' starts and
	// the reads overlap the namespace pass instead of following it.
	s.maps = newOFLimiter(mapsConcurrency, max(mapsConcurrency, env.Workers))
	if opts.Maps {
		s.prefetch = s.prefetchMaps(scanCtx, pids)
	}

	// Every task's namespace first (a readlink each), then each
	// namespace's mount table once, so that every fd can be placed.
	taskNS := make([]ofPidNS, len(pids))
	shared.Parallel(scanCtx, len(pids), scanGoroutines, func(i int) { taskNS[i] = s.taskNamespaces(pids[i]) })
	cands := map[uint64][]layout.TaskRef{}
	var nsOrder []uint64
	for i, pid := range pids {
		t := taskNS[i]
		if len(t.tasks) == 0 {
			continue
		}
		s.pidNS[pid] = t.leader
		for _, tn := range t.tasks {
			if _, ok := cands[tn.ns]; !ok {
				nsOrder = append(nsOrder, tn.ns)
			}
			if len(cands[tn.ns]) < shared.MaxNSCandidates {
				cands[tn.ns] = append(cands[tn.ns], layout.TaskRef{PID: pid, TID: tn.tid})
			}
			if tn.ns != t.leader {
				s.threads[pid] = append(s.threads[pid], tn)
			}
		}
	}
	spaces := make([]*ofNamespace, len(nsOrder))
	nsErrs := make([]error, len(nsOrder))
	// The tables in batches, a few worker round trips for all of them
	// (hostfs.TaskMountinfos), as the mounts collector reads them.
	tasks := make([][]hostfs.Task, len(nsOrder))
	for i, ns := range nsOrder {
		for _, c := range cands[ns] {
			tasks[i] = append(tasks[i], hostfs.Task{PID: c.PID, TID: c.TID})
		}
	}
	env.Host().TaskMountinfos(scanCtx, tasks, 64<<20, hostfs.MountinfoReaders(), func(i int, r hostfs.MountinfoResult) {
		if r.Err != nil {
			nsErrs[i] = r.Err
			return
		}
		mounts, _ := procfs.ParseMountInfo(r.Data)
		spaces[i] = newOFNamespace(nsOrder[i], mounts)
	})
	for i, n := range spaces {
		if n == nil {
			if nsErrs[i] != nil && !shared.Gone(nsErrs[i]) {
				sum.Errors = append(sum.Errors, fmt.Sprintf("mount namespace %d: reading mountinfo: %v", nsOrder[i], nsErrs[i]))
			}
			continue
		}
		s.spaces[n.inode] = n
		for j, m := range n.mounts {
			s.byID[m.ID] = mountRef{ns: n, i: j}
		}
	}

	out, err := env.Create(layout.OpenFilesProcessesFile)
	if err != nil {
		return err
	}
	agg := newOFAggregate(host)
	workers := scanGoroutines
	jobs := make(chan int)
	type indexed struct {
		i int
		r result
	}
	results := make(chan indexed, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				results <- indexed{i, s.scanProcess(scanCtx, pids[i])}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for i := range pids {
			if scanCtx.Err() != nil {
				return
			}
			select {
			case jobs <- i:
			case <-scanCtx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	// Write in pid order as results arrive; pending holds the few that
	// finished early.
	pending := map[int]result{}
	next, done := 0, 0
	enc := json.NewEncoder(out)
	var werr error
	for res := range results {
		pending[res.i] = res.r
		for {
			r, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			done++
			switch {
			case r.gone:
				sum.ProcessesGone++
			case r.kthread != nil:
				sum.KernelThreads++
				agg.kthreads = append(agg.kthreads, *r.kthread)
			default:
				sum.Processes++
				sum.FDs += r.proc.FDCount
				agg.add(r.proc, r.uses)
				if werr == nil {
					werr = enc.Encode(r.proc)
				}
			}
		}
	}
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("writing processes.jsonl: %w", werr)
	}
	if done < len(pids) {
		env.Partialf("scanned %d of %d processes before the deadline", done, len(pids))
	}
	s.summarize(&sum, agg)
	// One device or mount per line: compact, and read by the redactor a
	// line at a time.
	return jsonlines.Write(env, layout.HoldersFile, struct {
		*layout.OpenFilesSummary
		Devices       *struct{} `json:"devices,omitempty"`
		Mounts        *struct{} `json:"mounts,omitempty"`
		UnknownMounts *struct{} `json:"unknown_mounts,omitempty"`
	}{OpenFilesSummary: &sum},
		jsonlines.Array{Name: "devices", N: len(sum.Devices), Elem: func(i int) any { return &sum.Devices[i] }},
		jsonlines.Array{Name: "mounts", N: len(sum.Mounts), Elem: func(i int) any { return &sum.Mounts[i] }},
		jsonlines.Array{Name: "unknown_mounts", N: len(sum.UnknownMounts), Elem: func(i int) any { return &sum.UnknownMounts[i] }})
}

const (
	// scanGoroutines read processes at once: the work is system calls
	// into procfs, which do not block on anything but the kernel.
	scanGoroutines = 4
	// mapsConcurrency is how many maps reads run at once to begin
	// with. Each needs a worker process, and starting one costs more
	// than a hundred reads; the limit grows when a read hangs.
	mapsConcurrency = 2
)

// ofLimiter is a semaphore whose size can grow up to a maximum.
type ofLimiter struct {
	tokens chan struct{}
	mu     sync.Mutex
	size   int
}

func newOFLimiter(initial, max int) *ofLimiter {
	l := &ofLimiter{tokens: make(chan struct{}, max), size: initial}
	for i := 0; i < initial; i++ {
		l.tokens <- struct{}{}
	}
	return l
}

func (l *ofLimiter) acquire(ctx context.Context) error {
	select {
	case <-l.tokens:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *ofLimiter) release() { l.tokens <- struct{}{} }

// grow adds one token, up to the maximum.
func (l *ofLimiter) grow() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size < cap(l.tokens) {
		l.size++
		l.tokens <- struct{}{}
	}
}
