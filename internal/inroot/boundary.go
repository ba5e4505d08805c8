package inroot

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Boundary is where a process sees the host: Root for every path, Proc and
// Sys for the live kernel's /proc and /sys (each "" for Root's own).
//
// A path nodesnap reaches (the "seen" form, Root + host path) is resolved
// inside the boundary it lies under:
//   - under Proc: inside Proc (the kernel's own links such as /proc/self
//     or /proc/mounts are relative and stay inside it), except a path
//     through /proc/<pid>/root or cwd, which is resolved inside that
//     process's own root, as that process would see it;
//   - under Sys: inside Sys;
//   - anything else: inside Root ("/" when none), and a result on procfs
//     is refused: a user's link into /proc (to /proc/self/environ, say)
//     would otherwise hand over nodesnap's own environment.
type Boundary struct {
	Root string `json:"root,omitempty"`
	Proc string `json:"proc,omitempty"`
	Sys  string `json:"sys,omitempty"`
}

// EnvVar carries a worker's Boundary, set by the pool that starts it.
const EnvVar = "NODESNAP_BOUNDARY"

// Env is the environment entry that gives a worker b.
func (b Boundary) Env() string {
	j, _ := json.Marshal(b) // three strings: cannot fail
	return EnvVar + "=" + string(j)
}

var (
	procOnce sync.Once
	procB    Boundary
)

// Process is this process's Boundary, from its environment (the host's
// own "/" when none was given).
func Process() Boundary {
	procOnce.Do(func() {
		if v := os.Getenv(EnvVar); v != "" {
			_ = json.Unmarshal([]byte(v), &procB) // a malformed value leaves "/"
		}
	})
	return procB
}

func clean(p string) string {
	if p == "" {
		return ""
	}
	return path.Clean(p)
}

// cut returns what follows dir in s ("/" for dir itself).
func cut(s, dir string) (string, bool) {
	if dir == "" {
		return "", false
	}
	if s == dir {
		return "/", true
	}
	if dir == "/" {
		return s, strings.HasPrefix(s, "/")
	}
	if rest, ok := strings.CutPrefix(s, dir); ok && strings.HasPrefix(rest, "/") {
		return rest, true
	}
	return "", false
}

// Open opens seen inside the boundary it lies under (see Boundary).
func (b Boundary) Open(seen string, flags int) (int, error) {
	s := path.Clean(seen)
	proc, sys := clean(b.Proc), clean(b.Sys)
	root := clean(b.Root)
	if root == "" {
		root = "/"
	}
	if proc == "" {
		proc = path.Join(root, "proc")
	}
	if sys == "" {
		sys = path.Join(root, "sys")
	}
	if rest, ok := cut(s, proc); ok {
		return b.openProc(seen, root, proc, rest, flags)
	}
	if rest, ok := cut(s, sys); ok {
		sfd, err := openTree(root, sys)
		if err != nil {
			return -1, named(seen, err)
		}
		defer func() { _ = unix.Close(sfd) }() // an O_PATH descriptor: nothing to lose
		fd, err := OpenAt(sfd, rest, flags)
		return fd, named(seen, err)
	}
	var fd int
	if rest, ok := cut(s, root); ok {
		var err error
		if fd, err = Open(root, rest, flags); err != nil {
			return -1, named(seen, err)
		}
	} else {
		// Outside every root: a file of nodesnap's own (a program on
		// its PATH, a token file of its pod), opened as it names it.
		var err error
		if fd, err = unix.Open(s, flags|unix.O_CLOEXEC, 0); err != nil {
			return -1, &os.PathError{Op: "open", Path: seen, Err: err}
		}
	}
	return notProc(fd, seen)
}

// notProc closes fd and refuses it when it lies on procfs: a path of the
// host's filesystem that a link led into /proc.
func notProc(fd int, seen string) (int, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err == nil && st.Type == unix.PROC_SUPER_MAGIC {
		_ = unix.Close(fd)
		return -1, &os.PathError{Op: "open", Path: seen, Err: fmt.Errorf("%w: a link leads into /proc, which is not a file of the host's filesystem", unix.EXDEV)}
	}
	return fd, nil
}

