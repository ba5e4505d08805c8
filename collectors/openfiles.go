package collectors

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
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/isolate"
	"github.com/nodesnap/nodesnap/procfs"
)

// OpenFilesOptions are the openfiles collector's flags.
type OpenFilesOptions struct {
	// Maps reads /proc/<pid>/maps (in isolated workers) for mapped files.
	Maps bool `json:"maps"`
	// MaxFDs bounds the fds listed per process in processes.jsonl; all
	// fds are still counted and attributed to holders.
	MaxFDs int `json:"max_fds"`
}

var openFilesOptions = OpenFilesOptions{Maps: true, MaxFDs: 4096}

// opOpenFilesMaps reads and condenses one process's maps in a worker.
const opOpenFilesMaps = "openfiles.maps"

func init() {
	Register(Spec{
		Name:           layout.DirOpenFiles,
		Description:    "lsof from /proc by readlink only (fds with fdinfo, cwd, root, exe, mapped files); holders per device and per mountpoint; kernel threads per device",
		DefaultEnabled: true,
		DefaultTimeout: 60 * time.Second,
		Options:        &openFilesOptions,
		Flags: func(fs *pflag.FlagSet) {
			fs.BoolVar(&openFilesOptions.Maps, "openfiles-maps", true, "openfiles: read each process's memory maps for mapped files (each read in an isolated worker)")
			fs.IntVar(&openFilesOptions.MaxFDs, "openfiles-max-fds", 4096, "openfiles: fds listed per process (all are counted and attributed)")
		},
		Run: collectOpenFiles,
	})
	isolate.RegisterOp(opOpenFilesMaps, isolate.Typed(openFilesMapsOp))
}

const (
	maxHolderUses  = 16
	maxHolderPaths = 8
)

// ofMapsRequest asks a worker for one process's mapped files.
type ofMapsRequest struct {
	Path string `json:"path"`
	Max  int64  `json:"max"`
}

// ofMapsResult is the condensed answer: each mapped file once.
type ofMapsResult struct {
	Files     []ofMapped `json:"files"`
	Truncated bool       `json:"truncated,omitempty"`
	BadLines  int        `json:"bad_lines,omitempty"`
}

type ofMapped struct {
	Path    string `json:"p"`
	Major   uint32 `json:"ma"`
	Minor   uint32 `json:"mi"`
	Inode   uint64 `json:"i"`
	Deleted bool   `json:"d,omitempty"`
}

// openFilesMapsOp runs in a worker: it reads one maps file (which may block
// on the process's mmap lock) and returns its distinct files, so that only
// a few hundred bytes cross the pipe instead of the whole file.
func openFilesMapsOp(rq ofMapsRequest) (any, error) {
	r, err := isolate.ReadFileLimited(rq.Path, rq.Max)
	if err != nil {
		return nil, err
	}
	return condenseMaps(r.Data, r.Truncated), nil
}

