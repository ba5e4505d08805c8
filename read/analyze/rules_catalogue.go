package analyze

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/signatures"
)

// Findings of the catalogue's signatures that have no joined cause of
// their own: teardowns, mounts and unmounts that fail in any wording,
// CSI drivers' node operations, the runtime's calls and removals. Each
// names its object (pod, volume, device, path) as the lines do, in any
// kubelet version's wording.

// IDs of this family.
const (
	idTeardownFailed    = "volume-teardown-failed"
	idMountFailed       = "volume-mount-failed"
	idPodNotMounted     = "pod-volumes-not-mounted"
	idCSINodeOpFailed   = "csi-node-operation-failed"
	idUnmountFailed     = "unmount-failed"
	idRuntimeTimeout    = "runtime-call-timeout"
	idShmBusy           = "runtime-shm-busy"
	idContainerRemove   = "container-remove-failed"
	sigTeardownFailed   = "teardown-failed"
	sigTeardownNotEmpty = "teardown-not-empty"
	sigUnmapVolume      = "unmap-volume-failed"
	sigMountFailed      = "mount-failed"
	sigAttachTimeout    = "volume-attach-mount-timeout"
	sigOrphanRemoveFail = "orphaned-pod-remove-failed"
	sigOrphansCleanup   = "orphaned-pods-cleanup-failed"
	sigRuntimeDeadline  = "runtime-deadline-exceeded"
	sigCSIUnstage       = "csi-unstage-failed"
	sigCSIUnpublish     = "csi-unpublish-failed"
	sigCSIUnmountErr    = "csi-unmount-error"
	sigUnmountFailed    = "unmount-failed"
	sigShmBusy          = "runtime-shm-busy"
	sigRuntimeRemove    = "runtime-remove-failed"
	sigRootfsNotEmpty   = "runtime-rootfs-not-empty"
	sigUmountBusy       = "umount-target-busy"
	sigCephEstablished  = "libceph-session-established"
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: idTeardownFailed, Severity: "info or warning",
		Title:    "Volume teardown failing",
		Meaning:  "The kubelet's UnmountVolume.TearDown of a pod's volume fails (other than with EBUSY, which is volume-teardown-busy), for instance \"directory not empty\" when files were written into the volume's directory after its mount was gone. The kubelet retries with backoff and the pod stays Terminating. Any teardown failure of the kubelet that no signature knows is reported here too, its severity from state (see storage-operation-failing).",
		Evidence: "The kubelet log: the TearDown errors, per volume.",
		Fix:      "Read the wrapped error: for \"directory not empty\", check that nothing is mounted there, then move the leftover files away; the next retry removes the directory.",
	},
	RuleDoc{
		ID: idMountFailed, Severity: "info or warning",
		Title:    "Volume mount failing",
		Meaning:  "MountVolume.SetUp, MountDevice or WaitForAttach of a volume fails: the pod stays ContainerCreating. Retries while a pod starts are common (a secret not yet there). Severity comes from state: a warning when the error is permanent (EIO, NotFound, mount's exit status 32 ...), when the mount is still failing at the end of the evidence, or when the pod is not running; info when a later mount of it succeeded or the failures stopped, or when its one failure was its first try (retried after the kubelet's initial 500ms) in the kubelet's first minute (m=+ on the kubelet's clock): a kubelet starting. When the kubelet's error is that the CSI driver is not registered (\"driver name X not found in the list of registered CSI drivers\", in this or any other volume operation's finding), the finding names driver X and its node plugin's registration as the cause.",
		Evidence: "The kubelet log: the mount errors, per volume.",
		Fix:      "Read the wrapped error (the CSI driver's or the mount's own); fix the volume's source or the driver.",
	},
	RuleDoc{
		ID: idPodNotMounted, Severity: "info or warning",
		Title:    "Pod waiting for its volumes to mount",
		Meaning:  "The kubelet gave up waiting for a pod's volumes (\"Unable to attach or mount volumes\", \"timeout expired waiting for volumes to attach or mount\") and retries. A warning when its volumes' mount is still failing at the end of the evidence or the pod is not running; info when a later mount succeeded or the pod runs.",
		Evidence: "The kubelet log, per pod.",
		Fix:      "Find the volume's own mount error (volume-mount-failed) and fix that.",
	},
	RuleDoc{
		ID: idCSINodeOpFailed, Severity: "info or warning",
		Title:    "CSI driver's node operation failing",
		Meaning:  "The CSI driver's node service reports that an operation on a volume failed: unmounting its target or staging path or releasing its device (a warning), or any other node call (stage, publish, expand ...) read from the driver's log in any format, with the newest error verbatim and its severity from state (see storage-operation-failing); or its checks of a volume's mount path (stat, statfs, df, du, NodeGetVolumeStats, whatever the driver's words) timing out (a warning when they time out again and again with no later success: the plugin's view of a hung mount; info for one that timed out once or was answered later); or a volume's directory (a path holding its PV's name, or under the kubelet's pods or plugins directories) that cannot be made (a warning when its errno is a refusal or a full disk: EACCES, EPERM, ENOSPC, ENOTDIR); or the kubelet failing to connect to the driver's socket under its plugin directories (info: the gRPC client reconnects by itself, and a mount waiting on it fails on its own). The kubelet retries; the pod, or the volume's detach, waits.",
		Evidence: "The CSI driver's log, per volume.",
		Fix:      "Read the driver's error; find what holds the path or device (mount-held-in-foreign-namespace, openfiles/holders.json) and release it.",
	},
	RuleDoc{
		ID: idUnmountFailed, Severity: "info or warning",
		Title: "Unmount failing",
		Meaning: "An unmount by the kubelet's mount helper, a runtime or a CSI driver fails (its own error: busy, not mounted, the mount hangs). " +
			"It is info when every failure is ENOENT (no such file or directory): the path is gone, so nothing is left mounted there (a runtime's cleanup of a mount that went with its container). " +
			"A runtime's line that names no path is named by the 64-hex ID of its container or device.",
		Evidence: "The log lines, per path.",
		Fix:      "Check the path on the node (findmnt PATH); find what holds it and release it, or unmount it lazily (umount -l) once nothing needs it.",
	},
	RuleDoc{
		ID: idRuntimeTimeout, Severity: "warning",
		Title:    "Container runtime calls time out",
		Meaning:  "The kubelet's calls to the container runtime end in DeadlineExceeded, or the runtime's own calls to its shims time out (containerd's \"context deadline exceeded: unknown\", CRI-O's \"the deadline was exceeded\"): the runtime does not answer in time, often stuck on a container's mount or a dead storage server.",
		Evidence: "The kubelet log and the runtime's log: the calls that timed out.",
		Fix:      "Read the runtime's goroutine dump (`runtime/`) or its log for the call it is stuck in; a hung mount under it must be unmounted (umount -f / -l).",
	},
	RuleDoc{
		ID: idShmBusy, Severity: "warning",
		Title:    "Pod sandbox's shm mount busy",
		Meaning:  "The runtime cannot unmount or remove a pod sandbox's /dev/shm mount: it is busy, usually held by a copy of the mount in another process's mount namespace. The sandbox cannot be removed.",
		Evidence: "The runtime's log, per path; the mount table of every namespace.",
		Fix:      "Find the namespace holding the shm mount (grep the sandbox ID in /proc/*/mountinfo) and unmount it there, or restart that process.",
	},
	RuleDoc{
		ID: idContainerRemove, Severity: "info or warning",
		Title:    "Runtime fails to remove a container",
		Meaning:  "The runtime reports that removing a container, a sandbox or their directories failed; a warning when the error is \"busy\" (a mount still holds it).",
		Evidence: "The runtime's log.",
		Fix:      "Read the error; for busy, find the mount that holds the directory (mount-held-in-foreign-namespace) and unmount it.",
	},
)