// ErrNotProcfs is a path through a process's root, working directory or
// open file asked of a proc tree that is not the kernel's: its links are
// whatever whoever made the tree wrote, so they are not followed.
var ErrNotProcfs = errors.New("the proc tree is not a procfs (not the kernel's), so its process links are not followed")

// openTree opens the directory of a kernel tree (--proc, --sys): inside
// root when it lies under it, so that a link planted at Root/proc leads
// nowhere outside; as named when the operator put it elsewhere.
func openTree(root, dir string) (int, error) {
	if under, ok := cut(dir, root); ok {
		return Open(root, under, unix.O_PATH|unix.O_DIRECTORY)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, nil
}

// openProc opens rest under the proc tree. The tree itself is reached
// inside Root when it lies under it (a link at Root/proc leads nowhere
// else), and its kind is asked of the kernel: on a real procfs the
// kernel's own links of a process (<pid>/root, cwd, fd/N) are followed,
// since only the kernel made them; on anything else (a copied tree, a
// fake root) they are ordinary links anyone could have written, so
// <pid>/root/x is x inside Root (a tree that is not the kernel's cannot
// say a process has another root) and cwd and fd are refused.
func (b Boundary) openProc(seen, root, proc, rest string, flags int) (int, error) {
	pfd, err := openTree(root, proc)
	if err != nil {
		return -1, named(seen, err)
	}
	defer func() { _ = unix.Close(pfd) }() // an O_PATH descriptor: nothing to lose
	var st unix.Statfs_t
	kernel := unix.Fstatfs(pfd, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
	rel := strings.TrimPrefix(rest, "/")
	if isProcessRootLink(rest) && flags&unix.O_NOFOLLOW == 0 {
		// The process's root (or cwd) itself, followed: its "/".
		if !kernel {
			if strings.HasSuffix(rel, "/cwd") {
				return -1, &os.PathError{Op: "open", Path: seen, Err: ErrNotProcfs}
			}
			fd, err := Open(root, ".", flags)
			if err != nil {
				return -1, named(seen, err)
			}
			return notProc(fd, seen)
		}
		fd, err := unix.Openat(pfd, rel, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: seen, Err: err}
		}
		return fd, nil
	}
	if dir, within, ok := processRoot(rest); ok {
		if !kernel {
			if strings.HasSuffix(dir, "/cwd") {
				return -1, &os.PathError{Op: "open", Path: seen, Err: ErrNotProcfs}
			}
			fd, err := Open(root, within, flags)
			if err != nil {
				return -1, named(seen, err)
			}
			return notProc(fd, seen)
		}
		dfd, err := unix.Openat(pfd, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: seen, Err: err}
		}
		defer func() { _ = unix.Close(dfd) }() // an O_PATH descriptor: nothing to lose
		fd, err := OpenAt(dfd, within, flags)
		return fd, named(seen, err)
	}
	if openFileLink(rest) && (kernel || flags&unix.O_NOFOLLOW == 0) {
		if !kernel {
			return -1, &os.PathError{Op: "open", Path: seen, Err: ErrNotProcfs}
		}
		// The kernel's link to a file a process holds open (a driver's
		// stdout): followed, as only the kernel made it.
		fd, err := unix.Openat(pfd, rel, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: seen, Err: err}
		}
		return fd, nil
	}
	if rel == "" {
		rel = "."
	}
	fd, err := OpenAt(pfd, rel, flags)
	return fd, named(seen, err)
}

