package layout

import (
	"strings"

	"github.com/nodesnap/nodesnap/internal/procfs"
)

// The openfiles collector's records: openfiles/holders.json and openfiles/processes.jsonl.

// OpenFilesSummary is openfiles/holders.json.
type OpenFilesSummary struct {
	HostNamespace uint64 `json:"host_namespace"`
	Processes     int    `json:"processes"`
	KernelThreads int    `json:"kernel_threads"`
	// ProcessesGone counts processes that exited during the scan.
	ProcessesGone int `json:"processes_gone,omitempty"`
	FDs           int `json:"fds"`
	// Devices: every block device mounted in any namespace or held open,
	// and every other device (tmpfs, overlay, nfs...) with a holder; pseudo
	// filesystems (proc, sysfs, devtmpfs, cgroup...) are left out.
	Devices []DeviceHolders `json:"devices"`
	// Mounts: every mount (in any namespace) with at least one holder.
	Mounts []MountHolders `json:"mounts"`
	// UnknownMounts are mount IDs of open files that no namespace's
	// mountinfo lists: usually filesystems unmounted lazily (umount -l)
	// while still in use, which keep their devices busy out of sight.
	UnknownMounts []UnknownMountHolders `json:"unknown_mounts,omitempty"`
	Errors        []string              `json:"errors,omitempty"`
}

// UnknownMountHolders are the holders of files on one mount that is in no
// namespace's table.
type UnknownMountHolders struct {
	MountID int          `json:"mount_id"`
	Holders []FileHolder `json:"holders"`
}

// DeviceHolders is everyone using one device.
type DeviceHolders struct {
	Dev     string       `json:"dev"`
	Major   uint32       `json:"major"`
	Minor   uint32       `json:"minor"`
	Block   *BlockDevice `json:"block,omitempty"`
	FSTypes []string     `json:"fs_types,omitempty"`
	Sources []string     `json:"sources,omitempty"`
	// Holders are processes with a file, directory, mapping, or the
	// device node itself open on it, from every namespace.
	Holders []FileHolder `json:"holders"`
	// KernelThreads are kernel threads whose name carries the device's
	// kernel name or major:minor (jbd2/loop0-8, rbd3-tasks,
	// kdmflush/253:0): a filesystem still mounted somewhere keeps them.
	KernelThreads []KernelThreadRef `json:"kernel_threads,omitempty"`
}

// MountHolders is everyone using one mount.
type MountHolders struct {
	Namespace  uint64       `json:"namespace"`
	Host       bool         `json:"host"`
	MountID    int          `json:"mount_id"`
	MountPoint string       `json:"mount_point"`
	Dev        string       `json:"dev"`
	FSType     string       `json:"fs_type"`
	Source     string       `json:"source"`
	Holders    []FileHolder `json:"holders"`
}

// FileHolder is one process (or thread) using a device or mount.
type FileHolder struct {
	PID int `json:"pid"`
	// TID is set for a thread in a mount namespace of its own, whose cwd
	// or root differs from its process's.
	TID       int    `json:"tid,omitempty"`
	Comm      string `json:"comm"`
	Namespace uint64 `json:"mnt_ns"`
	// Uses: "cwd", "root", "exe", "mem" (a mapped file), "fd 3", or
	// "fd 4 (device node)" for the block device itself held open. At
	// most maxHolderUses are listed; UseCount counts all.
	Uses     []string `json:"uses"`
	UseCount int      `json:"use_count"`
	// Paths are up to maxHolderPaths distinct paths used.
	Paths []string `json:"paths,omitempty"`
}

// KernelThreadRef names a kernel thread.
type KernelThreadRef struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

// OpenFilesProcess is one line of openfiles/processes.jsonl.
type OpenFilesProcess struct {
	PID       int    `json:"pid"`
	PPID      int    `json:"ppid"`
	Comm      string `json:"comm"`
	Namespace uint64 `json:"mnt_ns"`
	// Exe, Cwd and Root are nil when unreadable (a zombie, say).
	Exe  *OpenFile `json:"exe,omitempty"`
	Cwd  *OpenFile `json:"cwd,omitempty"`
	Root *OpenFile `json:"root,omitempty"`
	// FDCount counts every fd; FDs lists those naming a file, directory,
	// device node or memfd (up to --openfiles-max-fds; FDsOmitted counts
	// the rest). Sockets, pipes and anonymous inodes are only counted.
	FDCount    int            `json:"fd_count"`
	FDs        []OpenFD       `json:"fds,omitempty"`
	FDsOmitted int            `json:"fds_omitted,omitempty"`
	Sockets    int            `json:"sockets,omitempty"`
	Pipes      int            `json:"pipes,omitempty"`
	AnonInodes map[string]int `json:"anon_inodes,omitempty"`
	OtherFDs   int            `json:"other_fds,omitempty"`
	// Maps lists each mapped file once.
	Maps      []OpenFile `json:"maps,omitempty"`
	MapsError string     `json:"maps_error,omitempty"`
	// Threads lists tasks in a mount namespace other than the process's.
	Threads []OpenFilesThread `json:"threads,omitempty"`
	Errors  []string          `json:"errors,omitempty"`
}

// OpenFile is a file as /proc names it, placed on a mount and device
// without touching it.
type OpenFile struct {
	Path string `json:"path"`
	// Kind is path, device (a node under /dev), memfd or unknown.
	Kind    procfs.LinkKind `json:"kind"`
	Deleted bool            `json:"deleted,omitempty"`
	// Dev is the filesystem's major:minor; MountID and MountPoint the
	// mount in the process's namespace. fds are placed by their fdinfo
	// mnt_id (exact; an fd whose MountID has no MountPoint is on a mount
	// in no namespace's table, see unknown_mounts); cwd, root, exe and
	// mapped files by the longest mount point that is a prefix of their
	// path; mapped files take Dev from maps.
	Dev        string `json:"dev,omitempty"`
	MountID    int    `json:"mount_id,omitempty"`
	MountPoint string `json:"mount_point,omitempty"`
	Inode      uint64 `json:"inode,omitempty"`
	// DeviceNode is the major:minor of the block device an fd on a
	// device node opens (/dev/loop3 → "7:3").
	DeviceNode string `json:"device_node,omitempty"`
}

// OpenFD is one file descriptor.
type OpenFD struct {
	FD int `json:"fd"`
	OpenFile
	Pos   int64  `json:"pos"`
	Flags string `json:"flags,omitempty"`
}

// OpenFilesThread is a task in a mount namespace of its own.
type OpenFilesThread struct {
	TID       int       `json:"tid"`
	Comm      string    `json:"comm"`
	Namespace uint64    `json:"mnt_ns"`
	Cwd       *OpenFile `json:"cwd,omitempty"`
	Root      *OpenFile `json:"root,omitempty"`
}

// KernelThreadNamesDevice reports whether a kernel thread's name carries a
// device's kernel name or major:minor as a whole token: "jbd2/loop0-8",
// "rbd3-tasks", "kworker/u8:1-loop0" and "kdmflush/253:0" name their
// devices; "jbd2/loop10-8" does not name loop1, nor "jbd2/sda1-8" sda.
func KernelThreadNamesDevice(comm, name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i+len(name) <= len(comm); {
		j := strings.Index(comm[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		if (j == 0 || !ofAlnum(comm[j-1])) && (end == len(comm) || !ofAlnum(comm[end])) {
			return true
		}
		i = j + 1
	}
	return false
}

func ofAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
