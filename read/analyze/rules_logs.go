package analyze

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/signatures"
)

// Log signatures that no joined cause explained: each is still worth a
// finding of its own, with what the bundle says about its subject (is the
// path still mounted, and where).

// IDs of this family.
const (
	idTeardownBusy      = "volume-teardown-busy"
	idUnmountDevice     = "volume-unmount-device-failed"
	idPodNotCleaned     = "pod-volumes-not-cleaned-up"
	idOrphanedPod       = "orphaned-pod-volume-paths"
	idOperationExists   = "csi-operation-already-exists"
	idOtherReferences   = "staging-mount-still-referenced"
	idRootfsBusy        = "container-rootfs-busy"
	idNotPublished      = "csi-driver-not-published"
	idDecodedOutput     = "decoded-command-output"
	idTransportLogs     = "fuse-transport-not-connected-logged"
	idHungTaskLogged    = idKernelHungTask
	maxLogFindingsPerID = 50
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "volume-teardown-busy", Severity: "warning",
		Title:    "Volume teardown failing with EBUSY",
		Meaning:  "The kubelet's UnmountVolume.TearDown fails with \"device or resource busy\" and retries with backoff: something still holds the volume's directory (a mount in another namespace, an open file).",
		Evidence: "The kubelet log: the TearDown errors with their backoff; the holders of the path.",
		Fix:      "Find the holder (`openfiles/holders.json`, or `grep PATH /proc/*/mountinfo` on the node) and release it; the kubelet's next retry then succeeds.",
	},
	RuleDoc{
		ID: "volume-unmount-device-failed", Severity: "info or warning",
		Title:    "Kubelet cannot unmount or unmap a volume's device",
		Meaning:  "UnmountDevice, or the `rbd unmap` behind it, fails: the device is still mapped and in use. Its command output, logged as a byte array, is decoded in the finding. An unstage or unmap failure of the kubelet that no signature knows is reported here too, its severity from state (see storage-operation-failing). A block volume's unmap from one pod (UnmapVolume.UnmapBlockVolume, UnmapPodDevice) is named by that operation, whatever its wrapped error says.",
		Evidence: "The kubelet log: the UnmountDevice errors, decoded.",
		Fix:      "Find what holds the device (mount-held-in-foreign-namespace often names it), release it, and let the kubelet retry.",
	},
	RuleDoc{
		ID: "pod-volumes-not-cleaned-up", Severity: "warning",
		Title:    "Terminated pod waiting for its volumes",
		Meaning:  "The kubelet logged \"Pod is terminated, but some volumes have not been cleaned up\": the pod cannot be removed until its volumes are torn down.",
		Evidence: "The kubelet log, per pod.",
		Fix:      "Look for the teardown's own error (volume-teardown-busy, volume-unmount-device-failed) and fix that.",
	},
	RuleDoc{
		ID: "orphaned-pod-volume-paths", Severity: "warning",
		Title:    "Orphaned pod with volume paths still on disk",
		Meaning:  "The kubelet logged \"orphaned pod ... found, but volume paths are still present on disk\": a pod directory it cannot remove because volume directories (often still mounted) remain.",
		Evidence: "The kubelet log, per pod; the pod's volume directories and mounts.",
		Fix:      "Unmount what is still mounted under the pod's directory once nothing uses it; the kubelet then removes the directory by itself.",
	},
	RuleDoc{
		ID: "csi-operation-already-exists", Severity: "warning",
		Title:    "CSI operation already in progress for a volume",
		Meaning:  "The CSI driver answers \"an operation with the given Volume ID ... already exists\": an earlier call for the volume never finished (often stuck on a hung mount or device), and every retry is refused.",
		Evidence: "The kubelet's and driver's logs, per volume.",
		Fix:      "Find the stuck operation (the driver's goroutines or logs, a hung mount) and clear it; restarting the driver's node plugin drops it.",
	},
	RuleDoc{
		ID: "staging-mount-still-referenced", Severity: "warning",
		Title:    "Staging mount still referenced",
		Meaning:  "The kubelet logged that a device's staging path \"is still mounted by other references\": it will not unstage the volume while another mount of it exists, often in another mount namespace.",
		Evidence: "The kubelet log; the mount table and mount-held-in-foreign-namespace.",
		Fix:      "Find and unmount the other reference; the kubelet then unstages the volume.",
	},
	RuleDoc{
		ID: "container-rootfs-busy", Severity: "warning",
		Title:    "Container rootfs cannot be removed (busy)",
		Meaning:  "The runtime cannot remove a container's rootfs: \"unlinkat .../merged: device or resource busy\". Its overlay mount leaked into another mount namespace, which keeps it busy.",
		Evidence: "The runtime's log; the mount table of every namespace.",
		Fix:      "Find the namespace holding the mount (mount-held-in-foreign-namespace) and unmount it there, or stop the process that holds that namespace.",
	},
	RuleDoc{
		ID: "csi-driver-not-published", Severity: "info",
		Title:    "CSI driver says a volume is not published",
		Meaning:  "The driver answered an unpublish with \"Volume ... is not published at ..., nothing to do\". Alone this is harmless; with the target still mounted it is csi-published-state-lost.",
		Evidence: "The CSI driver pods' logs (`csi/podlogs/`), or the log file or journal lines of a driver run as a host process (`csi/hostlogs/`).",
		Fix:      "Nothing alone; see csi-published-state-lost when the target is still mounted.",
	},
	RuleDoc{
		ID: "decoded-command-output", Severity: "info",
		Title:    "Command output in the logs, decoded",
		Meaning:  "A log line carried a command's output as a byte array (`output: [114 98 100 ...]`); the finding shows it as text, since it usually says why a mount, unmount or unmap failed.",
		Evidence: "The log line, and the decoded text.",
		Fix:      "Read the decoded output: it names the command's own error.",
	},
	RuleDoc{
		ID: "fuse-transport-not-connected-logged", Severity: "warning",
		Title:    "Transport endpoint is not connected (logged)",
		Meaning:  "A log reports \"Transport endpoint is not connected\" for a path, but no dead FUSE mount was found by the probe (it may have been unmounted since, or not probed).",
		Evidence: "The log lines, per path.",
		Fix:      "Check the path on the node (`stat PATH`); if its FUSE daemon is gone, unmount it and restart the daemon and its pods (see fuse-transport-not-connected).",
	},
)

