package analyze

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/goroutinedump"
)

// state is what the readers keep of a bundle for the rules: compact facts,
// bounded by the number of processes, mounts and matches, never by the
// number of open files or log lines. Files arrive in archive order, which
// the rules must not rely on: readers keep facts, rules join them at the
// end.
type state struct {
	manifest   *bundle.Manifest
	present    map[string]bool
	unreadable []unreadable
	// truncated says where the archive ended early, if it did.
	truncated *bundle.TruncatedError
	// listed holds the manifest's files, true once read (a truncated
	// bundle's missing files are the others). Only listed names are kept:
	// an entry the manifest does not list costs no memory here (issue 43).
	listed    map[string]bool
	filesRead int
	bytesRead int64

	// processes/tasks.json
	tasksSeen    bool
	procs        map[int]*procInfo
	tasks        []layout.Task // D state, or waiting in a filesystem
	tasksDropped int
	kthreads     []layout.KernelThreadRef

	// mounts/mounts.json and mounts/mountinfo.txt (or mounts/ns/*.mountinfo)
	mountsSeen     bool
	hostNS         uint64
	mounts         []mountRec
	nsInfo         map[uint64]*nsInfo
	devices        map[string]*deviceRec
	deviceOrder    []string
	mountinfoPath  map[uint64]string
	mountinfoLines map[nsMount]Line
	mountinfoSpare int
	mountinfoBytes int
	// nodesnap itself: its namespaces (from mounts.json) and the devices
	// the collector found held only there.
	selfMounts   *layout.MountsSelf
	selfNS       map[uint64]string
	selfOnlyDevs []string
	selfOnlyN    int

	// openfiles
	holdersSeen    bool
	devHolders     map[string]*layout.DeviceHolders
	mountHolders   map[nsMount]*layout.MountHolders
	writers        []writerRec
	writerSeen     map[writerKey]bool
	writersDropped int

	// mountprobe
	probesSeen  bool
	probes      []layout.MountProbe // every probe not ok
	probeCounts map[string]int

	// storageclients: the kernel's live storage-client state
	storage *layout.StorageClients
	// fuseHolders are the processes with /dev/fuse open, from openfiles
	// (storageclients lists its own).
	fuseHolders []layout.FUSEDevHolder

	// dirshape, csi
	shape *layout.DirShapeReport
	csi   *layout.CSIInventory

	// kubelet
	healthz    []Line
	healthzBad []Line
	kubeDumps  []*goroutineDump
	podsSeen   bool
	pods       map[string]podRec
	// runtimePods are the pods the container runtime has sandboxes for
	// (runtime/*/cri-pods.json): names for pod UIDs when the kubelet's
	// list is missing, never evidence that the kubelet runs a pod.
	runtimePods map[string]podRec
	// containers names container IDs (the kubelet's containerStatuses,
	// the runtime's cri-containers.json), for processes' cgroups.
	containers  map[string]containerRec
	runtimeDump []*goroutineDump
	// pluginDumps are the goroutine dumps CSI node plugins printed into
	// their logs (rules_mountcall.go).
	pluginDumps []*goroutineDump
	// podsNode is the node the kubelet's pods run on (spec.nodeName);
	// buildVersion the kubelet's kubernetes_build_info git_version, read
	// from buildVersionFile.
	podsNode         string
	buildVersion     string
	buildVersionFile string
	kubeletDone      bool
	kubeletCache     *kubeletProc
	// kubeletExplained is set when a finding already carries the
	// kubelet's stuck goroutines and failing healthz.
	kubeletExplained bool

	// cluster/objects.json: the API server's view of the node.
	cluster *layout.ClusterObjects
	apiPods map[string]podRec

	logs *logIndex
	// opGroups are the storage operations' failures in scope, by
	// operation and object (scopeOps).
	opGroups []*opGroup
	// scope is what scopeLogs decided lines are compared with.
	scope logScope

	findings []Finding

	// Options.Facts: build Report.Facts, counting the kubelet's
	// goroutines by frame on the way.
	wantFacts      bool
	goroutineCount *goroutinedump.Counter
}

type unreadable struct {
	Path string `json:"path"`
	Err  string `json:"error"`
}

func newState() *state {
	return &state{
		present:        map[string]bool{},
		procs:          map[int]*procInfo{},
		nsInfo:         map[uint64]*nsInfo{},
		selfNS:         map[uint64]string{},
		devices:        map[string]*deviceRec{},
		mountinfoPath:  map[uint64]string{},
		mountinfoLines: map[nsMount]Line{},
		devHolders:     map[string]*layout.DeviceHolders{},
		mountHolders:   map[nsMount]*layout.MountHolders{},
		writerSeen:     map[writerKey]bool{},
		probeCounts:    map[string]int{},
		pods:           map[string]podRec{},
		runtimePods:    map[string]podRec{},
		containers:     map[string]containerRec{},
		logs:           newLogIndex(),
	}
}

