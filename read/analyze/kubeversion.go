package analyze

import "fmt"

// Mechanisms that depend on the kubelet's version. The running kubelet's
// version comes from what the bundle holds (kubelet.go's kubelet()):
// kubernetes_build_info in its /metrics, the "Kubelet version" line its
// current instance logged at start, or a version in its binary's path.
// /configz and /pods carry none.

// kubeletVersionText says which kubelet the text that follows is about.
func (st *state) kubeletVersionText() string {
	k := st.kubelet()
	if k == nil || k.Version == "" {
		return "The kubelet's version is unknown (the bundle has no kubelet metrics, no start line of the running kubelet in its log and no version in its binary's path)"
	}
	return fmt.Sprintf("The kubelet is %s (from %s)", k.Version, k.From)
}

// teardownMountRoot: since 1.26 the kubelet's CSI TearDown asks mount-utils
// whether the target is still a mount (statx STATX_ATTR_MOUNT_ROOT) and,
// when it is, removes nothing and still reports success.
const teardownMountRootMinor = 26

// csiLostStateMechanism explains incident 004 for this kubelet: the
// sentence after "the driver answers NodeUnpublishVolume with success
// without unmounting", and the fixes, target being the mounted target and
// volDir its volume directory (with vol_data.json). What the kubelet's log
// shows wins over its version: ebusyLogged says it logged TearDown failing
// with EBUSY for this volume (a mount-utils that cannot tell the bind
// mount from its parent, on any version).
func (st *state) csiLostStateMechanism(target, volDir string, ebusyLogged bool) (summary, explanation string, fixes []string) {
	newer, known := st.kubeletAtLeast(teardownMountRootMinor)
	ver := st.kubeletVersionText()
	if ebusyLogged && newer {
		newer = false
		ver += ", but its log shows TearDown failing with EBUSY for this volume, so its mount check did not see the mount"
	}
	umount := "Confirm nothing uses the mount (openfiles/holders.json lists no holder for it), then unmount it by hand on the node: umount " + shellQuote(target)
	if newer {
		summary = "the kubelet sees the mount, removes nothing and reports TearDown succeeded, so the pod stays Terminating"
		explanation = ver + ", so since 1.26 its TearDown checks the target with mount-utils: it sees a mount (statx STATX_ATTR_MOUNT_ROOT), removes nothing, " +
			"and still logs \"UnmountVolume.TearDown succeeded\". The pod keeps its deletionTimestamp and waits forever for the volume to go, silently at --v=2 " +
			"(\"Pod is terminated, but some volumes have not been cleaned up\" is logged only at --v=3 and above): there is no EBUSY loop to find in the log. " +
			"Once the target is unmounted by hand, the volume directory's leftover vol_data.json makes the kubelet log \"orphaned pod \\\"<uid>\\\" found, " +
			"but error occurred when trying to remove the volumes dir: not a directory\" every 2 s until it is removed."
		fixes = []string{umount}
		if volDir != "" {
			fixes = append(fixes, "Then remove the volume directory the kubelet left (its vol_data.json stops the orphan cleanup): findmnt "+shellQuote(target)+" || rm -r "+shellQuote(volDir))
		}
		fixes = append(fixes, "The kubelet's next housekeeping pass then removes the pod directory and the pod finishes terminating.")
		return summary, explanation, fixes
	}
	summary = "so the pod's volume teardown fails with EBUSY"
	explanation = "The kubelet then removes the target directory, which fails with \"device or resource busy\" because it is still a mountpoint; " +
		"it retries with exponential backoff forever and the pod (and its PVC) stay Terminating. "
	switch {
	case ebusyLogged:
		explanation += ver + "."
	case known:
		explanation += ver + ": before 1.26 this is what its TearDown does."
	default:
		explanation += ver + ": this is what a kubelet before 1.26 does. A kubelet 1.26 or newer instead sees the mount, removes nothing, logs " +
			"\"UnmountVolume.TearDown succeeded\" and leaves the pod Terminating without an error at --v=2."
	}
	fixes = []string{umount, "The kubelet's next TearDown retry then removes the directory and the pod finishes terminating."}
	if !known && volDir != "" {
		fixes = append(fixes, "On a kubelet 1.26 or newer, remove the volume directory it left as well: findmnt "+shellQuote(target)+" || rm -r "+shellQuote(volDir))
	}
	return summary, explanation, fixes
}
