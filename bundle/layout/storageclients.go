package layout

import "time"

// The storageclients collector's record: storageclients/state.json. It is
// the kernel's own view of its storage clients (NFS, sunrpc, ceph, rbd,
// iSCSI/SCSI, device-mapper, block queues, FUSE connections), read from
// /proc, /sys and debugfs, each read in a worker under the probe deadline.

// Storage clients' bundle paths.
const (
	DirStorageClients  = "storageclients"
	StorageClientsFile = "state.json" // StorageClients
	StorageClientsPath = DirStorageClients + "/" + StorageClientsFile
)

// StorageClients is storageclients/state.json.
type StorageClients struct {
	StartedAt  time.Time `json:"started_at"`
	DurationMS float64   `json:"duration_ms"`
	// SampleIntervalMS separates the two samples of the counters that
	// tell stuck from busy (FUSE waiting, block inflight, task run counts);
	// 0 when one sample showed nothing waiting, and no second was taken.
	SampleIntervalMS int64 `json:"sample_interval_ms"`
	// Debugfs says how debugfs was reached: "mounted" (at its usual
	// place), "private" (mounted by the reading worker in its own mount
	// namespace, never on the host), or why it could not be.
	Debugfs string `json:"debugfs,omitempty"`
	// Fusectl is the same for the FUSE control filesystem.
	Fusectl string `json:"fusectl,omitempty"`

	NFSMounts     []NFSMount      `json:"nfs_mounts,omitempty"`
	NFSServers    []NFSServer     `json:"nfs_servers,omitempty"`
	NFSVolumes    []NFSVolume     `json:"nfs_volumes,omitempty"`
	RPCClients    []RPCClient     `json:"rpc_clients,omitempty"`
	Ceph          []CephClient    `json:"ceph,omitempty"`
	RBD           []RBDDevice     `json:"rbd,omitempty"`
	ISCSISessions []ISCSISession  `json:"iscsi_sessions,omitempty"`
	SCSIDevices   []SCSIDevice    `json:"scsi_devices,omitempty"`
	DM            []DMDevice      `json:"dm,omitempty"`
	Block         []BlockQueue    `json:"block,omitempty"`
	FUSE          []FUSEConn      `json:"fuse,omitempty"`
	CIFS          []string        `json:"cifs_files,omitempty"`
	Tasks         []StorageTask   `json:"tasks,omitempty"`
	Stuck         []KernelStuck   `json:"stuck,omitempty"`
	FUSEHolders   []FUSEDevHolder `json:"fuse_holders,omitempty"`
	// Errors are reads that failed or hung (a hung one is also in the
	// manifest with its kernel stack).
	Errors []string `json:"errors,omitempty"`
}

// NFSMount is one NFS mount in /proc/<pid>/mountstats.
type NFSMount struct {
	Device     string `json:"device"`
	Server     string `json:"server"`
	Export     string `json:"export"`
	Mountpoint string `json:"mountpoint"`
	FSType     string `json:"fstype"`
	StatVers   string `json:"statvers,omitempty"`
	// AgeSeconds is how long ago it was mounted.
	AgeSeconds int64             `json:"age_seconds"`
	Opts       map[string]string `json:"opts,omitempty"`
	// Xprt is the transport line's counters (tcp, udp or rdma).
	Xprt *NFSXprt `json:"xprt,omitempty"`
	// Ops are the per-operation counters, by operation name.
	Ops []NFSOp `json:"ops,omitempty"`
	// Totals over every operation.
	RPCs        uint64 `json:"rpcs"`
	Retransmits uint64 `json:"retransmits"`
	Timeouts    uint64 `json:"timeouts"`
}

// NFSXprt is the "xprt:" line of mountstats.
type NFSXprt struct {
	Proto       string `json:"proto"`
	Port        uint64 `json:"port"`
	Binds       uint64 `json:"binds"`
	Connects    uint64 `json:"connects"`
	ConnectTime uint64 `json:"connect_time"`
	IdleSeconds uint64 `json:"idle_seconds"`
	Sends       uint64 `json:"sends"`
	Receives    uint64 `json:"receives"`
	BadXIDs     uint64 `json:"bad_xids"`
	// CumActive and CumBacklog are sums over every send of the requests
	// active and waiting in the backlog; MaxSlots the most slots used.
	CumActive  uint64 `json:"cum_active"`
	CumBacklog uint64 `json:"cum_backlog"`
	MaxSlots   uint64 `json:"max_slots"`
	CumSending uint64 `json:"cum_sending"`
	CumPending uint64 `json:"cum_pending"`
	// InFlight is sends not yet answered (sends - receives), the
	// requests the server has not answered.
	InFlight int64 `json:"in_flight"`
}

