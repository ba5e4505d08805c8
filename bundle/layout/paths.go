package layout

import "strconv"

// Where things are in a bundle. Each collector writes under a directory
// named after it (the Dir constants, which are also the collectors' names);
// the File constants are the names a collector writes, relative to its
// directory, and the Path constants the same files as paths in the bundle,
// which is what readers match entries against. A collector writes
// layout.TasksFile; analyze reads layout.TasksPath: renaming either is a
// compile error in both, not a reader that finds nothing.

// Collector directories (and names).
const (
	DirHost       = "host"
	DirProcesses  = "processes"
	DirMounts     = "mounts"
	DirOpenFiles  = "openfiles"
	DirMountProbe = "mountprobe"
	DirDirShape   = "dirshape"
	DirKubelet    = "kubelet"
	DirRuntime    = "runtime"
	DirCSI        = "csi"
	DirJournal    = "journal"
)

// host
const (
	HostSummaryFile = "summary.json"
)

// processes
const (
	TasksFile            = "tasks.json"   // []Task
	ProcessesSummaryFile = "summary.json" // ProcessesSummary
	TasksPath            = DirProcesses + "/" + TasksFile
)

// mounts
const (
	MountsFile = "mounts.json" // MountsReport
	MountsPath = DirMounts + "/" + MountsFile
	// MountinfoTablesFile holds the raw mountinfo of every mount
	// namespace, each table after its header line (see
	// FormatMountinfoHeader); when it would pass the per-file cap the
	// rest goes on in MountinfoTablesPart(2), (3)...
	// MountNamespace.Mountinfo names the file holding a namespace's
	// table, relative to DirMounts.
	MountinfoTablesFile = "mountinfo.txt"
	// MountinfoTablesPrefix and MountinfoTablesExt match every part.
	MountinfoTablesPrefix = DirMounts + "/mountinfo"
	MountinfoTablesExt    = ".txt"

	// Bundles written before 2026-11-24 hold one file per namespace,
	// MountinfoFile(inode), in MountinfoDir; readers still read them.
	MountinfoDir  = "ns/"
	MountinfoExt  = ".mountinfo"
	MountinfoPath = DirMounts + "/" + MountinfoDir
)

// MountinfoTablesPart is the name of the n-th file of raw mount tables
// (n >= 1), relative to DirMounts: mountinfo.txt, mountinfo-2.txt...
func MountinfoTablesPart(n int) string {
	if n <= 1 {
		return MountinfoTablesFile
	}
	return "mountinfo-" + strconv.Itoa(n) + MountinfoTablesExt
}

// MountinfoFile is the raw mountinfo of the mount namespace with inode ns,
// relative to DirMounts, in bundles written before 2026-11-24.
func MountinfoFile(ns uint64) string {
	return MountinfoDir + strconv.FormatUint(ns, 10) + MountinfoExt
}

// openfiles
const (
	HoldersFile            = "holders.json"    // OpenFilesSummary
	OpenFilesProcessesFile = "processes.jsonl" // one OpenFilesProcess a line
	HoldersPath            = DirOpenFiles + "/" + HoldersFile
	OpenFilesProcessesPath = DirOpenFiles + "/" + OpenFilesProcessesFile
)

// mountprobe
const (
	ProbesFile = "probes.json" // MountProbeReport
	ProbesPath = DirMountProbe + "/" + ProbesFile
)

// dirshape
const (
	ShapeFile = "shape.json" // DirShapeReport
	ShapePath = DirDirShape + "/" + ShapeFile
)

// csi
const (
	CSIInventoryFile = "inventory.json" // CSIInventory
	CSIInventoryPath = DirCSI + "/" + CSIInventoryFile
	// CSIPodLogsDir holds the CSI driver pods' container logs.
	CSIPodLogsDir  = "podlogs/"
	CSIPodLogsPath = DirCSI + "/" + CSIPodLogsDir
	// CSIHostLogsDir holds the logs of CSI drivers run as host
	// processes: <driver>.<pid>.log.
	CSIHostLogsDir  = "hostlogs/"
	CSIHostLogsPath = DirCSI + "/" + CSIHostLogsDir
)

// kubelet
const (
	KubeletHealthzFile         = "healthz.txt"
	KubeletPodsFile            = "pods.json"
	KubeletGoroutineDebug1File = "goroutine-debug1.txt"
	KubeletGoroutineDebug2File = "goroutine-debug2.txt"
	KubeletHealthzPath         = DirKubelet + "/" + KubeletHealthzFile
	KubeletPodsPath            = DirKubelet + "/" + KubeletPodsFile
	KubeletGoroutineDebug2Path = DirKubelet + "/" + KubeletGoroutineDebug2File
	KubeletGoroutinePathPrefix = DirKubelet + "/goroutine-debug" // both dumps, .txt
	KubeletMetricsFile         = "metrics.txt"
	KubeletMetricsPrefix       = "metrics" // readers take metrics*.txt under DirKubelet
)

// runtime: files under DirRuntime/<runtime>/ (containerd, cri-o, docker).
const (
	RuntimeSummaryFile     = "summary.json" // RuntimeSummary
	RuntimeSummaryPath     = DirRuntime + "/" + RuntimeSummaryFile
	CRIPodsFile            = "cri-pods.json"
	CRIContainersFile      = "cri-containers.json"
	RuntimeGoroutineFile   = "goroutine-debug2.txt" // a runtime's goroutine dump
	RuntimeGoroutinePrefix = "goroutine"            // readers take goroutine*.txt
)

// journal
const (
	JournalSourcesFile = "sources.json" // JournalSources
	JournalBootsFile   = "boots.txt"
)
