// Package hostfs is the one way collectors touch the host's filesystem.
//
// A host path (Path) is written as the host names it: "/var/lib/kubelet",
// "/proc/1/mountinfo". Where nodesnap sees it (under --root, --proc,
// --sys) is computed only when a system call is made, inside a worker:
// the two forms are different types, so a collector cannot hand one where
// the other is meant, and the set of mounts found hung this run is keyed
// by the host form alone.
//
// Every operation (Read, Tail, Stat, Lstat, List, Glob, Mountinfo, Do)
// follows one policy: a path on a mount found hung earlier is not touched
// (ErrHung); otherwise one worker item does the work under the probe
// deadline; a missing or forbidden path answers errors.Is(err,
// fs.ErrNotExist) or fs.ErrPermission; and a path that hangs is skipped
// for the rest of the collector and the network or FUSE mount holding it
// is reported, so later collectors skip it too.
package hostfs

import (
	"path"
	"strings"
)

// Path is an absolute path as the host names it, never prefixed by
// --root. Convert a literal with Path("/etc/kubernetes"); build others
// with Join.
type Path string

// Clean returns p cleaned and made absolute ("" and relative paths are
// taken from "/").
func Clean(p string) Path {
	return Path(path.Clean("/" + p))
}

// Join appends elements to p.
func (p Path) Join(elem ...string) Path {
	return Clean(path.Join(append([]string{string(p)}, elem...)...))
}

// Dir is p's parent.
func (p Path) Dir() Path { return Path(path.Dir(string(p))) }

// Base is p's last element.
func (p Path) Base() string { return path.Base(string(p)) }

// String is the host form, for records and messages.
func (p Path) String() string { return string(p) }

// Under reports whether p is dir or lies below it.
func (p Path) Under(dir Path) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(string(p), string(dir)+"/")
}

// Roots are where nodesnap sees the host: Root for most paths, Proc for
// /proc and Sys for /sys (they default to Root/proc and Root/sys).
type Roots struct {
	Root, Proc, Sys string
}

func (r Roots) root() string {
	if r.Root == "" || r.Root == "/" {
		return ""
	}
	return strings.TrimSuffix(r.Root, "/")
}

// Seen is where nodesnap reaches p: the form for a system call. Only the
// code that makes the call (a worker op, or a library such as gopsutil
// that does its own reads) should ask for it.
func (r Roots) Seen(p Path) string {
	s := string(Clean(string(p)))
	if rest, ok := cutDir(s, "/proc"); ok && r.Proc != "" {
		return strings.TrimSuffix(r.Proc, "/") + rest
	}
	if rest, ok := cutDir(s, "/sys"); ok && r.Sys != "" {
		return strings.TrimSuffix(r.Sys, "/") + rest
	}
	if root := r.root(); root != "" {
		if s == "/" {
			return root
		}
		return root + s
	}
	return s
}

// Host is the host form of a path nodesnap sees at seen, and false when
// seen lies outside the roots.
func (r Roots) Host(seen string) (Path, bool) {
	s := path.Clean(seen)
	if r.Proc != "" {
		if rest, ok := cutDir(s, path.Clean(r.Proc)); ok {
			return Path("/proc" + rest), true
		}
	}
	if r.Sys != "" {
		if rest, ok := cutDir(s, path.Clean(r.Sys)); ok {
			return Path("/sys" + rest), true
		}
	}
	root := r.root()
	if root == "" {
		return Path(s), path.IsAbs(s)
	}
	if rest, ok := cutDir(s, root); ok {
		if rest == "" {
			return "/", true
		}
		return Path(rest), true
	}
	return "", false
}

// cutDir returns what follows dir in s ("" for dir itself, "/x" below it).
func cutDir(s, dir string) (string, bool) {
	if s == dir {
		return "", true
	}
	if dir == "/" {
		return s, strings.HasPrefix(s, "/")
	}
	if rest, ok := strings.CutPrefix(s, dir); ok && strings.HasPrefix(rest, "/") {
		return rest, true
	}
	return "", false
}

// userData reports whether p may lie on a mount a user made (anything but
// the kernel's own /proc and /sys, save a process's view of its root or
// working directory through /proc).
func userData(p Path) bool {
	s := string(p)
	if rest, ok := cutDir(s, "/proc"); ok {
		parts := strings.SplitN(strings.TrimPrefix(rest, "/"), "/", 3)
		return len(parts) >= 2 && (parts[1] == "root" || parts[1] == "cwd")
	}
	_, sys := cutDir(s, "/sys")
	return !sys
}
