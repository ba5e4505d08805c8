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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/procfs"
)

func init() {
	Register(Spec{
		Name:           "mounts",
		Description:    "mountinfo of every mount namespace (read once per namespace, found through every task), namespace → processes, device → every namespace/process/mountpoint that mounts it",
		DefaultEnabled: true,
		DefaultTimeout: 30 * time.Second,
		Run:            collectMounts,
	})
}

// MountsReport is mounts/mounts.json.
type MountsReport struct {
	// HostNamespace is the inode of pid 1's mount namespace (0 if it could
	// not be read, e.g. in a container without the host's pid namespace).
	HostNamespace uint64 `json:"host_namespace"`
	// Processes and Tasks are how many were scanned; TasksGone counts tasks
	// that exited (or could not be read) during the scan.
	Processes int `json:"processes"`
	Tasks     int `json:"tasks"`
	TasksGone int `json:"tasks_gone,omitempty"`
	// Namespaces lists every mount namespace found, the host's first.
	Namespaces []MountNamespace `json:"namespaces"`
	// Devices is the index: every device (major:minor) mounted in any
	// namespace, except pseudo filesystems (proc, sysfs, cgroup, ...).
	Devices []MountDevice `json:"devices"`
	Errors  []string      `json:"errors,omitempty"`
	// Nodesnap is nodesnap's own run as this scan found it: its
	// namespaces are never counted as holders.
	Nodesnap *MountsSelf `json:"nodesnap,omitempty"`
}

// MountsSelf is nodesnap itself in the mount index. In a pod, its mount
// namespace is a copy of the node's mounts made when the pod started, and
// would otherwise show as a holder of every mount the node has unmounted
// since.
type MountsSelf struct {
	// MountNamespace is nodesnap's own (its supervisor's, which every
	// collector and worker shares); 0 when the scanned /proc does not
	// show it.
	MountNamespace uint64 `json:"mount_namespace,omitempty"`
	// PodUID is nodesnap's pod, when it runs in one.
	PodUID string `json:"pod_uid,omitempty"`
	// Namespaces are the namespaces not counted as holders: nodesnap's
	// own and its pod's other containers'. Empty when nodesnap runs in
	// the host's namespace, which is never a foreign holder anyway.
	Namespaces []uint64 `json:"namespaces"`
	// SupervisorPID and PIDs are nodesnap's processes as this /proc
	// numbers them: the supervisor, its collectors and their workers
	// and programs, at the time of the scan.
	SupervisorPID int   `json:"supervisor_pid,omitempty"`
	PIDs          []int `json:"pids,omitempty"`
	// ExcludedDevices are devices mounted outside the host's namespace
	// only in Namespaces: not flagged (at most MaxExcludedDevices).
	ExcludedDevices     []string `json:"excluded_devices,omitempty"`
	ExcludedDeviceCount int      `json:"excluded_device_count,omitempty"`
}

// MaxExcludedDevices bounds MountsSelf.ExcludedDevices.
const MaxExcludedDevices = 100

// Values of the nodesnap field of a namespace.
const (
	NodesnapOwn = "own" // nodesnap's own namespace
	NodesnapPod = "pod" // another container of nodesnap's pod
)