var (
	reRemoveBusy = regexp.MustCompile(`(?:remove|rmdir\(\) volume at path|failed to remove dir \[?)\s*\\*"?(/[^\s:"\\\]]+)\]?:? device or resource busy`)
	reBackoff    = regexp.MustCompile(`durationBeforeRetry ([0-9a-zµ.]+)`)
)

func ruleVolumeLogs(st *state) {
	st.teardownBusy()
	st.simpleLogFindings(sigUnmountDevice, idUnmountDevice, Warning, "Kubelet cannot unmount or unmap a volume's device",
		func(k *keyHits) (string, string, []string) {
			out := ""
			if len(k.Decoded) > 0 {
				out = " Command output (decoded from the log's byte array): " + strings.Join(k.Decoded, " / ") + "."
			}
			return fmt.Sprintf("UnmountDevice of %s failed %s", st.subject(k, signatures.KeyDevice), plural(k.Count, "time", "times")),
				"The kubelet's unmount (or rbd unmap) of the volume's device fails, typically \"device or resource busy\": something still uses the device. " +
					"When lsof on the host shows only kernel threads (rbd3-task, jbd2/rbd3), the holder is a mount in another mount namespace (incident 002), which this bundle's " +
					"mounts collector would have named; otherwise an open file or a leftover mount on the host." + out,
				[]string{"Find who holds the device: grep <device> /proc/*/task/*/mountinfo and lsof <device>; unmount it there (nsenter -t <pid> -m umount <mountpoint>) or stop the holder; the kubelet then retries."}
		})
	st.simpleLogFindings(sigPodNotCleaned, idPodNotCleaned, Warning, "Terminated pod waiting for its volumes",
		func(k *keyHits) (string, string, []string) {
			return fmt.Sprintf("pod %s is terminated but its volumes are not cleaned up (%s)", st.subject(k, signatures.KeyPod), plural(k.Count, "log line", "log lines")),
				"The kubelet keeps the pod Terminating until every volume is unmounted and removed; it logs this every 100 ms while a volume's teardown does not finish (incident 004), " +
					"at --v=3 and above on a kubelet 1.26 or newer, which logs nothing else at --v=2 when a CSI target is still mounted. " +
					"The cause is the volume still mounted or whose TearDown fails: see that volume's lines in the kubelet log and the mount table. " + st.kubeletVersionText() + ".",
				[]string{"Find the pod's volume errors: grep " + shellQuote(st.podGrep(k)) + " in the kubelet log (UnmountVolume.TearDown failed ...); fix what keeps that volume mounted."}
		})
	st.orphanedPods()
	st.simpleLogFindings(sigOperationExists, idOperationExists, Warning, "CSI operation already in progress for a volume",
		func(k *keyHits) (string, string, []string) {
			return fmt.Sprintf("the CSI driver refuses operations on volume %s: one is already in progress (%s)", st.subject(k, signatures.KeyVolume), plural(k.Count, "time", "times")),
				"ceph-csi (and other drivers) serialise operations per volume ID with a lock; \"an operation with the given Volume ID ... already exists\" means an earlier one " +
					"never returned, usually a mount, map or fsck child process hung on the storage (ceph-csi#2289). Every retry fails until it ends.",
				[]string{"Look for the driver's hung child processes (D state, stack in rbd/ceph/nfs) on the node; restart the CSI node plugin pod to release the lock once the storage answers again."}
		})
	st.otherReferences()
	st.rootfsBusy()
	st.simpleLogFindings(sigNotPublished, idNotPublished, Info, "CSI driver says a volume is not published",
		func(k *keyHits) (string, string, []string) {
			return fmt.Sprintf("the CSI driver answered unpublish of volume %s with \"not published, nothing to do\"", st.subject(k, signatures.KeyVolume)),
				"Harmless when the volume is indeed unmounted; when its target is still mounted, the driver lost its state and the kubelet's teardown will fail with EBUSY (incident 004).",
				[]string{"Check that the volume's target path is not in the mount table (findmnt <target>); if it is, unmount it by hand."}
		})
	st.plegFindings()
	st.simpleLogFindings(sigByteOutput, idDecodedOutput, Info, "Command output in the logs, decoded",
		func(k *keyHits) (string, string, []string) {
			return "a log line carries command output as a byte array: " + shorten(strings.ReplaceAll(k.Key, "\n", " / "), 200),
				"Go programs that print a command's []byte output with %v log it as numbers ([114 98 100 58 ...]); this is the text.",
				nil
		})
}

