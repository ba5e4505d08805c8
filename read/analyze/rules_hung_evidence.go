package analyze

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// What the hung-mount rule gathers around a finding (hung-task traces, probe
// errors, blocked tasks, the NFS server's context, the pods of a path), and
// the faults a probe answered with.

// claimTraceLogs attaches hung-task reports whose call traces run through
// the filesystem's code.
func (st *state) claimTraceLogs(f *Finding, markers []string) {
	if len(markers) == 0 {
		return
	}
	s := st.logs.sigs[sigHungTask]
	if s == nil {
		return
	}
	for _, k := range s.unclaimed() {
		match := false
		for _, h := range k.hits() {
			for _, l := range h.Trace {
				for _, m := range markers {
					if strings.Contains(l.Text, m) {
						match = true
					}
				}
			}
		}
		if match {
			k.claimed = true
			f.addEvidence(k.evidence(sigWhat[sigHungTask])...)
		}
	}
}

// claimAll attaches every unclaimed hit of a signature.
func (st *state) claimAll(f *Finding, sig string) {
	s := st.logs.sigs[sig]
	if s == nil {
		return
	}
	for _, k := range s.unclaimed() {
		k.claimed = true
		f.addEvidence(k.evidence(sigWhat[sig])...)
	}
}

// probeErrors reports mounts that answered with a fault (stale handle,
// I/O error, device gone), one finding per filesystem.
func (st *state) probeErrors() {
	bad := map[string]bool{"ESTALE": true, "EIO": true, "ENODEV": true, "ENXIO": true, "EHOSTDOWN": true, "EHOSTUNREACH": true, "ETIMEDOUT": true, "ECONNREFUSED": true, "ECONNRESET": true}
	for _, ps := range st.probesByDevice(func(p layout.MountProbe) bool {
		return p.Result == layout.ProbeError && bad[p.Errno]
	}) {
		dev, mps := ps[0].Dev, probeMountpoints(ps)
		f := Finding{
			ID:          idMountError,
			Severity:    Warning,
			Title:       "Mount answers with an error",
			Subject:     dev,
			Summary:     fmt.Sprintf("%s mount %s answers stat/statfs with %s", ps[0].FSType, listOf(mps, 2), ps[0].Errno),
			Explanation: "The mount is reachable but broken: " + orUnknown(ps[0].Diagnosis) + ". Pods using it get the same error.",
		}
		for _, p := range ps {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.ProbesPath, What: "the probe's error", Record: p})
		}
		var tokens []string
		for _, mp := range mps {
			tokens = append(tokens, pathTokens(mp)...)
		}
		st.claimLogs(&f, tokens, sigTeardownBusy, sigOrphanedPod)
		for _, mp := range mps {
			f.Remediation = append(f.Remediation, "Unmount it (umount -l "+shellQuote(mp)+") and let the pod that needs it mount it again (restart the pod).")
		}
		st.add(f)
	}
}

// blockedTasks reports tasks in uninterruptible sleep that no hung mount
// explains.
func (st *state) blockedTasks(own, used map[int]bool) {
	var ts []layout.Task
	for _, t := range st.tasks {
		if own[t.TID] || own[t.PID] || used[t.TID] || t.State != "D" {
			continue
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return
	}
	// Local disk I/O (io_schedule, jbd2) is routine under load: info. A
	// wait in a network filesystem's or FUSE's code is what hangs.
	sev := Info
	var names []string
	for _, t := range ts {
		if fsStack(append([]string{t.Wchan}, t.Stack...)) {
			sev = Warning
		}
		names = append(names, fmt.Sprintf("%s[%d] (wchan %s)", t.Comm, t.TID, orUnknown(t.Wchan)))
	}
	sort.Strings(names)
	f := Finding{
		ID:       idBlockedTasks,
		Severity: sev,
		Title:    "Tasks in uninterruptible sleep",
		Summary:  fmt.Sprintf("%s in D state: %s", plural(len(ts), "task", "tasks"), listOf(names, 3)),
		Explanation: "These tasks sleep in the kernel and cannot be interrupted, usually waiting for a disk or a network filesystem. " +
			"A few for a moment are normal under I/O load; the same tasks in several bundles, or kernel stacks in a filesystem or block driver, mean I/O that does not complete. " +
			st.hungContext(),
		Evidence: []Evidence{{Path: layout.TasksPath, What: "the tasks in D state with their kernel stacks", Record: ts}},
		Remediation: []string{
			"Read the stacks: a filesystem or driver function names the culprit; check that device's or server's health (dmesg, iostat -x 1).",
			"Take a second bundle a minute later: tasks still in D with the same stack are stuck, not busy.",
		},
	}
	st.claimTraceLogs(&f, []string{"ext4", "xfs", "jbd2", "io_schedule", "blk_", "nvme", "scsi", "rbd", "nbd"})
	st.add(f)
}

func fsStack(stack []string) bool {
	for _, l := range stack {
		for _, m := range []string{"nfs", "ceph", "fuse", "request_wait_answer", "rpc_", "xprt", "cifs", "smb2", "rbd", "nbd", "iscsi"} {
			if strings.Contains(l, m) {
				return true
			}
		}
	}
	return false
}

// probesByDevice groups the probes keep accepts by filesystem (device),
// in the order the devices first appear: one finding per filesystem.
func (st *state) probesByDevice(keep func(layout.MountProbe) bool) [][]layout.MountProbe {
	idx := map[string]int{}
	var groups [][]layout.MountProbe
	for _, p := range st.probes {
		if !keep(p) {
			continue
		}
		i, ok := idx[p.Dev]
		if !ok {
			i = len(groups)
			idx[p.Dev] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], p)
	}
	return groups
}

