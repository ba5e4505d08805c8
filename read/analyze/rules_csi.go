package analyze

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Incident 004: after the CSI hostpath driver restarted, its state.json
// had "Published": null for a volume whose target was still mounted, so
// NodeUnpublishVolume answered "not published, nothing to do" without
// unmounting; the kubelet's TearDown then failed with EBUSY forever and
// the pod stayed Terminating. The csi collector cross-checks the driver's
// state, vol_data.json and the mount table; this family turns that into
// findings, adds the checks between pod volumes and the pods the kubelet
// knows, and joins the kubelet's log lines.

// IDs of this family.
const (
	idCSIPublishedLost  = "csi-published-state-lost"
	idCSINotMounted     = "csi-published-not-mounted"
	idVolDataNoMount    = "csi-vol-data-without-mount"
	idMountedUnknownPod = "volume-mounted-for-unknown-pod"
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "csi-published-state-lost", Severity: "critical",
		Title:    "CSI driver lost the publish of a volume that is still mounted",
		Meaning:  "The CSI driver's own state says a volume is not published on the node, but its target path is still mounted: the driver forgot it (a restart without persistent state). The kubelet's TearDown then fails forever (\"not published ... nothing to do\" while the path is busy) and the pod never finishes terminating.",
		Evidence: "`csi/inventory.json`: the driver's state files cross-checked with the mount table; the kubelet's and driver's log lines.",
		Fix:      "Confirm nothing uses the mount (`openfiles/holders.json`), then unmount it by hand (`umount TARGET`); the kubelet's next retry finishes. Run a driver release that persists its published state, or keep its state directory on persistent storage.",
		Incident: "incident 004, csi-driver-host-path#457",
	},
	RuleDoc{
		ID: "csi-published-not-mounted", Severity: "warning",
		Title:    "CSI driver says published, nothing is mounted",
		Meaning:  "The driver's state and the node disagree the other way: the driver records the volume as published at a path that is not mounted (unmounted by hand, a reboot). A pod using it sees an empty directory instead of its data.",
		Evidence: "`csi/inventory.json`: the cross-check of the driver's state with the mount table.",
		Fix:      "Restart the pod that uses the volume so the kubelet publishes it again; if the driver refuses, restart the driver's node plugin.",
	},
	RuleDoc{
		ID: "csi-vol-data-without-mount", Severity: "info or warning",
		Title:    "CSI volume directory with vol_data.json and no mount",
		Meaning:  "The kubelet writes `vol_data.json` when it sets a CSI volume up and removes the directory after tearing it down. A directory left with `vol_data.json` and no mount is a teardown that did not finish: the kubelet keeps retrying it and the pod directory cannot be removed.",
		Evidence: "`csi/inventory.json`: the pod volume directories and their `vol_data.json`; the mount table.",
		Fix:      "Check the kubelet log for the volume's TearDown errors; once it is unmounted in every namespace (`grep UID /proc/*/mountinfo`), remove the leftover directory.",
	},
	RuleDoc{
		ID: "volume-mounted-for-unknown-pod", Severity: "warning",
		Title:    "Pod volumes still mounted for a pod the kubelet does not run",
		Meaning:  "A pod is gone from the kubelet but its volume mounts are still in the host's mount table. The kubelet's orphan cleanup cannot remove the pod directory while they are mounted (\"orphaned pod ... found, but volume paths are still present on disk\"), and a block device behind them cannot be detached.",
		Evidence: "`mounts/mounts.json` (the host's mounts under /var/lib/kubelet/pods) and `kubelet/pods.json` (the pods it runs).",
		Fix:      "Check that no process uses them (`openfiles/holders.json`), then `umount` each; the kubelet then removes the orphaned pod directory by itself.",
	},
)

func ruleCSI(st *state) {
	if st.csi == nil {
		return
	}
	inv := st.csi
	for _, cf := range inv.Findings {
		switch cf.Kind {
		case "published-lost":
			st.csiPublishedLost(cf)
		case "published-not-mounted":
			st.csiNotMounted(cf)
		}
	}
	st.csiVolDataWithoutMount()
	st.csiMountsWithoutPod()
}

