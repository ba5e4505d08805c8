package analyze

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// The API's view joined to the node's: every finding names the pods it
// hurts and how, and every pod in trouble (Terminating past its grace
// period, Pending or ContainerCreating for long, a volume that will not
// detach) is explained by a chain (pod symptom ← node finding ← evidence)
// or said to be unexplained, with what the bundle lacks to explain it.
// Findings are ranked by what they hurt and findings of one cause grouped.

// IDs of this family.
const (
	idAttachedNotMounted = "volume-attached-not-on-node"
	idMountedNotAttached = "volume-on-node-not-attached"
	idDetachFailing      = "volume-detach-failing"
	idPodsUnexplained    = "pods-in-trouble-unexplained"
)

var _ = document(
	RuleDoc{
		ID: idAttachedNotMounted, Severity: "warning",
		Title:    "The API says a volume is attached here, the node has no trace of it",
		Meaning:  "A VolumeAttachment for this node says attached, but no pod of this node uses the volume and no mount of any namespace on the node shows it: an attachment nobody detached (the pod moved on, the detach never came), which keeps a ReadWriteOnce volume from attaching elsewhere.",
		Evidence: "`cluster/objects.json` (the VolumeAttachment, the node's volumesAttached and volumesInUse), the mount tables.",
		Fix:      "Check the attach/detach controller's and the CSI driver's controller logs for the volume; once sure nothing uses it, delete the VolumeAttachment so the controller detaches it.",
	},
	RuleDoc{
		ID: idMountedNotAttached, Severity: "warning",
		Title:    "The node has a volume mounted that the API does not attach here",
		Meaning:  "A mount on the node belongs to a CSI volume whose driver requires attaching, but no VolumeAttachment for this node says attached: the API believes the volume detached (or attached elsewhere) while the node still writes to it. For a ReadWriteOnce volume this risks two writers.",
		Evidence: "The mount tables, `cluster/objects.json` (the volume, its driver, the node's VolumeAttachments).",
		Fix:      "Find what still uses the mount (`nodesnap analyze`'s holders), stop it and unmount; do not attach the volume elsewhere until then.",
	},
	RuleDoc{
		ID: idDetachFailing, Severity: "warning",
		Title:    "A volume's detach from this node fails",
		Meaning:  "The VolumeAttachment of this node carries a detach error, or is being deleted and still attached: the volume stays on this node and pods that need it elsewhere wait in ContainerCreating (Multi-Attach error).",
		Evidence: "`cluster/objects.json`: the VolumeAttachment's status.detachError and deletionTimestamp.",
		Fix:      "Read the detach error; it is usually the node still using the device (see the findings about the volume's device and mounts): release it, and the controller's next try detaches.",
	},
	RuleDoc{
		ID: idPodsUnexplained, Severity: "warning",
		Title:    "Pods in trouble that no node finding explains",
		Meaning:  "The API shows pods of this node stuck (Terminating past their grace period, Pending or ContainerCreating for long), and nothing the bundle shows of the node ties to them. The finding says for each what was checked and what is missing to explain it.",
		Evidence: "`cluster/objects.json` (the pods, their conditions, container states and events), the manifest (which collectors were partial).",
		Fix:      "Collect again with what is missing (the kubelet's credentials for its goroutine dump, a longer timeout for the mount probe); read the pods' events (`kubectl describe pod`).",
	},
)

// Thresholds of a pod in trouble.
const (
	// terminatingSlack: a pod past its deletionTimestamp (deletion time
	// plus grace period) by more than this is stuck.
	terminatingSlack = 30 * time.Second
	// pendingLong: a pod not started this long after it was scheduled.
	pendingLong = 2 * time.Minute
)

// podView is one pod of the cluster view and what the join found.
type podView struct {
	pod     *layout.KubePod
	symptom string // "" when the pod is not in trouble
	kind    string // terminating, pending, container-creating, waiting
	since   time.Time
	// tokens that name the pod in the node's evidence: its UID, its
	// volumes' PV names, CSI handles and their staging hashes.
	pvs []string
}