// subject names what a key's hits are about for a finding's subject and
// summary: the key, else the object of that kind the lines name, else
// another object they name; never "".
func (st *state) subject(k *keyHits, kind signatures.KeyKind) string {
	o := k.Objects
	switch kind {
	case signatures.KeyPod:
		uid := k.Key
		if !reUID.MatchString(uid) {
			uid = o.PodUID
		}
		if uid != "" {
			if n := st.podName(uid); n != uid {
				return n
			}
			if o.Pod != "" {
				return o.Pod + " (" + uid + ")"
			}
			return uid
		}
		if k.Key != "" {
			return k.Key
		}
		if o.Pod != "" {
			return o.Pod
		}
	case signatures.KeyVolume, signatures.KeyDevice:
		for _, s := range []string{k.Key, o.Volume, o.Device, o.Path} {
			if s != "" {
				return s
			}
		}
	default:
		if k.Key != "" {
			return k.Key
		}
	}
	for _, s := range []string{o.Volume, o.Path, o.Device, o.Pod, o.PodUID, o.Server} {
		if s != "" {
			return s
		}
	}
	if id := runtimeIDSubject(k); id != "" {
		return id
	}
	return notNamed
}

// notNamed is the subject of lines that name no object.
const notNamed = "(not named in the log lines)"

var reUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// podGrep is what to grep the logs for to find a pod's lines.
func (st *state) podGrep(k *keyHits) string {
	for _, s := range []string{k.Objects.PodUID, k.Key, k.Objects.Pod} {
		if s != "" {
			return s
		}
	}
	return "volume"
}

// ofPod says which pod a volume's lines name, for a summary: " (pod X)".
func (st *state) ofPod(k *keyHits) string {
	switch {
	case k.Objects.PodUID != "":
		return " (pod " + st.podName(k.Objects.PodUID) + ")"
	case k.Objects.Pod != "":
		return " (pod " + k.Objects.Pod + ")"
	}
	return ""
}

// anyLine reports whether any kept line of a key holds s.
func (k *keyHits) anyLine(s string) bool {
	for _, h := range k.hits() {
		if strings.Contains(h.Line.Text, s) {
			return true
		}
	}
	return false
}

// catalogueFinding makes one finding per unclaimed key of a signature,
// its subject named by st.subject.
func (st *state) catalogueFinding(sig, id string, kind signatures.KeyKind, sev func(*keyHits) (Severity, string), title string,
	text func(k *keyHits, subj string) (summary, explanation string, remediation []string)) {
	st.eachUnclaimed(sig, id, func(k *keyHits) {
		subj := st.subject(k, kind)
		summary, expl, rem := withUnregisteredDriver(k)(text(k, subj))
		severity, why := sev(k)
		if why != "" {
			summary += ": " + why
		}
		st.add(Finding{ID: id, Severity: severity, Title: title, Subject: subj, Summary: summary, Explanation: expl,
			Evidence: k.evidence(sigWhat[sig]), Remediation: rem})
	})
}

func always(s Severity) func(*keyHits) (Severity, string) {
	return func(*keyHits) (Severity, string) { return s, "" }
}