func probeMountpoints(ps []layout.MountProbe) []string {
	mps := make([]string, 0, len(ps))
	for _, p := range ps {
		mps = append(mps, p.Mountpoint)
	}
	return mps
}

// nfsProbeContext says what the probe found of the mounts of NFS server
// host, for a "not responding" log line no hung mount claimed.
func (st *state) nfsProbeContext(host string) string {
	if !st.probesSeen {
		return "The bundle has no mount probe results, so whether its mounts hang now is unknown."
	}
	var notProbed []string
	for _, p := range st.probes {
		if !strings.HasPrefix(p.FSType, "nfs") {
			continue
		}
		if h, _, _ := strings.Cut(p.Source, ":"); h != host {
			continue
		}
		switch p.Result {
		case layout.ProbeUnfinished:
			notProbed = append(notProbed, p.Mountpoint)
		case layout.ProbeHung:
			return "A mount of this server hung when the bundle was taken (see the hung-mount findings)."
		}
	}
	if len(notProbed) > 0 {
		return fmt.Sprintf("Its mounts %s were not probed before mountprobe's deadline (see mount-not-probed): whether they hang now is unknown.", listOf(notProbed, 3))
	}
	return "No probe of its mounts hung when the bundle was taken."
}

// unroot turns a path as nodesnap saw it into the host's path by removing
// the run's --root prefix; ok is false when there is none or p is not
// under it.
func (st *state) unroot(p string) (string, bool) {
	if st.manifest == nil {
		return p, false
	}
	root := strings.TrimRight(st.manifest.Settings.Root, "/")
	if root == "" {
		return p, false
	}
	if p == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, root+"/"); ok {
		return "/" + rest, true
	}
	return p, false
}

// rePodVolumePath finds the pod of a path under <kubelet>/pods/<uid>/volumes.
var rePodVolumePath = regexp.MustCompile(`/pods/([0-9a-fA-F-]{36})/(?:volumes|volume-subpaths|volumeDevices)/`)

// podsOfPaths names the pods whose volumes the paths are ("a volume of
// pod ns/name (uid)"), saying when no one runs the pod any more; "" when
// none is a pod volume.
func (st *state) podsOfPaths(mps []string) string {
	var uids []string
	for _, mp := range mps {
		if m := rePodVolumePath.FindStringSubmatch(mp + "/"); m != nil && !contains(uids, m[1]) {
			uids = append(uids, m[1])
		}
	}
	if len(uids) == 0 {
		return ""
	}
	var parts []string
	for _, uid := range uids {
		s := "a volume of pod " + st.podName(uid)
		_, kubelet := st.pods[uid]
		_, runtime := st.runtimePods[uid]
		switch {
		case kubelet || runtime:
		case st.podsSeen && len(st.runtimePods) > 0:
			s += ", a pod neither the kubelet nor the container runtime runs (deleted: its directory is what the kubelet's orphan cleanup visits)"
		case st.podsSeen:
			s += ", a pod the kubelet does not run (deleted: its directory is what the kubelet's orphan cleanup visits)"
		case len(st.runtimePods) > 0:
			s += ", a pod the container runtime has no sandbox for"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