// notListed says how many findings of a kind were left out (past
// maxLogFindingsPerID, or keys past the log index's bounds).
func (st *state) notListed(id string, n, overflow int) {
	st.add(Finding{ID: id, Severity: Info, Title: "More of the same", Subject: "(more)",
		Summary:     fmt.Sprintf("%d more %s findings are not listed, and %d more matching log lines were only counted", n, id, overflow),
		Explanation: "The findings above show the first of them; the logs hold the rest."})
}

// simpleLogFindings makes one finding per unclaimed key of a signature.
func (st *state) simpleLogFindings(sig, id string, sev Severity, title string, text func(*keyHits) (summary, explanation string, remediation []string)) {
	st.eachUnclaimed(sig, id, func(k *keyHits) {
		summary, expl, rem := withUnregisteredDriver(k)(text(k))
		kind := signatures.KeyNone
		if c := signatures.ByID(sig); c != nil {
			kind = c.Key
		}
		f := Finding{ID: id, Severity: sev, Title: title, Subject: st.subject(k, kind), Summary: summary, Explanation: expl,
			Evidence: k.evidence(sigWhat[sig]), Remediation: rem}
		st.add(f)
	})
}

// teardownBusy: "UnmountVolume.TearDown failed ... remove <dir>: device or
// resource busy", retried with backoff. Says whether the directory is
// still mounted and where.
func (st *state) teardownBusy() {
	st.eachUnclaimed(sigTeardownBusy, idTeardownBusy, func(k *keyHits) {
		dir, backoff := k.Objects.Path, ""
		for _, h := range k.hits() {
			if m := reRemoveBusy.FindStringSubmatch(h.Line.Text); m != nil {
				dir = m[1]
			}
			if m := reBackoff.FindStringSubmatch(h.Line.Text); m != nil {
				backoff = m[1]
			}
		}
		f := Finding{
			ID:       idTeardownBusy,
			Severity: Warning,
			Title:    "Volume teardown fails with \"device or resource busy\"",
			Subject:  st.subject(k, signatures.KeyVolume),
			Summary:  fmt.Sprintf("TearDown of %s fails with EBUSY%s (%s", st.subject(k, signatures.KeyVolume), st.ofPod(k), plural(k.Count, "time", "times")),
		}
		if backoff != "" {
			f.Summary += ", retry backoff now " + backoff
		}
		f.Summary += ")"
		var b strings.Builder
		b.WriteString("The kubelet cannot remove the volume's directory because it is still a mountpoint or in use; it retries with exponential backoff " +
			"(\"No retries permitted until ...\") and the pod stays Terminating. ")
		var rem []string
		if dir != "" {
			ms := st.mountsAt(dir)
			var where []string
			for _, m := range ms {
				where = append(where, fmt.Sprintf("namespace %d%s at %s", m.NS, map[bool]string{true: " (host)", false: ""}[m.Host], m.MountPoint))
			}
			switch {
			case len(ms) > 0:
				fmt.Fprintf(&b, "%s is still mounted: %s. ", dir, listOf(where, 4))
				f.Evidence = append(f.Evidence, st.mountinfoEvidence(ms, "the volume's directory is still mounted")...)
				for _, m := range ms {
					if h := st.mountHolders[nsMount{m.NS, m.ID}]; h != nil && len(h.Holders) > 0 {
						f.Evidence = append(f.Evidence, Evidence{Path: layout.HoldersPath, What: "processes using the mount", Record: h})
						fmt.Fprintf(&b, "Processes using it: %s. ", listOf(holderNames(h.Holders), 4))
					}
				}
				if ms[0].Host {
					b.WriteString("On the host itself: the unmount (CSI NodeUnpublishVolume) returned success without unmounting, or an open file keeps it busy. ")
					rem = append(rem, "If no process uses it, unmount it by hand: umount "+shellQuote(dir))
				}
			case st.mountsSeen:
				fmt.Fprintf(&b, "%s is not mounted in any namespace now: the busy error may have been transient, or the mount was removed since. ", dir)
			}
		}
		f.Explanation = strings.TrimSpace(b.String())
		f.Evidence = append(k.evidence(sigWhat[sigTeardownBusy]), f.Evidence...)
		st.claimSameLines(&f, k, sigUnlinkatBusy)
		rem = append(rem, "Find what keeps it busy: findmnt "+shellQuote(st.subject(k, signatures.KeyPath))+"; grep the volume in /proc/*/task/*/mountinfo; lsof +D on the directory.")
		f.Remediation = rem
		st.add(f)
	})
}