func ruleCatalogueLogs(st *state, ops *opResult) {
	stateSeverity := func(k *keyHits) (Severity, string) { return st.stateSeverity(ops.Groups, k) }
	teardown := func(k *keyHits, subj string) (string, string, []string) {
		expl := "The kubelet's TearDown of the volume fails and is retried with exponential backoff; the pod stays Terminating until it succeeds."
		rem := []string{"Read the wrapped error in the lines; check the volume's directory on the node (findmnt, ls -la) and what keeps it from being removed."}
		if k.anyLine("not empty") {
			expl = "The volume's directory is \"not empty\" when the kubelet removes it: files were written there after the volume's mount was gone (a pod writing into an unmounted path), " +
				"or a nested mount was left. The kubelet never deletes data, so it retries forever and the pod stays Terminating."
			rem = []string{"Check that nothing is mounted under the directory (findmnt -R <dir>); then move the leftover files out (they are not on the volume) and let the kubelet retry."}
		}
		return fmt.Sprintf("TearDown of volume %s fails%s (%s)", subj, st.ofPod(k), plural(k.Count, "time", "times")), expl, rem
	}
	st.catalogueFinding(sigTeardownNotEmpty, idTeardownFailed, signatures.KeyVolume, always(Warning), "Volume teardown failing", teardown)
	st.catalogueFinding(sigTeardownFailed, idTeardownFailed, signatures.KeyVolume, always(Warning), "Volume teardown failing", teardown)
	st.catalogueFinding(sigUnmapVolume, idUnmountDevice, signatures.KeyVolume, always(Warning), "Kubelet cannot unmap a block volume",
		func(k *keyHits, subj string) (string, string, []string) {
			return fmt.Sprintf("unmapping block volume %s fails%s (%s)", subj, st.ofPod(k), plural(k.Count, "time", "times")),
				"The kubelet cannot unmap the block volume's device from the pod or from its global map path: something still uses the device.",
				[]string{"Find who holds the device: lsof <device>; grep <device> /proc/*/task/*/mountinfo; release it and let the kubelet retry."}
		})
	st.catalogueFinding(sigMountFailed, idMountFailed, signatures.KeyVolume, stateSeverity, "Volume mount failing",
		func(k *keyHits, subj string) (string, string, []string) {
			return fmt.Sprintf("mounting volume %s fails%s (%s)", subj, st.ofPod(k), plural(k.Count, "time", "times")),
				"The kubelet cannot set the volume up for its pod (MountVolume.SetUp, MountDevice or WaitForAttach failed); the pod stays ContainerCreating while it retries.",
				[]string{"Read the wrapped error in the lines: the CSI driver's or the mount command's own words name the cause."}
		})
	st.catalogueFinding(sigAttachTimeout, idPodNotMounted, signatures.KeyPod, stateSeverity, "Pod waiting for its volumes to mount",
		func(k *keyHits, subj string) (string, string, []string) {
			return fmt.Sprintf("pod %s waits for its volumes to attach or mount (%s)", subj, plural(k.Count, "time", "times")),
				"The kubelet gave up waiting for the pod's volumes and retries its sync; the pod stays ContainerCreating.",
				[]string{"Find the volumes' own errors (MountVolume.* failed) in the kubelet log and fix those."}
		})
	csiOp := func(what string) func(k *keyHits, subj string) (string, string, []string) {
		return func(k *keyHits, subj string) (string, string, []string) {
			return fmt.Sprintf("the CSI driver fails to %s volume %s (%s)", what, subj, plural(k.Count, "time", "times")),
				"The driver's node service could not unmount the volume's path or release its device; the kubelet retries, and the pod's termination or the volume's detach waits for it.",
				[]string{"Read the driver's error in the lines; find what holds the path or device (findmnt, lsof, grep in /proc/*/mountinfo) and release it."}
		}
	}
	st.catalogueFinding(sigCSIUnstage, idCSINodeOpFailed, signatures.KeyVolume, always(Warning), "CSI driver fails to unstage a volume", csiOp("unstage"))
	st.catalogueFinding(sigCSIUnpublish, idCSINodeOpFailed, signatures.KeyVolume, always(Warning), "CSI driver fails to unpublish a volume", csiOp("unpublish"))
	st.catalogueFinding(sigCSIUnmountErr, idCSINodeOpFailed, signatures.KeyVolume, always(Warning), "CSI driver fails to unmount a volume", csiOp("unmount"))
	unmount := func(k *keyHits, subj string) (string, string, []string) {
		return fmt.Sprintf("unmounting %s fails (%s)", subj, plural(k.Count, "time", "times")),
			"An unmount fails with the error the lines quote: the mount is busy, already gone, or hangs on its server.",
			[]string{"Check the path on the node: findmnt " + shellQuote(subj) + "; if it is busy find the holder, if it hangs unmount it with umount -f then umount -l."}
	}
	st.catalogueFinding(sigUmountBusy, idUnmountFailed, signatures.KeyPath, always(Warning), "Unmount failing", unmount)
	st.catalogueFinding(sigUnmountFailed, idUnmountFailed, signatures.KeyPath, unmountSeverity, "Unmount failing",
		func(k *keyHits, subj string) (string, string, []string) {
			return fmt.Sprintf("unmounting %s fails (%s)", subj, plural(k.Count, "time", "times")),
				"An unmount fails with the error the lines quote: the mount is busy, already gone, or hangs on its server.",
				[]string{"Check the path on the node: findmnt " + shellQuote(subj) + "; if it is busy find the holder, if it hangs unmount it with umount -f then umount -l."}
		})
	st.catalogueFinding(sigShmBusy, idShmBusy, signatures.KeyPath, always(Warning), "Pod sandbox's shm mount busy",
		func(k *keyHits, subj string) (string, string, []string) {
			expl := "The runtime cannot unmount or remove the sandbox's shm mount: it is busy, usually held by a copy of the mount in another process's mount namespace."
			if ms := st.mountsAt(subj); len(ms) > 0 {
				expl += " Still mounted: " + listOf(mountPoints(ms), 4) + "."
			}
			return fmt.Sprintf("the runtime cannot release %s: device or resource busy (%s)", subj, plural(k.Count, "time", "times")), expl,
				[]string{"Find the namespace that still mounts it (grep the sandbox ID in /proc/*/task/*/mountinfo) and unmount it there (nsenter -t <pid> -m umount <path>), or restart that process."}
		})
	st.catalogueFinding(sigRootfsNotEmpty, idRootfsBusy, signatures.KeyPath, always(Warning), "A container's rootfs cannot be removed",
		func(k *keyHits, subj string) (string, string, []string) {
			return fmt.Sprintf("the runtime cannot remove the rootfs mountpoint %s: directory not empty (%s)", subj, plural(k.Count, "time", "times")),
				"The container's overlay mountpoint is not empty when the runtime removes it: it is still mounted somewhere (another mount namespace) or something wrote into it after the unmount. The runtime retries; the container's name stays reserved and new containers of the pod fail.",
				[]string{"Check whether it is still mounted in any namespace (grep the container ID in /proc/*/task/*/mountinfo) and unmount it there; then let the runtime retry its cleanup (crictl rm / rmp)."}
		})
	st.catalogueFinding(sigRuntimeRemove, idContainerRemove, signatures.KeyPath,
		func(k *keyHits) (Severity, string) {
			if k.anyLine("busy") {
				return Warning, ""
			}
			return Info, ""
		}, "Runtime fails to remove a container",
		func(k *keyHits, subj string) (string, string, []string) {
			return fmt.Sprintf("the runtime fails to remove %s (%s)", subj, plural(k.Count, "time", "times")),
				"The runtime could not remove a container, a sandbox or their directories; the error in the lines says why (busy: a mount still holds it).",
				[]string{"Read the error; for busy, find the mount holding the directory (grep it in /proc/*/task/*/mountinfo) and unmount it."}
		})
	// The runtime's timeouts, as one finding: the calls are many, the
	// cause (a runtime stuck) one.
	if s := st.logs.sigs[sigRuntimeDeadline]; s != nil {
		if ks := s.unclaimed(); len(ks) > 0 {
			f := Finding{ID: idRuntimeTimeout, Severity: Warning, Title: "Container runtime calls time out", Subject: "container runtime"}
			n := 0
			var objs []string
			for _, k := range ks {
				k.claimed = true
				n += k.Count
				if o := st.subject(k, signatures.KeyPod); o != "(not named in the log lines)" && len(objs) < 4 && !contains(objs, o) {
					objs = append(objs, o)
				}
				f.Evidence = append(f.Evidence, k.evidence(sigWhat[sigRuntimeDeadline])...)
			}
			f.Summary = fmt.Sprintf("the kubelet's calls to the container runtime time out (DeadlineExceeded, %s)", plural(n, "time", "times"))
			if len(objs) > 0 {
				f.Summary += "; for " + strings.Join(objs, ", ")
			}
			f.Explanation = "The runtime did not answer the kubelet in time: it is stuck (often inside a call on a container whose mount hangs) or overloaded. Pods on the node neither start nor stop while it lasts."
			f.Remediation = []string{"Read the runtime's goroutine dump or log for the call it is stuck in (crictl ps with a timeout shows if it answers at all); unmount a hung mount under it (umount -f, then -l), or restart the runtime."}
			st.add(f)
		}
	}
}

// cephRecovered turns a lost ceph monitor session into info when the
// client established a session again after the last loss ("libceph: mon1
// ... session established"): the client hunted and found a monitor.
func (st *state) cephRecovered(f *Finding, lost []*keyHits) {
	est := st.logs.sigs[sigCephEstablished]
	if est == nil {
		return
	}
	var lastLost, lastEst time.Time
	for _, k := range lost {
		if k.Newest.After(lastLost) {
			lastLost = k.Newest
		}
	}
	var ks []*keyHits
	for _, k := range est.unclaimed() {
		if k.Newest.After(lastEst) {
			lastEst = k.Newest
		}
		ks = append(ks, k)
	}
	if len(ks) == 0 || (!lastLost.IsZero() && lastEst.Before(lastLost)) {
		return
	}
	f.Severity = Info
	f.Summary += "; it established a session again afterwards (with " + st.subject(ks[len(ks)-1], signatures.KeyServer) + ")"
	for _, k := range ks {
		k.claimed = true
		f.Evidence = append(f.Evidence, k.evidence(sigWhat[sigCephEstablished])...)
	}
}
