package analyze

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Incident 003: a leftover cephfs mount hung every stat(); the kubelet's
// housekeeping stat()ed it in cleanupOrphanedPodDirs and its sync loop
// stopped, so new pods never started. The mount probe finds mounts that
// do not answer (safely, in a worker with a deadline); this family names
// them, the tasks sleeping on them (in D state, or in S with the FUSE
// wait channel request_wait_answer), the kubelet's stuck goroutines, and
// the kernel's own complaints (hung tasks, libceph session lost, NFS not
// responding), as one finding per filesystem.

// IDs of this family.
const (
	idHungMount       = "hung-mount"
	idNotProbed       = "mount-not-probed"
	idDeadFUSE        = "fuse-transport-not-connected"
	idMountError      = "mount-probe-error"
	idBlockedTasks    = "tasks-blocked-in-kernel"
	idCephSession     = "ceph-session-lost"
	idNFSNotReponding = "nfs-server-not-responding"
	idKernelHungTask  = "kernel-hung-task"
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "hung-mount", Severity: "critical",
		Title:    "A mount does not answer",
		Meaning:  "A stat or statfs of the mount did not return within the probe's deadline: every process that touches it (the kubelet's volume manager, `df`, a pod) blocks in the kernel. The finding joins the tasks stuck on it, the kubelet goroutines waiting on it and the kernel and kubelet log lines that go with it. Without the kubelet's goroutine dump (no credential, or none allowed its pprof endpoints), a kubelet thread the kernel's view ties to the mount, in the volume directory of a pod no pod list of the bundle knows (the kubelet's, the runtime's sandboxes, the API's, or the kubelet's own orphan log lines), is named as the kubelet's housekeeping (cleanupOrphanedPodDirs) stopping the sync loop, inferred from its kernel stack and the pod UID, and every Pending pod is chained to it; a pod a list knows is that pod's own volume work; with no pod list, the finding says which it is cannot be told.",
		Evidence: "`mountprobe/probes.json` (the probe, where it blocked), `processes/tasks.json` (tasks in D state and their kernel stacks), `kubelet/goroutine-debug2.txt`, `kubelet/healthz.txt`, the kernel log.",
		Fix:      "Force-unmount it (`umount -f`, then `umount -l`; for FUSE `fusermount -uz`), fix what serves it (ceph monitors and MDS, the NFS server, the FUSE daemon), and restart the kubelet if its sync loop does not resume within a minute.",
		Incident: "incident 003",
	},
	RuleDoc{
		ID: "mount-not-probed", Severity: "info or warning",
		Title:    "A mount not probed before its deadline",
		Meaning:  "mountprobe ran out of time before reaching these mounts, so whether they answer is unknown. When the bundle shows processes waiting on that kind of filesystem, or dirshape timing out under it, the finding says so (warning): it probably hangs.",
		Evidence: "`mountprobe/probes.json` (not reached), `processes/tasks.json`, `dirshape/shape.json`.",
		Fix:      "Collect again with a longer `--timeout` or `--collector-timeout`, or `--only mountprobe`; check the mount by hand from a shell you can afford to lose (`timeout 5 stat -f MOUNT`).",
	},
	RuleDoc{
		ID: "mount-probe-error", Severity: "warning",
		Title:    "A mount answers with an error",
		Meaning:  "The mount answers, but with an error such as ESTALE (stale NFS file handle) or EIO: it is reachable but broken, and pods using it get the same error.",
		Evidence: "`mountprobe/probes.json`: the probe's error and its diagnosis.",
		Fix:      "Unmount it (`umount -l MOUNT`) and let the pod that needs it mount it again (restart the pod).",
	},
	RuleDoc{
		ID: "tasks-blocked-in-kernel", Severity: "info or warning",
		Title:    "Tasks in uninterruptible sleep no hung mount explains",
		Meaning:  "Tasks sleep in the kernel in D state, usually waiting for a disk or a network filesystem (info when they wait on local disk I/O, warning in a network filesystem's or FUSE's code). A few for a moment are normal under I/O load; the same tasks in several bundles, or kernel stacks in a filesystem or block driver, mean I/O that does not complete.",
		Evidence: "`processes/tasks.json`: the tasks in D state with their kernel stacks and wait channels.",
		Fix:      "Read the stacks: a filesystem or driver function names the culprit; check that device's or server's health (`dmesg`, `iostat -x 1`). A second bundle a minute later tells stuck from busy.",
	},
	RuleDoc{
		ID: "ceph-session-lost", Severity: "warning",
		Title:    "Ceph client lost its monitor session",
		Meaning:  "The kernel's ceph client logged \"libceph: monN ... session lost\": the node lost its connection to a ceph monitor. cephfs and rbd I/O stalls until it reconnects, and mounts can hang.",
		Evidence: "The kernel log (`journal/kernel.log`): the libceph lines.",
		Fix:      "Check the network path to the ceph monitors and the cluster's health (`ceph -s`); a hung cephfs mount is reported as hung-mount with its own fix.",
	},
	RuleDoc{
		ID: "nfs-server-not-responding", Severity: "warning",
		Title:    "NFS server not responding",
		Meaning:  "The kernel logged \"nfs: server ... not responding\": I/O to that server's mounts waits (hard mounts wait forever), and processes touching them hang in D state.",
		Evidence: "The kernel log: the nfs lines, per server.",
		Fix:      "Check the NFS server and the network to it; for volumes whose server may go away, consider the soft or timeo/retrans mount options.",
	},
	RuleDoc{
		ID: "kernel-hung-task", Severity: "warning",
		Title:    "The kernel reports hung tasks",
		Meaning:  "The kernel's hung task detector logged \"INFO: task ... blocked for more than 120 seconds\": a task waited in D state that long, with its stack. When a hung mount explains it, the hung-mount finding carries these lines instead.",
		Evidence: "The kernel log: the hung task reports and their stacks.",
		Fix:      "Read the stack for the filesystem or driver it waits in, and check that device or server; see tasks-blocked-in-kernel.",
	},
	RuleDoc{
		ID: "fuse-transport-not-connected", Severity: "critical",
		Title:    "A FUSE mount whose daemon is gone",
		Meaning:  "The mount is still in the mount table but nothing serves it: every stat, open or list fails at once with \"Transport endpoint is not connected\" (ENOTCONN). Pods using it see I/O errors and the kubelet cannot tear it down cleanly. A FUSE daemon such as ceph-fuse dies with the CSI node plugin that started it when the plugin is restarted or upgraded.",
		Evidence: "`mountprobe/probes.json` (ENOTCONN), the mount table, the holders.",
		Fix:      "Unmount it (`fusermount -uz MOUNT` or `umount -l MOUNT`), restart the FUSE daemon or the CSI node plugin that runs it, then restart the pods that use the volume.",
		Incident: "ceph-csi#792",
	},
)