// orphanedPods: "orphaned pod <uid> found, but volume paths are still
// present on disk", and rmdir EBUSY under a pod's volumes.
func (st *state) orphanedPods() {
	byUID := map[string][]*keyHits{}
	overflow := 0
	notRemoved := map[string]bool{}
	for _, sig := range []string{sigOrphanedPod, sigRmdirBusy, sigOrphanedRemove, sigOrphanRemoveFail, sigOrphansCleanup} {
		s := st.logs.sigs[sig]
		if s == nil {
			continue
		}
		overflow += s.Overflow
		for _, k := range s.unclaimed() {
			uid := k.Key
			if i := strings.LastIndex(uid, "/pods/"); i >= 0 {
				uid = uid[i+len("/pods/"):]
			}
			if !reUID.MatchString(uid) && k.Objects.PodUID != "" {
				uid = k.Objects.PodUID
			}
			byUID[uid] = append(byUID[uid], k)
			if sig == sigOrphanedRemove {
				notRemoved[uid] = true
			}
		}
	}
	uids := slices.Sorted(maps.Keys(byUID))
	for i, uid := range uids {
		if i == maxLogFindingsPerID {
			st.notListed(idOrphanedPod, len(uids)-i, overflow)
			break
		}
		subj, ruid := st.podName(uid), uid
		if uid == "" {
			subj, ruid = "(pods not named in the log lines)", "<pod UID>"
		}
		f := Finding{
			ID:       idOrphanedPod,
			Severity: Warning,
			Title:    "Orphaned pod directory whose volumes are still present",
			Subject:  subj,
		}
		count := 0
		for _, k := range byUID[uid] {
			k.claimed = true
			count += k.Count
			f.Evidence = append(f.Evidence, k.evidence("the kubelet cannot clean up the deleted pod's directory")...)
		}
		var ms []mountRec
		if uid != "" {
			ms = st.mountsUnder("/pods/" + uid)
		}
		f.Summary = fmt.Sprintf("the kubelet cannot remove deleted pod %s's directory: volume paths are still there (%s)", subj, plural(count, "log line", "log lines"))
		f.Explanation = "The pod is gone, but the kubelet's orphan cleanup finds volume directories under it and will not remove them while they may be mounted " +
			"(kubernetes#60987). A volume still mounted somewhere (or on a mount that hangs) keeps the directory forever."
		if len(ms) > 0 {
			var where []string
			for _, m := range ms {
				where = append(where, fmt.Sprintf("%s (namespace %d)", m.MountPoint, m.NS))
			}
			f.Summary += fmt.Sprintf("; %s still mounted", plural(len(ms), "volume is", "volumes are"))
			f.Explanation += " Still mounted: " + listOf(where, 4) + "."
			f.Evidence = append(f.Evidence, st.mountinfoEvidence(ms, "the pod's volumes still in a mount table")...)
		} else if st.mountsSeen {
			f.Explanation += " Nothing under the pod's directory is mounted now, so the leftover directories can be removed."
		}
		f.Remediation = []string{
			"Check nothing under /var/lib/kubelet/pods/" + ruid + " is mounted in any namespace (grep " + ruid + " /proc/*/task/*/mountinfo); unmount what is.",
			"Then remove the leftover volume directories (rmdir the empty ones under /var/lib/kubelet/pods/" + ruid + "/volumes/*/*); the kubelet removes the rest.",
		}
		if notRemoved[uid] {
			f.Summary = fmt.Sprintf("the kubelet cannot remove deleted pod %s's volumes directory: a volume directory still holds a file (%s)", subj, plural(count, "log line", "log lines"))
			f.Explanation = "\"orphaned pod ... found, but error occurred when trying to remove the volumes dir: not a directory\": the kubelet's orphan cleanup (kubelet 1.26 and newer) " +
				"removes only empty volume directories and finds a file, usually the vol_data.json of a CSI volume whose target was unmounted by hand after the driver lost its state (incident 004); " +
				"it logs this every 2 s and the pod directory stays. " + st.kubeletVersionText() + "."
			if len(ms) > 0 {
				f.Explanation += " Still mounted under the pod: " + listOf(mountPoints(ms), 4) + "."
			}
			f.Remediation = []string{
				"Check nothing under /var/lib/kubelet/pods/" + ruid + " is mounted in any namespace (grep " + ruid + " /proc/*/task/*/mountinfo); unmount what is.",
				"Then remove the leftover volume directories with their vol_data.json: rm -r /var/lib/kubelet/pods/" + ruid + "/volumes/kubernetes.io~csi/*   (only what findmnt shows unmounted); the kubelet removes the pod directory on its next pass.",
			}
		}
		st.add(f)
	}
}