// Pod kinds of trouble.
const (
	troubleTerminating = "terminating"
	troublePending     = "pending"
	troubleCreating    = "container-creating"
	troubleWaiting     = "waiting"
)

// now is when the API's view was taken.
func (st *state) clusterNow() time.Time {
	if st.cluster != nil && !st.cluster.CollectedAt.IsZero() {
		return st.cluster.CollectedAt
	}
	if st.manifest != nil {
		return st.manifest.StartedAt
	}
	return time.Time{}
}

// trouble says what is wrong with a pod as the API shows it.
func trouble(p *layout.KubePod, now time.Time) (symptom, kind string, since time.Time) {
	if dt := p.Metadata.DeletionTimestamp; dt != nil {
		if now.Sub(*dt) > terminatingSlack {
			grace := "its grace period"
			if g := p.Metadata.DeletionGracePeriodSeconds; g != nil {
				grace = fmt.Sprintf("its %ds grace period", *g)
			}
			return fmt.Sprintf("stuck Terminating for %s past %s", human(now.Sub(*dt)), grace), troubleTerminating, *dt
		}
		return "", "", time.Time{}
	}
	if p.Status.Phase != "Pending" && p.Status.Phase != "" {
		return "", "", time.Time{}
	}
	start := time.Time{}
	for _, c := range p.Status.Conditions {
		if c.Type == "PodScheduled" && c.Status == "True" && c.LastTransitionTime != nil {
			start = *c.LastTransitionTime
		}
	}
	if start.IsZero() && p.Metadata.CreationTimestamp != nil {
		start = *p.Metadata.CreationTimestamp
	}
	if start.IsZero() || now.Sub(start) < pendingLong {
		return "", "", time.Time{}
	}
	for _, cs := range append(append([]layout.KubeContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			msg := fmt.Sprintf("Pending for %s: container %s waiting (%s)", human(now.Sub(start)), cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + shorten(w.Message, 200)
			}
			return msg, troubleWaiting, start
		}
	}
	if len(p.Status.ContainerStatuses) > 0 || len(p.Status.InitContainerStatuses) > 0 {
		return fmt.Sprintf("ContainerCreating for %s on this node", human(now.Sub(start))), troubleCreating, start
	}
	return fmt.Sprintf("Pending for %s on this node: the kubelet never reported a container of it", human(now.Sub(start))), troublePending, start
}

// human is a duration for a person: 2h10m, 40m, 35s.
func human(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

// pvsOf returns the PVs a pod uses (through its claims), by name.
func (st *state) pvsOf(p *layout.KubePod) []*layout.KubePV {
	c := st.cluster
	var out []*layout.KubePV
	for _, v := range p.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = p.Metadata.Name + "-" + v.Name
		default:
			continue
		}
		for i := range c.PVCs {
			pvc := &c.PVCs[i]
			if pvc.Metadata.Namespace != p.Metadata.Namespace || pvc.Metadata.Name != claim || pvc.Spec.VolumeName == "" {
				continue
			}
			for j := range c.PVs {
				if c.PVs[j].Metadata.Name == pvc.Spec.VolumeName {
					out = append(out, &c.PVs[j])
				}
			}
		}
	}
	return out
}

// pvTokens are the strings that name a PV in the node's paths: its name,
// its CSI volume handle and the staging directory's hash of the handle
// (plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount), and
// a UUID the handle embeds: drivers compose handles from the backend
// object's UUID, which names the object on the node (ceph-csi's handle
// 0001-0009-<cluster>-<pool id>-<uuid> is the rbd image csi-vol-<uuid>
// and the cephfs subvolume csi-vol-<uuid>), while the PV's name is the
// claim's UID and appears nowhere there.
func pvTokens(pv *layout.KubePV) []string {
	t := []string{pv.Metadata.Name}
	if c := pv.Spec.CSI; c != nil && c.VolumeHandle != "" {
		sum := sha256.Sum256([]byte(c.VolumeHandle))
		t = append(t, c.VolumeHandle, hex.EncodeToString(sum[:]))
		for _, u := range reUUID.FindAllString(c.VolumeHandle, 4) {
			if u != c.VolumeHandle {
				t = append(t, u)
			}
		}
	}
	if r := pv.Spec.RBD; r != nil && r.Image != "" {
		t = append(t, r.Image)
	}
	return usefulTokens(t)
}

