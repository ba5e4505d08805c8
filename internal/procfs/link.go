package procfs

import (
	"fmt"
	"math"
	"strings"
)

// LinkKind says what a /proc/<pid>/{fd/N,cwd,root,exe} link points at, as
// far as its text shows. It is a string so reports read without a legend.
type LinkKind string

// Link kinds.
const (
	// LinkPath is a filesystem path (a file or directory; readlink cannot
	// tell which, and nodesnap does not stat to find out).
	LinkPath LinkKind = "path"
	// LinkDevice is a path under /dev other than the tmpfs mounts there
	// (/dev/shm, /dev/mqueue, /dev/hugepages), which are LinkPath.
	LinkDevice LinkKind = "device"
	// LinkSocket is "socket:[inode]".
	LinkSocket LinkKind = "socket"
	// LinkPipe is "pipe:[inode]".
	LinkPipe LinkKind = "pipe"
	// LinkAnonInode is "anon_inode:[eventfd]", "anon_inode:inotify", ...;
	// Name holds the part after the colon without brackets.
	LinkAnonInode LinkKind = "anon_inode"
	// LinkMemfd is a memfd_create(2) file, "/memfd:name (deleted)"; it is
	// on no mount. Name holds the name.
	LinkMemfd LinkKind = "memfd"
	// LinkNamespace is an open namespace file, "net:[4026531840]"; Name
	// holds the namespace kind.
	LinkNamespace LinkKind = "namespace"
	// LinkUnknown is anything else; Path holds the text as read.
	LinkUnknown LinkKind = "unknown"
)

// Link is a classified readlink result.
type Link struct {
	Kind LinkKind `json:"kind"`
	// Path is the filesystem path for LinkPath and LinkDevice (without a
	// " (deleted)" suffix), or the whole text for LinkUnknown.
	Path string `json:"path,omitempty"`
	// Name is the anon inode type, memfd name or namespace kind.
	Name string `json:"name,omitempty"`
	// Inode is the inode number of a socket, pipe or namespace.
	Inode uint64 `json:"inode,omitempty"`
	// Deleted is set when the target was unlinked; an open deleted file
	// still pins its filesystem (and the space it uses).
	Deleted bool `json:"deleted,omitempty"`
}

// nsKinds are the kinds the kernel writes in a namespace link; the
// pid_for_children and time_for_children files show "pid" and "time".
var nsKinds = map[string]bool{
	"cgroup": true, "ipc": true, "mnt": true, "net": true,
	"pid": true, "time": true, "user": true, "uts": true,
}

// ParseLink classifies target, the text readlink returned for one of a
// process's fd, cwd, root or exe links. It only looks at the text: nothing
// here may touch the target, which can sit on a hung mount.
func ParseLink(target string) Link {
	if name, ino, ok := splitBracketed(target); ok {
		switch {
		case name == "socket":
			return Link{Kind: LinkSocket, Inode: ino}
		case name == "pipe":
			return Link{Kind: LinkPipe, Inode: ino}
		case nsKinds[name]:
			return Link{Kind: LinkNamespace, Name: name, Inode: ino}
		}
		return Link{Kind: LinkUnknown, Path: target, Inode: ino}
	}
	if name, ok := strings.CutPrefix(target, "anon_inode:"); ok {
		// Both "anon_inode:[eventfd]" and "anon_inode:inotify" occur.
		if len(name) >= 2 && name[0] == '[' && name[len(name)-1] == ']' {
			name = name[1 : len(name)-1]
		}
		return Link{Kind: LinkAnonInode, Name: name}
	}
	if !strings.HasPrefix(target, "/") {
		return Link{Kind: LinkUnknown, Path: target}
	}
	path, deleted := strings.CutSuffix(target, deletedSuffix)
	if name, ok := strings.CutPrefix(path, "/memfd:"); ok {
		return Link{Kind: LinkMemfd, Name: name, Deleted: deleted}
	}
	kind := LinkPath
	if strings.HasPrefix(path, "/dev/") && !isDevTmpfs(path) {
		kind = LinkDevice
	}
	return Link{Kind: kind, Path: path, Deleted: deleted}
}

// isDevTmpfs reports whether a /dev path is on one of the filesystems
// conventionally mounted under /dev that hold ordinary files.
func isDevTmpfs(path string) bool {
	for _, dir := range []string{"/dev/shm", "/dev/mqueue", "/dev/hugepages"} {
		if rest, ok := strings.CutPrefix(path, dir); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// splitBracketed splits "name:[digits]" into name and the number.
func splitBracketed(s string) (name string, ino uint64, ok bool) {
	name, num, ok := strings.Cut(s, ":[")
	if !ok || name == "" || !strings.HasSuffix(num, "]") {
		return "", 0, false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || c == '_') {
			return "", 0, false
		}
	}
	ino, ok = parseUint(num[:len(num)-1], 10, math.MaxUint64)
	return name, ino, ok
}

// ParseNSLink parses the target of a /proc/<pid>/ns/<kind> link, e.g.
// "mnt:[4026531841]", into the namespace kind and inode number. Two tasks
// are in the same namespace exactly when the inode numbers (of the same
// kind) are equal.
func ParseNSLink(link string) (kind string, inode uint64, err error) {
	kind, inode, ok := splitBracketed(link)
	if !ok {
		return "", 0, malformed(fmt.Sprintf("namespace link %q is not kind:[inode]", truncate(link)))
	}
	if !nsKinds[kind] {
		return "", 0, malformed(fmt.Sprintf("namespace link %q: unknown kind %q", truncate(link), kind))
	}
	return kind, inode, nil
}

// ParseMountNS parses the target of /proc/<pid>/ns/mnt, "mnt:[4026531841]",
// into the mount namespace's inode number.
func ParseMountNS(link string) (uint64, error) {
	kind, inode, err := ParseNSLink(link)
	if err != nil {
		return 0, err
	}
	if kind != "mnt" {
		return 0, malformed(fmt.Sprintf("namespace link %q is a %s namespace, not mnt", truncate(link), kind))
	}
	return inode, nil
}

// truncate keeps error messages bounded whatever the input.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