// otherReferences: "the device mount path .../globalmount is still mounted
// by other references": the staging mount's device is mounted elsewhere.
func (st *state) otherReferences() {
	st.eachUnclaimed(sigOtherReferences, idOtherReferences, func(k *keyHits) {
		f := Finding{
			ID:       idOtherReferences,
			Severity: Warning,
			Title:    "Staging mount still referenced by other mounts",
			Subject:  st.subject(k, signatures.KeyPath),
			Summary:  fmt.Sprintf("the kubelet will not unstage %s: it is still mounted by other references (%s)", st.subject(k, signatures.KeyPath), plural(k.Count, "time", "times")),
			Explanation: "Before unmounting a volume's global (staging) mount, the kubelet checks that no other mount uses the same device; other references remain — " +
				"a pod's bind mount that was not torn down, or a copy in another mount namespace (kubernetes#105323).",
			Evidence: k.evidence(sigWhat[sigOtherReferences]),
		}
		if k.Key != "" {
			var refs []mountRec
			for _, m := range st.mountsAt(k.Key) {
				for _, o := range st.mounts {
					if o.Dev == m.Dev && (o.NS != m.NS || o.ID != m.ID) {
						refs = append(refs, o)
					}
				}
			}
			if len(refs) > 0 {
				var where []string
				for _, r := range refs {
					where = append(where, fmt.Sprintf("%s (namespace %d)", r.MountPoint, r.NS))
				}
				sort.Strings(where)
				f.Explanation += " Other mounts of the same device: " + listOf(where, 6) + "."
				f.Evidence = append(f.Evidence, st.mountinfoEvidence(refs, "the other mounts of the same device")...)
			}
		}
		f.Remediation = []string{"Unmount the leftover references (pod bind mounts under /var/lib/kubelet/pods/*/volumes, or copies in other namespaces), then the kubelet unstages the volume."}
		st.add(f)
	})
}

