// Package inroot opens paths so that they resolve inside a root directory,
// as the host mounted at that root would resolve them: an absolute symbolic
// link starts again at the root, ".." stops at it, and nothing leads out of
// it. It is how --root becomes a boundary rather than a prefix.
//
// On kernels with openat2 (5.6 and later) the kernel does the walk
// (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS); elsewhere a walk one component
// at a time with O_NOFOLLOW under a descriptor of the root does the same.
// Either way a /proc "magic link" (/proc/<pid>/root, fd/N, exe) met on the
// way is never jumped through.
//
// Calls here may block on a hung mount: they belong in isolated workers.
package inroot

import (
	"errors"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// maxLinks bounds the symbolic links followed in one resolution, as the
// kernel's own MAXSYMLINKS does.
const maxLinks = 40

// noOpenat2 is set once openat2 answered ENOSYS (or is blocked by a
// seccomp policy that answers EPERM for unknown calls): the walk is used
// from then on.
var noOpenat2 atomic.Bool

// WalkEnv, set to 1, makes a process take the walk whatever its kernel
// has: how the path of kernels before 5.6 (RHEL 8's 4.18, say) is tested
// through the real binary on a newer one.
const WalkEnv = "NODESNAP_INROOT_WALK"

func init() {
	if os.Getenv(WalkEnv) == "1" {
		noOpenat2.Store(true)
	}
}

// Open opens rel (a path as the host names it; leading "/" optional)
// inside the directory root, with open(2) flags (O_CLOEXEC is added).
// A symbolic link as the last component is followed unless flags hold
// O_NOFOLLOW, in which case, with O_PATH, the link itself is opened.
func Open(root, rel string, flags int) (int, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer func() { _ = unix.Close(rfd) }() // an O_PATH descriptor: nothing to lose
	return OpenAt(rfd, rel, flags)
}

// OpenAt is Open under an already open root descriptor.
func OpenAt(rootfd int, rel string, flags int) (int, error) {
	rel = strings.TrimLeft(path.Clean("/"+rel), "/")
	if rel == "" {
		rel = "."
	}
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		}
		for {
			fd, err := unix.Openat2(rootfd, rel, &how)
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue // EAGAIN: a rename raced the walk; the kernel asks for a retry
			}
			if errors.Is(err, unix.ENOSYS) {
				noOpenat2.Store(true)
				break
			}
			if err != nil {
				return -1, &os.PathError{Op: "open", Path: "/" + strings.TrimPrefix(rel, "."), Err: err}
			}
			return fd, nil
		}
	}
	return walk(rootfd, rel, flags)
}

// walk resolves rel under rootfd one component at a time, never letting
// the kernel follow a link: each link's text is read and spliced into the
// components left (an absolute one restarting at the root).
func walk(rootfd int, rel string, flags int) (int, error) {
	fail := func(err error) (int, error) {
		return -1, &os.PathError{Op: "open", Path: "/" + rel, Err: err}
	}
	// stack holds the descriptors of the directories walked, the root
	// (not ours to close) at the bottom.
	stack := []int{rootfd}
	defer func() {
		for _, fd := range stack[1:] {
			_ = unix.Close(fd)
		}
	}()
	pop := func() {
		if len(stack) > 1 {
			_ = unix.Close(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
		}
	}
	todo := split(rel)
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case ".":
			continue
		case "..":
			pop() // never above the root
			continue
		}
		dir := stack[len(stack)-1]
		last := len(todo) == 0
		fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = unix.Close(fd)
			return fail(err)
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK && (!last || flags&unix.O_NOFOLLOW == 0):
			_ = unix.Close(fd)
			if links++; links > maxLinks {
				return fail(unix.ELOOP)
			}
			target, err := readlinkAt(dir, name)
			if err != nil {
				return fail(err)
			}
			if strings.HasPrefix(target, "/") {
				for len(stack) > 1 {
					pop()
				}
			}
			todo = append(split(target), todo...)
		case last:
			_ = unix.Close(fd)
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				// O_NOFOLLOW on a link: only an O_PATH open of the
				// link itself means anything.
				if flags&unix.O_PATH == 0 {
					return fail(unix.ELOOP)
				}
			}
			nfd, err := unix.Openat(dir, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fail(err)
			}
			return nfd, nil
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			stack = append(stack, fd)
		default:
			_ = unix.Close(fd)
			return fail(unix.ENOTDIR)
		}
	}
	// rel named the root itself, or ended in "." or "..".
	return unix.Openat(stack[len(stack)-1], ".", flags|unix.O_CLOEXEC, 0)
}

func split(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func readlinkAt(dir int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// Readlink reads the link rel names inside root (its last component not
// followed).
func Readlink(root, rel string) (string, error) {
	fd, err := Open(root, rel, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return "", err
	}
	defer func() { _ = unix.Close(fd) }()
	s, err := readlinkAt(fd, "")
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: rel, Err: err}
	}
	return s, nil
}

// forceWalk makes tests take the walk whatever the kernel has.
func forceWalk(on bool) { noOpenat2.Store(on) }