// stateVolume finds a volume of a state file.
func (st *state) stateVolume(file, volID string) (*layout.CSIStateFile, *layout.CSIStateVolume) {
	for i := range st.csi.StateFiles {
		sf := &st.csi.StateFiles[i]
		if sf.Path != file {
			continue
		}
		for j := range sf.Volumes {
			if sf.Volumes[j].VolID == volID {
				return sf, &sf.Volumes[j]
			}
		}
		return sf, nil
	}
	return nil, nil
}

func (st *state) podVolumeAt(target string) *layout.CSIPodVolume {
	for i := range st.csi.PodVolumes {
		if path.Clean(st.csi.PodVolumes[i].MountPath) == path.Clean(target) {
			return &st.csi.PodVolumes[i]
		}
	}
	return nil
}

func (st *state) csiPublishedLost(cf layout.CSIFinding) {
	sf, v := st.stateVolume(cf.StateFile, cf.VolumeID)
	pv := st.podVolumeAt(cf.TargetPath)
	volDir := ""
	if pv != nil {
		volDir = pv.Dir
	}
	tokens := append(pathTokens(cf.TargetPath), cf.VolumeID, cf.PodUID)
	if pv != nil {
		tokens = append(tokens, pv.Dir)
	}
	mechSummary, mech, fixes := st.csiLostStateMechanism(cf.TargetPath, volDir, st.logsMention(tokens, sigTeardownBusy))
	f := Finding{
		ID:       idCSIPublishedLost,
		Severity: Critical,
		Title:    "CSI driver lost the volume's published state while it is still mounted",
		Subject:  cf.TargetPath,
		Summary: fmt.Sprintf("volume %s is mounted at %s but %s says it is not published there: unpublish returns success without unmounting; %s",
			cf.VolumeID, cf.TargetPath, cf.StateFile, mechSummary),
	}
	published := "missing"
	if v != nil {
		published = v.PublishedState
	}
	f.Explanation = fmt.Sprintf("The CSI driver's state file %s records volume %s with \"Published\": %s, yet the mount table has %s mounted. "+
		"A driver that lost its state (csi-driver-host-path keeps it in state.json and lost it on restart: kubernetes-csi/csi-driver-host-path#457) "+
		"answers NodeUnpublishVolume with \"volume is not published at ..., nothing to do\" and success, without unmounting (incident 004). %s "+
		"lsof shows nothing: no process holds it, the mount itself does.",
		cf.StateFile, cf.VolumeID, published, cf.TargetPath, mech)
	if pv != nil && pv.PodUID != "" {
		f.Explanation += " Pod: " + st.podName(pv.PodUID) + "."
	}
	f.Evidence = append(f.Evidence, Evidence{Path: layout.CSIInventoryPath, What: "the csi collector's cross-check of the driver's state and the mount table", Record: cf})
	if sf != nil && v != nil {
		p := layout.CSIInventoryPath
		if sf.File != "" {
			p = layout.DirCSI + "/" + sf.File
		}
		f.Evidence = append(f.Evidence, Evidence{Path: p, What: "the driver's record of the volume (Published " + v.PublishedState + ")", Record: v})
	}
	if pv != nil {
		ev := Evidence{Path: layout.CSIInventoryPath, What: "the pod volume: its vol_data.json and its mount", Record: pv}
		f.Evidence = append(f.Evidence, ev)
		if pv.VolDataFile != "" {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.DirCSI + "/" + pv.VolDataFile, What: "the kubelet's vol_data.json for the volume", Record: pv.VolData})
		}
	}
	ms := st.mountsAt(cf.TargetPath)
	f.Evidence = append(f.Evidence, st.mountinfoEvidence(ms, "the target is still in the mount table")...)
	for _, m := range ms {
		if h := st.mountHolders[nsMount{m.NS, m.ID}]; h != nil && len(h.Holders) > 0 {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.HoldersPath, What: "processes using the mount", Record: h})
		}
	}
	// The driver's own log (csi/podlogs/, csi/hostlogs/) says "not published, nothing to
	// do" for the volume: the moment the lost state turned into a leak.
	st.claimLogs(&f, tokens, sigTeardownBusy, sigTeardownOK, sigNotPublished, sigNodeUnpublish, sigPodNotCleaned, sigRmdirBusy, sigOrphanedPod, sigOrphanedRemove)
	f.Remediation = fixes
	f.Remediation = append(f.Remediation,
		"Upgrade the CSI driver to a release that persists its published state across restarts (for csi-driver-host-path, one with the fix for #457), or restart it with its state directory on persistent storage.")
	st.add(f)
}