// hungFS is one filesystem (device) whose probes hung.
type hungFS struct {
	dev    string
	fstype string
	source string
	class  string
	probes []layout.MountProbe
	// manifest hung_mounts entries for it (also when probes.json is
	// missing).
	items []bundle.HungItem
}

func (h *hungFS) mountpoints() []string {
	var out []string
	for _, p := range h.probes {
		if !contains(out, p.Mountpoint) {
			out = append(out, p.Mountpoint)
		}
	}
	for _, it := range h.items {
		if len(h.probes) == 0 && !contains(out, it.Target) {
			out = append(out, it.Target)
		}
	}
	return out
}

// namespaces are the mount namespaces that have one of the group's mounts.
func (h *hungFS) namespaces() map[uint64]bool {
	out := map[uint64]bool{}
	for _, p := range h.probes {
		for _, ns := range p.Namespaces {
			out[ns] = true
		}
	}
	return out
}

func ruleHungMounts(st *state) {
	own := st.ownPIDs()
	groups := map[string]*hungFS{}
	var order []string
	for _, p := range st.probes {
		if p.Result != layout.ProbeHung {
			continue
		}
		g := groups[p.Dev]
		if g == nil {
			g = &hungFS{dev: p.Dev, fstype: p.FSType, source: p.Source, class: p.Class}
			groups[p.Dev] = g
			order = append(order, p.Dev)
		}
		g.probes = append(g.probes, p)
	}
	// Hung mounts the manifest knows of (from any collector) that the
	// probe file does not list: the probe file may be missing or cut.
	if st.manifest != nil {
		for _, it := range st.manifest.HungMounts {
			found := false
			for _, g := range groups {
				for _, p := range g.probes {
					if p.ProbePath == it.Target || p.Mountpoint == it.Target {
						g.items = append(g.items, it)
						found = true
					}
				}
			}
			if !found && !st.probesSeen {
				key := "target:" + it.Target
				g := groups[key]
				if g == nil {
					g = &hungFS{dev: "", class: st.classOfPath(it.Target)}
					groups[key] = g
					order = append(order, key)
				}
				g.items = append(g.items, it)
			}
		}
	}
	kinds := map[string]int{}
	for _, k := range order {
		g := groups[k]
		kinds[strings.Join(fsMarkers(g.fstype, g.class), ",")]++
	}
	// Per kind, how many hung filesystems each mount namespace sees: a
	// task can only wait in a mount of its own namespace.
	nsKinds := map[string]map[uint64]int{}
	for _, k := range order {
		g := groups[k]
		key := strings.Join(fsMarkers(g.fstype, g.class), ",")
		if nsKinds[key] == nil {
			nsKinds[key] = map[uint64]int{}
		}
		for ns := range g.namespaces() {
			nsKinds[key][ns]++
		}
	}
	used := map[int]bool{}
	for _, k := range order {
		g := groups[k]
		key := strings.Join(fsMarkers(g.fstype, g.class), ",")
		st.hungFinding(g, own, used, kinds[key], nsKinds[key])
	}
	st.notProbed(own, used)
	st.deadFUSE()
	st.probeErrors()
	st.blockedTasks(own, used)
}

