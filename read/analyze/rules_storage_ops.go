package analyze

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/read/events"
)

// Every error about a storage object is a finding: the failures of one
// operation on one object (events grouped in opevents.go) that no other
// finding names become a storage-operation-failing finding with the
// object, the operation, the first and last time, the count and the
// newest error verbatim. The signatures' rules only refine such a group
// into a named cause. Severity comes from state: a later success of the
// operation on the object makes it info; a permanent error, an operation
// still failing at the end of its log, or the pod it blocks not running
// makes it a warning.

const (
	idStorageOpFailing = "storage-operation-failing"
	// sigStorageOp labels the lines of a group set aside by scope.
	sigStorageOp = "storage-operation"
)

var _ = document(RuleDoc{
	ID: idStorageOpFailing, Severity: "info or warning",
	Title: "Storage operation failing",
	Meaning: "A log (a storage daemon's such as iscsid or multipathd, the kernel's, or a writer of no other family) reports that an operation on a storage object failed — " +
		"mount, stage, publish, attach, teardown, unstage, unpublish, detach, format, resize, a container's rootfs unmount, a sandbox's removal, I/O, a check of a mount path that timed out, a volume directory's creation — and no more specific finding names that object. " +
		"The finding names the object, the operation, when it first and last failed, how often, and the newest error verbatim. " +
		"It is a warning when the error is permanent by its nature (EIO, ENODEV, NotFound, PermissionDenied, InvalidArgument, a refused login, mount's exit status 32), " +
		"when the operation is still failing at the end of the evidence with no later success, or when the pod it blocks is not running; info when a later success of the same operation on the object follows, " +
		"when the failures stopped well before the log ends, or when the pod runs. The summary says which. " +
		"A kernel driver's controller or host is read as a state: a record naming it (an NVMe controller `nvmeN`, a block device, " +
		"a SCSI host `scsiN`) says a failure (a command timed out, error recovery or a reset started, a reconnect scheduled or failed, " +
		"commands waited for, a device offlined) or a recovery (reconnected, a reset that succeeded, a path reinstated), and the newest " +
		"decides: an NVMe-oF controller that timed out and reconnected is info, one still recovering when the log ends a warning.",
	Evidence: "The log lines of the failures (`journal/`, `csi/podlogs/`, `csi/hostlogs/`), with the pods' state from `kubelet/pods.json`, the runtime and the API.",
	Fix:      "Read the newest error: it is the driver's, the mount's or the kernel's own words for the cause; fix the object it names (its device, server, credentials or mount) and let the operation retry.",
})

func init() {
	sigWhat[sigStorageOp] = "a storage operation's failures"
}

// scopeOps sets aside the groups that are not evidence of now (as
// scopeLogs does for signatures' lines) and merges the rest by operation
// and object.
func (st *state) scopeOps(k *kubeletProc, names []string, winStart time.Time) {
	o := st.logs.ops
	merged := map[string]*opGroup{}
	for _, ik := range o.order {
		g := o.groups[ik]
		if _, why := outOfScope(g.hits, k, names, winStart); why != "" {
			// Not evidence of now. Its lines are set aside without a
			// word: those a signature knows are listed as history by
			// earlier-log-lines already.
			continue
		}
		mk := string(g.op) + "\x00" + g.hits.Key
		m := merged[mk]
		if m == nil {
			merged[mk] = g
			st.opGroups = append(st.opGroups, g)
			continue
		}
		m.hits.merge(g.hits)
		m.keys.Merge(g.keys)
		if g.lastSeq > m.lastSeq {
			m.lastSeq, m.lastPath, m.newest = g.lastSeq, g.lastPath, g.newest
		}
		if m.permanent == "" {
			m.permanent = g.permanent
		}
		m.kubelet = m.kubelet || g.kubelet
		for _, s := range g.sources {
			if !contains(m.sources, s) && len(m.sources) < 4 {
				m.sources = append(m.sources, s)
			}
		}
	}
}

