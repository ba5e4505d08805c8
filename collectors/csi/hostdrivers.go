package csi

// --- CSI drivers run as host processes ----------------------------------
//
// A driver started by systemd or a shell, not in a pod, has no log under
// /var/log/pods: its "Volume … is not published at …, nothing to do"
// (incident 004) is in a file it writes to or in the journal. It is found
// through the socket the kubelet talks to it on: the sockets of
// plugins_registry/ and the csi.sock endpoints under plugins/ → the
// listening socket of that path in /proc/1/net/unix (the host's network
// namespace) → the process holding that socket's inode among its
// descriptors → its fd 2 and fd 1. Every read of /proc/<pid> is a worker
// item: a process's files can block while its own state is locked.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// Worker ops of the host drivers' search.
const (
	opSocketOwners = "csi.socketowners"
	opProcInfo     = "csi.procinfo"
)

func init() {
	isolate.RegisterOp(opSocketOwners, isolate.Typed(socketOwnersOp))
	isolate.RegisterOp(opProcInfo, isolate.Typed(procInfoOp))
}

// socketOwnersRequest asks which processes hold one of the socket inodes.
type socketOwnersRequest struct {
	Proc   string   `json:"proc"`
	Inodes []uint64 `json:"inodes"`
}

type socketOwner struct {
	Inode uint64 `json:"inode"`
	PID   int    `json:"pid"`
}

type socketOwnersResult struct {
	Owners []socketOwner `json:"owners"`
	// Unreadable counts processes whose descriptors could not be listed
	// (gone, or forbidden).
	Unreadable int `json:"unreadable,omitempty"`
}

// socketOwnersOp reads every process's fd links ("socket:[inode]"). A
// readlink of an fd takes no lock the process can hold, but the walk is
// long on a busy node and so runs in a worker under a deadline.
func socketOwnersOp(rq socketOwnersRequest) (any, error) {
	want := map[string]uint64{}
	for _, ino := range rq.Inodes {
		want["socket:["+strconv.FormatUint(ino, 10)+"]"] = ino
	}
	pids, err := hostfs.ListPIDs(rq.Proc)
	if err != nil {
		return nil, fmt.Errorf("listing processes in %s: %w", rq.Proc, err)
	}
	res := socketOwnersResult{Owners: []socketOwner{}}
	for _, pid := range pids {
		dir := rq.Proc + "/" + strconv.Itoa(pid) + "/fd"
		d, err := os.Open(dir)
		if err != nil {
			res.Unreadable++
			continue
		}
		names, _ := d.Readdirnames(-1)
		_ = d.Close() // read-only: nothing to lose
		seen := map[uint64]bool{}
		for _, n := range names {
			l, err := os.Readlink(dir + "/" + n)
			if err != nil {
				continue
			}
			if ino, ok := want[l]; ok && !seen[ino] {
				seen[ino] = true
				res.Owners = append(res.Owners, socketOwner{Inode: ino, PID: pid})
			}
		}
	}
	return res, nil
}

// procInfoRequest asks for what one process says of itself.
type procInfoRequest struct {
	Proc string `json:"proc"`
	PID  int    `json:"pid"`
}

type procInfoResult struct {
	Comm    string   `json:"comm"`
	Cmdline []string `json:"cmdline"`
	Cgroup  string   `json:"cgroup"`
	// FD1 and FD2 are the links of descriptors 1 and 2 ("" when closed).
	FD1 string `json:"fd1"`
	FD2 string `json:"fd2"`
}

