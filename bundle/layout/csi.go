package layout

// The csi collector's records: csi/inventory.json and what it refers to.

// CSIInventory is csi/inventory.json.
type CSIInventory struct {
	// KubeletDir is the kubelet's root (host path).
	KubeletDir string `json:"kubelet_dir"`
	// MountTable is the mountinfo the inventory was checked against;
	// MountTableError says why it could not be read (then every
	// "mounted" is null).
	MountTable      string `json:"mount_table"`
	MountTableError string `json:"mount_table_error,omitempty"`
	// PodVolumes are pods/<uid>/volumes/<plugin>/<volume>, every plugin.
	PodVolumes []CSIPodVolume `json:"pod_volumes"`
	// StagingVolumes are the CSI staging directories under
	// plugins/kubernetes.io/csi/ that hold a vol_data.json.
	StagingVolumes []CSIStagingVolume `json:"staging_volumes"`
	StateFiles     []CSIStateFile     `json:"state_files"`
	// Plugins and PluginsRegistry list plugins/ (a few levels deep, never
	// into a mountpoint) and plugins_registry/.
	Plugins         []CSIDirEntry `json:"plugins"`
	PluginsRegistry []CSIDirEntry `json:"plugins_registry"`
	// Findings are the cross-checks of state files, vol_data.json and the
	// mount table that found something wrong.
	Findings []CSIFinding `json:"findings"`
	// Drivers are the CSI drivers the kubelet knows (plugins_registry,
	// plugins, vol_data.json), used to find the drivers' pods.
	Drivers []string `json:"drivers,omitempty"`
	// PodLogDir is the kubelet's pod log directory (host path); PodLogs
	// the containers of CSI pods whose logs were kept, under podlogs/.
	PodLogDir string      `json:"pod_log_dir,omitempty"`
	PodLogs   []CSIPodLog `json:"pod_logs"`
	// HostDrivers are the processes listening on the CSI sockets the
	// kubelet knows (plugins_registry/*.sock, plugins/**/csi.sock) that
	// run outside any pod, and where their logs were taken from
	// (hostlogs/).
	HostDrivers []CSIHostDriver `json:"host_drivers,omitempty"`
	// Errors are listings or reads that failed (hung ones included).
	Errors []string `json:"errors,omitempty"`
}

// CSIDirEntry is one entry of a listing, typed from readdir's d_type
// (nothing is stat()ed).
type CSIDirEntry struct {
	// Path is the host path.
	Path string `json:"path"`
	// Type is dir, file, json (a regular *.json file), socket, symlink,
	// other or unknown.
	Type string `json:"type"`
	// Mountpoint is true when the mount table has a mount there; such
	// directories are never entered.
	Mountpoint bool `json:"mountpoint,omitempty"`
}

// CSIPodVolume is one volume directory of one pod.
type CSIPodVolume struct {
	PodUID string `json:"pod_uid"`
	// Plugin is the directory name, e.g. "kubernetes.io~csi".
	Plugin string `json:"plugin"`
	// Volume is the volume directory's name (the PV name for CSI).
	Volume string `json:"volume"`
	// Dir is the volume directory (host path).
	Dir string `json:"dir"`
	// MountPath is where the volume is expected to be mounted: Dir/mount
	// for CSI, Dir itself for other plugins.
	MountPath string `json:"mount_path"`
	// Mounted says whether MountPath is in the mount table (null when the
	// table could not be read).
	Mounted *bool `json:"mounted"`
	// Mounts are the mount table entries at MountPath (a volume mounted
	// twice shows twice).
	Mounts []CSIMountRef `json:"mounts,omitempty"`
	// DeletingLeftover marks a "<name>.deleting~<n>" directory left by a
	// failed teardown (incident 000).
	DeletingLeftover bool `json:"deleting_leftover,omitempty"`
	// VolData is the parsed vol_data.json of a CSI volume, VolDataFile its
	// copy in the bundle (relative to csi/), VolDataError why it could not
	// be read or parsed.
	VolData      *CSIVolData `json:"vol_data,omitempty"`
	VolDataFile  string      `json:"vol_data_file,omitempty"`
	VolDataError string      `json:"vol_data_error,omitempty"`
}