// opState is a group's severity from state, and the reason in words.
func (st *state) opState(g *opGroup) (Severity, string) {
	o := st.logs.ops
	if o.succeededAfter(g) {
		return Info, "a later " + string(g.op) + " of it succeeded"
	}
	if g.permanent != "" {
		return Warning, "the error is permanent by its nature (" + g.permanent + "): retrying does not mend it"
	}
	if g.op == events.OpConnect {
		// A gRPC channel to a plugin's socket reconnects by itself (a
		// plugin restarting refuses it for a moment): the failure that
		// matters is the operation that waited on it, a finding of its
		// own when it failed.
		return Info, "a connection to the plugin's socket failed; the client reconnects by itself, and an operation that waits on it fails on its own"
	}
	if g.op == events.OpCheck && g.hits.Count < 2 {
		// One check that timed out, not repeated: a slow answer, not yet
		// a mount that hangs.
		return Info, "one check of the mount path timed out and none repeated it: a slow answer, not yet a hung mount"
	}
	if g.op == events.OpSandboxRemove && g.newest.Errno != "EBUSY" {
		// A sandbox's network teardown (a CNI delete) failing holds no
		// volume: the runtime retries it with the pod's removal. Only a
		// namespace kept busy (a mount holding it) blocks storage.
		return Info, "a sandbox's network teardown failing holds no volume or mount: the runtime retries it when it removes the pod"
	}
	if pod, phase, ok := st.podPhase(g.keys); ok {
		if phase != "Running" && phase != "Succeeded" {
			return Warning, "pod " + pod + " is still not running (" + phaseText(phase) + ")"
		}
		if mountOp(g.op) {
			return Info, "pod " + pod + " is running: its retries resolved"
		}
	}
	end := o.ends[g.lastPath]
	last := g.hits.Newest
	if last.IsZero() || end.IsZero() || end.Sub(last) < stillFailingFor {
		if why, ok := firstTryAtStart(g); ok {
			return Info, why
		}
		if g.op == events.OpCheck {
			return Warning, "its checks of the mount path time out again and again with no later success: a hung mount suspected (a stat that hangs in the kernel)"
		}
		return Warning, "still failing at the end of the evidence, with no later success"
	}
	return Info, fmt.Sprintf("no failure after %s, %s before its log ends, and no success logged: it stopped failing", last.UTC().Format(time.RFC3339), end.Sub(last).Round(time.Second))
}

func phaseText(p string) string {
	if p == "" {
		return "no phase"
	}
	return p
}

// mountOp tells the operations that set a volume up for a pod.
func mountOp(op events.Op) bool {
	switch op {
	case events.OpMount, events.OpStage, events.OpPublish, events.OpAttach, events.OpMap:
		return true
	}
	return false
}

// podPhase finds the pod a group names in the bundle's own view: the
// kubelet's pods, then the API's, then the runtime's (which has no
// phase: a sandbox is taken as running).
func (st *state) podPhase(k events.Keys) (name, phase string, ok bool) {
	find := func(m map[string]podRec) (podRec, bool) {
		if k.PodUID != "" {
			if p, ok := m[k.PodUID]; ok {
				return p, true
			}
		}
		if k.Pod != "" {
			for _, p := range m {
				if p.Namespace+"/"+p.Name == k.Pod || (!strings.Contains(k.Pod, "/") && p.Name == k.Pod) {
					return p, true
				}
			}
		}
		return podRec{}, false
	}
	for _, m := range []map[string]podRec{st.pods, st.apiPods} {
		if p, ok := find(m); ok {
			return p.Namespace + "/" + p.Name, p.Phase, true
		}
	}
	return "", "", false
}

// mentioned says whether a finding already names one of the group's
// objects.
func mentioned(fs []Finding, keys []string) bool {
	for _, f := range fs {
		if f.ID == idEarlierLogs || f.ID == idInternalError {
			continue
		}
		text := f.Subject + "\n" + f.Title + "\n" + f.Summary
		for _, k := range keys {
			if strings.Contains(text, k) || strings.HasPrefix(k, "/dev/") && strings.Contains(text, strings.TrimPrefix(k, "/dev/")) {
				return true
			}
		}
	}
	return false
}