// MountNamespace is one mount namespace and its mount table.
type MountNamespace struct {
	// Inode identifies the namespace: readlink /proc/<pid>/ns/mnt gives
	// "mnt:[Inode]".
	Inode uint64 `json:"inode"`
	// Host is set for pid 1's namespace.
	Host bool `json:"host"`
	// Mountinfo is the raw file's path in the bundle, relative to the
	// collector's directory ("ns/<inode>.mountinfo").
	Mountinfo string `json:"mountinfo,omitempty"`
	// ReadFrom is the task whose mountinfo was read. Mount points are
	// relative to that task's root, which is ReadFromRoot when it is not
	// "/" (no task of the namespace had "/" as its root).
	ReadFrom     TaskRef `json:"read_from"`
	ReadFromRoot string  `json:"read_from_root,omitempty"`
	// ThreadLevel is set when some task here is a thread whose process's
	// main thread is in another namespace (it unshared on its own).
	ThreadLevel bool `json:"thread_level,omitempty"`
	// Nodesnap is "own" for nodesnap's own namespace and "pod" for
	// another container of its pod: never counted as a holder.
	Nodesnap     string             `json:"nodesnap,omitempty"`
	ProcessCount int                `json:"process_count"`
	TaskCount    int                `json:"task_count"`
	Processes    []NamespaceProcess `json:"processes"`
	Mounts       []NamespaceMount   `json:"mounts"`
	// BadLines are mountinfo lines that could not be parsed (kept in the
	// raw file).
	BadLines  []procfs.LineError `json:"bad_lines,omitempty"`
	Truncated bool               `json:"truncated,omitempty"`
	// Error says why the mount table is missing.
	Error string `json:"error,omitempty"`
}

// TaskRef names one task.
type TaskRef struct {
	PID int `json:"pid"`
	TID int `json:"tid"`
}

// NamespaceProcess is a process with at least one task in a namespace.
type NamespaceProcess struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Threads is how many of its tasks are in this namespace.
	Threads int `json:"threads"`
	// Tasks lists those tasks, only when the process's tasks are spread
	// over more than one namespace.
	Tasks []NamespaceTask `json:"tasks,omitempty"`
}

// NamespaceTask is one task (thread) of a process.
type NamespaceTask struct {
	TID  int    `json:"tid"`
	Comm string `json:"comm"`
}

// NamespaceMount is one parsed mountinfo line.
type NamespaceMount struct {
	procfs.Mount
	// PropagationType is "shared", "slave", "shared,slave" or "private",
	// with ",unbindable" appended when unbindable. A private copy of a
	// host mount is not unmounted when the host unmounts.
	PropagationType string `json:"propagation_type"`
	// Class is network, fuse, block, other or pseudo.
	Class string `json:"class"`
}

// MountDevice is one entry of the device index.
type MountDevice struct {
	Dev   string `json:"dev"` // "major:minor"
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	// Sources and FSTypes are the distinct mount sources ("/dev/rbd3",
	// "10.0.0.1:/export") and filesystem types it is mounted with.
	Sources []string `json:"sources"`
	FSTypes []string `json:"fs_types"`
	Class   string   `json:"class"`
	// Block describes a block device from sysfs (loop backing file, dm
	// name, rbd image); nil for filesystems without one (tmpfs, nfs...).
	Block *BlockDevice `json:"block,omitempty"`
	// InHostNamespace is set when pid 1's namespace mounts it.
	InHostNamespace bool `json:"in_host_namespace"`
	// OnlyOutsideHostNamespace: mounted somewhere, but not in the host's
	// namespace. An unmount on the host cannot free such a device (the
	// EBUSY of incident 002); Namespaces names who holds it.
	// nodesnap's own namespaces (MountsSelf) do not count.
	OnlyOutsideHostNamespace bool `json:"only_outside_host_namespace"`
	// OnlyInNodesnapNamespaces: mounted outside the host's namespace,
	// but only in nodesnap's own namespaces: not flagged.
	OnlyInNodesnapNamespaces bool                   `json:"only_in_nodesnap_namespaces,omitempty"`
	Namespaces               []MountDeviceNamespace `json:"namespaces"`
}

// MountDeviceNamespace is one namespace mounting a device.
// MaxDeviceNamespaceProcesses bounds the processes listed per namespace
// under a device; ProcessCount has the full count.
const MaxDeviceNamespaceProcesses = 16

type MountDeviceNamespace struct {
	Namespace uint64 `json:"namespace"`
	Host      bool   `json:"host"`
	// Nodesnap marks nodesnap's own namespaces (see MountNamespace).
	Nodesnap string `json:"nodesnap,omitempty"`
	// ProcessCount is how many processes have a task in the namespace.
	ProcessCount int `json:"process_count"`
	// Processes lists them (pids, comms, and tids for thread-level
	// namespaces), at most MaxDeviceNamespaceProcesses. Left out for the
	// host namespace, whose processes are in namespaces[] once.
	Processes []NamespaceProcess `json:"processes,omitempty"`
	Mounts    []MountDeviceMount `json:"mounts"`
}