// procInfo is a process (thread-group leader).
type procInfo struct {
	PID     int    `json:"pid"`
	PPID    int    `json:"ppid"`
	Comm    string `json:"comm"`
	State   string `json:"state"`
	Cmdline string `json:"cmdline,omitempty"`
	MountNS uint64 `json:"mnt_ns,omitempty"`
	Kernel  bool   `json:"kernel_thread,omitempty"`
	// UID is the process's real uid (0 in bundles that predate it).
	UID int `json:"uid"`
	// Start is when the process started (zero when unknown).
	Start time.Time `json:"start_time,omitzero"`
	// PodUID and ContainerID come from the process's cgroup.
	PodUID      string `json:"pod_uid,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
}

// nsMount names a mount in a namespace.
type nsMount struct {
	ns uint64
	id int
}

// mountRec is one mount of one namespace.
type mountRec struct {
	NS          uint64 `json:"namespace"`
	Host        bool   `json:"host"`
	ID          int    `json:"mount_id"`
	ParentID    int    `json:"parent_id"`
	Dev         string `json:"dev"`
	Major       uint32 `json:"-"`
	Root        string `json:"root"`
	MountPoint  string `json:"mount_point"`
	FSType      string `json:"fs_type"`
	Source      string `json:"source"`
	Propagation string `json:"propagation"`
	Class       string `json:"class"`
}

// nsInfo is one mount namespace: some of its processes.
type nsInfo struct {
	Inode        uint64                    `json:"inode"`
	Host         bool                      `json:"host"`
	ProcessCount int                       `json:"process_count"`
	Processes    []layout.NamespaceProcess `json:"processes"`
	Mountinfo    string                    `json:"mountinfo,omitempty"`
	// Nodesnap is "own" or "pod" for nodesnap's own namespaces.
	Nodesnap string `json:"nodesnap,omitempty"`
}

// maxNSProcesses bounds the processes kept per namespace.
const maxNSProcesses = 16

// deviceRec is one device of the mount index.
type deviceRec struct {
	layout.MountDevice
}

// podRec is one pod the kubelet knows.
// containerRec is a container's name and pod.
type containerRec struct {
	Name   string `json:"name"`
	PodUID string `json:"pod_uid,omitempty"`
}

type podRec struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase,omitempty"`
	Deleting  bool   `json:"deleting,omitempty"`
}

// writerRec is a process with a file or working directory on a data
// directory (kubelet, runtime, CSI and volume trees): who may be filling
// a huge directory.
type writerRec struct {
	PID       int    `json:"pid"`
	Comm      string `json:"comm"`
	Namespace uint64 `json:"mnt_ns"`
	// Use is "cwd" or "fd N (flags)".
	Use        string `json:"use"`
	Path       string `json:"path"`
	Dev        string `json:"dev,omitempty"`
	MountID    int    `json:"mount_id,omitempty"`
	MountPoint string `json:"mount_point,omitempty"`
	// Line is the process's line in openfiles/processes.jsonl.
	Line int `json:"line"`
}

type writerKey struct {
	pid int
	dir string
}

const maxWriters = 100_000

// procName is "comm[pid]" with the command line when known.
func (st *state) procName(pid int, comm string) string {
	s := comm + "[" + strconv.Itoa(pid) + "]"
	if p := st.procs[pid]; p != nil {
		if comm == "" {
			s = p.Comm + s
		}
		if p.Cmdline != "" {
			s += " `" + shorten(p.Cmdline, 160) + "`"
		}
		if w := st.podOf(p); w != "" {
			s += " " + w
		}
	}
	return s
}