// procInfoOp reads comm, cmdline (which blocks while the process's mmap
// lock is held), cgroup and the links of fd 1 and 2.
func procInfoOp(rq procInfoRequest) (any, error) {
	base := rq.Proc + "/" + strconv.Itoa(rq.PID)
	var res procInfoResult
	if _, err := os.Stat(base); err != nil {
		return nil, fmt.Errorf("process %d: %w", rq.PID, err)
	}
	res.Comm = hostfs.ReadComm(base + "/comm")
	if r, err := isolate.ReadFileLimited(base+"/cmdline", 64<<10); err == nil {
		for _, a := range bytes.Split(bytes.TrimRight(r.Data, "\x00"), []byte{0}) {
			res.Cmdline = append(res.Cmdline, string(a))
		}
	}
	if r, err := isolate.ReadFileLimited(base+"/cgroup", 16<<10); err == nil {
		res.Cgroup = string(r.Data)
	}
	res.FD1, _ = os.Readlink(base + "/fd/1")
	res.FD2, _ = os.Readlink(base + "/fd/2")
	return res, nil
}

// FDKind classifies a /proc/<pid>/fd link: file (a path, perhaps
// " (deleted)"), pipe, socket, tty, null, other, or "" for a closed
// descriptor. A path is a file until a stat says otherwise.
func FDKind(link string) string {
	switch {
	case link == "":
		return ""
	case strings.HasPrefix(link, "pipe:["):
		return "pipe"
	case strings.HasPrefix(link, "socket:["):
		return "socket"
	case link == "/dev/null":
		return "null"
	case strings.HasPrefix(link, "/dev/pts/"), strings.HasPrefix(link, "/dev/tty"), link == "/dev/console":
		return "tty"
	case strings.HasPrefix(link, "/"):
		return "file"
	}
	return "other"
}

// CgroupPath is the cgroup v2 path of a /proc/<pid>/cgroup, else the
// first v1 line that names a pod or a systemd unit, else the first line.
func CgroupPath(data string) string {
	lines := strings.Split(strings.TrimSpace(data), "\n")
	for _, l := range lines {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "kubepods") || strings.Contains(l, ".service") {
			return l
		}
	}
	return lines[0]
}

// systemdUnit is the .service the cgroup path ends in ("" if none).
func systemdUnit(cg string) string {
	es := strings.Split(cg, "/")
	for i := len(es) - 1; i >= 0; i-- {
		if strings.HasSuffix(es[i], ".service") {
			return es[i]
		}
	}
	return ""
}

// csiSocketDriver names the driver of a kubelet socket:
// plugins/<driver>/csi.sock, plugins_registry/<driver>-reg.sock or
// <driver>.sock.
func csiSocketDriver(sock string) string {
	if path.Base(sock) == "csi.sock" {
		return path.Base(path.Dir(sock))
	}
	b := strings.TrimSuffix(path.Base(sock), ".sock")
	return strings.TrimSuffix(b, "-reg")
}