// hungContext says what the mount probe found, for findings that explain
// a wait by a mount: never "no mount hung" beside a hung mount, and never
// silence about mounts the probe did not reach.
func (st *state) hungContext() string {
	hung := st.probeCounts[layout.ProbeHung]
	if hung == 0 && st.manifest != nil {
		hung = len(st.manifest.HungMounts)
	}
	unfinished := st.probeCounts[layout.ProbeUnfinished]
	switch {
	case hung > 0 && unfinished > 0:
		return fmt.Sprintf("%s hung (see the hung-mount findings) and %s not probed before mountprobe's deadline (see mount-not-probed); these tasks are not tied to any of them by the evidence.",
			plural(hung, "mount", "mounts"), plural(unfinished, "was", "were"))
	case hung > 0:
		return fmt.Sprintf("%s hung (see the hung-mount findings), but these tasks are not tied to one by the evidence: they may wait on it below another path, or on something else (a device).",
			plural(hung, "mount", "mounts"))
	case unfinished > 0:
		return fmt.Sprintf("No probed mount hung, but %s not probed before mountprobe's deadline (see mount-not-probed): the wait may be on one of them.",
			plural(unfinished, "mount was", "mounts were"))
	case !st.probesSeen:
		return "The bundle has no mount probe results (mountprobe did not run), so a hung mount is not ruled out."
	}
	return "No probed mount hung, so the wait is on something the probe did not touch (a device, a path below a mountpoint)."
}

// kernelStatePhase is the phase of hang evidence that the storageclients
// collector took from the kernel's state: the tasks it names are the
// node's, blocked on the mount before nodesnap touched it.
const kernelStatePhase = "kernel state"

// ownPIDs are nodesnap's own workers that hung on purpose (probing a hung
// mount): the manifest's hang evidence names them; and every process of
// nodesnap's the mounts collector found.
func (st *state) ownPIDs() map[int]bool {
	own := st.selfPIDs()
	var walk func(h *layout.HangEvidence)
	walk = func(h *layout.HangEvidence) {
		// The kernel's own evidence of a mount already stuck names the
		// node's tasks blocked on it (no probe was sent): not nodesnap's.
		if h == nil || h.Phase == kernelStatePhase {
			return
		}
		own[h.PID] = true
		for _, t := range h.Tasks {
			own[t.TID] = true
		}
		for _, c := range h.Children {
			walk(c)
		}
	}
	if m := st.manifest; m != nil {
		for _, it := range m.HungMounts {
			walk(it.Evidence)
		}
		for _, c := range m.Collectors {
			walk(c.HangEvidence)
			for _, it := range c.HungItems {
				walk(it.Evidence)
			}
		}
	}
	// Workers of an earlier run still stuck probing a mount: the kernel's
	// evidence may name them among the tasks blocked on it.
	for _, p := range st.probes {
		if p.EarlierProbe != nil && p.EarlierProbe.PID > 0 {
			own[p.EarlierProbe.PID] = true
		}
	}
	return own
}