func condenseMaps(data []byte, truncated bool) ofMapsResult {
	entries, bad := procfs.ParseMaps(data)
	res := ofMapsResult{Truncated: truncated, BadLines: len(bad), Files: []ofMapped{}}
	type key struct {
		path         string
		major, minor uint32
		inode        uint64
	}
	seen := map[key]bool{}
	for _, e := range entries {
		if !e.IsFile() {
			continue
		}
		k := key{e.Pathname, e.Major, e.Minor, e.Inode}
		if seen[k] {
			continue
		}
		seen[k] = true
		res.Files = append(res.Files, ofMapped{Path: e.Pathname, Major: e.Major, Minor: e.Minor, Inode: e.Inode, Deleted: e.Deleted})
	}
	return res
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

// ofMountRef is a mount found by its ID.
type ofMountRef struct {
	ns *ofNamespace
	i  int
}

func (r ofMountRef) mount() *procfs.Mount { return &r.ns.mounts[r.i] }

// ofScanner holds what every per-process scan reads.
type ofScanner struct {
	env      *Env
	proc     string
	opts     OpenFilesOptions
	spaces   map[uint64]*ofNamespace
	byID     map[int]ofMountRef
	pidNS    map[int]uint64
	threads  map[int][]ofTaskNS // tasks outside their process's namespace
	devs     *mntBlockCache
	devsMu   sync.Mutex
	mapsMax  int64
	maps     *ofLimiter
	mapsDead bool // the worker pool cannot start: stop trying
	mu       sync.Mutex
}

type ofTaskNS struct {
	tid int
	ns  uint64
}

// ofResult is one process's scan.
type ofResult struct {
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
	mount   *ofMountRef
	devNode bool
	// unknownMount is an fd's mount ID found in no namespace's table.
	unknownMount int
}

func collectOpenFiles(ctx context.Context, env *Env) error {
	opts := openFilesOptions
	if err := env.Options(&opts); err != nil {
		return err
	}
	if opts.MaxFDs <= 0 {
		opts.MaxFDs = 4096
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
		byID: map[int]ofMountRef{}, pidNS: map[int]uint64{}, threads: map[int][]ofTaskNS{},
		devs: mntNewBlockCache(env.Sys), mapsMax: 64 << 20}
	sum := layout.OpenFilesSummary{Devices: []layout.DeviceHolders{}, Mounts: []layout.MountHolders{}}
	host, err := mntHostNamespace(env)
	if err != nil {
		sum.Errors = append(sum.Errors, err.Error())
	}
	sum.HostNamespace = host

	pids, err := hostfs.ListPIDs(s.proc)
	if err != nil {
		return fmt.Errorf("listing processes in %s: %w", s.proc, err)
	}
	// Start the maps workers now: spawning them overlaps the namespace
	// pass instead of delaying the first process.
	s.maps = newOFLimiter(ofMapsConcurrency, max(ofMapsConcurrency, env.Workers))
	if opts.Maps {
		for i := 0; i < ofMapsConcurrency; i++ {
			go func() {
				if s.maps.acquire(scanCtx) == nil {
					defer s.maps.release()
					var res ofMapsResult
					_ = env.Do(scanCtx, opOpenFilesMaps, env.ProcPath("self", "maps"), ofMapsRequest{Path: env.ProcPath("self", "maps"), Max: 1 << 20}, &res)
				}
			}()
		}
	}

	// Every task's namespace first (a readlink each), then each
	// namespace's mount table once, so that every fd can be placed.
	taskNS := make([]ofPidNS, len(pids))
	mntParallel(scanCtx, len(pids), ofScanGoroutines, func(i int) { taskNS[i] = s.taskNamespaces(pids[i]) })
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
			if len(cands[tn.ns]) < mntMaxNSCandidates {
				cands[tn.ns] = append(cands[tn.ns], layout.TaskRef{PID: pid, TID: tn.tid})
			}
			if tn.ns != t.leader {
				s.threads[pid] = append(s.threads[pid], tn)
			}
		}
	}
	spaces := make([]*ofNamespace, len(nsOrder))
	nsErrs := make([]error, len(nsOrder))
	mntParallel(scanCtx, len(nsOrder), ofScanGoroutines, func(i int) {
		res, _, _, rerr := readNamespaceMountinfo(scanCtx, env, cands[nsOrder[i]], 64<<20)
		if rerr != nil {
			nsErrs[i] = rerr
			return
		}
		mounts, _ := procfs.ParseMountInfo(res.Data)
		spaces[i] = newOFNamespace(nsOrder[i], mounts)
	})
	for i, n := range spaces {
		if n == nil {
			if nsErrs[i] != nil && !mntGone(nsErrs[i]) {
				sum.Errors = append(sum.Errors, fmt.Sprintf("mount namespace %d: reading mountinfo: %v", nsOrder[i], nsErrs[i]))
			}
			continue
		}
		s.spaces[n.inode] = n
		for j, m := range n.mounts {
			s.byID[m.ID] = ofMountRef{ns: n, i: j}
		}
	}

	out, err := env.Create(layout.OpenFilesProcessesFile)
	if err != nil {
		return err
	}
	agg := newOFAggregate(host)
	workers := ofScanGoroutines
	jobs := make(chan int)
	type indexed struct {
		i int
		r ofResult
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
	pending := map[int]ofResult{}
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
	return mntWriteJSONLines(env, layout.HoldersFile, struct {
		*layout.OpenFilesSummary
		Devices       *struct{} `json:"devices,omitempty"`
		Mounts        *struct{} `json:"mounts,omitempty"`
		UnknownMounts *struct{} `json:"unknown_mounts,omitempty"`
	}{OpenFilesSummary: &sum},
		mntJSONArray{"devices", len(sum.Devices), func(i int) any { return &sum.Devices[i] }},
		mntJSONArray{"mounts", len(sum.Mounts), func(i int) any { return &sum.Mounts[i] }},
		mntJSONArray{"unknown_mounts", len(sum.UnknownMounts), func(i int) any { return &sum.UnknownMounts[i] }})
}