// podOf says which pod and container a process runs in ("in pod ns/name,
// container c"), from its cgroup and the names the kubelet or the runtime
// gave; "" outside a pod.
func (st *state) podOf(p *procInfo) string {
	if p.PodUID == "" && p.ContainerID == "" {
		return ""
	}
	uid := p.PodUID
	ctr, known := st.containers[p.ContainerID]
	if uid == "" {
		uid = ctr.PodUID
	}
	var b strings.Builder
	pod, ok := st.pods[uid]
	if !ok || pod.Name == "" {
		pod, ok = st.runtimePods[uid]
	}
	if !ok || pod.Name == "" {
		pod, ok = st.apiPods[uid]
	}
	switch {
	case ok && pod.Name != "":
		fmt.Fprintf(&b, "in pod %s/%s", pod.Namespace, pod.Name)
	case uid != "":
		fmt.Fprintf(&b, "in pod %s (a UID neither the kubelet's list nor the runtime names)", uid)
	default:
		b.WriteString("in a container")
	}
	switch {
	case known && ctr.Name != "":
		fmt.Fprintf(&b, ", container %s", ctr.Name)
	case p.ContainerID != "":
		fmt.Fprintf(&b, ", container %.13s", p.ContainerID)
	}
	return b.String()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// mountsAt returns every mount, in any namespace, whose mount point is p
// or, outside the host's namespace, ends with p: a container with the
// host's root mounted at /host shows /var/lib/kubelet/... as
// /host/var/lib/kubelet/... (incident 002).
func (st *state) mountsAt(p string) []mountRec {
	p = strings.TrimSuffix(p, "/")
	var out []mountRec
	for _, m := range st.mounts {
		if rest, ok := pathWithin(m.MountPoint, p, !m.Host); ok && rest == "" {
			out = append(out, m)
		}
	}
	return out
}

// mountsUnder returns the mounts (any namespace) at or below directory
// p, with the same rule as mountsAt.
func (st *state) mountsUnder(p string) []mountRec {
	p = strings.TrimSuffix(p, "/")
	var out []mountRec
	for _, m := range st.mounts {
		if _, ok := pathWithin(m.MountPoint, p, !m.Host); ok {
			out = append(out, m)
		}
	}
	return out
}

// pathWithin reports whether mp is p or below it (rest is what follows
// p); with prefixed, p may also appear after a leading path (a host root
// mounted elsewhere).
func pathWithin(mp, p string, prefixed bool) (rest string, ok bool) {
	if p == "" || p[0] != '/' {
		return "", false
	}
	i := strings.Index(mp, p)
	if i < 0 || (i > 0 && !prefixed) {
		return "", false
	}
	rest = mp[i+len(p):]
	return rest, rest == "" || rest[0] == '/'
}

func (st *state) mountinfoEvidence(ms []mountRec, what string) []Evidence {
	byNS := map[uint64]*Evidence{}
	var order []uint64
	for _, m := range ms {
		l, ok := st.mountinfoLines[nsMount{m.NS, m.ID}]
		if !ok {
			continue
		}
		e := byNS[m.NS]
		if e == nil {
			e = &Evidence{Path: st.mountinfoPath[m.NS], What: what}
			byNS[m.NS] = e
			order = append(order, m.NS)
		}
		e.Lines = append(e.Lines, l)
	}
	var out []Evidence
	for _, ns := range order {
		out = append(out, *byNS[ns])
	}
	return out
}

func (st *state) add(f Finding) {
	if f.Evidence == nil {
		f.Evidence = []Evidence{}
	}
	if f.Remediation == nil {
		f.Remediation = []string{}
	}
	st.findings = append(st.findings, f)
}

// report runs the rules and builds the report.
func (st *state) report() *Report {
	st.adoptLoggedDumps()
	st.scopeLogs()
	st.settleTransients()
	st.runAnalyzers(analyzers())
	sortFindings(st.findings)
	m := st.manifest
	pods := st.podReports()
	rep := &Report{Pods: pods, ClusterView: st.cluster != nil, Hostname: m.Host.Hostname, Kernel: m.Host.Kernel, CollectedAt: m.StartedAt,
		ToolVersion: m.Tool.Version, BundleStatus: m.Status, Counts: map[string]int{},
		Findings: st.findings, FilesRead: st.filesRead, BytesRead: st.bytesRead}
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	if k := st.kubelet(); k != nil {
		rep.KubeletVersion, rep.KubeletVersionFrom = k.Version, k.From
	}
	for _, s := range []Severity{Critical, Warning, Info} {
		rep.Counts[s.String()] = 0
	}
	for _, f := range st.findings {
		rep.Counts[f.Severity.String()]++
	}
	if st.wantFacts {
		rep.Facts = st.facts()
	}
	for id, s := range st.logs.sigs {
		if s.Count > 0 && !evidenceOnlySigs[id] {
			if rep.Signatures == nil {
				rep.Signatures = map[string]int{}
			}
			rep.Signatures[id] = s.Count
		}
	}
	return rep
}

// idInternalError is the finding of a rule that panicked.
const idInternalError = "analyze-internal-error"

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "analyze-internal-error", Severity: "info",
		Title:    "A rule failed",
		Meaning:  "A rule of nodesnap analyze stopped with an internal error (a bug meeting data nobody foresaw); the other rules ran.",
		Evidence: "The rule's name and stack.",
		Fix:      "Report it to nodesnap with the bundle if you can share it.",
	},
)