func (st *state) csiNotMounted(cf layout.CSIFinding) {
	f := Finding{
		ID:       idCSINotMounted,
		Severity: Warning,
		Title:    "CSI driver thinks a volume is published but nothing is mounted there",
		Subject:  cf.TargetPath,
		Summary:  fmt.Sprintf("%s records volume %s as published at %s, but the mount table has nothing there", cf.StateFile, cf.VolumeID, cf.TargetPath),
		Explanation: "The driver's state and the node disagree: the publish was lost (unmounted by hand, a node reboot) without the driver being told. " +
			"A pod using the volume sees an empty directory instead of its data, and the driver may refuse to publish it again.",
		Evidence: []Evidence{{Path: layout.CSIInventoryPath, What: "the csi collector's cross-check", Record: cf}},
		Remediation: []string{
			"Restart the pod that uses the volume so the kubelet publishes it again; if the driver refuses, restart the driver's node plugin.",
		},
	}
	st.claimLogs(&f, append(pathTokens(cf.TargetPath), cf.VolumeID), sigTeardownBusy, sigNotPublished)
	st.add(f)
}

// csiVolDataWithoutMount: pod volume directories of CSI volumes that keep
// a vol_data.json but are not mounted: left behind by a teardown that did
// not finish, for a pod the kubelet no longer runs.
func (st *state) csiVolDataWithoutMount() {
	byPod := map[string][]layout.CSIPodVolume{}
	for _, pv := range st.csi.PodVolumes {
		if pv.VolData == nil || pv.DeletingLeftover || pv.Mounted == nil || *pv.Mounted {
			continue
		}
		if len(st.mountsAt(pv.MountPath)) > 0 {
			continue // mounted in some namespace: another finding's business
		}
		byPod[pv.PodUID] = append(byPod[pv.PodUID], pv)
	}
	for _, uid := range slices.Sorted(maps.Keys(byPod)) {
		pvs := byPod[uid]
		sev := Info
		state := "the pod is still known to the kubelet"
		if p, ok := st.pods[uid]; st.podsSeen && !ok {
			sev, state = Warning, "the kubelet does not run this pod any more (not in kubelet/pods.json)"
		} else if ok && (p.Deleting || p.Phase == "Succeeded" || p.Phase == "Failed") {
			sev, state = Warning, "the pod is terminating or finished"
		}
		var names []string
		for _, pv := range pvs {
			names = append(names, pv.Volume)
		}
		f := Finding{
			ID:       idVolDataNoMount,
			Severity: sev,
			Title:    "CSI volume directory without a mount",
			Subject:  uid,
			Summary:  fmt.Sprintf("pod %s has %s with vol_data.json but nothing mounted (%s); %s", uid, plural(len(pvs), "CSI volume directory", "CSI volume directories"), listOf(names, 3), state),
			Explanation: "The kubelet writes vol_data.json when it sets a CSI volume up and removes the directory after tearing it down. A directory left with vol_data.json " +
				"and no mount is a teardown that did not finish: the kubelet keeps retrying it (\"orphaned pod ... found, but volume paths are still present on disk\") " +
				"and the pod directory cannot be removed.",
			Remediation: []string{
				"Check the kubelet log for the volume's TearDown errors; once it is confirmed unmounted in every namespace (grep " + uid + " /proc/*/mountinfo), remove the leftover directory: rm -r " + shellQuote(path.Dir(pvs[0].Dir)) + "/<volume>",
			},
		}
		for _, pv := range pvs {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.CSIInventoryPath, What: "the volume directory and its vol_data.json, not mounted", Record: pv})
		}
		st.claimLogs(&f, []string{uid}, sigOrphanedPod, sigOrphanedRemove, sigRmdirBusy, sigPodNotCleaned, sigTeardownBusy)
		st.add(f)
	}
}