const (
	// ofScanGoroutines read processes at once: the work is system calls
	// into procfs, which do not block on anything but the kernel.
	ofScanGoroutines = 4
	// ofMapsConcurrency is how many maps reads run at once to begin
	// with. Each needs a worker process, and starting one costs more
	// than a hundred reads; the limit grows when a read hangs.
	ofMapsConcurrency = 2
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

// ofPidNS is the mount namespace of each task of one process.
type ofPidNS struct {
	leader uint64 // the main thread's (or first live task's)
	tasks  []ofTaskNS
}

// taskNamespaces reads the ns/mnt link of every task of pid.
func (s *ofScanner) taskNamespaces(pid int) ofPidNS {
	tids, nss, err := hostfs.TaskNamespaces(s.proc, pid)
	if err != nil {
		return ofPidNS{}
	}
	r := ofPidNS{tasks: make([]ofTaskNS, 0, len(tids))}
	for i, tid := range tids {
		ns := nss[i]
		if ns == 0 {
			continue
		}
		if tid == pid {
			r.leader = ns
		}
		r.tasks = append(r.tasks, ofTaskNS{tid, ns})
	}
	if r.leader == 0 && len(r.tasks) > 0 {
		r.leader = r.tasks[0].ns
	}
	return r
}

// scanProcess reads one process. It runs on several goroutines at once:
// the scanner's maps are read-only by now, except the device cache.
func (s *ofScanner) scanProcess(ctx context.Context, pid int) ofResult {
	dir := s.proc + "/" + strconv.Itoa(pid)
	var statBuf [2048]byte
	statData, err := hostfs.ReadSmall(dir+"/stat", statBuf[:])
	if err != nil {
		return ofResult{gone: true}
	}
	st, err := procfs.ParseStat(statData)
	if err != nil {
		return ofResult{gone: true}
	}
	if st.IsKernelThread() {
		return ofResult{kthread: &layout.KernelThreadRef{PID: pid, Comm: st.Comm}}
	}
	ns, ok := s.pidNS[pid]
	if !ok {
		// Started after the namespace pass.
		if ns, err = hostfs.NSInode(dir + "/ns/mnt"); err != nil {
			return ofResult{gone: true}
		}
	}
	p := &layout.OpenFilesProcess{PID: pid, PPID: st.PPID, Comm: st.Comm, Namespace: ns}
	r := ofResult{proc: p}
	space := s.spaces[ns]
	addErr := func(what string, err error) {
		if !mntGone(err) {
			p.Errors = append(p.Errors, fmt.Sprintf("%s: %v", what, err))
		}
	}

	for _, what := range []string{"exe", "cwd", "root"} {
		link, err := os.Readlink(dir + "/" + what)
		if err != nil {
			addErr(what, err)
			continue
		}
		f := s.placeByPath(space, link)
		switch what {
		case "exe":
			p.Exe = f
		case "cwd":
			p.Cwd = f
		default:
			p.Root = f
		}
		r.uses = append(r.uses, s.useOf(0, ns, what, f))
	}

	s.scanFDs(dir, ns, p, &r)

	for _, t := range s.threads[pid] {
		td := dir + "/task/" + strconv.Itoa(t.tid)
		th := layout.OpenFilesThread{TID: t.tid, Comm: hostfs.ReadComm(td + "/comm"), Namespace: t.ns}
		tspace := s.spaces[t.ns]
		if link, err := os.Readlink(td + "/cwd"); err == nil {
			th.Cwd = s.placeByPath(tspace, link)
			r.uses = append(r.uses, s.useOf(t.tid, t.ns, "cwd", th.Cwd))
		}
		if link, err := os.Readlink(td + "/root"); err == nil {
			th.Root = s.placeByPath(tspace, link)
			r.uses = append(r.uses, s.useOf(t.tid, t.ns, "root", th.Root))
		}
		p.Threads = append(p.Threads, th)
	}

	if s.opts.Maps && ctx.Err() == nil {
		s.scanMaps(ctx, dir, space, p, &r)
	}
	return r
}

func (s *ofScanner) scanFDs(dir string, ns uint64, p *layout.OpenFilesProcess, r *ofResult) {
	fdDir := dir + "/fd"
	f, err := os.Open(fdDir)
	if err != nil {
		if !mntGone(err) {
			p.Errors = append(p.Errors, fmt.Sprintf("fd: %v", err))
		}
		return
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil && len(names) == 0 {
		if !mntGone(err) {
			p.Errors = append(p.Errors, fmt.Sprintf("fd: %v", err))
		}
		return
	}
	fds := make([]int, 0, len(names))
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil && v >= 0 {
			fds = append(fds, v)
		}
	}
	slices.Sort(fds)
	var infoBuf [4096]byte
	for _, fd := range fds {
		num := strconv.Itoa(fd)
		link, err := os.Readlink(fdDir + "/" + num)
		if err != nil {
			continue // closed meanwhile
		}
		p.FDCount++
		l := procfs.ParseLink(link)
		switch l.Kind {
		case procfs.LinkSocket:
			p.Sockets++
			continue
		case procfs.LinkPipe:
			p.Pipes++
			continue
		case procfs.LinkAnonInode:
			if p.AnonInodes == nil {
				p.AnonInodes = map[string]int{}
			}
			p.AnonInodes[l.Name]++
			continue
		case procfs.LinkPath, procfs.LinkDevice, procfs.LinkMemfd:
		default:
			p.OtherFDs++
			continue
		}
		o := layout.OpenFD{FD: fd, OpenFile: layout.OpenFile{Path: l.Path, Kind: l.Kind, Deleted: l.Deleted}}
		if l.Kind == procfs.LinkMemfd {
			o.Path = "/memfd:" + l.Name
		}
		// fdinfo is formatted by procfs from the struct file; it does not
		// call into the file's filesystem.
		if b, err := hostfs.ReadSmall(dir+"/fdinfo/"+num, infoBuf[:]); err == nil {
			if fi, err := procfs.ParseFDInfo(b); err == nil {
				o.Pos, o.Flags, o.Inode = fi.Pos, fi.FlagsString(), fi.Ino
				if fi.MntID >= 0 {
					o.MountID = fi.MntID
				}
				if ref, ok := s.byID[fi.MntID]; ok && fi.MntID >= 0 {
					m := ref.mount()
					o.MountPoint, o.Dev = m.MountPoint, m.Dev()
					r.uses = append(r.uses, ofUse{ns: ns, what: "fd " + num, path: o.Path, dev: o.Dev,
						major: m.Major, minor: m.Minor, mount: &ref})
				} else if fi.MntID > 0 && l.Kind == procfs.LinkPath {
					// A mount in no namespace's table: most often a
					// filesystem unmounted lazily (umount -l) while in
					// use, which keeps its device busy.
					r.uses = append(r.uses, ofUse{ns: ns, what: "fd " + num, path: o.Path, unknownMount: fi.MntID})
				}
			}
		}
		if l.Kind == procfs.LinkDevice {
			if maj, mnr, ok := s.blockDevByPath(l.Path); ok {
				o.DeviceNode = strconv.FormatUint(uint64(maj), 10) + ":" + strconv.FormatUint(uint64(mnr), 10)
				r.uses = append(r.uses, ofUse{ns: ns, what: "fd " + num + " (device node)", path: o.Path,
					dev: o.DeviceNode, major: maj, minor: mnr, devNode: true})
			}
		}
		if len(p.FDs) < s.opts.MaxFDs {
			p.FDs = append(p.FDs, o)
		} else {
			p.FDsOmitted++
		}
	}
}

// blockDevByPath resolves /dev/<name> to a block device through sysfs,
// never through the device node.
func (s *ofScanner) blockDevByPath(p string) (uint32, uint32, bool) {
	name, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		return 0, 0, false
	}
	s.devsMu.Lock()
	defer s.devsMu.Unlock()
	return s.devs.lookupName(name)
}