// NFSOp is one per-op statistics line.
type NFSOp struct {
	Name        string `json:"name"`
	Ops         uint64 `json:"ops"`
	Trans       uint64 `json:"trans"`
	Timeouts    uint64 `json:"timeouts"`
	BytesSent   uint64 `json:"bytes_sent"`
	BytesRecv   uint64 `json:"bytes_recv"`
	QueueMS     uint64 `json:"queue_ms"`
	RTTMS       uint64 `json:"rtt_ms"`
	ExecuteMS   uint64 `json:"execute_ms"`
	Errors      uint64 `json:"errors,omitempty"`
	ErrorsKnown bool   `json:"errors_known,omitempty"`
}

// NFSServer is a line of /proc/fs/nfsfs/servers.
type NFSServer struct {
	Version  string `json:"version"`
	ServerID string `json:"server_id"`
	Port     string `json:"port"`
	Use      int    `json:"use"`
	Hostname string `json:"hostname"`
}

// NFSVolume is a line of /proc/fs/nfsfs/volumes.
type NFSVolume struct {
	Version  string `json:"version"`
	ServerID string `json:"server_id"`
	Port     string `json:"port"`
	Dev      string `json:"dev"`
	FSID     string `json:"fsid"`
	FSCache  string `json:"fscache,omitempty"`
}

// RPCClient is one sunrpc client in debugfs (rpc_clnt/<n>): its transport
// and the RPC tasks it has in flight.
type RPCClient struct {
	ID     string    `json:"id"`
	Xprt   string    `json:"xprt,omitempty"`
	Addr   string    `json:"addr,omitempty"`
	Port   string    `json:"port,omitempty"`
	Netid  string    `json:"netid,omitempty"`
	Tasks  []RPCTask `json:"tasks,omitempty"`
	Errors []string  `json:"errors,omitempty"`
}

// RPCTask is a line of rpc_clnt/<n>/tasks.
type RPCTask struct {
	PID       uint64 `json:"pid"`
	Flags     string `json:"flags"`
	Status    int64  `json:"status"`
	ClientID  string `json:"client_id"`
	XID       string `json:"xid"`
	TimeoutJ  int64  `json:"timeout_jiffies"`
	Ops       string `json:"ops"`
	Program   string `json:"program"`
	Procedure string `json:"procedure"`
	Action    string `json:"action"`
	Queue     string `json:"queue"`
}

// CephClient is one kernel ceph client in debugfs (ceph/<fsid>.client<id>).
type CephClient struct {
	Dir         string            `json:"dir"`
	Status      map[string]string `json:"status,omitempty"`
	OSDRequests []CephOSDRequest  `json:"osd_requests,omitempty"`
	MDSRequests []CephMDSRequest  `json:"mds_requests,omitempty"`
	// Monc is monc's lines as read (maps held, requests to monitors).
	Monc []string `json:"monc,omitempty"`
	// Caps is the first lines of caps (totals).
	Caps   []string `json:"caps,omitempty"`
	Errors []string `json:"errors,omitempty"`
}

// CephOSDRequest is one in-flight request in osdc.
type CephOSDRequest struct {
	TID      uint64 `json:"tid"`
	OSD      int    `json:"osd"`
	PG       string `json:"pg"`
	Object   string `json:"object,omitempty"`
	Attempts int    `json:"attempts"`
	Ops      string `json:"ops,omitempty"`
	Paused   bool   `json:"paused,omitempty"`
	Linger   bool   `json:"linger,omitempty"`
}

// CephMDSRequest is one in-flight request in mdsc.
type CephMDSRequest struct {
	TID uint64 `json:"tid"`
	// MDS is the rank asked, -1 when the request has no session yet.
	MDS  int    `json:"mds"`
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
}

// RBDDevice is /sys/bus/rbd/devices/<id>: `rbd showmapped` without rbd.
type RBDDevice struct {
	ID       string `json:"id"`
	Pool     string `json:"pool"`
	PoolNS   string `json:"pool_ns,omitempty"`
	Image    string `json:"image"`
	Snap     string `json:"snap,omitempty"`
	ClientID string `json:"client_id,omitempty"`
	ClusterF string `json:"cluster_fsid,omitempty"`
	Major    string `json:"major,omitempty"`
	Minor    string `json:"minor,omitempty"`
	Device   string `json:"device"`
}

// ISCSISession is an iSCSI session with its connection and host.
type ISCSISession struct {
	Name        string `json:"name"`
	State       string `json:"state"`
	TargetName  string `json:"target_name"`
	RecoveryTMO string `json:"recovery_tmo,omitempty"`
	// Portal is the connection's persistent address and port.
	Address string `json:"address,omitempty"`
	Port    string `json:"port,omitempty"`
	// ConnState is the connection's state (newer kernels).
	ConnState string `json:"conn_state,omitempty"`
	Host      string `json:"host,omitempty"`
	HostState string `json:"host_state,omitempty"`
	// InitiatorAddr is the initiator's address on the session's host.
	InitiatorAddr string `json:"initiator_addr,omitempty"`
	// Devices are the SCSI disks behind the session (sdX).
	Devices []string `json:"devices,omitempty"`
}