// rootfsBusy: "unlinkat .../merged: device or resource busy": a container's
// rootfs mount leaked into another process's private namespace
// (moby#22260).
func (st *state) rootfsBusy() {
	st.eachUnclaimed(sigUnlinkatBusy, idRootfsBusy, func(k *keyHits) {
		if netnsPath(k.Key) {
			st.add(Finding{
				ID: idContainerRemove, Severity: Warning,
				Title:   "Runtime cannot remove a sandbox's network namespace (busy)",
				Subject: k.Key,
				Summary: fmt.Sprintf("removing network namespace %s fails with EBUSY (%s): the sandbox cannot be removed", k.Key, plural(k.Count, "time", "times")),
				Explanation: "The runtime cannot unlink a pod sandbox's network namespace file because it is still mounted: a bind mount of it leaked into another mount namespace " +
					"(a process or service started while the sandbox ran), so the sandbox stays and its pod stays terminating.",
				Evidence:    k.evidence(sigWhat[sigUnlinkatBusy]),
				Remediation: []string{"Find the mount namespace that still holds it (grep the namespace's name in /proc/*/mountinfo) and unmount it there, or restart that process."},
			})
			return
		}
		f := Finding{
			ID:       idRootfsBusy,
			Severity: Warning,
			Title:    "Container filesystem cannot be removed (busy)",
			Subject:  st.subject(k, signatures.KeyPath),
			Summary:  fmt.Sprintf("removing %s fails with EBUSY (%s)", st.subject(k, signatures.KeyPath), plural(k.Count, "time", "times")),
			Explanation: "The runtime cannot remove a container's filesystem because it is still mounted: usually a copy of the container's rootfs mount in the private " +
				"mount namespace of a service started while the container ran (moby#22260).",
			Evidence: k.evidence(sigWhat[sigUnlinkatBusy]),
		}
		if k.Key != "" {
			ms := st.mountsAt(k.Key)
			if len(ms) > 0 {
				var where []string
				for _, m := range ms {
					where = append(where, fmt.Sprintf("namespace %d (%s)", m.NS, st.nsHolders(m.NS)))
				}
				f.Explanation += " Still mounted in: " + listOf(where, 4) + "."
				f.Evidence = append(f.Evidence, st.mountinfoEvidence(ms, "the rootfs still mounted")...)
			}
		}
		f.Remediation = []string{"Find the namespace that still mounts it (grep the container ID in /proc/*/task/*/mountinfo) and unmount it there (nsenter -t <pid> -m umount <path>), or restart that service."}
		st.add(f)
	})
}

// netnsPath tells a network namespace's file, where runtimes and ip(8)
// bind-mount them (/run/netns, /var/run/netns).
func netnsPath(p string) bool {
	return strings.HasPrefix(p, "/run/netns/") || strings.HasPrefix(p, "/var/run/netns/")
}

// nsHolders names a few processes of a namespace.
func (st *state) nsHolders(ns uint64) string {
	ni := st.nsInfo[ns]
	if ni == nil {
		return "processes unknown"
	}
	var ps []string
	for _, p := range ni.Processes {
		ps = append(ps, st.procName(p.PID, p.Comm))
	}
	return listOf(ps, 3)
}