var reUUID = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// maxBlob bounds the text of one finding searched for pods.
const maxBlob = 1 << 20

// findingText is everything a finding says, for finding the pods and
// volumes it names.
func findingText(f *Finding) string {
	var b strings.Builder
	add := func(s string) {
		if b.Len() < maxBlob {
			b.WriteString(s)
			b.WriteByte('\n')
		}
	}
	add(f.Subject)
	add(f.Summary)
	add(f.Explanation)
	for _, e := range f.Evidence {
		add(e.What)
		for _, l := range e.Lines {
			add(l.Text)
		}
		if e.Record != nil && b.Len() < maxBlob {
			if j, err := compactJSON(e.Record); err == nil {
				add(string(j))
			}
		}
	}
	return b.String()
}

// syncLoopFinding reports whether a finding stops the kubelet's sync loop
// (so every pod it should start or stop waits).
func syncLoopFinding(f *Finding) bool {
	switch f.ID {
	case idSyncloop, idPLEG:
		// Not when the finding says its lines are history (info).
		return f.Severity >= Warning
	case idHealthz:
		return strings.Contains(f.Summary+f.Explanation, "syncloop")
	case idHungMount, idNotProbed, idRuntimeLock:
		// The rule says so (a kubelet thread's kernel stack in the volume
		// directory of a pod no pod list knows), or the goroutine dump does.
		return f.Impact == ImpactSyncLoop || strings.Contains(f.Summary, "the kubelet is stuck on it") || strings.Contains(f.Explanation, "cleanupOrphanedPodDirs")
	}
	return false
}