// MountDeviceMount is one mount of a device in one namespace.
type MountDeviceMount struct {
	MountID    int    `json:"mount_id"`
	MountPoint string `json:"mount_point"`
	Root       string `json:"root"`
	Source     string `json:"source"`
	FSType     string `json:"fs_type"`
	// Propagation as mountinfo writes it: "shared:5 master:3", "private".
	Propagation string `json:"propagation"`
}

// BlockDevice is what sysfs says about a block device, read from
// /sys/dev/block/<major:minor>/.
type BlockDevice struct {
	// Name is the kernel name (DEVNAME in uevent): loop3, rbd3, dm-0,
	// nbd0, sda1. The device node is /dev/<Name>.
	Name string `json:"name"`
	// BackingFile is a loop device's file (loop/backing_file).
	BackingFile string `json:"backing_file,omitempty"`
	// DMName and DMUUID are a device-mapper device's dm/name
	// (/dev/mapper/<DMName>) and dm/uuid.
	DMName string `json:"dm_name,omitempty"`
	DMUUID string `json:"dm_uuid,omitempty"`
	// RBDPool and RBDImage come from /sys/bus/rbd/devices/<id>/.
	RBDPool  string `json:"rbd_pool,omitempty"`
	RBDImage string `json:"rbd_image,omitempty"`
	// NBDPid is the nbd client's pid (nbd pid attribute).
	NBDPid int `json:"nbd_pid,omitempty"`
	// Partition is the partition number when the device is a partition.
	Partition int `json:"partition,omitempty"`
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
	candidates  []TaskRef // tasks to read mountinfo from, in scan order
	processes   []NamespaceProcess
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
			e.candidates = append(e.candidates, TaskRef{PID: pid, TID: t.tid})
		}
		e.tasks++
	}
	if !r.split {
		e := s.spaces[r.tasks[0].ns]
		e.processes = append(e.processes, NamespaceProcess{PID: pid, Comm: r.comm, Threads: len(r.tasks)})
		return
	}
	byNS := map[uint64]*NamespaceProcess{}
	var nsOrder []uint64
	for _, t := range r.tasks {
		np := byNS[t.ns]
		if np == nil {
			np = &NamespaceProcess{PID: pid, Comm: r.comm}
			byNS[t.ns] = np
			nsOrder = append(nsOrder, t.ns)
		}
		np.Threads++
		np.Tasks = append(np.Tasks, NamespaceTask{TID: t.tid, Comm: t.comm})
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
func mntReadNamespaceMountinfo(proc string, cands []TaskRef, max int64, buf []byte) (data []byte, from TaskRef, root string, truncated bool, err error) {
	taskDir := func(t TaskRef) string {
		return proc + "/" + strconv.Itoa(t.PID) + "/task/" + strconv.Itoa(t.TID)
	}
	err = errors.New("no task of the namespace is left")
	var fallback []TaskRef
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
	return nil, TaskRef{}, "", false, err
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
	rep := MountsReport{}
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
	rep.Namespaces = make([]MountNamespace, len(order))
	werrs := make([]error, len(order))
	for i, ns := range order {
		e := scan.spaces[ns]
		rep.Namespaces[i] = MountNamespace{Inode: ns, Host: ns == host && host != 0, ThreadLevel: e.threadLevel,
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
		mns.Mountinfo = "ns/" + strconv.FormatUint(ns, 10) + ".mountinfo"
		if err := env.WriteFile(mns.Mountinfo, data); err != nil {
			werrs[i] = err
			return
		}
		mounts, bad := procfs.ParseMountInfo(data)
		mns.Mounts = make([]NamespaceMount, len(mounts))
		for j, m := range mounts {
			mns.Mounts[j] = NamespaceMount{Mount: m, PropagationType: PropagationType(m.Propagation), Class: procfs.Classify(m).String()}
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

// mntWriteReport writes mounts.json as ordinary JSON laid out one mount,
// one process list and one device per line: compact enough to write and
// compress quickly when there are thousands of mounts, and in lines the
// redactor reads one at a time.
func mntWriteReport(env *Env, rep *MountsReport) error {
	f, err := env.Create("mounts.json")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	werr := mntEncodeReport(w, rep)
	if err := w.Flush(); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("writing mounts.json: %w", werr)
	}
	return nil
}

// mntEncodeReport writes rep as JSON. Objects are marshalled without their
// long arrays, which are appended element by element.
func mntEncodeReport(w io.Writer, rep *MountsReport) error {
	bw := &mntJSONWriter{w: w}
	head := *rep
	head.Namespaces, head.Devices = nil, nil
	bw.object(struct {
		*MountsReport
		Namespaces *struct{} `json:"namespaces,omitempty"`
		Devices    *struct{} `json:"devices,omitempty"`
	}{MountsReport: &head})
	bw.str(`,"namespaces":[`)
	for i := range rep.Namespaces {
		ns := &rep.Namespaces[i]
		bw.sep(i)
		bw.object(struct {
			*MountNamespace
			Processes *struct{} `json:"processes,omitempty"`
			Mounts    *struct{} `json:"mounts,omitempty"`
		}{MountNamespace: ns})
		bw.str(`,"processes":`)
		bw.value(nonNil(ns.Processes))
		bw.str(`,"mounts":[`)
		for j := range ns.Mounts {
			bw.sep(j)
			bw.value(&ns.Mounts[j])
		}
		bw.str("\n]}")
	}
	bw.str("\n],\n\"devices\":[")
	for i := range rep.Devices {
		bw.sep(i)
		bw.value(&rep.Devices[i])
	}
	bw.str("\n]}\n")
	return bw.err
}

// mntJSONArray is an array field written one element per line.
type mntJSONArray struct {
	name string
	n    int
	elem func(i int) any
}

// mntWriteJSONLines writes the object head (whose long arrays are hidden by
// shadowing fields) followed by arrays, one element per line.
func mntWriteJSONLines(env *Env, name string, head any, arrays ...mntJSONArray) error {
	f, err := env.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	j := &mntJSONWriter{w: w}
	j.object(head)
	for _, a := range arrays {
		j.str(`,"` + a.name + `":[`)
		for i := 0; i < a.n; i++ {
			j.sep(i)
			j.value(a.elem(i))
		}
		j.str("\n]")
	}
	j.str("}\n")
	werr := j.err
	if err := w.Flush(); werr == nil {
		werr = err
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("writing %s: %w", name, werr)
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// mntJSONWriter writes JSON pieces, keeping the first error.
type mntJSONWriter struct {
	w   io.Writer
	err error
}

func (j *mntJSONWriter) str(s string) {
	if j.err == nil {
		_, j.err = io.WriteString(j.w, s)
	}
}

func (j *mntJSONWriter) value(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = err
		return
	}
	_, j.err = j.w.Write(b)
}

// object writes v, an object, without its closing brace, so that fields
// can follow.
func (j *mntJSONWriter) object(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = err
		return
	}
	if len(b) < 2 || b[len(b)-1] != '}' {
		j.err = fmt.Errorf("internal error: %T is not a JSON object", v)
		return
	}
	b = b[:len(b)-1]
	if len(b) == 1 {
		// An empty object: the next field must not start with a comma.
		j.err = fmt.Errorf("internal error: %T has no fields", v)
		return
	}
	_, j.err = j.w.Write(b)
}

// sep starts the i-th element of an array on a new line.
func (j *mntJSONWriter) sep(i int) {
	if i > 0 {
		j.str(",\n")
	} else {
		j.str("\n")
	}
}

func mntBlockName(b *BlockDevice) string {
	if b == nil || b.Name == "" {
		return ""
	}
	s := " (" + b.Name
	if b.BackingFile != "" {
		s += ", backed by " + b.BackingFile
	}
	return s + ")"
}

func mntDescribeHolders(d *MountDevice) string {
	var parts []string
	for _, n := range d.Namespaces {
		if n.Nodesnap != "" {
			continue
		}
		var ps []string
		for _, p := range n.Processes {
			ps = append(ps, fmt.Sprintf("%s[%d]", p.Comm, p.PID))
			if len(ps) == 5 {
				ps = append(ps, "...")
				break
			}
		}
		parts = append(parts, fmt.Sprintf("namespace %d (%s)", n.Namespace, strings.Join(ps, " ")))
	}
	return strings.Join(parts, "; ")
}

// BuildMountDeviceIndex makes the device index from parsed namespaces:
// one entry per major:minor that any namespace mounts (pseudo filesystems
// left out), sorted by device, each with every namespace and mountpoint
// that mounts it and whether the host namespace is among them.
func BuildMountDeviceIndex(nss []MountNamespace) []MountDevice {
	type key struct{ major, minor uint32 }
	byDev := map[key]*MountDevice{}
	var keys []key
	for _, ns := range nss {
		var cur map[key]int // device → index in its Namespaces, for this ns
		for _, m := range ns.Mounts {
			if m.Class == procfs.ClassPseudo.String() {
				continue
			}
			k := key{m.Major, m.Minor}
			d := byDev[k]
			if d == nil {
				d = &MountDevice{Dev: m.Dev(), Major: m.Major, Minor: m.Minor, Class: m.Class}
				byDev[k] = d
				keys = append(keys, k)
			}
			if !slices.Contains(d.Sources, m.Source) {
				d.Sources = append(d.Sources, m.Source)
			}
			if !slices.Contains(d.FSTypes, m.FSType) {
				d.FSTypes = append(d.FSTypes, m.FSType)
			}
			if cur == nil {
				cur = map[key]int{}
			}
			i, ok := cur[k]
			if !ok {
				dn := MountDeviceNamespace{Namespace: ns.Inode, Host: ns.Host, ProcessCount: ns.ProcessCount}
				if !ns.Host {
					// Enough to name the holders; the full list is in
					// namespaces[] once, not repeated for every device
					// the namespace mounts (it made mounts.json
					// quadratic on a node with many namespaces).
					dn.Processes = ns.Processes[:min(len(ns.Processes), MaxDeviceNamespaceProcesses)]
				}
				d.Namespaces = append(d.Namespaces, dn)
				i = len(d.Namespaces) - 1
				cur[k] = i
				if ns.Host {
					d.InHostNamespace = true
				}
			}
			d.Namespaces[i].Mounts = append(d.Namespaces[i].Mounts, MountDeviceMount{
				MountID: m.ID, MountPoint: m.MountPoint, Root: m.Root, Source: m.Source,
				FSType: m.FSType, Propagation: m.Propagation.String(),
			})
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].major != keys[j].major {
			return keys[i].major < keys[j].major
		}
		return keys[i].minor < keys[j].minor
	})
	out := make([]MountDevice, 0, len(keys))
	for _, k := range keys {
		d := byDev[k]
		d.OnlyOutsideHostNamespace = !d.InHostNamespace
		out = append(out, *d)
	}
	return out
}

// mntBlockCache reads sysfs facts about block devices once each.
type mntBlockCache struct {
	sys   string
	byDev map[[2]uint32]*BlockDevice
	// byName maps a kernel name (loop3) to its device, filled by
	// lookupName.
	byName map[string]*mntNameEntry
}

type mntNameEntry struct {
	major, minor uint32
	ok           bool
}

func mntNewBlockCache(sys string) *mntBlockCache {
	return &mntBlockCache{sys: sys, byDev: map[[2]uint32]*BlockDevice{}, byName: map[string]*mntNameEntry{}}
}

// lookup returns sysfs facts for a block device, or nil when major:minor
// is not a block device (major 0 is the kernel's anonymous devices: tmpfs,
// overlay, nfs, fuse...). sysfs attributes are kernel memory: reading
// them touches no filesystem that can hang.
func (c *mntBlockCache) lookup(major, minor uint32) *BlockDevice {
	if major == 0 {
		return nil
	}
	k := [2]uint32{major, minor}
	if b, ok := c.byDev[k]; ok {
		return b
	}
	dir := c.sys + "/dev/block/" + strconv.FormatUint(uint64(major), 10) + ":" + strconv.FormatUint(uint64(minor), 10)
	b := mntReadBlockDevice(c.sys, dir)
	c.byDev[k] = b
	return b
}

// lookupName returns the device number of /dev/<name> when name is a block
// device the kernel knows (from /sys/class/block/<name>/dev).
func (c *mntBlockCache) lookupName(name string) (uint32, uint32, bool) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return 0, 0, false
	}
	if e, ok := c.byName[name]; ok {
		return e.major, e.minor, e.ok
	}
	e := &mntNameEntry{}
	c.byName[name] = e
	var buf [64]byte
	b, err := mntReadSmall(c.sys+"/class/block/"+name+"/dev", buf[:])
	if err != nil {
		return 0, 0, false
	}
	maj, mnr, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	a, err1 := strconv.ParseUint(maj, 10, 32)
	z, err2 := strconv.ParseUint(mnr, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	e.major, e.minor, e.ok = uint32(a), uint32(z), true
	return e.major, e.minor, true
}

func mntReadBlockDevice(sys, dir string) *BlockDevice {
	var buf [4096]byte
	read := func(name string) string {
		b, err := mntReadSmall(dir+"/"+name, buf[:])
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	uevent := read("uevent")
	if uevent == "" {
		return nil
	}
	b := &BlockDevice{}
	for _, line := range strings.Split(uevent, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "DEVNAME":
			b.Name = v
		case "PARTN":
			b.Partition, _ = strconv.Atoi(v)
		}
	}
	switch {
	case strings.HasPrefix(b.Name, "loop"):
		b.BackingFile = read("loop/backing_file")
	case strings.HasPrefix(b.Name, "dm-"):
		b.DMName = read("dm/name")
		b.DMUUID = read("dm/uuid")
	case strings.HasPrefix(b.Name, "nbd"):
		b.NBDPid, _ = strconv.Atoi(read("pid"))
	case strings.HasPrefix(b.Name, "rbd") && b.Partition == 0:
		// /sys/bus/rbd/devices/<id>/ for /dev/rbd<id>.
		if id := strings.TrimPrefix(b.Name, "rbd"); id != "" && strings.Trim(id, "0123456789") == "" {
			rbd := sys + "/bus/rbd/devices/" + id + "/"
			if p, err := mntReadSmall(rbd+"pool", buf[:]); err == nil {
				b.RBDPool = strings.TrimSpace(string(p))
			}
			if p, err := mntReadSmall(rbd+"name", buf[:]); err == nil {
				b.RBDImage = strings.TrimSpace(string(p))
			}
		}
	}
	return b
}

// mntFindSelf finds nodesnap in the scan: its own mount namespace (the
// supervisor's, passed down in Common.Self), its pod's other containers'
// namespaces, and its processes: the supervisor (this collector's parent,
// found through <proc>/self, which names the reader as that /proc numbers
// it) and its descendants.
func mntFindSelf(env *Env, proc string, scan *mntNSScan, host uint64, nss []MountNamespace) *MountsSelf {
	ms := &MountsSelf{Namespaces: []uint64{}}
	if env.Self != nil {
		ms.MountNamespace = env.Self.MountNamespace
		if env.Self.Pod != nil {
			ms.PodUID = env.Self.Pod.UID
		}
	}
	if ms.MountNamespace == 0 {
		ms.MountNamespace, _ = mntNSInode("/proc/self/ns/mnt")
	}
	if link, err := os.Readlink(proc + "/self"); err == nil {
		if me, err := strconv.Atoi(link); err == nil {
			ms.SupervisorPID, ms.PIDs = SelfProcesses(scan.ppid, scan.comms, me)
		}
	}
	if _, ok := scan.spaces[ms.MountNamespace]; !ok {
		// Not among the namespaces this /proc shows (a fixture root,
		// or a pod without the host's PID namespace): nothing of
		// nodesnap's own to leave out.
		ms.MountNamespace = 0
	}
	if ms.MountNamespace == 0 || ms.MountNamespace == host || host == 0 {
		return ms
	}
	ms.Namespaces = append(ms.Namespaces, ms.MountNamespace)
	ms.Namespaces = append(ms.Namespaces, PodNamespaces(nss, host, ms.MountNamespace, ms.PodUID)...)
	return ms
}

// PodNamespaces returns the mount namespaces of the pod uid's containers
// other than host and own: those with a mount bound from the pod's own
// kubelet directory (/etc/hosts, a termination log, a volume) at a mount
// point outside any kubelet pod directory. A copy of the node's kubelet
// tree (a CSI driver's) has its mount points in pod directories, and is
// not the pod.
func PodNamespaces(nss []MountNamespace, host, own uint64, uid string) []uint64 {
	if uid == "" {
		return nil
	}
	var out []uint64
	for _, ns := range nss {
		if ns.Inode == host || ns.Inode == own || ns.Host {
			continue
		}
		for _, m := range ns.Mounts {
			if strings.Contains(m.MountPoint, "/pods/") {
				continue
			}
			if u, ok := procfs.PodUIDFromMountRoot(m.Root); ok && u == uid {
				out = append(out, ns.Inode)
				break
			}
		}
	}
	return out
}

// SelfProcesses returns the supervisor of the collector process me (its
// parent) and the supervisor's processes: itself, its children that run
// the same program (collectors: the supervisor of an in-process test run
// has other children), and everything below those (workers, the programs
// they run). ppid and comm cover every scanned process.
func SelfProcesses(ppid map[int]int, comm map[int]string, me int) (int, []int) {
	sup, ok := ppid[me]
	if !ok || sup <= 0 {
		return 0, nil
	}
	children := map[int][]int{}
	for pid, pp := range ppid {
		children[pp] = append(children[pp], pid)
	}
	out := []int{sup}
	queue := []int{}
	for _, c := range children[sup] {
		if comm[c] == comm[sup] || c == me {
			queue = append(queue, c)
		}
	}
	seen := map[int]bool{sup: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	slices.Sort(out)
	return sup, out
}

// MarkNodesnapNamespaces marks rep.Nodesnap's namespaces in the namespace
// list and the device index, and recomputes which devices are held only
// outside the host's namespace without them.
func MarkNodesnapNamespaces(rep *MountsReport) {
	if rep.Nodesnap == nil || len(rep.Nodesnap.Namespaces) == 0 {
		return
	}
	kind := map[uint64]string{}
	for _, ns := range rep.Nodesnap.Namespaces {
		kind[ns] = NodesnapPod
	}
	kind[rep.Nodesnap.MountNamespace] = NodesnapOwn
	for i := range rep.Namespaces {
		if k, ok := kind[rep.Namespaces[i].Inode]; ok && !rep.Namespaces[i].Host {
			rep.Namespaces[i].Nodesnap = k
		}
	}
	for i := range rep.Devices {
		d := &rep.Devices[i]
		foreign := false
		for j := range d.Namespaces {
			n := &d.Namespaces[j]
			if k, ok := kind[n.Namespace]; ok && !n.Host {
				n.Nodesnap = k
			} else if !n.Host {
				foreign = true
			}
		}
		if d.InHostNamespace || foreign || !d.OnlyOutsideHostNamespace {
			continue
		}
		d.OnlyOutsideHostNamespace = false
		d.OnlyInNodesnapNamespaces = true
		rep.Nodesnap.ExcludedDeviceCount++
		if len(rep.Nodesnap.ExcludedDevices) < MaxExcludedDevices {
			rep.Nodesnap.ExcludedDevices = append(rep.Nodesnap.ExcludedDevices, d.Dev)
		}
	}
}