// fsMarkers are kernel function name prefixes per filesystem family, as
// they appear in /proc/<pid>/stack, wchan and hung-task call traces.
func fsMarkers(fstype, class string) []string {
	t := strings.ToLower(fstype)
	switch {
	case strings.Contains(t, "ceph") && strings.HasPrefix(t, "fuse"):
		return []string{"fuse_", "request_wait_answer"}
	case strings.Contains(t, "ceph"):
		return []string{"ceph_", "libceph"}
	case strings.HasPrefix(t, "nfs"):
		return []string{"nfs", "rpc_", "xprt"}
	case strings.Contains(t, "cifs") || strings.Contains(t, "smb"):
		return []string{"cifs", "smb2"}
	case strings.HasPrefix(t, "fuse") || class == "fuse":
		return []string{"fuse_", "request_wait_answer"}
	case class == "block":
		return []string{"io_schedule", "folio_wait", "wait_on_page", "jbd2", "blk_mq_"}
	}
	return nil
}

func taskOn(t *layout.Task, markers []string) bool {
	for _, m := range markers {
		if strings.Contains(t.Wchan, m) {
			return true
		}
		for _, f := range t.Stack {
			if strings.Contains(f, m) {
				return true
			}
		}
	}
	return false
}

// taskNames names tasks with their state and wait channel.
func taskNames(ts []layout.Task) []string {
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%s[%d] (state %s, wchan %s)", t.Comm, t.TID, t.State, orUnknown(t.Wchan)))
	}
	return out
}