// ruleVolumeAttachments compares the API's attachments of this node with
// the node's mounts.
func ruleVolumeAttachments(st *state) {
	c := st.cluster
	if c == nil {
		return
	}
	used := map[string][]string{} // PV name → pods of this node using it
	for i := range c.Pods {
		p := &c.Pods[i]
		for _, pv := range st.pvsOf(p) {
			used[pv.Metadata.Name] = append(used[pv.Metadata.Name], p.Metadata.Namespace+"/"+p.Metadata.Name)
		}
	}
	pvByName := map[string]*layout.KubePV{}
	for i := range c.PVs {
		pvByName[c.PVs[i].Metadata.Name] = &c.PVs[i]
	}
	onNode := func(tokens []string) []mountRec {
		var out []mountRec
		for _, m := range st.mounts {
			for _, t := range tokens {
				if strings.Contains(m.MountPoint, t) || strings.Contains(m.Root, t) {
					out = append(out, m)
					break
				}
			}
		}
		return out
	}
	attachedPV := map[string]bool{}
	for i := range c.VolumeAttachments {
		va := &c.VolumeAttachments[i]
		pvName := ""
		if va.Spec.Source.PersistentVolumeName != nil {
			pvName = *va.Spec.Source.PersistentVolumeName
		}
		if va.Status.Attached {
			attachedPV[pvName] = true
		}
		ev := Evidence{Path: layout.ClusterObjectsPath, What: "the VolumeAttachment " + va.Metadata.Name, Record: va}
		if de := va.Status.DetachError; de != nil || (va.Metadata.DeletionTimestamp != nil && va.Status.Attached) {
			f := Finding{ID: idDetachFailing, Severity: Warning, Title: "A volume's detach from this node fails", Subject: orUnknown(pvName),
				Impact: ImpactPodVolumes, Evidence: []Evidence{ev},
				Remediation: []string{"Release what still uses the volume on this node (see the findings about its device and mounts); the attach/detach controller retries the detach."}}
			if de != nil {
				f.Summary = fmt.Sprintf("volume %s does not detach from this node: %s", orUnknown(pvName), shorten(de.Message, 300))
			} else {
				f.Summary = fmt.Sprintf("volume %s is being detached from this node (VolumeAttachment deleted %s) but is still attached", orUnknown(pvName), va.Metadata.DeletionTimestamp.UTC().Format(time.RFC3339))
			}
			f.Explanation = "A pod that needs this volume on another node waits in ContainerCreating (\"Multi-Attach error\") until it detaches here."
			if ms := onNode(volTokens(pvByName[pvName], pvName)); len(ms) > 0 {
				f.Explanation += fmt.Sprintf(" The node still has %s of it.", plural(len(ms), "mount", "mounts"))
				f.addEvidence(st.mountinfoEvidence(ms, "the volume still mounted on the node")...)
			}
			st.add(f)
			continue
		}
		if !va.Status.Attached || !st.mountsSeen || len(used[pvName]) > 0 {
			continue
		}
		if ms := onNode(volTokens(pvByName[pvName], pvName)); len(ms) > 0 {
			continue
		}
		st.add(Finding{ID: idAttachedNotMounted, Severity: Warning, Title: "The API says a volume is attached here, the node has no trace of it",
			Subject: orUnknown(pvName), Impact: ImpactPodVolumes,
			Summary: fmt.Sprintf("VolumeAttachment %s says %s is attached to this node, but no pod here uses it and no mount on the node shows it", va.Metadata.Name, orUnknown(pvName)),
			Explanation: "An attachment nobody detached keeps a ReadWriteOnce volume from attaching to the node where its pod now runs. " +
				"The mount tables of every namespace were searched for the volume's name and CSI handle.",
			Evidence:    []Evidence{ev},
			Remediation: []string{"Check the CSI driver's controller and the attach/detach controller (kube-controller-manager) logs for the volume; once sure nothing uses it, `kubectl delete volumeattachment " + va.Metadata.Name + "`."}})
	}
	// The reverse: CSI volumes mounted in a pod's volume directory whose
	// driver attaches, with no attachment here.
	if listed := attachmentsComplete(c); !listed {
		return
	}
	attach := map[string]bool{}
	for _, d := range c.CSIDrivers {
		attach[d.Metadata.Name] = d.Spec.AttachRequired == nil || *d.Spec.AttachRequired
	}
	seen := map[string]bool{}
	for _, m := range st.mounts {
		if !m.Host {
			continue
		}
		mm := reCSIPodMount.FindStringSubmatch(m.MountPoint)
		if mm == nil || seen[mm[2]] {
			continue
		}
		pv := pvByName[mm[2]]
		if pv == nil || pv.Spec.CSI == nil || !attach[pv.Spec.CSI.Driver] || attachedPV[pv.Metadata.Name] {
			continue
		}
		seen[mm[2]] = true
		st.add(Finding{ID: idMountedNotAttached, Severity: Warning, Title: "The node has a volume mounted that the API does not attach here",
			Subject: pv.Metadata.Name, Impact: ImpactPodVolumes,
			Summary: fmt.Sprintf("%s is mounted on this node for pod %s, but its driver %s requires attaching and no VolumeAttachment of this node says attached", pv.Metadata.Name, st.podName(mm[1]), pv.Spec.CSI.Driver),
			Explanation: "The API believes the volume is not attached here (detached, or attached to another node) while the node still has it mounted. " +
				"For a ReadWriteOnce volume another node may be writing to it too.",
			Evidence:    append([]Evidence{{Path: layout.ClusterObjectsPath, What: "the volume", Record: pv}}, st.mountinfoEvidence([]mountRec{m}, "the mount on the node")...),
			Remediation: []string{"Find what still uses the mount (the holders in this report), stop it and unmount; do not start the volume's pod elsewhere until then."}})
	}
}

var reCSIPodMount = regexp.MustCompile(`/pods/([0-9a-fA-F-]{36})/volumes/kubernetes\.io~csi/([^/]+)/mount$`)