// CSIStagingVolume is one staging directory under plugins/kubernetes.io/csi.
type CSIStagingVolume struct {
	Dir             string        `json:"dir"`
	GlobalMountPath string        `json:"global_mount_path"`
	Mounted         *bool         `json:"mounted"`
	Mounts          []CSIMountRef `json:"mounts,omitempty"`
	VolData         *CSIVolData   `json:"vol_data,omitempty"`
	VolDataFile     string        `json:"vol_data_file,omitempty"`
	VolDataError    string        `json:"vol_data_error,omitempty"`
}

// CSIMountRef is the part of a mount table entry the inventory needs.
type CSIMountRef struct {
	MountID int    `json:"mount_id"`
	Dev     string `json:"dev"`
	Root    string `json:"root"`
	FSType  string `json:"fs_type"`
	Source  string `json:"source"`
}

// CSIVolData is the kubelet's vol_data.json of a CSI volume.
type CSIVolData struct {
	DriverName          string `json:"driver_name,omitempty"`
	VolumeHandle        string `json:"volume_handle,omitempty"`
	SpecVolID           string `json:"spec_vol_id,omitempty"`
	NodeName            string `json:"node_name,omitempty"`
	AttachmentID        string `json:"attachment_id,omitempty"`
	VolumeLifecycleMode string `json:"volume_lifecycle_mode,omitempty"`
}

// CSIStateFile is one driver state file.
type CSIStateFile struct {
	// Path is the host path; File its raw (redacted) copy in the bundle,
	// relative to csi/.
	Path      string `json:"path"`
	File      string `json:"file,omitempty"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated,omitempty"`
	// Format is "csi-hostpath" (csi-driver-host-path's state.json),
	// "json" (JSON of an unknown layout) or "invalid".
	Format string `json:"format"`
	// ParseError says why an invalid file could not be parsed (cut short,
	// malformed): the raw copy is still in the bundle.
	ParseError string           `json:"parse_error,omitempty"`
	Volumes    []CSIStateVolume `json:"volumes,omitempty"`
	Snapshots  int              `json:"snapshots,omitempty"`
	// ReadError says why the file could not be read at all.
	ReadError string `json:"read_error,omitempty"`
}

// CSIStateVolume is one volume of a csi-hostpath state file, with what the
// mount table says about it.
type CSIStateVolume struct {
	VolID   string `json:"vol_id"`
	VolName string `json:"vol_name,omitempty"`
	VolPath string `json:"vol_path,omitempty"`
	NodeID  string `json:"node_id,omitempty"`
	Kind    string `json:"kind,omitempty"`
	// PublishedState is how the driver recorded the volume's publications:
	// "set" (a non-empty list), "empty" ([] or ""), "null", "false",
	// "missing", or "other".
	PublishedState string   `json:"published_state"`
	Published      []string `json:"published,omitempty"`
	StagedState    string   `json:"staged_state"`
	Staged         []string `json:"staged,omitempty"`
	// MountedTargets are target paths of this volume (from Published and
	// from pods' vol_data.json) that the mount table has.
	MountedTargets []string `json:"mounted_targets,omitempty"`
}

// CSIFinding is one inconsistency between a driver's state, the kubelet's
// vol_data.json and the mount table.
type CSIFinding struct {
	// Kind is "published-lost" (the driver does not think the volume is
	// published, yet its target is mounted: NodeUnpublishVolume will
	// return success without unmounting, incident 004) or
	// "published-not-mounted" (the driver thinks it is published, yet the
	// target is not mounted).
	Kind       string `json:"kind"`
	StateFile  string `json:"state_file"`
	VolumeID   string `json:"volume_id"`
	TargetPath string `json:"target_path"`
	PodUID     string `json:"pod_uid,omitempty"`
	Detail     string `json:"detail"`
}