// sameKind is how many hung groups share a filesystem family with g, and
// nsSame how many of them each mount namespace has.
func (st *state) hungFinding(g *hungFS, own, used map[int]bool, sameKind int, nsSame map[uint64]int) {
	mps := g.mountpoints()
	kind := g.fstype
	if kind == "" {
		kind = g.class
	}
	if kind == "" {
		kind = "filesystem"
	}
	subject := g.dev
	if subject == "" && len(mps) > 0 {
		subject = mps[0]
	}
	f := Finding{
		ID:       idHungMount,
		Severity: Critical,
		Title:    "Mount does not answer (hung)",
		Subject:  subject,
	}
	var timeout string
	if len(g.probes) > 0 {
		timeout = strconv.FormatFloat(g.probes[0].LatencyMS/1000, 'f', -1, 64) + "s"
	}
	// Tasks waiting on it: those whose command line names the mount or
	// that hold files on it for sure; the others sleeping in the same
	// filesystem's code too when no other mount of that kind hangs.
	markers := fsMarkers(g.fstype, g.class)
	holders := map[int]bool{}
	for _, p := range g.probes {
		for _, ns := range p.Namespaces {
			if h := st.mountHolders[nsMount{ns, p.MountID}]; h != nil {
				for _, fh := range h.Holders {
					holders[fh.PID] = true
				}
			}
		}
	}
	// The kernel's own attribution (storageclients: the task's system
	// call names the mount, or it is the only stuck connection).
	kernelTIDs := map[int]bool{}
	for _, p := range g.probes {
		if p.KernelStuck != nil {
			for _, tid := range p.KernelStuck.TIDs {
				kernelTIDs[tid] = true
			}
		}
	}
	gNS := g.namespaces()
	var waiting, possible, kubeletTasks []layout.Task
	for i := range st.tasks {
		t := &st.tasks[i]
		if own[t.TID] || own[t.PID] || fuseServer(t) || (!taskOn(t, markers) && !kernelTIDs[t.TID]) {
			continue
		}
		used[t.TID] = true
		direct := holders[t.PID] || kernelTIDs[t.TID]
		if p := st.procs[t.PID]; p != nil && p.Cmdline != "" {
			for _, mp := range mps {
				direct = direct || tokenIn(p.Cmdline, mp)
			}
		}
		// The only hung mount of its kind in the task's own namespace.
		direct = direct || (t.MountNS != 0 && gNS[t.MountNS] && nsSame[t.MountNS] == 1)
		if direct || sameKind <= 1 {
			waiting = append(waiting, *t)
		} else {
			possible = append(possible, *t)
		}
		if st.isKubeletTask(t) && (direct || sameKind <= 1) {
			kubeletTasks = append(kubeletTasks, *t)
		}
	}
	kubelet := kubeletThreadNames(kubeletTasks)
	// The kubelet's housekeeping stuck on a path under its own tree.
	underKubelet := false
	for _, mp := range mps {
		if strings.Contains(mp, "/kubelet/") {
			underKubelet = true
		}
	}
	var stuck []goroutine
	if underKubelet || len(kubelet) > 0 {
		stuck = st.stuckCleanup()
	}
	syncBad := st.syncloopBad()

	var kernel *layout.MountProbeKernel
	for _, p := range g.probes {
		if p.KernelStuck != nil {
			kernel = p.KernelStuck
			break
		}
	}
	if kernel != nil {
		f.Summary = fmt.Sprintf("%s mount %s (%s) is stuck in the kernel (not probed): %s", kind, listOf(mps, 2), g.source, kernel.Reason)
	} else {
		f.Summary = fmt.Sprintf("%s mount %s (%s) did not answer stat/statfs within %s", kind, listOf(mps, 2), g.source, orUnknown(timeout))
	}
	podText := st.podsOfPaths(mps)
	if podText != "" {
		f.Summary += "; " + podText
	}
	// Without the goroutine dump, the kubelet threads' kernel stacks
	// and the pod UID of the mount say what the kubelet does there.
	var kw kubeletWait
	if len(stuck) == 0 {
		kw = st.kubeletWaitIn(mps, kubeletTasks)
	}
	switch {
	case len(stuck) > 0:
		f.Summary += "; the kubelet is stuck on it"
		if len(syncBad) > 0 {
			f.Summary += " and its sync loop is unhealthy"
		}
	case kw.summary != "":
		f.Summary += kw.summary
		if len(syncBad) > 0 {
			f.Summary += "; the kubelet's sync loop is unhealthy"
		}
	case len(waiting) > 0:
		f.Summary += fmt.Sprintf("; %s waiting in the kernel", plural(len(waiting), "task is", "tasks are"))
	}
	fuse := strings.HasPrefix(g.fstype, "fuse") || g.class == "fuse"
	var b strings.Builder
	if kernel != nil {
		fmt.Fprintf(&b, "The kernel's own state shows %s (device %s, %s from %s) stuck: %s. nodesnap did not probe it, which would only have added one more stuck task: any process that touches the mount blocks in the kernel, ",
			listOf(mps, 6), orUnknown(g.dev), kind, orUnknown(g.source), kernel.Reason)
	} else {
		fmt.Fprintf(&b, "A stat/statfs of %s (device %s, %s from %s) in an isolated worker did not return within its deadline: any process that touches the mount blocks in the kernel, ",
			listOf(mps, 6), orUnknown(g.dev), kind, orUnknown(g.source))
	}
	b.WriteString("often unkillably, and stays there until the mount answers or is force-unmounted. ")
	switch {
	case fuse:
		b.WriteString("A FUSE mount hangs like this when its daemon is alive but stuck; processes waiting on it sleep in request_wait_answer (state S or D). ")
	case strings.Contains(kind, "ceph"):
		b.WriteString("A cephfs mount hangs like this when the ceph client lost its monitors or MDS (\"libceph: ... session lost\"), typically a leftover mount of a deleted pod after the cluster or the CSI plugin moved on. ")
	case strings.HasPrefix(kind, "nfs"):
		b.WriteString("An NFS hard mount hangs like this when its server does not answer (\"nfs: server ... not responding\"). ")
	}
	if podText != "" {
		b.WriteString("It is " + podText + ". ")
	}
	if len(waiting) > 0 {
		fmt.Fprintf(&b, "Tasks waiting on it: %s. ", listOf(taskNames(waiting), 6))
	}
	if len(possible) > 0 {
		fmt.Fprintf(&b, "%d other mounts of this kind hang too; tasks waiting in %s code on one of them: %s. ", sameKind-1, kind, listOf(taskNames(possible), 6))
	}
	if len(stuck) > 0 {
		fmt.Fprintf(&b, "The kubelet's goroutine dump shows pod cleanup stuck: %s. Its housekeeping stat()s the volume paths of dead pods (cleanupOrphanedPodDirs), and one on this mount never returns, so the sync loop stops and new pods never start (incident 003). ",
			describeGoroutines(stuck))
	}
	if kw.explanation != "" {
		b.WriteString(kw.explanation + " ")
	}
	if kw.housekeeping {
		f.Impact = ImpactSyncLoop
	}
	if len(syncBad) > 0 {
		b.WriteString("The kubelet's healthz says: " + syncBad[0].Text + ". ")
	}
	f.Explanation = strings.TrimSpace(b.String())
	st.storageHungContext(&f, g, mps)

	// Evidence.
	for _, p := range g.probes {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.ProbesPath, What: "the probe that did not answer", Record: p})
	}
	if len(g.items) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: bundle.ManifestName, What: "hung_mounts: where the probe's worker was blocked", Record: g.items})
	}
	var ms []mountRec
	for _, p := range g.probes {
		for _, ns := range p.Namespaces {
			ms = append(ms, mountRec{NS: ns, ID: p.MountID})
		}
	}
	f.Evidence = append(f.Evidence, st.mountinfoEvidence(ms, "the mount in the mount table")...)
	for _, m := range ms {
		if h := st.mountHolders[nsMount{m.NS, m.ID}]; h != nil && len(h.Holders) > 0 {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.HoldersPath, What: "processes with files, a working directory or a root on the mount", Record: h})
		}
	}
	if len(waiting) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.TasksPath, What: "tasks waiting on the mount (kernel stack or wait channel in its filesystem's code)", Record: waiting})
	}
	if len(possible) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.TasksPath, What: "tasks waiting in the same filesystem's code, on this or another hung mount of its kind", Record: possible})
	}
	if len(stuck) > 0 {
		f.Evidence = append(f.Evidence, goroutineEvidence(stuck, "the kubelet's goroutines stuck in pod cleanup, and for how long")...)
		st.kubeletExplained = true
	}
	if len(syncBad) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.KubeletHealthzPath, What: "the kubelet's failing health checks", Lines: syncBad})
		st.kubeletExplained = true
	}
	// Kernel and kubelet log lines about this filesystem.
	tokens := append([]string{}, mps...)
	for _, mp := range mps {
		tokens = append(tokens, pathTokens(mp)...)
	}
	st.claimLogs(&f, tokens, sigTransportNotConn, sigTeardownBusy, sigOrphanedPod)
	st.claimTraceLogs(&f, markers)
	if strings.Contains(kind, "ceph") && !fuse {
		st.claimAll(&f, sigCephSessionLost)
	}
	if strings.HasPrefix(kind, "nfs") {
		host, _, _ := strings.Cut(g.source, ":")
		st.claimLogs(&f, []string{host}, sigNFSNotResponding)
	}
	if len(stuck) > 0 || len(syncBad) > 0 {
		st.claimAll(&f, sigSyncLoop)
		st.claimAll(&f, sigPLEG)
	}

	// Remediation.
	for _, mp := range mps {
		q := shellQuote(mp)
		switch {
		case fuse:
			f.Remediation = append(f.Remediation, fuseFixes(g.probes, mp)...)
		default:
			f.Remediation = append(f.Remediation, "Force-unmount it: umount -f "+q+"   and if it is still busy: umount -l "+q)
		}
	}
	switch {
	case fuse:
		f.Remediation = append(f.Remediation, "Restart the FUSE daemon (or the CSI node plugin that runs it) and the pods that use the volume, so they mount it afresh.")
	case strings.Contains(kind, "ceph"):
		f.Remediation = append(f.Remediation, "Check that the node reaches the ceph monitors and MDS; if the mount belonged to a deleted pod nothing needs it: leave it unmounted.")
	case strings.HasPrefix(kind, "nfs"):
		f.Remediation = append(f.Remediation, "Check the NFS server "+orUnknown(g.source)+"; consider soft or timeo/retrans mount options for volumes whose server may go away.")
	}
	if len(stuck) > 0 || len(kubelet) > 0 || len(syncBad) > 0 {
		f.Remediation = append(f.Remediation, "The kubelet's sync loop resumes once the stat returns (it fails fast on an unmounted path); if it does not within a minute, restart the kubelet (systemctl restart kubelet).")
	}
	st.add(f)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