func (s *ofScanner) scanMaps(ctx context.Context, dir string, space *ofNamespace, p *layout.OpenFilesProcess, r *ofResult) {
	s.mu.Lock()
	dead := s.mapsDead
	s.mu.Unlock()
	if dead {
		return
	}
	if s.maps.acquire(ctx) != nil {
		return
	}
	var res ofMapsResult
	target := dir + "/maps"
	err := s.env.Do(ctx, opOpenFilesMaps, target, ofMapsRequest{Path: target, Max: s.mapsMax}, &res)
	s.maps.release()
	var he *isolate.HungError
	var oe *isolate.OpError
	switch {
	case errors.As(err, &he):
		p.MapsError = err.Error()
		// A stuck mmap lock is rarely alone: let one more read run at
		// once, so that several cost a deadline together, not in turn.
		s.maps.grow()
		if ctx.Err() == nil {
			s.env.Partialf("maps of pid %d (%s) did not answer within its deadline: its mmap lock is held (evidence in hung_items)", p.PID, p.Comm)
		}
		return
	case errors.As(err, &oe):
		if !mntGone(oe) {
			p.MapsError = err.Error()
		}
		return
	case err != nil:
		// The pool itself failed (cannot start workers): say so once.
		p.MapsError = err.Error()
		s.mu.Lock()
		if !s.mapsDead {
			s.mapsDead = true
			s.env.Partialf("mapped files not read: %v", err)
		}
		s.mu.Unlock()
		return
	}
	if res.Truncated {
		p.MapsError = "maps truncated"
	}
	for _, m := range res.Files {
		f := s.placeByPath(space, m.Path)
		f.Deleted = m.Deleted
		f.Inode = m.Inode
		f.Dev = strconv.FormatUint(uint64(m.Major), 10) + ":" + strconv.FormatUint(uint64(m.Minor), 10)
		p.Maps = append(p.Maps, *f)
		u := s.useOf(0, p.Namespace, "mem", f)
		u.major, u.minor, u.dev = m.Major, m.Minor, f.Dev
		r.uses = append(r.uses, u)
	}
}