// CSIPodLog is one container of a CSI pod, and what was kept of its logs.
type CSIPodLog struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	PodUID    string `json:"pod_uid"`
	Container string `json:"container"`
	// Dir is the container's log directory (host path).
	Dir string `json:"dir"`
	// Match says why the pod was taken for a CSI pod.
	Match string `json:"match"`
	// Files are the container's log files, newest first, each with what
	// was kept of it or why nothing was.
	Files []CSIPodLogFile `json:"files"`
	// Bytes is what was kept over all files; Truncated says the current
	// and previous instance's logs hold more than that.
	Bytes     int64 `json:"bytes"`
	Truncated bool  `json:"truncated,omitempty"`
	// Error says why the directory could not be listed.
	Error string `json:"error,omitempty"`
}

// CSIPodLogFile is one log file of a container.
type CSIPodLogFile struct {
	// Name is the file's name in the container's log directory: "1.log",
	// a rotated "1.log.20240715-034930", a compressed "….gz".
	Name string `json:"name"`
	// Path is the host path.
	Path string `json:"path"`
	// Restart is the container instance the file belongs to (the
	// kubelet's restart count); Instance is "current", "previous" (the
	// one before the last restart) or "older".
	Restart    int    `json:"restart"`
	Instance   string `json:"instance"`
	Rotated    bool   `json:"rotated,omitempty"`
	Compressed bool   `json:"compressed,omitempty"`
	// File is the copy in the bundle, relative to csi/ (absent when
	// nothing was kept).
	File string `json:"file,omitempty"`
	// SourceBytes is the file's size when read; Bytes how many of its
	// last bytes were kept (whole lines, before redaction); Truncated says
	// its beginning was left out.
	SourceBytes int64 `json:"source_bytes,omitempty"`
	Bytes       int64 `json:"bytes"`
	Truncated   bool  `json:"truncated,omitempty"`
	// Skipped says why the file was not read; Error why reading it failed.
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// CSIHostDriver is a process listening on a CSI socket the kubelet knows,
// found through the socket's inode (/proc/net/unix) among the processes'
// descriptors, and what was kept of its log.
type CSIHostDriver struct {
	// Driver is the driver's name as its socket's place says it
	// (plugins/<driver>/csi.sock, plugins_registry/<driver>-reg.sock).
	Driver string `json:"driver"`
	// Sockets are the host paths of the sockets it listens on.
	Sockets []string `json:"sockets"`
	PID     int      `json:"pid"`
	Comm    string   `json:"comm,omitempty"`
	// Cmdline is the process's command line, redacted.
	Cmdline string `json:"cmdline,omitempty"`
	// Cgroup is its cgroup (v2 path, or the v1 line naming a pod);
	// InPod says it runs in a pod, whose logs are under podlogs/.
	Cgroup string `json:"cgroup,omitempty"`
	InPod  bool   `json:"in_pod,omitempty"`
	// Stdout and Stderr are its descriptors 1 and 2.
	Stdout *CSIHostFD `json:"stdout,omitempty"`
	Stderr *CSIHostFD `json:"stderr,omitempty"`
	// LogFrom is where its log was taken from: "file" (the regular file
	// behind fd 2, as klog writes there by default, else behind fd 1: its
	// newest bytes), "journal" (fd 1 or 2 is a
	// pipe or socket, as journald's stdout stream is: the journal's lines
	// of the pid), "pod" (the kubelet keeps it under podlogs/) or "none"
	// (a terminal, /dev/null: the process writes nowhere nodesnap can
	// read). LogSource names the file or the journal query.
	LogFrom   string `json:"log_from"`
	LogSource string `json:"log_source,omitempty"`
	// File is the copy in the bundle, relative to csi/ (under hostlogs/);
	// Bytes how many were kept; Truncated that older bytes were left out.
	File      string `json:"file,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// Error says why the process, its descriptors or its log could not be
	// read.
	Error string `json:"error,omitempty"`
}

// CSIHostFD is one standard descriptor of a host CSI driver.
type CSIHostFD struct {
	// Target is the descriptor's link ("/var/log/csi.log", "pipe:[123]",
	// "socket:[456]", "/dev/null", "/dev/pts/0").
	Target string `json:"target"`
	// Kind is file, pipe, socket, tty, null or other.
	Kind string `json:"kind"`
}