func volTokens(pv *layout.KubePV, name string) []string {
	if pv != nil {
		return pvTokens(pv)
	}
	return usefulTokens([]string{name})
}

// attachmentsComplete: the VolumeAttachments were listed (not only read
// by name, nor refused), so an absent one is absent.
func attachmentsComplete(c *layout.ClusterObjects) bool {
	for _, m := range c.Missing {
		if strings.Contains(m, "VolumeAttachment") {
			return false
		}
	}
	return true
}

// rulePods names, on every finding, the pods it hurts; marks what stops
// the kubelet's sync loop; groups findings of one cause; and says which
// pods in trouble nothing explains.
func rulePods(st *state) {
	for i := range st.findings {
		if syncLoopFinding(&st.findings[i]) {
			st.findings[i].Impact = ImpactSyncLoop
		}
	}
	views := st.podViews()
	if views != nil {
		// Pods named by each finding.
		byUID := map[string]*podView{}
		byPV := map[string][]*podView{}
		var tokens []string
		for _, v := range views {
			byUID[strings.ToLower(v.pod.Metadata.UID)] = v
			for _, t := range v.pvs {
				if byPV[t] == nil {
					tokens = append(tokens, t)
				}
				byPV[t] = append(byPV[t], v)
			}
		}
		sort.Strings(tokens)
		for i := range st.findings {
			f := &st.findings[i]
			if f.Severity < Warning && f.Impact == "" {
				continue
			}
			text := findingText(f)
			hit := map[*podView]string{}
			for _, u := range reUUID.FindAllString(text, -1) {
				if v := byUID[strings.ToLower(u)]; v != nil {
					hit[v] = "its own volume directory or process is in the evidence"
				}
			}
			for _, t := range tokens {
				if !tokenIn(text, t) {
					continue
				}
				for _, v := range byPV[t] {
					if _, ok := hit[v]; !ok {
						hit[v] = "its volume (" + t + ") is in the evidence"
					}
				}
			}
			if f.Impact == ImpactSyncLoop {
				for _, v := range views {
					if _, ok := hit[v]; !ok && (v.kind == troublePending || v.kind == troubleCreating || v.kind == troubleTerminating) {
						hit[v] = ""
					}
				}
			}
			for v, why := range hit {
				how := impactHow(f, v, why)
				f.Pods = append(f.Pods, PodImpact{Namespace: v.pod.Metadata.Namespace, Name: v.pod.Metadata.Name, UID: v.pod.Metadata.UID, How: how})
			}
			sort.Slice(f.Pods, func(a, b int) bool {
				return f.Pods[a].Namespace+"/"+f.Pods[a].Name < f.Pods[b].Namespace+"/"+f.Pods[b].Name
			})
			if len(f.Pods) > 0 && f.Impact == "" {
				f.Impact = ImpactPodVolumes
			}
		}
	}
	st.groupFindings()
	if views == nil {
		return
	}
	var lost []string
	var ev []any
	for _, v := range views {
		if v.symptom == "" || v.kind == troubleWaiting {
			continue
		}
		if len(st.chainFor(v)) == 0 {
			lost = append(lost, v.pod.Metadata.Namespace+"/"+v.pod.Metadata.Name+" "+v.symptom)
			ev = append(ev, v.pod.Metadata.Namespace+"/"+v.pod.Metadata.Name+": "+v.symptom)
		}
	}
	if len(lost) == 0 {
		return
	}
	f := Finding{ID: idPodsUnexplained, Severity: Warning, Title: "Pods in trouble that no node finding explains",
		Subject: plural(len(lost), "pod", "pods"),
		Summary: fmt.Sprintf("%s in trouble per the API, and nothing in this bundle of the node explains %s: %s",
			plural(len(lost), "pod is", "pods are"), map[bool]string{true: "it", false: "them"}[len(lost) == 1], listOf(lost, 3)),
		Explanation: "No finding names these pods' UIDs or volumes, and the kubelet's sync loop is not shown stuck. Missing from this bundle: " + strings.Join(st.missingForPods(), "; ") + ".",
		Evidence:    []Evidence{{Path: layout.ClusterObjectsPath, What: "the pods and their symptoms", Record: ev}},
		Remediation: []string{"Read the pods' events (`kubectl describe pod`) and collect again with what is missing above."}}
	st.add(f)
}