// covers says whether a finding already tells what a group says: it
// names one of the group's objects, and it is not only about the other
// side of the object's life — a finding drawn from an object's unmount
// failing does not explain its mount failing (the mount's error, often the
// cause, would be lost), nor a setup failure its teardown's.
func (st *state) covers(g *opGroup, keys []string, byLine map[lineRef]*opGroup) bool {
	for _, f := range st.findings {
		if !mentioned([]Finding{f}, keys) {
			continue
		}
		otherSide := false
		for _, e := range f.Evidence {
			for _, l := range e.Lines {
				h := byLine[lineRef{e.Path, l.N}]
				if h == nil {
					continue
				}
				if a, b := opSide(h.op), opSide(g.op); a == 0 || b == 0 || a == b {
					return true
				}
				otherSide = true
			}
		}
		if !otherSide {
			return true
		}
	}
	return false
}

// opSide is +1 for the operations that bring a volume up on a node, -1 for
// those that take it down, 0 for the rest (I/O, a bare CSI call, a plugin's
// connection).
func opSide(op events.Op) int {
	switch op {
	case events.OpMount, events.OpStage, events.OpPublish, events.OpAttach, events.OpMap, events.OpFormat, events.OpResize:
		return 1
	case events.OpUnmount, events.OpUnstage, events.OpUnpublish, events.OpTeardown, events.OpUnmap, events.OpDetach, events.OpRootfsUnmount, events.OpSandboxRemove:
		return -1
	}
	return 0
}

// groupOfLine maps each log line an event group holds to its group.
func (st *state) groupOfLine() map[lineRef]*opGroup {
	byLine := map[lineRef]*opGroup{}
	for _, g := range st.opGroups {
		for _, h := range g.hits.hits() {
			byLine[lineRef{h.Path, h.Line.N}] = g
		}
	}
	return byLine
}

// lineRef is a line of a bundle file.
type lineRef struct {
	path string
	n    int
}

// usedLines are the log lines a finding shows or a signature's finding
// claimed, and the lines set aside as history: a group with one of them
// is a signature's, not a failure of its own.
func (st *state) usedLines() map[lineRef]bool {
	used := map[lineRef]bool{}
	for _, f := range st.findings {
		for _, e := range f.Evidence {
			for _, l := range e.Lines {
				used[lineRef{e.Path, l.N}] = true
			}
		}
	}
	mark := func(kh *keyHits) {
		for _, h := range kh.hits() {
			used[lineRef{h.Path, h.Line.N}] = true
		}
	}
	for _, s := range st.logs.sigs {
		for _, k := range s.order {
			if kh := s.keys[k]; kh.claimed {
				mark(kh)
			}
		}
	}
	for _, o := range st.logs.outside {
		mark(o.hits)
	}
	return used
}

// ruleStorageOps makes a finding of every failing group no finding
// names.
func ruleStorageOps(st *state, groups []*opGroup) {
	st.nameObjects()
	n := 0
	used := st.usedLines()
	byLine := st.groupOfLine()
	for _, g := range groups {
		keys := g.keys.All()
		if st.covers(g, keys, byLine) || slices.ContainsFunc(g.hits.hits(), func(h logHit) bool { return used[lineRef{h.Path, h.Line.N}] }) {
			continue
		}
		if n == maxLogFindingsPerID {
			st.notListed(idStorageOpFailing, len(groups)-n, st.logs.ops.overflow)
			return
		}
		n++
		sev, why := st.opState(g)
		kh := g.hits
		subj := g.hits.Key
		var also []string
		for _, k := range keys {
			if k != subj && len(also) < 4 {
				also = append(also, k)
			}
		}
		s := fmt.Sprintf("%s of %s %s fails (%s", g.op, g.kind, subj, plural(kh.Count, "time", "times"))
		if !kh.Oldest.IsZero() {
			s += ", " + kh.Oldest.UTC().Format(time.RFC3339)
			if kh.Newest.After(kh.Oldest) {
				s += " to " + kh.Newest.UTC().Format(time.RFC3339)
			}
		}
		s += ")"
		if len(also) > 0 {
			s += "; it names " + strings.Join(also, ", ")
		}
		s += ": " + why
		expl := "The " + listOf(g.sources, 4) + " log reports the " + string(g.op) + " failing; no finding above names this object, so it is shown as the logs say it. Newest error: " +
			fmt.Sprintf("%q", g.newest.Message) + "."
		if d := errDetail(g.newest); d != "" {
			expl += " " + d
		}
		id, title := opFinding(g)
		st.add(Finding{ID: id, Severity: sev, Title: title, Subject: subj, Summary: s, Explanation: expl,
			Evidence: kh.evidence(sigWhat[sigStorageOp]),
			Remediation: []string{"Read the newest error in the lines: it names the cause in the driver's, the mount's or the kernel's own words; fix what it names (" +
				string(g.kind) + " " + shellQuote(subj) + ") and let the operation retry."}})
	}
}

