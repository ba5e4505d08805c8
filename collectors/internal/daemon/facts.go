package daemon

import (
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/inroot"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// OpFacts gathers what the kernel says of one process, in a worker.
const OpFacts = "daemon.facts"

func init() { isolate.RegisterOp(OpFacts, isolate.Typed(factsOp)) }

// FactsRequest names a process: the proc tree as nodesnap sees it and
// the pid.
type FactsRequest struct {
	Proc string `json:"proc"`
	PID  int    `json:"pid"`
}

// Facts is what the kernel says of a process. Each field read is kept
// with the error that kept it from being read, so Judge can say which
// check could not be made.
type Facts struct {
	UID       procfs.IDSet `json:"uid"`
	StatusErr string       `json:"status_err,omitempty"`
	// UserNS and InitUserNS are the targets of its ns/user link and pid
	// 1's ("" when unreadable).
	UserNS     string `json:"user_ns,omitempty"`
	InitUserNS string `json:"init_user_ns,omitempty"`
	// NSRef says whose InitUserNS is: "pid 1's", or "nodesnap's own"
	// where pid 1's cannot be read.
	NSRef string `json:"ns_ref,omitempty"`
	// Exe is its executable as the kernel names it (" (deleted)" cut);
	// ExeUID, ExeGID, ExeMode the file's owner and mode.
	Exe     string `json:"exe,omitempty"`
	ExeUID  uint32 `json:"exe_uid"`
	ExeGID  uint32 `json:"exe_gid"`
	ExeMode uint32 `json:"exe_mode"`
	ExeErr  string `json:"exe_err,omitempty"`
	// Dirs are the directories of Exe, innermost first, up to "/".
	Dirs []FileFacts `json:"dirs,omitempty"`
	// Unit is the systemd unit of its cgroup ("" none).
	Unit string   `json:"unit,omitempty"`
	Args []string `json:"args,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`
}

// FileFacts is one file's owner and mode, or why they are unknown.
type FileFacts struct {
	Path string `json:"path"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	Mode uint32 `json:"mode"`
	Err  string `json:"err,omitempty"`
}

// factsOp reads a process's status, namespace, executable, cgroup,
// command line and working directory, every open inside the worker's
// boundary. Its command line may block (the process's mmap lock): this
// runs in a worker under a deadline.
func factsOp(rq FactsRequest) (any, error) {
	b := inroot.Process()
	base := path.Join(rq.Proc, strconv.Itoa(rq.PID))
	var f Facts
	if r, err := isolate.ReadFileLimited(base+"/status", 64<<10); err != nil {
		f.StatusErr = err.Error()
	} else if st, err := procfs.ParseStatus(r.Data); err != nil {
		f.StatusErr = err.Error()
	} else {
		f.UID = st.UID
	}
	f.UserNS = nsLink(b, base+"/ns/user")
	f.InitUserNS, f.NSRef = nsLink(b, path.Join(rq.Proc, "1", "ns", "user")), "pid 1's"
	if f.InitUserNS == "" && b.Kernel(base) {
		// pid 1's link may be unreadable (an init that is not dumpable,
		// a security module): on the kernel's own procfs nodesnap's own
		// namespace, root's on the node, stands in.
		if l, err := os.Readlink("/proc/self/ns/user"); err == nil {
			if kind, _, err := procfs.ParseNSLink(l); err == nil && kind == "user" {
				f.InitUserNS, f.NSRef = l, "nodesnap's own"
			}
		}
	}
	root := base + "/root"
	if l, err := b.Readlink(base + "/exe"); err != nil {
		f.ExeErr = err.Error()
	} else if l = strings.TrimSuffix(l, " (deleted)"); !path.IsAbs(l) {
		f.ExeErr = "its link is not a path: " + l
	} else {
		f.Exe = path.Clean(l)
		// The file itself: through the kernel's link on a real procfs
		// (the file it runs, even replaced since), else by its name in
		// the process's root.
		ff := stat(b, base+"/exe", f.Exe)
		if ff.Err != "" {
			ff = stat(b, root+f.Exe, f.Exe)
		}
		f.ExeUID, f.ExeGID, f.ExeMode, f.ExeErr = ff.UID, ff.GID, ff.Mode, ff.Err
		for d := path.Dir(f.Exe); ; d = path.Dir(d) {
			f.Dirs = append(f.Dirs, stat(b, root+d, d))
			if d == "/" {
				break
			}
		}
	}
	if r, err := isolate.ReadFileLimited(base+"/cgroup", 16<<10); err == nil {
		f.Unit = unitOf(string(r.Data))
	}
	if r, err := isolate.ReadFileLimited(base+"/cmdline", 128<<10); err == nil {
		f.Args = procfs.ParseCmdline(r.Data)
	}
	if l, err := b.Readlink(base + "/cwd"); err == nil && path.IsAbs(l) {
		f.Cwd = l
	}
	return f, nil
}

func nsLink(b inroot.Boundary, seen string) string {
	l, err := b.Readlink(seen)
	if err != nil {
		return ""
	}
	if kind, _, err := procfs.ParseNSLink(l); err != nil || kind != "user" {
		return ""
	}
	return l
}

// stat is the owner and mode of seen (followed), named name.
func stat(b inroot.Boundary, seen, name string) FileFacts {
	ff := FileFacts{Path: name}
	fd, err := b.Open(seen, unix.O_PATH)
	if err != nil {
		ff.Err = err.Error()
		return ff
	}
	defer func() { _ = unix.Close(fd) }() // an O_PATH descriptor: nothing to lose
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		ff.Err = err.Error()
		return ff
	}
	ff.UID, ff.GID, ff.Mode = st.Uid, st.Gid, st.Mode
	return ff
}

// unitOf is the systemd unit (.service or .scope) a /proc/<pid>/cgroup
// names, innermost.
func unitOf(cgroup string) string {
	for _, l := range strings.Split(cgroup, "\n") {
		_, p, ok := strings.Cut(l, "::")
		if !ok {
			if i := strings.LastIndexByte(l, ':'); i >= 0 && strings.Contains(l[:i], "systemd") {
				p, ok = l[i+1:], true
			}
		}
		if !ok {
			continue
		}
		es := strings.Split(p, "/")
		for i := len(es) - 1; i >= 0; i-- {
			if strings.HasSuffix(es[i], ".service") {
				return es[i]
			}
		}
	}
	return ""
}