func ruleKernelLogs(st *state) {
	// Hung tasks, as one finding.
	if s := st.logs.sigs[sigHungTask]; s != nil {
		ks := s.unclaimed()
		if len(ks) > 0 {
			var names []string
			f := Finding{ID: idHungTaskLogged, Severity: Warning, Title: "Kernel reports hung tasks", Subject: "kernel"}
			for _, k := range ks {
				k.claimed = true
				names = append(names, k.Key)
				f.Evidence = append(f.Evidence, k.evidence(sigWhat[sigHungTask])...)
			}
			f.Summary = fmt.Sprintf("the kernel's hung-task detector reported %s blocked for more than its timeout: %s", plural(len(ks), "task", "tasks"), listOf(names, 4))
			f.Explanation = "\"INFO: task <comm>:<pid> blocked for more than 120 seconds\" means the task sat in uninterruptible sleep that long, usually on a network filesystem, " +
				"a block device whose I/O does not complete, or a lock held by such a task. The call trace below each report names the code it waits in."
			f.Remediation = []string{"Read the call traces: ceph_/nfs_/fuse_ functions point at a mount (unmount it with umount -f / -l), blk_/scsi/nvme at a disk (check it with dmesg and iostat -x)."}
			st.add(f)
		}
	}
	if s := st.logs.sigs[sigCephSessionLost]; s != nil {
		ks := s.unclaimed()
		if len(ks) > 0 {
			f := Finding{ID: idCephSession, Severity: Warning, Title: "Ceph client lost its monitor session", Subject: "libceph"}
			var mons []string
			for _, k := range ks {
				k.claimed = true
				mons = append(mons, st.subject(k, signatures.KeyServer))
				f.Evidence = append(f.Evidence, k.evidence(sigWhat[sigCephSessionLost])...)
			}
			f.Summary = "the kernel ceph client lost its session with " + listOf(mons, 3)
			f.Explanation = "\"libceph: monN ... session lost, hunting for new mon\": the node lost contact with the ceph monitors. Brief losses recover; if they do not, cephfs and rbd I/O " +
				"hangs, and so does everything that touches those mounts (ceph-csi#5265)."
			f.Remediation = []string{"Check the network path to the monitors and the cluster's health (ceph -s); mounts that stay hung need umount -f."}
			st.cephRecovered(&f, ks)
			st.add(f)
		}
	}
	if s := st.logs.sigs[sigNFSNotResponding]; s != nil {
		ok := st.logs.sigs[sigNFSOK]
		for _, k := range s.unclaimed() {
			k.claimed = true
			if st.mountsSeen && !st.mountsServer(k.Key) && k.Key != "" {
				// Nothing of that server is mounted now, in any
				// namespace: what it did is history.
				st.logs.outside = append(st.logs.outside, outsideHits{sig: sigNFSNotResponding, hits: k, class: "earlier",
					why: "NFS server " + k.Key + " has no mount on the node now"})
				continue
			}
			f := Finding{ID: idNFSNotReponding, Severity: Warning, Title: "NFS server not responding", Subject: st.subject(k, signatures.KeyServer),
				Summary: fmt.Sprintf("NFS server %s did not respond (%s)", st.subject(k, signatures.KeyServer), plural(k.Count, "time", "times")),
				Explanation: "\"nfs: server ... not responding, still trying\": on a hard mount every process touching it waits until the server answers. " +
					st.nfsProbeContext(k.Key),
				Evidence:    k.evidence(sigWhat[sigNFSNotResponding]),
				Remediation: []string{"Check the server and the network path to it; unmount (umount -f -l) mounts of a server that is gone for good."}}
			if ok != nil {
				if r := ok.keys[k.Key]; r != nil {
					f.Severity = Info
					f.Summary += "; it answered again later (\"nfs: server " + k.Key + " OK\")"
					r.claimed = true
					f.Evidence = append(f.Evidence, r.evidence(sigWhat[sigNFSOK])...)
				}
			}
			st.add(f)
		}
	}
	st.simpleLogFindings(sigTransportNotConn, idTransportLogs, Warning, "Transport endpoint is not connected (logged)",
		func(k *keyHits) (string, string, []string) {
			return fmt.Sprintf("%s: Transport endpoint is not connected (%s)", st.subject(k, signatures.KeyPath), plural(k.Count, "time", "times")),
				"A FUSE daemon behind this path (e.g. ceph-fuse) is gone: accesses fail with ENOTCONN. It happens when the CSI node plugin that ran the daemon restarts (ceph-csi#792). " +
					"The mount probe did not find it dead, so it may have been unmounted since.",
				[]string{"If the path is still mounted: umount -l <path>, then restart the pods using the volume so it is mounted again."}
		})
}

// mountsServer reports whether any namespace mounts an NFS export of
// server (a mount source "server:/path").
func (st *state) mountsServer(server string) bool {
	for _, m := range st.mounts {
		if !strings.HasPrefix(m.FSType, "nfs") {
			continue
		}
		if h, _, ok := strings.Cut(m.Source, ":"); ok && strings.Trim(h, "[]") == strings.Trim(server, "[]") {
			return true
		}
	}
	return false
}

func mountPoints(ms []mountRec) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MountPoint)
	}
	return out
}
