package layout

import "github.com/nodesnap/nodesnap/internal/procfs"

// The mounts collector's record: mounts/mounts.json, its namespaces and device index.

// MountsReport is mounts/mounts.json.
type MountsReport struct {
	// Format is mounts.json's format: absent (1) in bundles written
	// before 2026-12-07, where every namespace carries its own mounts;
	// MountsFormat since. Readers refuse a format above MountsFormat.
	Format int `json:"format,omitempty"`
	// HostNamespace is the inode of pid 1's mount namespace (0 if it could
	// not be read, e.g. in a container without the host's pid namespace).
	HostNamespace uint64 `json:"host_namespace"`
	// Processes and Tasks are how many were scanned; TasksGone counts tasks
	// that exited (or could not be read) during the scan.
	Processes int `json:"processes"`
	Tasks     int `json:"tasks"`
	TasksGone int `json:"tasks_gone,omitempty"`
	// Tables (format 2) holds each distinct mount table once, before the
	// namespaces that refer to it by its hash (MountNamespace.Table).
	Tables []MountTable `json:"tables,omitempty"`
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
	// Mountinfo is the path, relative to the collector's directory, of
	// the file holding the raw table: "mountinfo.txt" (the table follows
	// its header line there, see FormatMountinfoHeader; from format 4 the
	// header may name another namespace's table instead, see
	// RebuildMountinfo), or in bundles
	// written before 2026-11-24 "ns/<inode>.mountinfo" (the file is the
	// table).
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
	// Mounts is the namespace's table, parsed. In format 2 it is empty
	// when Table names the table instead (ExpandMountTables fills it).
	Mounts []NamespaceMount `json:"mounts,omitempty"`
	// Table (format 2) is the hash of this namespace's table in
	// MountsReport.Tables. Namespaces whose tables differ only in their
	// mount IDs (every copy of a namespace numbers its mounts anew) share
	// one; MountIDs and RootParents give this namespace's numbers.
	Table string `json:"table,omitempty"`
	// MountIDs are the namespace's mount IDs, mount by mount in the
	// table's order, as runs [first, count] of consecutive IDs.
	MountIDs [][2]int `json:"mount_ids,omitempty"`
	// RootParents are the parent IDs of the mounts whose parent is not in
	// the table (the namespace's root mount), in the table's order.
	RootParents []int `json:"root_parents,omitempty"`
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
	// Tables (format 3) names the namespaces whose entries are left out
	// of Namespaces because their table says all of it: each mounts the
	// device exactly where its table does, and its entry is made from
	// its namespaces[] record (see ExpandDeviceTables).
	Tables []MountDeviceTable `json:"tables,omitempty"`
}

// MountDeviceTable is, under one device, the namespaces of one shared
// table (format 3) whose device entries are not written out.
type MountDeviceTable struct {
	// Table is the hash of the table in MountsReport.Tables.
	Table string `json:"table"`
	// Namespaces are the inodes of the namespaces naming that table.
	Namespaces []uint64 `json:"namespaces"`
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