// csiMountsWithoutPod: mounts under pods/<uid>/volumes/ of a pod the
// kubelet does not run.
func (st *state) csiMountsWithoutPod() {
	if !st.podsSeen || !st.mountsSeen {
		return
	}
	prefix := strings.TrimSuffix(st.csi.KubeletDir, "/") + "/pods/"
	byPod := map[string][]mountRec{}
	for _, m := range st.mounts {
		if !m.Host {
			continue
		}
		rest, ok := strings.CutPrefix(m.MountPoint, prefix)
		if !ok {
			continue
		}
		uid, sub, _ := strings.Cut(rest, "/")
		if !strings.HasPrefix(sub, "volumes/") && !strings.HasPrefix(sub, "volume-subpaths/") {
			continue
		}
		if _, known := st.pods[uid]; known {
			continue
		}
		byPod[uid] = append(byPod[uid], m)
	}
	for _, uid := range slices.Sorted(maps.Keys(byPod)) {
		ms := byPod[uid]
		if st.claimedMountsOf(ms) {
			continue
		}
		var points []string
		for _, m := range ms {
			points = append(points, m.MountPoint)
		}
		sort.Strings(points)
		f := Finding{
			ID:       idMountedUnknownPod,
			Severity: Warning,
			Title:    "Volume still mounted for a pod the kubelet does not run",
			Subject:  uid,
			Summary:  fmt.Sprintf("%s under pods/%s, a pod not in the kubelet's pod list", plural(len(ms), "mount remains", "mounts remain"), uid),
			Explanation: "Pod " + uid + " is gone from the kubelet, but its volume mounts are still in the host's mount table: " + listOf(points, 4) + ". " +
				"The kubelet's orphan cleanup cannot remove the pod directory while they are mounted (\"orphaned pod ... found, but volume paths are still present on disk\"), " +
				"and a block device behind them cannot be detached.",
		}
		f.Evidence = append(f.Evidence, st.mountinfoEvidence(ms, "the leftover mounts in the host's mount table")...)
		if len(f.Evidence) == 0 {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.MountsPath, What: "the leftover mounts", Record: ms})
		}
		f.Evidence = append(f.Evidence, Evidence{Path: layout.KubeletPodsPath, What: "the pods the kubelet runs: " + uid + " is not among them"})
		for _, m := range ms {
			if h := st.mountHolders[nsMount{m.NS, m.ID}]; h != nil && len(h.Holders) > 0 {
				f.Evidence = append(f.Evidence, Evidence{Path: layout.HoldersPath, What: "processes using the mount", Record: h})
			}
		}
		st.claimLogs(&f, []string{uid}, sigOrphanedPod, sigOrphanedRemove, sigRmdirBusy, sigTeardownBusy, sigPodNotCleaned)
		for _, p := range points {
			f.Remediation = append(f.Remediation, "umount "+shellQuote(p))
		}
		f.Remediation = append(f.Remediation, "Check first that no process uses them (openfiles/holders.json); the kubelet then removes the orphaned pod directory by itself.")
		st.add(f)
	}
}

// claimedMountsOf reports whether a finding already covers one of these
// mounts (the CSI lost-state finding names its target).
func (st *state) claimedMountsOf(ms []mountRec) bool {
	for _, f := range st.findings {
		for _, m := range ms {
			if f.Subject == m.MountPoint {
				return true
			}
		}
	}
	return false
}

// podName is "namespace/name (uid)" when the kubelet, or else the
// container runtime, knows the pod.
func (st *state) podName(uid string) string {
	if p, ok := st.pods[uid]; ok && p.Name != "" {
		return p.Namespace + "/" + p.Name + " (" + uid + ")"
	}
	if p, ok := st.runtimePods[uid]; ok && p.Name != "" {
		return p.Namespace + "/" + p.Name + " (" + uid + ")"
	}
	if p, ok := st.apiPods[uid]; ok && p.Name != "" {
		return p.Namespace + "/" + p.Name + " (" + uid + ")"
	}
	return uid
}
