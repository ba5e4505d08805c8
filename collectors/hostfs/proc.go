package hostfs

// The kernel's own process files, read in the collector's process: /proc
// directory listings, namespace links (readlink of an nsfs link), and
// short files such as comm and stat take no lock another process can hold
// and cannot meet a user's mount. They are given the proc root as nodesnap
// sees it (FS.Seen("/proc")). Whatever reads a file a process's state can
// block (mountinfo, cmdline, maps, stack) goes through a worker.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/inroot"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// NSInode reads a /proc/.../ns/mnt link. Readlink of a namespace link
// touches no filesystem but nsfs.
func NSInode(p string) (uint64, error) {
	link, err := os.Readlink(p)
	if err != nil {
		return 0, err
	}
	return procfs.ParseMountNS(link)
}

// Readlink reads a /proc link (ns/*, exe, cwd, fd/N, "self") without
// following it. Reading a link takes no lock of the process it belongs
// to and touches no filesystem but procfs.
func Readlink(p string) (string, error) {
	return os.Readlink(p)
}

// ProcFileMax bounds ReadProc: a task's status or cgroup file, or
// /proc/stat on a machine with many CPUs and interrupts, is far shorter.
const ProcFileMax = 1 << 20

// ReadProc reads a kernel file of /proc (a task's status, stat, cgroup or
// wchan; /proc/stat) whole, up to ProcFileMax, in the calling process:
// these files take no lock another process can hold. buf, if large
// enough, is used (and the result aliases it); otherwise a buffer of
// ProcFileMax is allocated.
func ReadProc(p string, buf []byte) ([]byte, error) {
	if len(buf) == 0 {
		buf = make([]byte, ProcFileMax)
	}
	return ReadSmall(p, buf)
}

