package collectors

// The mounts collector: the mount table of every mount namespace on the
// node, and an index from each device to every namespace, process and
// mountpoint that still mounts it. Incident 002 (rbd unmap EBUSY because a
// container kept its own copy of the mount) was solved by
// `grep rbd3 /proc/*/task/*/mountinfo`; here that answer is one lookup in
// mounts.json.
//
// Everything is read from /proc and /sys: nothing here stats, opens or lists
// a path under a mount, so a hung mount cannot stop it. mountinfo is read
// per task (threads can unshare their own namespace), but only once per
// namespace: the namespace of a task is its ns/mnt link, a readlink that
// costs about a microsecond.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/procfs"
)

func init() {
	Register(Spec{
		Name:           layout.DirMounts,
		Description:    "mountinfo of every mount namespace (read once per namespace, found through every task), namespace → processes, device → every namespace/process/mountpoint that mounts it",
		DefaultEnabled: true,
		DefaultTimeout: 30 * time.Second,
		Run:            collectMounts,
	})
}

// mntNSInode reads a /proc/.../ns/mnt link. Readlink of a namespace link
// touches no filesystem but nsfs.
func mntNSInode(p string) (uint64, error) {
	link, err := os.Readlink(p)
	if err != nil {
		return 0, err
	}
	return procfs.ParseMountNS(link)
}

// mntHostNamespace returns the host's mount namespace: pid 1's, or when
// that cannot be read (a sandbox that hides its init), kthreadd's (pid 2):
// kernel threads live in the initial mount namespace, which is pid 1's on
// any ordinary host.
func mntHostNamespace(env *Env) (uint64, error) {
	ns, err := mntNSInode(env.ProcPath("1", "ns", "mnt"))
	if err == nil {
		return ns, nil
	}
	if ns2, err2 := mntNSInode(env.ProcPath("2", "ns", "mnt")); err2 == nil && mntIsKthreadd(env.ProcPath("2")) {
		return ns2, nil
	}
	return 0, fmt.Errorf("cannot tell the host's mount namespace: %w", err)
}

// mntIsKthreadd reports whether the process at dir is kthreadd.
func mntIsKthreadd(dir string) bool {
	return mntReadComm(dir+"/comm") == "kthreadd"
}