// rule is one family of findings.
type rule struct {
	name string
	run  func(*state)
	// analyze, instead of run, reads its requirements' results from the
	// pass and returns its own, of type result.
	analyze func(*pass) (any, error)
	result  reflect.Type
	// reads are the rules (or "events") whose results it reads: their
	// findings, the log lines they claimed, the state they leave
	// (kubeletExplained, the log lines set aside). It runs after them and
	// sees their findings only; nothing else orders the rules.
	reads []string
}

// Groups of rules that others read as a whole.
var (
	// claimers join evidence from several collectors into one cause and
	// claim the log lines they use, so that the log-signature rules
	// report only what no cause explained.
	claimers = []string{"mount-held-in-foreign-namespace", "csi", "hung-mounts", "storage-clients", "kubelet", "directories"}
	// causes are the rules that name a cause: the storage operations'
	// rule reports each failing operation none of them names.
	causes = append(slices.Clone(claimers), "runtime", "mount-calls", "volume-logs", "catalogue-logs", "kernel-logs", "kernel-storage")
	// reported is every rule before the API's view, which is joined to
	// every finding.
	reported = append(slices.Clone(causes), "storage-operations", "bundle", "earlier-log-lines")
)

// rules are the analysis, each after what it reads. Their order in this
// list is the graph's stable order, not a constraint: a rule lists in
// reads every rule whose result it needs.
var rules = []rule{
	// Claims the volume log lines (volumeSigs) that name a mount it finds
	// held in another namespace.
	{name: "mount-held-in-foreign-namespace", run: ruleHeldMounts},
	// Reads the held mounts' findings (a mount already explained) and
	// claims teardown and orphan lines after them.
	{name: "csi", run: ruleCSI, reads: []string{"mount-held-in-foreign-namespace"}},
	// Claims teardown, orphan, FUSE, hung-task, ceph, NFS and sync-loop
	// lines after the two above.
	{name: "hung-mounts", analyze: hungMountsPass, result: reflect.TypeOf(&hungResult{}), reads: []string{"mount-held-in-foreign-namespace", "csi"}},
	// Reads the hung mounts' findings (a stuck device they name) and
	// claims hung-task and ceph lines after them.
	{name: "storage-clients", analyze: needs("hung-mounts", func(st *state, h *hungResult) { ruleStorageClients(st, h.Devices) }), reads: []string{"hung-mounts"}},
	// Reads kubeletExplained (a hung mount carries the kubelet's stuck
	// goroutines) and claims sync-loop and PLEG lines after it.
	{name: "kubelet", analyze: needs("hung-mounts", func(st *state, h *hungResult) { ruleKubelet(st, h.KubeletExplained) }), reads: []string{"hung-mounts"}},
	// Claims deleting, teardown, rmdir, orphan and unlinkat lines after
	// the rules that claim them first.
	{name: "directories", analyze: directoriesPass, result: reflect.TypeOf(&dirsResult{}), reads: []string{"mount-held-in-foreign-namespace", "csi", "hung-mounts"}},
	// Reads the huge directories found.
	{name: "runtime", analyze: needs("directories", func(st *state, d *dirsResult) { ruleRuntimeLock(st, d.Huge) }), reads: []string{"directories"}},
	// Runtime goroutines in a mount call, CSI node plugin calls in a
	// system call (their goroutine dumps).
	{name: "mount-calls", run: ruleBlockedMountCalls},
	// The log-signature rules: what no claimer used.
	{name: "volume-logs", run: ruleVolumeLogs, reads: claimers},
	// Also reads the events' groups (stateSeverity).
	{name: "catalogue-logs", analyze: needs("events", ruleCatalogueLogs), reads: append([]string{"events"}, claimers...)},
	{name: "kernel-logs", run: ruleKernelLogs, reads: claimers},
	{name: "kernel-storage", run: ruleKernelStorage, reads: claimers},
	// Each failing storage operation no cause names (it reads their
	// findings, claims and the lines set aside as history).
	{name: "storage-operations", analyze: needs("events", func(st *state, ev *opResult) { ruleStorageOps(st, ev.Groups) }), reads: append([]string{"events"}, causes...)},
	{name: "bundle", run: ruleBundle},
	// The lines set aside: by scopeLogs, and by the kernel's NFS rule.
	{name: "earlier-log-lines", run: ruleEarlierLogs, reads: []string{"kernel-logs"}},
	// Last: the API's view joined to every finding above.
	{name: "volume-attachments", run: ruleVolumeAttachments, reads: reported},
	{name: "pods", run: rulePods, reads: append(slices.Clone(reported), "volume-attachments")},
}