// impactHow words what a finding does to a pod.
func impactHow(f *Finding, v *podView, why string) string {
	var how string
	switch {
	case f.Impact == ImpactSyncLoop && v.kind == troubleTerminating:
		how = "cannot finish terminating: the kubelet's sync loop that tears pods down is blocked"
	case f.Impact == ImpactSyncLoop && (v.kind == troublePending || v.kind == troubleCreating):
		how = "cannot start: the kubelet's sync loop that starts pods is blocked"
	case v.kind == troubleTerminating:
		how = "cannot finish terminating: its volume cannot be torn down"
	case v.kind == troublePending || v.kind == troubleCreating:
		how = "cannot start: its volume cannot be set up"
	default:
		how = "uses what this finding is about"
	}
	if why != "" {
		how += " (" + why + ")"
	}
	return how
}

// podViews is the cluster view's pods with their trouble, or nil when the
// bundle has no cluster view.
func (st *state) podViews() []*podView {
	if st.cluster == nil {
		return nil
	}
	now := st.clusterNow()
	out := make([]*podView, 0, len(st.cluster.Pods))
	for i := range st.cluster.Pods {
		p := &st.cluster.Pods[i]
		v := &podView{pod: p}
		v.symptom, v.kind, v.since = trouble(p, now)
		for _, pv := range st.pvsOf(p) {
			v.pvs = append(v.pvs, pvTokens(pv)...)
		}
		out = append(out, v)
	}
	return out
}