// listNumeric returns the numeric entry names of a /proc directory (pids,
// tids), sorted; processes, mounts and openfiles all walk /proc with it.
// Readdirnames does not stat the entries.
func listNumeric(dir string) ([]int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	names, err := mntDirNames(fd)
	unix.Close(fd)
	if err != nil && len(names) == 0 {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if len(n) == 0 || n[0] < '0' || n[0] > '9' {
			continue
		}
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// mntDirNames lists a directory with getdents on a raw descriptor.
func mntDirNames(fd int) ([]string, error) {
	var buf [16 << 10]byte
	var names []string
	for {
		n, err := unix.Getdents(fd, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return names, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// mntReadSmall reads a short /proc or /sys file into buf (no stat: such files
// report size 0 or 4096) and returns the bytes read.
func mntReadSmall(p string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return buf[:n], &os.PathError{Op: "read", Path: p, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// mntReadComm returns a task's comm without its trailing newline.
func mntReadComm(p string) string {
	var buf [128]byte
	b, err := mntReadSmall(p, buf[:])
	if err != nil {
		return ""
	}
	return string(bytes.TrimSuffix(b, []byte("\n")))
}

// mntReadProcFile reads a whole /proc file up to max bytes into buf (grown
// as needed; the result aliases it). Raw system calls, like the task scan:
// os.Open would register every file with the netpoller.
func mntReadProcFile(p string, max int64, buf []byte) ([]byte, bool, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return buf, false, &os.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			return buf, false, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return buf[:max], true, nil
		}
	}
}

// mntBufs are the mountinfo read buffers of the goroutines reading
// namespaces: one table is read, written and parsed (which copies it)
// before the next, so a buffer is reused instead of allocating one per
// namespace.
var mntBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// mntGone reports whether err means the process or task went away while being
// read (an ordinary race, not worth a note).
func mntGone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// mntNSScan collects tasks by mount namespace.
type mntNSScan struct {
	// ppid and comms are every scanned process's parent and name.
	ppid      map[int]int
	comms     map[int]string
	spaces    map[uint64]*mntNSEntry
	order     []uint64
	tasks     int
	processes int
	gone      int
}

type mntNSEntry struct {
	inode       uint64
	candidates  []layout.TaskRef // tasks to read mountinfo from, in scan order
	processes   []layout.NamespaceProcess
	tasks       int
	threadLevel bool
}

// mntScanGoroutines read /proc at once: reads of procfs only wait for the
// kernel, so a few goroutines use the CPUs while one is in a system call.
const mntScanGoroutines = 4

// mntMaxNSCandidates bounds the tasks remembered per namespace for reading
// its mountinfo: the first one nearly always works.
const mntMaxNSCandidates = 16

func mntNewNSScan() *mntNSScan {
	return &mntNSScan{spaces: map[uint64]*mntNSEntry{}, ppid: map[int]int{}, comms: map[int]string{}}
}

func (s *mntNSScan) entry(ns uint64) *mntNSEntry {
	e := s.spaces[ns]
	if e == nil {
		e = &mntNSEntry{inode: ns}
		s.spaces[ns] = e
		s.order = append(s.order, ns)
	}
	return e
}

// mntProcScan is what one process's tasks say about namespaces.
type mntProcScan struct {
	comm  string
	ppid  int
	tasks []mntTaskNS
	split bool // tasks in more than one namespace
	gone  int  // tasks that could not be read
}

type mntTaskNS struct {
	tid    int
	ns     uint64
	comm   string // only when the process is split
	leader bool   // the process's namespace: its main thread's
}

// mntTaskNamespaces lists the tasks of pid and reads each one's ns/mnt
// link (0 when the task is gone). The links are read relative to the open
// task directory, which spares a path walk per task.
func mntTaskNamespaces(proc string, pid int) ([]int, []uint64, error) {
	// Raw syscalls: os.Open registers every file with the netpoller and
	// Fd() switches it back to blocking, four extra system calls for each
	// of thousands of tasks.
	fd, err := unix.Open(proc+"/"+strconv.Itoa(pid)+"/task", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	names, err := mntDirNames(fd)
	if err != nil && len(names) == 0 {
		return nil, nil, err
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			tids = append(tids, v)
		}
	}
	slices.Sort(tids)
	nss := make([]uint64, len(tids))
	var buf [64]byte
	var rel []byte
	for i, tid := range tids {
		rel = strconv.AppendInt(rel[:0], int64(tid), 10)
		rel = append(rel, "/ns/mnt"...)
		n, err := unix.Readlinkat(fd, string(rel), buf[:])
		if err != nil || n >= len(buf) {
			continue
		}
		if ns, err := procfs.ParseMountNS(string(buf[:n])); err == nil {
			nss[i] = ns
		}
	}
	return tids, nss, nil
}

// mntScanProcess reads the namespace of every task of pid. It only reads:
// several run at once.
func mntScanProcess(proc string, pid int) mntProcScan {
	pidDir := proc + "/" + strconv.Itoa(pid)
	tids, nss, err := mntTaskNamespaces(proc, pid)
	if err != nil {
		return mntProcScan{gone: 1}
	}
	r := mntProcScan{tasks: make([]mntTaskNS, 0, len(tids))}
	var leaderNS uint64
	for i, tid := range tids {
		ns := nss[i]
		if ns == 0 {
			r.gone++
			continue
		}
		if len(r.tasks) > 0 && ns != r.tasks[0].ns {
			r.split = true
		}
		if tid == pid {
			leaderNS = ns
		}
		r.tasks = append(r.tasks, mntTaskNS{tid: tid, ns: ns})
	}
	if len(r.tasks) == 0 {
		return r
	}
	if leaderNS == 0 {
		// The main thread has exited (a zombie leader): the first live
		// thread stands for the process.
		leaderNS = r.tasks[0].ns
	}
	// stat, not comm: the same one read gives the parent, which tells
	// nodesnap's own processes (the supervisor's descendants) apart.
	var sb [1024]byte
	if b, err := mntReadSmall(pidDir+"/stat", sb[:]); err == nil {
		if st, err := procfs.ParseStat(b); err == nil {
			r.comm, r.ppid = st.Comm, st.PPID
		}
	}
	if r.comm == "" {
		r.comm = mntReadComm(pidDir + "/comm")
	}
	if r.split {
		// A thread that unshared often has a telling name of its own.
		for i := range r.tasks {
			r.tasks[i].comm = mntReadComm(pidDir + "/task/" + strconv.Itoa(r.tasks[i].tid) + "/comm")
			r.tasks[i].leader = r.tasks[i].ns == leaderNS
		}
	}
	return r
}

// add records one process's scan.
func (s *mntNSScan) add(pid int, r mntProcScan) {
	s.gone += r.gone
	if len(r.tasks) == 0 {
		return
	}
	s.processes++
	s.tasks += len(r.tasks)
	s.ppid[pid] = r.ppid
	s.comms[pid] = r.comm
	for _, t := range r.tasks {
		e := s.entry(t.ns)
		if len(e.candidates) < mntMaxNSCandidates {
			e.candidates = append(e.candidates, layout.TaskRef{PID: pid, TID: t.tid})
		}
		e.tasks++
	}
	if !r.split {
		e := s.spaces[r.tasks[0].ns]
		e.processes = append(e.processes, layout.NamespaceProcess{PID: pid, Comm: r.comm, Threads: len(r.tasks)})
		return
	}
	byNS := map[uint64]*layout.NamespaceProcess{}
	var nsOrder []uint64
	for _, t := range r.tasks {
		np := byNS[t.ns]
		if np == nil {
			np = &layout.NamespaceProcess{PID: pid, Comm: r.comm}
			byNS[t.ns] = np
			nsOrder = append(nsOrder, t.ns)
		}
		np.Threads++
		np.Tasks = append(np.Tasks, layout.NamespaceTask{TID: t.tid, Comm: t.comm})
		if !t.leader {
			s.spaces[t.ns].threadLevel = true
		}
	}
	for _, ns := range nsOrder {
		e := s.spaces[ns]
		e.processes = append(e.processes, *byNS[ns])
	}
}

// mntParallel calls fn(i) for i in [0, n) on up to workers goroutines,
// stopping early when ctx ends.
func mntParallel(ctx context.Context, n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// mntReadNamespaceMountinfo reads the mountinfo of a namespace from the first
// candidate task whose root is "/" (mount points are printed relative to
// the reading task's root, so a chrooted task would show a partial table),
// falling back to a task with another root when no task has "/".
func mntReadNamespaceMountinfo(proc string, cands []layout.TaskRef, max int64, buf []byte) (data []byte, from layout.TaskRef, root string, truncated bool, err error) {
	taskDir := func(t layout.TaskRef) string {
		return proc + "/" + strconv.Itoa(t.PID) + "/task/" + strconv.Itoa(t.TID)
	}
	err = errors.New("no task of the namespace is left")
	var fallback []layout.TaskRef
	var fallbackRoots []string
	for _, t := range cands {
		r, lerr := os.Readlink(taskDir(t) + "/root")
		if lerr != nil {
			err = lerr
			continue
		}
		if r != "/" {
			fallback, fallbackRoots = append(fallback, t), append(fallbackRoots, r)
			continue
		}
		d, trunc, rerr := mntReadProcFile(taskDir(t)+"/mountinfo", max, buf)
		if rerr == nil {
			return d, t, "", trunc, nil
		}
		err = rerr
	}
	for i, t := range fallback {
		d, trunc, rerr := mntReadProcFile(taskDir(t)+"/mountinfo", max, buf)
		if rerr == nil {
			return d, t, fallbackRoots[i], trunc, nil
		}
		err = rerr
	}
	return nil, layout.TaskRef{}, "", false, err
}

// PropagationType names a mount's propagation in one word or two.
func PropagationType(p procfs.Propagation) string {
	var s string
	switch {
	case p.Shared != 0 && p.Master != 0:
		s = "shared,slave"
	case p.Shared != 0:
		s = "shared"
	case p.Master != 0:
		s = "slave"
	default:
		s = "private"
	}
	if p.Unbindable {
		s += ",unbindable"
	}
	return s
}

func collectMounts(ctx context.Context, env *Env) error {
	proc := env.ProcPath()
	rep := layout.MountsReport{}
	host, err := mntHostNamespace(env)
	if err != nil {
		rep.Errors = append(rep.Errors, err.Error())
		env.Notef("%v; no namespace is marked as the host's", err)
	}
	rep.HostNamespace = host

	// Stop reading a little before the deadline so that mounts.json is
	// still written.
	scanCtx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		scanCtx, cancel = context.WithDeadline(ctx, dl.Add(-min(3*time.Second, time.Until(dl)/5)))
		defer cancel()
	}
	pids, err := listNumeric(proc)
	if err != nil {
		return fmt.Errorf("listing processes in %s: %w", proc, err)
	}
	scan := mntNewNSScan()
	procs := make([]mntProcScan, len(pids))
	done := make([]bool, len(pids))
	mntParallel(scanCtx, len(pids), mntScanGoroutines, func(i int) {
		procs[i] = mntScanProcess(proc, pids[i])
		done[i] = true
	})
	scanned := 0
	for i, pid := range pids {
		if done[i] {
			scanned++
			scan.add(pid, procs[i])
		}
	}
	if scanned < len(pids) {
		env.Partialf("stopped scanning tasks at the deadline after %d of %d processes", scanned, len(pids))
	}
	procs = nil
	rep.Processes, rep.Tasks, rep.TasksGone = scan.processes, scan.tasks, scan.gone

	maxRaw := env.MaxFileBytes
	if maxRaw <= 0 {
		maxRaw = 64 << 20
	}
	order := slices.Clone(scan.order)
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if (a == host) != (b == host) {
			return a == host
		}
		return a < b
	})
	// Each namespace's table: read from one task, kept raw, parsed.
	rep.Namespaces = make([]layout.MountNamespace, len(order))
	werrs := make([]error, len(order))
	for i, ns := range order {
		e := scan.spaces[ns]
		rep.Namespaces[i] = layout.MountNamespace{Inode: ns, Host: ns == host && host != 0, ThreadLevel: e.threadLevel,
			ProcessCount: len(e.processes), TaskCount: e.tasks, Processes: e.processes,
			Error: "not read: the collector's deadline passed"}
	}
	mntParallel(scanCtx, len(order), mntScanGoroutines, func(i int) {
		mns := &rep.Namespaces[i]
		ns := mns.Inode
		mns.Error = ""
		bp := mntBufs.Get().(*[]byte)
		defer mntBufs.Put(bp)
		data, from, root, trunc, rerr := mntReadNamespaceMountinfo(proc, scan.spaces[ns].candidates, maxRaw, *bp)
		if cap(data) > cap(*bp) {
			*bp = data[:0]
		}
		if rerr != nil {
			mns.Error = fmt.Sprintf("reading mountinfo: %v", rerr)
			if !mntGone(rerr) {
				env.Partialf("mount namespace %d: %v", ns, rerr)
			}
			return
		}
		mns.ReadFrom, mns.ReadFromRoot, mns.Truncated = from, root, trunc
		mns.Mountinfo = layout.MountinfoFile(ns)
		if err := env.WriteFile(mns.Mountinfo, data); err != nil {
			werrs[i] = err
			return
		}
		mounts, bad := procfs.ParseMountInfo(data)
		mns.Mounts = make([]layout.NamespaceMount, len(mounts))
		for j, m := range mounts {
			mns.Mounts[j] = layout.NamespaceMount{Mount: m, PropagationType: PropagationType(m.Propagation), Class: procfs.Classify(m).String()}
		}
		if len(bad) > 0 {
			mns.BadLines = bad
			env.Notef("mount namespace %d: %d mountinfo lines could not be parsed (kept in %s)", ns, len(bad), mns.Mountinfo)
		}
	})
	if err := errors.Join(werrs...); err != nil {
		return err
	}
	for _, mns := range rep.Namespaces {
		if mns.Error == "not read: the collector's deadline passed" {
			env.Partialf("mount namespace %d not read before the deadline", mns.Inode)
		}
	}

	rep.Devices = BuildMountDeviceIndex(rep.Namespaces)
	rep.Nodesnap = mntFindSelf(env, proc, scan, host, rep.Namespaces)
	MarkNodesnapNamespaces(&rep)
	if n := rep.Nodesnap; len(n.Namespaces) > 0 {
		pod := ""
		if len(n.Namespaces) > 1 {
			pod = fmt.Sprintf(" and %d of its pod's other containers", len(n.Namespaces)-1)
		}
		env.Notef("nodesnap's own mount namespace %d%s not counted as holders: %d device(s) mounted outside the host's namespace only there were not flagged",
			n.MountNamespace, pod, n.ExcludedDeviceCount)
	}
	sysCache := mntNewBlockCache(env.Sys)
	outside := 0
	for i := range rep.Devices {
		d := &rep.Devices[i]
		d.Block = sysCache.lookup(d.Major, d.Minor)
		if d.OnlyOutsideHostNamespace && host != 0 && d.Major != 0 {
			outside++
			if outside <= 5 {
				env.Notef("block device %s%s is mounted only outside the host's mount namespace: %s",
					d.Dev, mntBlockName(d.Block), mntDescribeHolders(d))
			}
		}
	}
	if host == 0 {
		for i := range rep.Devices {
			rep.Devices[i].OnlyOutsideHostNamespace = false
		}
	}
	return mntWriteReport(env, &rep)
}