// processRoot splits "/<pid>/root/x" (or task/<tid>/root, or cwd) into
// the magic link's directory and the path within it.
func processRoot(rest string) (dir, within string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	n := 1
	if len(parts) >= 3 && parts[1] == "task" {
		n = 3
	}
	if len(parts) <= n || (parts[n] != "root" && parts[n] != "cwd") {
		return "", "", false
	}
	if len(parts) == n+1 {
		return "", "", false // the link itself: readlink of the kernel's own link
	}
	return strings.Join(parts[:n+1], "/"), strings.Join(parts[n+1:], "/"), true
}

// isProcessRootLink reports whether rest is "/<pid>/root" or cwd (or
// under task/<tid>) itself.
func isProcessRootLink(rest string) bool {
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	n := 1
	if len(parts) >= 3 && parts[1] == "task" {
		n = 3
	}
	return len(parts) == n+1 && parts[0] != "" && (parts[n] == "root" || parts[n] == "cwd")
}

// openFileLink reports whether rest is "/<pid>/fd/<n>" or "/<pid>/exe"
// (or under task/<tid>): a process's open file or executable, reached
// through the kernel's own link.
func openFileLink(rest string) bool {
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if len(parts) >= 4 && parts[1] == "task" {
		parts = append(parts[:1], parts[3:]...)
	}
	if len(parts) == 2 && parts[1] == "exe" && parts[0] != "" {
		return true
	}
	return len(parts) == 3 && parts[1] == "fd" && parts[0] != "" && parts[2] != "" &&
		strings.Trim(parts[2], "0123456789") == ""
}

// named makes an error name the path as nodesnap reaches it.
func named(seen string, err error) error {
	if err == nil {
		return nil
	}
	if pe, ok := err.(*os.PathError); ok {
		return &os.PathError{Op: pe.Op, Path: seen, Err: pe.Err}
	}
	return err
}

// ReadlinkSeen reads the link seen names (its last component not
// followed), its directories resolved inside the boundary.
func (b Boundary) Readlink(seen string) (string, error) {
	fd, err := b.Open(seen, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return "", err
	}
	defer func() { _ = unix.Close(fd) }()
	s, err := readlinkAt(fd, "")
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: seen, Err: err}
	}
	return s, nil
}

// File opens seen for reading inside the boundary, as an *os.File.
func (b Boundary) File(seen string, flags int) (*os.File, error) {
	fd, err := b.Open(seen, flags)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), seen), nil
}

// kernelTrees caches, per proc or sys tree as nodesnap sees it, whether
// the kernel says it is its own (procfs, sysfs).
var kernelTrees sync.Map // string → bool

// Kernel reports whether seen lies in a proc or sys tree of the boundary
// that is the kernel's own (statfs magic PROC_SUPER_MAGIC or
// SYSFS_MAGIC, asked once per tree and process). There, a plain open
// meets only the kernel's files and links and is what the fast readers of
// /proc use; anywhere else (a fake or copied tree, the root) a path must
// be opened with Open, inside the boundary.
func (b Boundary) Kernel(seen string) bool {
	s := path.Clean(seen)
	root := clean(b.Root)
	if root == "" {
		root = "/"
	}
	proc, sys := clean(b.Proc), clean(b.Sys)
	if proc == "" {
		proc = path.Join(root, "proc")
	}
	if sys == "" {
		sys = path.Join(root, "sys")
	}
	var tree string
	var magic int64
	if _, ok := cut(s, proc); ok {
		tree, magic = proc, unix.PROC_SUPER_MAGIC
	} else if _, ok := cut(s, sys); ok {
		tree, magic = sys, unix.SYSFS_MAGIC
	} else {
		return false
	}
	key := root + "\x00" + tree
	if v, ok := kernelTrees.Load(key); ok {
		return v.(bool)
	}
	kernel := false
	if fd, err := openTree(root, tree); err == nil {
		var st unix.Statfs_t
		kernel = unix.Fstatfs(fd, &st) == nil && st.Type == magic
		_ = unix.Close(fd) // an O_PATH descriptor: nothing to lose
	}
	kernelTrees.Store(key, kernel)
	return kernel
}