// hostDrivers finds the processes behind the kubelet's CSI sockets and
// keeps the log of each one that runs outside a pod.
func (c *csiRun) hostDrivers(ctx context.Context) {
	var socks []string
	for _, e := range c.inv.Plugins {
		if path.Base(e.Path) == "csi.sock" && (e.Type == "socket" || e.Type == "unknown") {
			socks = append(socks, e.Path)
		}
	}
	for _, e := range c.inv.PluginsRegistry {
		if strings.HasSuffix(e.Path, ".sock") && (e.Type == "socket" || e.Type == "unknown") {
			socks = append(socks, e.Path)
		}
	}
	if len(socks) == 0 {
		return
	}
	// A socket's listening entry names it as its process bound it: the
	// host path for a host process, the path under --root for a process
	// of nodesnap's own view (tests, a chroot).
	byPath := map[string]string{}
	for _, s := range socks {
		byPath[s] = s
		byPath[c.env.Host().Seen(hostfs.Path(s))] = s
	}
	table := hostfs.Path("/proc/1/net/unix")
	r, err := c.env.Host().Read(ctx, table, 32<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return // a proc without a network table (a fixture tree): no socket to follow
	}
	if err != nil {
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("reading %s (to find the processes behind the CSI sockets): %v", table, err))
		return
	}
	all, bad := ParseNetUnix(r.Data)
	if bad > 0 {
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("%s: %d lines could not be read", table, bad))
	}
	sockOf := map[uint64]string{}
	var inodes []uint64
	for _, s := range all {
		if hp, ok := byPath[s.Path]; ok && s.Listening() {
			if _, dup := sockOf[s.Inode]; !dup {
				sockOf[s.Inode] = hp
				inodes = append(inodes, s.Inode)
			}
		}
	}
	if len(inodes) == 0 {
		return // no host process listens there: drivers in pods bind their own paths
	}
	var owners socketOwnersResult
	proc := hostfs.Path("/proc")
	if err := c.env.Host().Do(ctx, 20*time.Second, opSocketOwners, proc,
		socketOwnersRequest{Proc: c.env.Host().Seen(proc), Inodes: inodes}, &owners); err != nil {
		c.inv.Errors = append(c.inv.Errors, fmt.Sprintf("finding the processes that listen on %s: %v", strings.Join(sortedValues(sockOf), ", "), err))
		return
	}
	byPID := map[int]*layout.CSIHostDriver{}
	var pids []int
	for _, o := range owners.Owners {
		d := byPID[o.PID]
		if d == nil {
			d = &layout.CSIHostDriver{PID: o.PID}
			byPID[o.PID] = d
			pids = append(pids, o.PID)
		}
		d.Sockets = append(d.Sockets, sockOf[o.Inode])
	}
	sort.Ints(pids)
	for _, pid := range pids {
		d := byPID[pid]
		sort.Slice(d.Sockets, func(i, j int) bool { // csi.sock names the driver best
			ci, cj := path.Base(d.Sockets[i]) == "csi.sock", path.Base(d.Sockets[j]) == "csi.sock"
			if ci != cj {
				return ci
			}
			return d.Sockets[i] < d.Sockets[j]
		})
		d.Driver = csiSocketDriver(d.Sockets[0])
		c.hostDriver(ctx, d)
		c.inv.HostDrivers = append(c.inv.HostDrivers, *d)
		if d.LogFrom != "pod" {
			c.env.Notef("CSI driver %s runs as host process %d (%s); its log: %s", d.Driver, d.PID, d.Comm, describeHostLog(d))
		}
	}
}

func sortedValues(m map[uint64]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func describeHostLog(d *layout.CSIHostDriver) string {
	switch d.LogFrom {
	case "file":
		return "the file " + d.LogSource + ", kept as csi/" + d.File
	case "journal":
		if d.File == "" {
			return "the journal (" + d.LogSource + "), nothing kept: " + d.Error
		}
		return "the journal (" + d.LogSource + "), kept as csi/" + d.File
	}
	if d.Error != "" {
		return d.Error
	}
	var fds []string
	for _, fd := range []struct {
		n  string
		fd *layout.CSIHostFD
	}{{"2", d.Stderr}, {"1", d.Stdout}} {
		if fd.fd == nil {
			fds = append(fds, "fd "+fd.n+" is closed")
		} else {
			fds = append(fds, "fd "+fd.n+" is "+fd.fd.Target)
		}
	}
	return "nothing to read (" + strings.Join(fds, ", ") + ")"
}

func (c *csiRun) hostDriver(ctx context.Context, d *layout.CSIHostDriver) {
	var pi procInfoResult
	if err := c.env.Host().Do(ctx, 0, opProcInfo, hostfs.Path("/proc").Join(strconv.Itoa(d.PID)),
		procInfoRequest{Proc: c.env.Host().Seen("/proc"), PID: d.PID}, &pi); err != nil {
		d.LogFrom, d.Error = "none", fmt.Sprintf("reading process %d: %v", d.PID, err)
		return
	}
	d.Comm, d.Cmdline = pi.Comm, c.env.Redact(strings.Join(pi.Cmdline, " "))
	if pi.Cgroup != "" {
		d.Cgroup = CgroupPath(pi.Cgroup)
	}
	if pi.FD1 != "" {
		d.Stdout = &layout.CSIHostFD{Target: pi.FD1, Kind: FDKind(pi.FD1)}
	}
	if pi.FD2 != "" {
		d.Stderr = &layout.CSIHostFD{Target: pi.FD2, Kind: FDKind(pi.FD2)}
	}
	if strings.Contains(d.Cgroup, "kubepods") {
		d.InPod, d.LogFrom = true, "pod"
		return
	}
	// klog writes to stderr by default: fd 2 first.
	for _, fd := range []struct {
		n  string
		fd *layout.CSIHostFD
	}{{"2", d.Stderr}, {"1", d.Stdout}} {
		if fd.fd == nil || fd.fd.Kind != "file" {
			continue
		}
		p := hostfs.Path("/proc").Join(strconv.Itoa(d.PID), "fd", fd.n)
		st, err := c.env.Host().Stat(ctx, p)
		if err != nil {
			d.Error = fmt.Sprintf("fd %s (%s): %v", fd.n, fd.fd.Target, err)
			continue
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			fd.fd.Kind = "other"
			if st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
				fd.fd.Kind = "pipe"
			}
			continue
		}
		d.LogFrom, d.LogSource, d.Error = "file", fd.fd.Target, ""
		c.hostLogFile(ctx, d, p)
		return
	}
	for _, fd := range []*layout.CSIHostFD{d.Stderr, d.Stdout} {
		if fd != nil && (fd.Kind == "pipe" || fd.Kind == "socket") {
			d.LogFrom = "journal"
			c.hostJournal(ctx, d, fd)
			return
		}
	}
	if d.LogFrom == "" {
		d.LogFrom = "none"
	}
}