// placeByPath parses a readlink target and places it on a mount of the
// namespace by its path.
func (s *ofScanner) placeByPath(space *ofNamespace, link string) *layout.OpenFile {
	l := procfs.ParseLink(link)
	f := &layout.OpenFile{Path: l.Path, Kind: l.Kind, Deleted: l.Deleted}
	switch {
	case l.Kind == procfs.LinkMemfd:
		f.Path = "/memfd:" + l.Name
	case f.Path == "":
		f.Path = link
	}
	if l.Kind != procfs.LinkPath && l.Kind != procfs.LinkDevice {
		return f
	}
	if i := space.mountFor(l.Path); i >= 0 {
		m := &space.mounts[i]
		f.MountID, f.MountPoint, f.Dev = m.ID, m.MountPoint, m.Dev()
	}
	return f
}

func (s *ofScanner) useOf(tid int, ns uint64, what string, f *layout.OpenFile) ofUse {
	u := ofUse{tid: tid, ns: ns, what: what, path: f.Path, dev: f.Dev}
	if f.MountID != 0 {
		if ref, ok := s.byID[f.MountID]; ok {
			u.mount = &ref
			u.major, u.minor = ref.mount().Major, ref.mount().Minor
		}
	}
	return u
}

// ofAggregate builds the holder summaries.
type ofAggregate struct {
	host     uint64
	devs     map[string]*ofDevAgg
	mounts   map[ofMountKey]*ofMountAgg
	unknown  map[int]*ofHolders
	kthreads []layout.KernelThreadRef
}

