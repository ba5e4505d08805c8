package layout

import "time"

// mountprobe's record: mountprobe/probes.json.

// MountProbeReport is mountprobe/probes.json.
type MountProbeReport struct {
	StartedAt      time.Time `json:"started_at"`
	DurationMS     float64   `json:"duration_ms"`
	ProbeTimeoutMS int64     `json:"probe_timeout_ms"`
	Workers        int       `json:"workers"`
	MaxWorkers     int       `json:"max_workers"`
	// MaxStuck bounds the probes stuck on hung mounts at once, besides
	// MaxWorkers; PeakStuck is the most there were.
	MaxStuck  int `json:"max_stuck,omitempty"`
	PeakStuck int `json:"peak_stuck,omitempty"`
	// EarlierStuck counts the workers of earlier runs found still stuck
	// on hung mounts; they count against MaxStuck, which bounds the stuck
	// workers of all runs together.
	EarlierStuck int `json:"earlier_stuck,omitempty"`
	// MaxPerNamespace is the bound on one namespace's network and FUSE
	// probes at once; Reserved workers are kept for the probes that
	// come first (kubelet, runtime and CSI paths of the host).
	MaxPerNamespace int                   `json:"max_per_namespace,omitempty"`
	Reserved        int                   `json:"reserved_workers,omitempty"`
	Namespaces      []MountProbeNamespace `json:"namespaces"`
	// Counts is the number of probes per result (ok, hung, error,
	// skipped, unfinished).
	Counts map[string]int `json:"counts"`
	// Probes has one record per distinct mount, network and FUSE first.
	Probes []MountProbe `json:"probes"`
	Notes  []string     `json:"notes,omitempty"`
}

// MountProbeNamespace is one distinct mount namespace whose table was read.
type MountProbeNamespace struct {
	// Inode identifies the namespace (the number in /proc/<pid>/ns/mnt).
	Inode uint64 `json:"inode"`
	// Host is the namespace of pid 1; Self is nodesnap's own.
	Host bool `json:"host,omitempty"`
	Self bool `json:"self,omitempty"`
	// PID is the task whose mountinfo was read and through whose
	// /proc/<pid>/root its mounts were probed.
	PID  int    `json:"pid"`
	Comm string `json:"comm,omitempty"`
	// PIDs are some of the tasks in it (at most 16); Tasks counts all.
	PIDs   []int  `json:"pids"`
	Tasks  int    `json:"tasks"`
	Mounts int    `json:"mounts"`
	Error  string `json:"error,omitempty"`
}

// MountProbe is one mount's probe record.
type MountProbe struct {
	// Mountpoint is the path as the namespace's mountinfo shows it.
	Mountpoint string `json:"mountpoint"`
	// ProbePath is the path that was (or would have been) probed: the
	// mountpoint itself in nodesnap's own namespace, else
	// /proc/<pid>/root/<mountpoint>.
	ProbePath string `json:"probe_path"`
	// Namespaces lists every mount namespace with this same mount
	// (filesystem, root and mountpoint); ProbeNamespace is the one probed.
	Namespaces     []uint64 `json:"namespaces"`
	ProbeNamespace uint64   `json:"probe_namespace"`
	MountID        int      `json:"mount_id"`
	FSType         string   `json:"fstype"`
	Source         string   `json:"source"`
	Dev            string   `json:"dev"`
	Root           string   `json:"root"`
	// Class is network, fuse, block, local or pseudo.
	Class string `json:"class"`
	// First is set for mounts probed first: on a kubelet, runtime or CSI
	// path of the host, or on the way to one.
	First bool `json:"first,omitempty"`
	// Result is ok, hung, error, skipped or unfinished.
	Result string `json:"result"`
	// Probed is false when no probe ran: skipped, or hung inferred from
	// another mount of the same filesystem (HungVia).
	Probed bool   `json:"probed"`
	Errno  string `json:"errno,omitempty"`
	Error  string `json:"error,omitempty"`
	// Diagnosis says in words what the result means.
	Diagnosis  string `json:"diagnosis,omitempty"`
	SkipReason string `json:"skip_reason,omitempty"`
	HungVia    string `json:"hung_via,omitempty"`
	// LatencyMS is stat + statfs time in the worker; for a hung probe,
	// the deadline it missed.
	LatencyMS float64           `json:"latency_ms"`
	StatMS    float64           `json:"stat_ms,omitempty"`
	StatfsMS  float64           `json:"statfs_ms,omitempty"`
	StatDev   string            `json:"stat_dev,omitempty"`
	Statfs    *MountProbeStatfs `json:"statfs,omitempty"`
	FUSE      *MountProbeFUSE   `json:"fuse,omitempty"`
	// BlockedIn is where the hung probe's worker was blocked (the full
	// evidence is in the manifest's hung_mounts).
	BlockedIn string `json:"blocked_in,omitempty"`
	// StartedMS and DoneMS are when the probe started and when its
	// result was known (reported hung, for a hung one), counted from the
	// collector's start: how long a mount waited for its turn.
	StartedMS float64 `json:"started_ms,omitempty"`
	DoneMS    float64 `json:"done_ms,omitempty"`
	// EarlierProbe is a probe of an earlier run still stuck on this
	// filesystem: the mount is reported hung without a new probe.
	EarlierProbe *MountProbeEarlier `json:"earlier_probe,omitempty"`
	// KernelStuck is the kernel's own evidence that the filesystem is
	// stuck (requests waiting, tasks blocked on them), found by the
	// storageclients collector: the mount is reported hung without a
	// probe, which would only add one more stuck task.
	KernelStuck *MountProbeKernel `json:"kernel_stuck,omitempty"`
}

// MountProbeKernel is what made a mount hung without a probe.
type MountProbeKernel struct {
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	Requests int    `json:"requests"`
	TIDs     []int  `json:"tids"`
	Reason   string `json:"reason"`
}

// MountProbeEarlier is a worker of an earlier run still stuck probing a
// filesystem.
type MountProbeEarlier struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Path    string    `json:"path,omitempty"`
}

// MountProbeStatfs summarises statfs(2).
type MountProbeStatfs struct {
	TypeMagic     string  `json:"type_magic"`
	BlockSize     int64   `json:"block_size"`
	TotalBytes    uint64  `json:"total_bytes"`
	FreeBytes     uint64  `json:"free_bytes"`
	AvailBytes    uint64  `json:"avail_bytes"`
	UsedPct       float64 `json:"used_pct"`
	Inodes        uint64  `json:"inodes"`
	InodesFree    uint64  `json:"inodes_free"`
	InodesUsedPct float64 `json:"inodes_used_pct"`
	ReadOnly      bool    `json:"read_only,omitempty"`
}

// MountProbeFUSE is what fusectl (/sys/fs/fuse/connections/<minor>) says
// about a FUSE mount's connection: requests queued for, or being served
// by, its daemon.
type MountProbeFUSE struct {
	Conn uint32 `json:"conn"`
	// WaitingBefore is read before any probe ran, WaitingAfter after a
	// hung or failed probe; null when fusectl could not be read.
	WaitingBefore *int `json:"waiting_before"`
	WaitingAfter  *int `json:"waiting_after,omitempty"`
}

// Probe results, as in MountProbe.Result.
const (
	ProbeOK      = "ok"
	ProbeHung    = "hung"
	ProbeError   = "error"
	ProbeSkipped = "skipped"
	// ProbeUnfinished is a probe cut short by the collector's own
	// deadline before its probe deadline passed: neither ok nor proven
	// hung.
	ProbeUnfinished = "unfinished"
)
