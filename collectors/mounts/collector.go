package mounts

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
// costs about a microsecond (one per process for a process of one thread,
// whose stat says so).

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/blockdev"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirMounts,
		Description:    "mountinfo of every mount namespace (read once per namespace, found through every task), namespace → processes, device → every namespace/process/mountpoint that mounts it",
		Requires:       "root: /proc/<pid>/mountinfo of every mount namespace",
		DefaultEnabled: true,
		PrestartWorker: true, // every run reads through a worker
		DefaultTimeout: 30 * time.Second,
		Files:          files,
		Run:            collect,
	})
}

// nsScan collects tasks by mount namespace.
type nsScan struct {
	// ppid and comms are every scanned process's parent and name.
	ppid      map[int]int
	comms     map[int]string
	spaces    map[uint64]*nsEntry
	order     []uint64
	tasks     int
	processes int
	gone      int
}

type nsEntry struct {
	inode       uint64
	candidates  []hostfs.Task // tasks to read mountinfo from, in scan order
	processes   []layout.NamespaceProcess
	tasks       int
	threadLevel bool
}

// scanGoroutines read /proc at once: reads of procfs only wait for the
// kernel, so a few goroutines use the CPUs while one is in a system call.
const scanGoroutines = 4

func newNSScan() *nsScan {
	return &nsScan{spaces: map[uint64]*nsEntry{}, ppid: map[int]int{}, comms: map[int]string{}}
}

func (s *nsScan) entry(ns uint64) *nsEntry {
	e := s.spaces[ns]
	if e == nil {
		e = &nsEntry{inode: ns}
		s.spaces[ns] = e
		s.order = append(s.order, ns)
	}
	return e
}