// ListPIDs returns the numeric entry names of a /proc directory (pids,
// tids), sorted; every collector that walks /proc does it with this.
// getdents only: no entry is stat()ed.
func ListPIDs(dir string) ([]int, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Names()
	d.Close()
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

// dirNames lists a directory with getdents on a raw descriptor.
func dirNames(fd int) ([]string, error) {
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

// ReadSmall reads a short /proc or /sys file into buf (no stat: such files
// report size 0 or 4096) and returns the bytes read.
func ReadSmall(p string, buf []byte) ([]byte, error) {
	fd, err := openKernel(p, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	return readFD(fd, p, buf)
}

// readFD reads the open file fd (at path p, for errors) into buf until
// EOF or buf is full.
func readFD(fd int, p string, buf []byte) ([]byte, error) {
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

// ReadComm returns a task's comm without its trailing newline.
func ReadComm(p string) string {
	var buf [128]byte
	b, err := ReadSmall(p, buf[:])
	if err != nil {
		return ""
	}
	return string(bytes.TrimSuffix(b, []byte("\n")))
}

// TaskNamespaces lists the tasks of pid and reads each one's ns/mnt
// link (0 when the task is gone). The links are read relative to the open
// task directory, which spares a path walk per task.
func TaskNamespaces(proc string, pid int) ([]int, []uint64, error) {
	// Raw syscalls: os.Open registers every file with the netpoller and
	// Fd() switches it back to blocking, four extra system calls for each
	// of thousands of tasks.
	d, err := OpenDir(proc + "/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil && len(names) == 0 {
		return nil, nil, err
	}
	fd := d.fd
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

// Task is one thread of one process.
type Task struct {
	PID, TID int
}

// Namespaces are the mount namespaces of the node, each with the tasks in
// it (thread ids; a thread may have unshared its own).
type Namespaces struct {
	Tasks map[uint64][]int
	// Host is pid 1's namespace (0 when unknown), Self nodesnap's own.
	Host, Self uint64
}

// MountNamespaces finds every distinct mount namespace by the ns/mnt link
// of every task. readlink of these links takes no lock another process
// can hold.
func (f *FS) MountNamespaces() (Namespaces, error) {
	proc := f.Seen("/proc")
	pids, err := ListPIDs(proc)
	if err != nil {
		return Namespaces{}, fmt.Errorf("listing %s: %w", proc, err)
	}
	ns := Namespaces{Tasks: map[uint64][]int{}}
	for _, pid := range pids {
		base := proc + "/" + strconv.Itoa(pid)
		ino, err := NSInode(base + "/ns/mnt")
		if err != nil {
			continue // exited, or a kernel thread without one
		}
		ns.Tasks[ino] = append(ns.Tasks[ino], pid)
		if pid == 1 {
			ns.Host = ino
		}
		tids, tns, err := TaskNamespaces(proc, pid)
		if err != nil || len(tids) < 2 {
			continue
		}
		for i, tid := range tids {
			if tid != pid && tns[i] != 0 && tns[i] != ino {
				ns.Tasks[tns[i]] = append(ns.Tasks[tns[i]], tid)
			}
		}
	}
	ns.Self, _ = NSInode(proc + "/self/ns/mnt")
	if len(ns.Tasks) == 0 {
		return Namespaces{}, fmt.Errorf("no readable mount namespace links under %s", proc)
	}
	return ns, nil
}

// TaskMountinfo reads a namespace's mount table from the first of cands
// whose root is "/" (mount points are printed relative to the reading
// task's root, so a chrooted task would show a partial table), falling
// back to a task with another root (returned) when none has "/". Each
// read is a worker item (see Mountinfo).
func (f *FS) TaskMountinfo(ctx context.Context, cands []Task, max int64) (r isolate.ReadFileResult, from Task, root string, err error) {
	proc := f.Seen("/proc")
	err = errors.New("no task of the namespace is left")
	var fallback []Task
	var fallbackRoots []string
	for _, t := range cands {
		l, lerr := os.Readlink(proc + "/" + taskDir(t) + "/root")
		if lerr != nil {
			err = lerr
			continue
		}
		if l != "/" {
			fallback, fallbackRoots = append(fallback, t), append(fallbackRoots, l)
			continue
		}
		res, rerr := f.Mountinfo(ctx, taskDir(t), max)
		if rerr == nil {
			return res, t, "", nil
		}
		err = rerr
		if ctx.Err() != nil || isolate.IsTimeout(rerr) {
			return r, Task{}, "", err
		}
	}
	for i, t := range fallback {
		res, rerr := f.Mountinfo(ctx, taskDir(t), max)
		if rerr == nil {
			return res, t, fallbackRoots[i], nil
		}
		err = rerr
		if ctx.Err() != nil || isolate.IsTimeout(rerr) {
			break
		}
	}
	return r, Task{}, "", err
}

// Dir is an open /proc directory (a process's, its fd or fdinfo
// directory) whose entries are read relative to it: each read walks one
// path component instead of /proc/<pid>/..., and a process of thousands of
// descriptors is read with a system call per entry. Raw syscalls, as in
// TaskNamespaces.
type Dir struct {
	fd   int
	path string
	// contained: the directory is not on the kernel's procfs or sysfs,
	// so its entries are opened inside it.
	contained bool
}

// OpenDir opens the directory p.
func OpenDir(p string) (*Dir, error) {
	fd, err := openKernel(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, path: p, contained: !inroot.Process().Kernel(p)}, nil
}

// openKernel opens p, a path of the kernel's /proc or /sys as nodesnap
// sees it. On the kernel's own procfs or sysfs a plain open meets only
// the kernel's files; on a tree that is not (a fake or copied root's) the
// open goes through the root boundary, so a link there leads nowhere out
// of the root.
func openKernel(p string, flags int) (int, error) {
	b := inroot.Process()
	if !b.Kernel(p) {
		return b.Open(p, flags)
	}
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

// openAt opens name under the directory d: on a tree that is not the
// kernel's, resolved inside d (no link leads out of it).
func (d *Dir) openAt(name string, flags int) (int, error) {
	if d.contained {
		fd, err := inroot.OpenAt(d.fd, name, flags|unix.O_NOFOLLOW)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: d.path + "/" + name, Err: err}
		}
		return fd, nil
	}
	fd, err := unix.Openat(d.fd, name, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: d.path + "/" + name, Err: err}
	}
	return fd, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Sub opens the subdirectory name.
func (d *Dir) Sub(name string) (*Dir, error) {
	fd, err := d.openAt(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, path: d.path + "/" + name, contained: d.contained}, nil
}

// Names lists the directory's entries (getdents only), once: a second
// call finds none.
func (d *Dir) Names() ([]string, error) {
	return dirNames(d.fd)
}

// Readlink reads the link name (exe, cwd, an fd), never following it.
func (d *Dir) Readlink(name string) (string, error) {
	var buf [unix.PathMax]byte
	for {
		n, err := unix.Readlinkat(d.fd, name, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return "", &os.PathError{Op: "readlink", Path: d.path + "/" + name, Err: err}
		}
		return string(buf[:n]), nil
	}
}

// ReadSmall reads the short file name into buf, as ReadSmall does.
func (d *Dir) ReadSmall(name string, buf []byte) ([]byte, error) {
	fd, err := d.openAt(name, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	return readFD(fd, d.path+"/"+name, buf)
}

// Close closes the directory.
func (d *Dir) Close() {
	if d != nil && d.fd >= 0 {
		_ = unix.Close(d.fd) // read-only: nothing to lose
		d.fd = -1
	}
}