type ofMountKey struct {
	ns uint64
	id int
}

type ofHolderKey struct{ pid, tid int }

type ofHolders struct {
	byKey map[ofHolderKey]*layout.FileHolder
	order []ofHolderKey
}

func (h *ofHolders) add(p *layout.OpenFilesProcess, u ofUse) {
	k := ofHolderKey{p.PID, u.tid}
	fh := h.byKey[k]
	if fh == nil {
		if h.byKey == nil {
			h.byKey = map[ofHolderKey]*layout.FileHolder{}
		}
		fh = &layout.FileHolder{PID: p.PID, TID: u.tid, Comm: p.Comm, Namespace: u.ns}
		if u.tid != 0 {
			for _, t := range p.Threads {
				if t.TID == u.tid {
					fh.Comm = t.Comm
				}
			}
		}
		h.byKey[k] = fh
		h.order = append(h.order, k)
	}
	fh.UseCount++
	if len(fh.Uses) < maxHolderUses && !slices.Contains(fh.Uses, u.what) {
		fh.Uses = append(fh.Uses, u.what)
	}
	if u.path != "" && len(fh.Paths) < maxHolderPaths && !slices.Contains(fh.Paths, u.path) {
		fh.Paths = append(fh.Paths, u.path)
	}
}

func (h *ofHolders) list() []layout.FileHolder {
	out := make([]layout.FileHolder, 0, len(h.order))
	for _, k := range h.order {
		out = append(out, *h.byKey[k])
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].TID < out[j].TID
	})
	return out
}

type ofDevAgg struct {
	major, minor uint32
	holders      ofHolders
}

type ofMountAgg struct {
	ref     ofMountRef
	holders ofHolders
}

func newOFAggregate(host uint64) *ofAggregate {
	return &ofAggregate{host: host, devs: map[string]*ofDevAgg{}, mounts: map[ofMountKey]*ofMountAgg{}, unknown: map[int]*ofHolders{}}
}

func (a *ofAggregate) add(p *layout.OpenFilesProcess, uses []ofUse) {
	for _, u := range uses {
		if u.unknownMount != 0 {
			h := a.unknown[u.unknownMount]
			if h == nil {
				h = &ofHolders{}
				a.unknown[u.unknownMount] = h
			}
			h.add(p, u)
			continue
		}
		if u.mount != nil {
			m := u.mount.mount()
			if procfs.Classify(*m) == procfs.ClassPseudo && !u.devNode {
				// /dev/null, /proc/..., cgroup files: everyone holds
				// those, and they never keep a volume busy.
				continue
			}
			k := ofMountKey{u.mount.ns.inode, m.ID}
			ma := a.mounts[k]
			if ma == nil {
				ma = &ofMountAgg{ref: *u.mount}
				a.mounts[k] = ma
			}
			ma.holders.add(p, u)
		}
		if u.dev == "" || (u.major == 0 && u.mount == nil && !u.devNode) {
			// A mapping of kernel-internal shared memory (memfd, SysV
			// shm) is on no mount anyone can unmount.
			continue
		}
		if u.mount != nil && !u.devNode && procfs.Classify(*u.mount.mount()) == procfs.ClassPseudo {
			continue
		}
		d := a.devs[u.dev]
		if d == nil {
			d = &ofDevAgg{major: u.major, minor: u.minor}
			a.devs[u.dev] = d
		}
		d.holders.add(p, u)
	}
}