// procScan is what one process's tasks say about namespaces.
type procScan struct {
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

// scanProcess reads the namespace of every task of pid. It only reads:
// several run at once.
func scanProcess(proc string, pid int) procScan {
	pidDir := proc + "/" + strconv.Itoa(pid)
	// stat, not comm: the same one read gives the parent, which tells
	// nodesnap's own processes (the supervisor's descendants) apart, and
	// the number of threads.
	var comm string
	var ppid, threads int
	var sb [1024]byte
	if b, err := hostfs.ReadSmall(pidDir+"/stat", sb[:]); err == nil {
		if st, err := procfs.ParseStat(b); err == nil {
			comm, ppid, threads = st.Comm, st.PPID, st.NumThreads
		}
	}
	if comm == "" {
		comm = hostfs.ReadComm(pidDir + "/comm")
	}
	if threads == 1 {
		// A process of one thread has one task, its leader, whose
		// namespace is the process's ns/mnt: one readlink instead of
		// listing task/ and reading a link in it. Most processes of a
		// node are such. (With more threads each task is read: a thread
		// may have unshared its own namespace, which the kernel allows.)
		// A leader that has exited has no namespace link left: its
		// live thread is then found the long way.
		if ns, err := hostfs.NSInode(pidDir + "/ns/mnt"); err == nil && ns != 0 {
			return procScan{comm: comm, ppid: ppid, tasks: []mntTaskNS{{tid: pid, ns: ns}}}
		}
	}
	tids, nss, err := hostfs.TaskNamespaces(proc, pid)
	if err != nil {
		return procScan{gone: 1}
	}
	r := procScan{comm: comm, ppid: ppid, tasks: make([]mntTaskNS, 0, len(tids))}
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
	if r.split {
		// A thread that unshared often has a telling name of its own.
		for i := range r.tasks {
			r.tasks[i].comm = hostfs.ReadComm(pidDir + "/task/" + strconv.Itoa(r.tasks[i].tid) + "/comm")
			r.tasks[i].leader = r.tasks[i].ns == leaderNS
		}
	}
	return r
}

// add records one process's scan.
func (s *nsScan) add(pid int, r procScan) {
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
		if len(e.candidates) < shared.MaxNSCandidates {
			e.candidates = append(e.candidates, hostfs.Task{PID: pid, TID: t.tid})
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

func collect(ctx context.Context, env *collectors.Env) error {
	proc := env.ProcPath()
	rep := layout.MountsReport{}
	host, err := shared.HostNamespace(env)
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
	pids, err := hostfs.ListPIDs(proc)
	if err != nil {
		return fmt.Errorf("listing processes in %s: %w", proc, err)
	}
	scan := newNSScan()
	procs := make([]procScan, len(pids))
	done := make([]bool, len(pids))
	shared.Parallel(scanCtx, len(pids), scanGoroutines, func(i int) {
		procs[i] = scanProcess(proc, pids[i])
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
	cands := make([][]hostfs.Task, len(order))
	for i, ns := range order {
		e := scan.spaces[ns]
		rep.Namespaces[i] = layout.MountNamespace{Inode: ns, Host: ns == host && host != 0, ThreadLevel: e.threadLevel,
			ProcessCount: len(e.processes), TaskCount: e.tasks, Processes: e.processes,
			Error: "not read: the collector's deadline passed"}
		cands[i] = e.candidates
	}
	tables := newMntTables(env, len(order))
	share := newTableShare(len(order))
	env.Host().TaskMountinfos(scanCtx, cands, tables.maxTable(), hostfs.MountinfoReaders(), func(i int, r hostfs.MountinfoResult) {
		mns := &rep.Namespaces[i]
		ns := mns.Inode
		mns.Error = ""
		if r.Err != nil {
			tables.skip(i)
			mns.Error = fmt.Sprintf("reading mountinfo: %v", r.Err)
			if !shared.Gone(r.Err) {
				env.Partialf("mount namespace %d: %v", ns, r.Err)
			}
			return
		}
		mns.ReadFrom, mns.ReadFromRoot, mns.Truncated = layout.TaskRef{PID: r.From.PID, TID: r.From.TID}, r.Root, r.Truncated
		if r.Truncated {
			env.Partialf("mount namespace %d: mountinfo longer than %d bytes (the file size cap); the mounts after the cut are missing", ns, tables.maxTable())
		}
		h := layout.MountinfoHeader{Inode: ns, PID: r.From.PID, TID: r.From.TID, Host: mns.Host, Truncated: r.Truncated}
		// A table the same as one parsed already but for its mount IDs
		// is not parsed again: finish numbers that one's mounts as its.
		// A cut table is never shared.
		// The shape of a table the worker sent as another's renumbered
		// is that one's (refShape); any other is hashed.
		s, ok := share.refShape(r)
		from := 0 // the table r.Data was rebuilt from, + 1
		if ok {
			from = r.SameAs.Of + 1
		} else {
			s, ok = share.shapeOf(r.Data)
		}
		if !ok || r.Truncated {
			s = tableShape{}
		}
		if s.hash != "" && share.known(i, s) {
			tables.put(i, h, r.Data, s, from)
			return
		}
		mounts, bad := procfs.ParseMountInfo(r.Data)
		mns.Mounts = make([]layout.NamespaceMount, len(mounts))
		for j, m := range mounts {
			mns.Mounts[j] = layout.NamespaceMount{Mount: m, PropagationType: PropagationType(m.Propagation), Class: procfs.Classify(m).String()}
		}
		mns.BadLines = bad
		share.keep(i, mns.Mounts, len(bad) == 0)
		tables.put(i, h, r.Data, s, from)
	})
	names, err := tables.close()
	if err != nil {
		return err
	}
	rep.Format = layout.MountsFormat
	if rep.Tables, err = share.finish(rep.Namespaces); err != nil {
		return fmt.Errorf("sharing the mount tables: %w", err)
	}
	for i := range rep.Namespaces {
		mns := &rep.Namespaces[i]
		mns.Mountinfo = names[i]
		if len(mns.BadLines) > 0 {
			env.Notef("mount namespace %d: %d mountinfo lines could not be parsed (kept in %s)", mns.Inode, len(mns.BadLines), mns.Mountinfo)
		}
	}
	for _, mns := range rep.Namespaces {
		if mns.Error == "not read: the collector's deadline passed" {
			env.Partialf("mount namespace %d not read before the deadline", mns.Inode)
		}
	}

	rep.Devices = BuildMountDeviceIndex(rep.Namespaces)
	rep.Nodesnap = findSelf(env, proc, scan, host, rep.Namespaces)
	MarkNodesnapNamespaces(&rep)
	if n := rep.Nodesnap; len(n.Namespaces) > 0 {
		pod := ""
		if len(n.Namespaces) > 1 {
			pod = fmt.Sprintf(" and %d of its pod's other containers", len(n.Namespaces)-1)
		}
		env.Notef("nodesnap's own mount namespace %d%s not counted as holders: %d device(s) mounted outside the host's namespace only there were not flagged",
			n.MountNamespace, pod, n.ExcludedDeviceCount)
	}
	sysCache := blockdev.NewCache(env.Sys)
	outside := 0
	for i := range rep.Devices {
		d := &rep.Devices[i]
		d.Block = sysCache.Lookup(d.Major, d.Minor)
		if d.OnlyOutsideHostNamespace && host != 0 && d.Major != 0 {
			outside++
			if outside <= 5 {
				env.Notef("block device %s%s is mounted only outside the host's mount namespace: %s",
					d.Dev, blockName(d.Block), describeHolders(d))
			}
		}
	}
	if host == 0 {
		for i := range rep.Devices {
			rep.Devices[i].OnlyOutsideHostNamespace = false
		}
	}
	// Format 3: a device lists a shared table's namespaces by name only.
	layout.CompactDeviceIndex(&rep)
	return writeReport(env, &rep)
}