// nameObjects adds to each finding drawn from log lines the objects the
// events of those lines name and its summary does not: a signature keyed
// by one object (a path, a request's stage) names the volume, pod, device
// or target the record carries too.
func (st *state) nameObjects() {
	byLine := st.groupOfLine()
	if len(byLine) == 0 {
		return
	}
	var placeless []int
	defer func() { st.foldPlaceless(placeless) }()
	for i := range st.findings {
		f := &st.findings[i]
		var extra []string
		runtimeOnly, seen := true, false
		// kubeletOwn: every line is the kubelet's own operation with no
		// CSI call in it (an in-tree plugin's mount, mount(8)'s output):
		// a driver's wording that matched it does not make it a CSI
		// driver's failure.
		kubeletOwn, own := true, (*opGroup)(nil)
		// runtimeOwn: every line is in a container runtime's own
		// journal: the runtime's operation, not a CSI driver's.
		runtimeOwn := true
		for _, e := range f.Evidence {
			for _, l := range e.Lines {
				g := byLine[lineRef{e.Path, l.N}]
				if g == nil {
					continue
				}
				seen = true
				runtimeOnly = runtimeOnly && !csiLog(e.Path) && (g.op == events.OpRootfsUnmount || g.op == events.OpSandboxRemove)
				kubeletOwn = kubeletOwn && !csiLog(e.Path) && g.kubelet && g.newest.Code == "" && g.op != events.OpCSICall && !namesCSI(l.Text)
				runtimeOwn = runtimeOwn && runtimeJournal(e.Path) && !namesCSI(l.Text)
				own = g
				for _, k := range g.keys.All() {
					if len(extra) < 4 && !contains(extra, k) && !strings.Contains(f.Subject+"\n"+f.Summary, k) {
						extra = append(extra, k)
					}
				}
			}
		}
		if seen && runtimeOnly && f.ID == idCSINodeOpFailed {
			// The lines' writer and operation say what a wording
			// alone could not: a runtime removing a container.
			f.ID, f.Title = idContainerRemove, "Runtime fails to remove a container"
		}
		if seen && runtimeOwn && f.ID == idCSINodeOpFailed {
			// A CSI driver's wording ("failed to unmount target")
			// matched the runtime's own line: the finding is its
			// operation's.
			f.ID, f.Title = opFinding(own)
		}
		if seen && kubeletOwn && f.ID == idCSINodeOpFailed {
			if id, title := opFinding(own); id != idCSINodeOpFailed && id != idStorageOpFailing {
				f.ID, f.Title = id, title
				f.Summary = fmt.Sprintf("the kubelet's %s of %s fails (%s; its own volume plugin, no CSI call)", own.op, f.Subject, plural(own.hits.Count, "time", "times"))
			}
		}
		if len(extra) == 0 {
			continue
		}
		if f.Subject == notNamed {
			// The lines' events name what their wording did not.
			f.Subject = extra[0]
			if v := podLocalVolume(own); v != "" && v == extra[0] {
				placeless = append(placeless, i)
			}
			if strings.Contains(f.Summary, notNamed) {
				f.Summary = strings.Replace(f.Summary, notNamed, extra[0], 1)
				if extra = extra[1:]; len(extra) == 0 {
					continue
				}
			}
		}
		f.Summary += " (its lines name " + strings.Join(extra, ", ") + ")"
	}
}