// summarize fills the device and mount summaries, adding block devices
// that are mounted but held by no process, and kernel threads per device.
func (s *ofScanner) summarize(sum *layout.OpenFilesSummary, a *ofAggregate) {
	type devInfo struct {
		major, minor     uint32
		fstypes, sources []string
	}
	info := map[string]*devInfo{}
	note := func(dev string, major, minor uint32) *devInfo {
		d := info[dev]
		if d == nil {
			d = &devInfo{major: major, minor: minor}
			info[dev] = d
		}
		return d
	}
	for _, n := range s.spaces {
		for _, m := range n.mounts {
			if procfs.Classify(m) == procfs.ClassPseudo {
				continue
			}
			_, held := a.devs[m.Dev()]
			if m.Major == 0 && !held {
				continue
			}
			d := note(m.Dev(), m.Major, m.Minor)
			if !slices.Contains(d.fstypes, m.FSType) {
				d.fstypes = append(d.fstypes, m.FSType)
			}
			if !slices.Contains(d.sources, m.Source) {
				d.sources = append(d.sources, m.Source)
			}
		}
	}
	for dev, d := range a.devs {
		note(dev, d.major, d.minor)
	}
	devs := make([]string, 0, len(info))
	for dev := range info {
		devs = append(devs, dev)
	}
	sort.Slice(devs, func(i, j int) bool {
		a, b := info[devs[i]], info[devs[j]]
		if a.major != b.major {
			return a.major < b.major
		}
		return a.minor < b.minor
	})
	for _, dev := range devs {
		d := info[dev]
		dh := layout.DeviceHolders{Dev: dev, Major: d.major, Minor: d.minor, FSTypes: d.fstypes, Sources: d.sources, Holders: []layout.FileHolder{}}
		if agg := a.devs[dev]; agg != nil {
			dh.Holders = agg.holders.list()
		}
		dh.Block = s.devs.lookup(d.major, d.minor)
		if dh.Block != nil && dh.Block.Name != "" {
			for _, kt := range a.kthreads {
				if layout.KernelThreadNamesDevice(kt.Comm, dh.Block.Name) || layout.KernelThreadNamesDevice(kt.Comm, dev) {
					dh.KernelThreads = append(dh.KernelThreads, kt)
				}
			}
		}
		sum.Devices = append(sum.Devices, dh)
	}
	keys := make([]ofMountKey, 0, len(a.mounts))
	for k := range a.mounts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i].ns == a.host) != (keys[j].ns == a.host) {
			return keys[i].ns == a.host
		}
		if keys[i].ns != keys[j].ns {
			return keys[i].ns < keys[j].ns
		}
		return keys[i].id < keys[j].id
	})
	ids := make([]int, 0, len(a.unknown))
	for id := range a.unknown {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		sum.UnknownMounts = append(sum.UnknownMounts, layout.UnknownMountHolders{MountID: id, Holders: a.unknown[id].list()})
	}
	for _, k := range keys {
		ma := a.mounts[k]
		m := ma.ref.mount()
		sum.Mounts = append(sum.Mounts, layout.MountHolders{Namespace: k.ns, Host: k.ns == a.host && a.host != 0, MountID: m.ID,
			MountPoint: m.MountPoint, Dev: m.Dev(), FSType: m.FSType, Source: m.Source, Holders: ma.holders.list()})
	}
}