// SCSIDevice is /sys/class/scsi_device/<h:c:t:l>.
type SCSIDevice struct {
	HCTL  string `json:"hctl"`
	State string `json:"state"`
	Block string `json:"block,omitempty"`
	// Session is the iSCSI session it belongs to, if any.
	Session string `json:"session,omitempty"`
}

// DMDevice is a device-mapper device (dm-N).
type DMDevice struct {
	Block   string   `json:"block"`
	Dev     string   `json:"dev,omitempty"`
	Name    string   `json:"name"`
	UUID    string   `json:"uuid,omitempty"`
	Suspend string   `json:"suspended,omitempty"`
	Slaves  []string `json:"slaves,omitempty"`
	Holders []string `json:"holders,omitempty"`
	// Multipath is set for a multipath map (uuid mpath-...).
	Multipath bool `json:"multipath,omitempty"`
}

// BlockQueue is /sys/block/<name>: in-flight requests and counters.
type BlockQueue struct {
	Name string `json:"name"`
	Dev  string `json:"dev"`
	// InflightRead/Write are /sys/block/<name>/inflight, in two samples.
	Inflight  [2]int64 `json:"inflight"`
	Inflight2 [2]int64 `json:"inflight_second"`
	// Stat is the stat file's fields (I/Os completed, merges, sectors,
	// ms, in flight, io ticks, time in queue, ...) in two samples.
	Stat  []uint64          `json:"stat,omitempty"`
	Stat2 []uint64          `json:"stat_second,omitempty"`
	Queue map[string]string `json:"queue,omitempty"`
	// BackingFile is a loop device's backing file.
	BackingFile string   `json:"backing_file,omitempty"`
	Slaves      []string `json:"slaves,omitempty"`
	Holders     []string `json:"holders,omitempty"`
}

// FUSEConn is /sys/fs/fuse/connections/<n> (n is the minor of the
// mount's device 0:n).
type FUSEConn struct {
	Conn             uint32 `json:"conn"`
	Waiting          int    `json:"waiting"`
	Waiting2         int    `json:"waiting_second"`
	MaxBackground    int    `json:"max_background,omitempty"`
	CongestionThresh int    `json:"congestion_threshold,omitempty"`
	// Mountpoints of the connection in the host's mount namespace.
	Mountpoints []string `json:"mountpoints,omitempty"`
	FSType      string   `json:"fstype,omitempty"`
	Source      string   `json:"source,omitempty"`
}

// FUSEDevHolder is a process holding /dev/fuse open: a FUSE daemon.
type FUSEDevHolder struct {
	PID     int    `json:"pid"`
	Comm    string `json:"comm"`
	MountNS uint64 `json:"mnt_ns,omitempty"`
	FDs     int    `json:"fds"`
	// Readers are its threads waiting to read a request (fuse_dev_do_read).
	Readers int `json:"readers"`
}

// StorageTask is a task found waiting in storage code in both samples.
type StorageTask struct {
	PID     int      `json:"pid"`
	TID     int      `json:"tid"`
	Comm    string   `json:"comm"`
	State   string   `json:"state"`
	Wchan   string   `json:"wchan,omitempty"`
	Syscall string   `json:"syscall,omitempty"`
	Stack   []string `json:"stack,omitempty"`
	Kernel  bool     `json:"kernel_thread,omitempty"`
	// NotRun: the task was not scheduled between the samples.
	NotRun bool `json:"not_run,omitempty"`
	// Dev is the device (major:minor) it is known to wait on, and Via
	// how that is known (the fd of its syscall, its thread's name...).
	Dev string `json:"dev,omitempty"`
	Via string `json:"via,omitempty"`
}

// KernelStuck is a filesystem or device whose kernel state already shows
// stuck requests and tasks stuck on them: it is reported hung from that
// evidence, and mountprobe does not probe its mounts again.
type KernelStuck struct {
	Dev  string `json:"dev"`
	Kind string `json:"kind"` // fuse, block
	Name string `json:"name"`
	// Requests waiting (FUSE waiting, block in flight) in the second
	// sample.
	Requests int `json:"requests"`
	// TIDs are the tasks waiting on it in both samples.
	TIDs   []int  `json:"tids"`
	Reason string `json:"reason"`
	// Evidence is where the tasks are blocked (for the manifest's
	// hung_mounts).
	Evidence *HangEvidence `json:"evidence,omitempty"`
}

// Stuck kinds.
const (
	StuckFUSE  = "fuse"
	StuckBlock = "block"
)