// namesCSI tells a line about a CSI volume or call: its plugin's paths,
// a CSI method or the word.
func namesCSI(text string) bool {
	return strings.Contains(text, "kubernetes.io/csi") || strings.Contains(text, "kubernetes.io~csi") || strings.Contains(text, "csi.v1") ||
		strings.Contains(text, "CSI") || strings.Contains(text, "Node") && (strings.Contains(text, "tageVolume") || strings.Contains(text, "ublishVolume") || strings.Contains(text, "xpandVolume"))
}

// opFinding is the ID and title of a group's finding: the family of its
// operation and writer (a kubelet's mount, a CSI driver's node call, a
// runtime's removal), storage-operation-failing for the rest (I/O, a
// storage daemon's operations).
func opFinding(g *opGroup) (id, title string) {
	driver := csiLog(g.lastPath)
	switch {
	case g.op == events.OpRootfsUnmount || g.op == events.OpSandboxRemove:
		return idContainerRemove, "Runtime fails to remove a container"
	case g.op == events.OpRootfsMount:
		return idContainerCreate, "Runtime cannot mount a container's rootfs"
	case g.op == events.OpIO:
		return idStorageOpFailing, "Storage I/O failing"
	case g.op == events.OpConnect:
		return idCSINodeOpFailed, "CSI driver's node operation failing"
	case driver:
		return idCSINodeOpFailed, "CSI driver's node operation failing"
	case !g.kubelet:
		return idStorageOpFailing, "Storage operation failing"
	case mountOp(g.op) || g.op == events.OpFormat || g.op == events.OpResize:
		return idMountFailed, "Volume mount failing"
	case g.op == events.OpTeardown && g.newest.Errno == "EBUSY":
		return idTeardownBusy, "Volume teardown fails with \"device or resource busy\""
	case g.op == events.OpTeardown || g.op == events.OpUnpublish:
		return idTeardownFailed, "Volume teardown failing"
	case g.op == events.OpUnstage || g.op == events.OpUnmap:
		return idUnmountDevice, "Kubelet cannot unmount or unmap a volume's device"
	case g.op == events.OpUnmount:
		return idUnmountFailed, "Unmount failing"
	}
	return idStorageOpFailing, "Storage operation failing"
}

// errDetail says what the error's structure tells: its gRPC code, errno
// and exit status.
func errDetail(e events.Error) string {
	var parts []string
	if e.Code != "" {
		parts = append(parts, "gRPC code "+e.Code)
	}
	if e.Errno != "" {
		parts = append(parts, "errno "+e.Errno)
	}
	if e.Exit != 0 {
		parts = append(parts, fmt.Sprintf("exit status %d", e.Exit))
	}
	if e.LoginRefused {
		parts = append(parts, "login refused")
	}
	if len(parts) == 0 {
		return ""
	}
	return "It carries " + strings.Join(parts, ", ") + "."
}

// stateSeverity is the severity of a signature's lines about setting a
// volume up, from the state of the operations of groups (the events
// analyzer's) they name (opState), and the reason; without a group, from
// the lines' own end.
func (st *state) stateSeverity(groups []*opGroup, k *keyHits) (Severity, string) {
	cands := []string{k.Key, k.Objects.Volume, k.Objects.PodUID, k.Objects.Pod, k.Objects.Device, k.Objects.Path}
	best, why, found := Info, "", false
	for _, g := range groups {
		if !mountOp(g.op) || !anyKey(g.keys.All(), cands) {
			continue
		}
		sev, w := st.opState(g)
		if !found || sev > best {
			best, why = sev, w
		}
		found = true
	}
	if found {
		return best, why
	}
	if len(k.First) == 0 {
		return Warning, "still failing at the end of the evidence"
	}
	last := k.hits()[len(k.hits())-1]
	end := st.logs.ops.ends[last.Path]
	if k.Newest.IsZero() || end.IsZero() || end.Sub(k.Newest) < stillFailingFor {
		return Warning, "still failing at the end of the evidence, with no later success"
	}
	return Info, "no failure in the last " + end.Sub(k.Newest).Round(time.Second).String() + " of its log: it stopped failing"
}

func anyKey(keys, cands []string) bool {
	for _, c := range cands {
		if c != "" && contains(keys, c) {
			return true
		}
	}
	return false
}