// chainFor is the findings that explain a pod, most harmful first.
func (st *state) chainFor(v *podView) []*Finding {
	var out []*Finding
	for i := range st.findings {
		f := &st.findings[i]
		if f.Severity < Warning || f.ID == idPodsUnexplained {
			continue
		}
		for _, p := range f.Pods {
			if p.UID == v.pod.Metadata.UID && p.Namespace == v.pod.Metadata.Namespace && p.Name == v.pod.Metadata.Name {
				out = append(out, f)
				break
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := impactRank(out[i].Impact), impactRank(out[j].Impact); a != b {
			return a < b
		}
		return out[i].Severity > out[j].Severity
	})
	return out
}

// missingForPods says what the bundle lacks that could explain a pod.
func (st *state) missingForPods() []string {
	var out []string
	if st.manifest != nil {
		for _, c := range st.manifest.Collectors {
			if c.Status != "ok" && c.Status != "" {
				s := "the " + c.Name + " collector was " + c.Status
				if c.Error != "" {
					s += " (" + shorten(c.Error, 160) + ")"
				}
				out = append(out, s)
			}
		}
	}
	if len(st.kubeDumps) == 0 {
		out = append(out, "the kubelet's goroutine dump (what its sync loop and volume manager wait on; needs the kubelet's credentials)")
	}
	if !st.probesSeen {
		out = append(out, "mount probe results (which mounts hang)")
	}
	if st.cluster != nil {
		out = append(out, st.cluster.Missing...)
	}
	if len(out) == 0 {
		out = append(out, "nothing this bundle could hold: the cause may be outside the node (the API server, a controller, the storage backend)")
	}
	return out
}

// groupFindings folds findings of one cause into one: mounts of one kind,
// one source and one mount namespace that hang (or whose FUSE daemon is
// gone) together, hurting no pod and not the kubelet, are one finding
// ("200 hung ceph-fuse mounts in the mount namespace of agent-x").
func (st *state) groupFindings() {
	type key struct{ id, fstype, source, ns string }
	groups := map[key][]int{}
	var order []key
	for i := range st.findings {
		f := &st.findings[i]
		if (f.ID != idHungMount && f.ID != idDeadFUSE) || f.Impact != "" || len(f.Pods) > 0 {
			continue
		}
		var probe *layout.MountProbe
		for _, e := range f.Evidence {
			if p, ok := e.Record.(layout.MountProbe); ok {
				probe = &p
				break
			}
		}
		if probe == nil {
			continue
		}
		src := probe.Source
		if h, _, ok := strings.Cut(src, ":"); ok {
			src = h // an NFS or ceph server: its mounts share a cause
		}
		k := key{f.ID, probe.FSType, src, fmt.Sprint(probe.ProbeNamespace)}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	drop := map[int]bool{}
	var merged []Finding
	for _, k := range order {
		idx := groups[k]
		if len(idx) < 2 {
			continue
		}
		first := st.findings[idx[0]]
		var mps []string
		var members []GroupMember
		for _, i := range idx {
			drop[i] = true
			f := &st.findings[i]
			members = append(members, GroupMember{Subject: f.Subject, Summary: f.Summary, Remediation: f.Remediation})
			for _, e := range f.Evidence {
				if p, ok := e.Record.(layout.MountProbe); ok && !contains(mps, p.Mountpoint) {
					mps = append(mps, p.Mountpoint)
				}
			}
		}
		where := "the mount namespace " + k.ns + st.namespaceOwner(k.ns)
		g := first
		g.Subject = fmt.Sprintf("%d %s mounts in %s", len(mps), orUnknown(k.fstype), where)
		what := "hung"
		if k.id == idDeadFUSE {
			what = "dead (transport endpoint not connected)"
		}
		g.Summary = fmt.Sprintf("%d %s %s mounts from %s in %s: one cause; they hurt no pod of this node and not the kubelet",
			len(mps), what, orUnknown(k.fstype), orUnknown(k.source), where)
		g.Explanation = fmt.Sprintf("These mounts share their filesystem type, their source and their mount namespace, so they are one cause (one server or one FUSE daemon), not %d. The first one's details: %s Mountpoints: %s.",
			len(mps), first.Explanation, listOf(mps, 10))
		// The first mount's evidence, and each member's probe (the
		// record that shows how it failed) for the first few.
		g.Evidence = append([]Evidence{}, first.Evidence[:min(len(first.Evidence), 4)]...)
		for n, i := range idx[1:] {
			if n == 10 {
				break
			}
			for _, e := range st.findings[i].Evidence {
				if _, ok := e.Record.(layout.MountProbe); ok {
					g.Evidence = append(g.Evidence, e)
					break
				}
			}
		}
		for _, e := range first.Evidence[min(len(first.Evidence), 4):] {
			if _, ok := e.Record.(layout.MountProbe); ok {
				g.Evidence = append(g.Evidence, e)
			}
		}
		g.Evidence = append(g.Evidence, Evidence{Path: layout.ProbesPath, What: "every mount of this group", Record: mps})
		g.Members = members
		g.Remediation = append([]string{fmt.Sprintf("Fix the one cause first: the %s serving these mounts (a stuck FUSE daemon, an unreachable server).", orUnknown(k.source))},
			first.Remediation...)
		g.Remediation = append(g.Remediation, fmt.Sprintf("Do the same for the other %d mounts: each one's commands are in this finding's members (-o json).", len(idx)-1))
		merged = append(merged, g)
	}
	if len(drop) == 0 {
		return
	}
	kept := st.findings[:0:0]
	for i, f := range st.findings {
		if !drop[i] {
			kept = append(kept, f)
		}
	}
	st.findings = append(kept, merged...)
}

// namespaceOwner names a mount namespace by its first processes.
func (st *state) namespaceOwner(ns string) string {
	for inode, n := range st.nsInfo {
		if fmt.Sprint(inode) != ns || len(n.Processes) == 0 {
			continue
		}
		p := n.Processes[0]
		s := " (" + st.procName(p.PID, p.Comm)
		if n.ProcessCount > 1 {
			s += fmt.Sprintf(" and %d more processes", n.ProcessCount-1)
		}
		return s + ")"
	}
	return ""
}