// hostLogFile keeps the newest bytes of the log file behind p
// (/proc/<pid>/fd/<n>: the same file even when deleted or outside
// nodesnap's mount namespace).
func (c *csiRun) hostLogFile(ctx context.Context, d *layout.CSIHostDriver, p hostfs.Path) {
	lf := layout.CSIPodLogFile{Name: fmt.Sprintf("%s.%d.log", csiSafeName(d.Driver), d.PID), Path: string(p)}
	if err := c.podLogFile(ctx, &lf, c.podLogBudget(), strings.TrimSuffix(layout.CSIHostLogsDir, "/")); err != nil && errors.Is(err, fs.ErrNotExist) {
		d.Error = fmt.Sprintf("process %d exited before its log could be read", d.PID)
	}
	d.File, d.Bytes, d.Truncated = lf.File, lf.Bytes, lf.Truncated
	if lf.Error != "" {
		d.Error = lf.Error
	}
}

// hostJournal keeps the journal's lines of the driver: journald's stdout
// streams are sockets, and a pipe may lead to it through a supervisor.
// The lines of its systemd unit when it has one (they span its restarts),
// else of its pid.
func (c *csiRun) hostJournal(ctx context.Context, d *layout.CSIHostDriver, fd *layout.CSIHostFD) {
	match := "_PID=" + strconv.Itoa(d.PID)
	if u := systemdUnit(d.Cgroup); u != "" {
		match = "_SYSTEMD_UNIT=" + u
	}
	args := []string{"--no-pager", "--quiet", "--output=short-iso", "--lines=20000"}
	if c.env.Root != "" && c.env.Root != "/" {
		args = append(args, "--root="+c.env.Root)
	}
	if c.env.Since > 0 {
		args = append(args, fmt.Sprintf("--since=-%ds", int64(c.env.Since/time.Second)))
	}
	args = append(args, match)
	d.LogSource = "journalctl " + strings.Join(args, " ")
	name := c.unique(layout.CSIHostLogsDir + fmt.Sprintf("%s.%d.journal.log", csiSafeName(d.Driver), d.PID))
	if name == "" {
		d.Error = "too many files of the same name in the bundle"
		return
	}
	if _, err := c.env.Command(ctx, 30*time.Second, name, "journalctl", args...); err != nil {
		d.Error = fmt.Sprintf("fd %s is a %s; reading the journal: %v", fdNumber(d, fd), fd.Kind, err)
		return
	}
	d.File = name
}

func fdNumber(d *layout.CSIHostDriver, fd *layout.CSIHostFD) string {
	if fd == d.Stderr {
		return "2"
	}
	return "1"
}
