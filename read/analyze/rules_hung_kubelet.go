package analyze

import (
	"fmt"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Incident 003 without the kubelet's goroutine dump (a run without the
// kubelet's credentials, or with a least-privilege one that does not open
// pprof): the kernel's view of a kubelet thread blocked in a hung mount,
// and the pod UID of that mount's path, say whether it is the kubelet's
// housekeeping (HandlePodCleanups → cleanupOrphanedPodDirs, which stat()s
// the volume directories of pods that no longer exist) and so the sync
// loop that starts every new pod. A UID no pod list of the bundle knows is
// such a directory; a UID a pod list knows is a live pod, whose own volume
// work is stuck, not the housekeeping.

// podListing is what the bundle's pod lists say of a pod UID.
type podListing int

const (
	podUnlisted podListing = iota // the bundle holds no pod list
	podListed                     // a pod list knows it
	podOrphaned                   // every pod list the bundle holds lacks it
)

// podListingOf says whether a pod UID is in one of the bundle's pod lists
// (the kubelet's, the runtime's sandboxes, the API's pods of this node),
// and names the lists consulted.
func (st *state) podListingOf(uid string) (podListing, []string) {
	uid = strings.ToLower(uid)
	var lists []string
	known := false
	has := func(m map[string]podRec) bool {
		for k := range m {
			if strings.ToLower(k) == uid {
				return true
			}
		}
		return false
	}
	if st.podsSeen {
		lists = append(lists, "the kubelet's pod list")
		known = known || has(st.pods)
	}
	if len(st.runtimePods) > 0 {
		lists = append(lists, "the container runtime's pod sandboxes")
		known = known || has(st.runtimePods)
	}
	if st.apiPodsComplete() {
		lists = append(lists, "the API's pods of this node")
		known = known || has(st.apiPods)
	}
	if !known && st.loggedOrphan(uid) {
		return podOrphaned, append(lists, "the kubelet's own log, which calls it an orphaned pod")
	}
	switch {
	case known:
		return podListed, lists
	case len(lists) == 0:
		return podUnlisted, nil
	}
	return podOrphaned, lists
}

// loggedOrphan: the kubelet's log names the pod UID as an orphaned pod
// ("Orphaned pod ... found, but volume paths are still present on disk",
// and the other lines of its orphan cleanup), whoever claimed the lines.
func (st *state) loggedOrphan(uid string) bool {
	for _, sig := range []string{sigOrphanedPod, sigOrphanedRemove, sigOrphanRemoveFail} {
		s := st.logs.sigs[sig]
		if s == nil {
			continue
		}
		for _, k := range s.keys {
			key := k.Key
			if i := strings.LastIndex(key, "/pods/"); i >= 0 {
				key = key[i+len("/pods/"):]
			}
			if strings.EqualFold(key, uid) || strings.EqualFold(k.Objects.PodUID, uid) {
				return true
			}
		}
	}
	return false
}

// apiPodsComplete: the cluster view lists this node's pods in full (not
// refused, cut or abandoned), so a UID absent from it is not a pod of
// this node as far as the API knows.
func (st *state) apiPodsComplete() bool {
	if st.cluster == nil {
		return false
	}
	for _, m := range st.cluster.Missing {
		if strings.Contains(strings.ToLower(m), "pods") {
			return false
		}
	}
	return true
}

// isKubeletTask tells a thread of the node's kubelet: of the process the
// bundle shows running the kubelet, or named like it.
func (st *state) isKubeletTask(t *layout.Task) bool {
	if k := st.kubelet(); k != nil && k.PID != 0 && t.PID == k.PID {
		return true
	}
	if p := st.procs[t.PID]; p != nil && !p.Kernel && isKubeletProc(p) {
		return true
	}
	return t.Comm == "kubelet" || strings.HasPrefix(t.Comm, "kubelet")
}

// kernelCall says what a kernel stack is doing, from its system-call
// frames ("a stat", "an open"), or "" when they do not say.
func kernelCall(stack []string) string {
	calls := []struct{ frame, what string }{
		{"statfs", "a statfs"}, {"statx", "a stat"}, {"newstat", "a stat"}, {"newlstat", "a stat"}, {"newfstatat", "a stat"},
		{"getattr", "a stat"}, {"openat", "an open"}, {"sys_open", "an open"}, {"getdents", "a directory listing"},
		{"iterate_dir", "a directory listing"}, {"umount", "an unmount"}, {"rmdir", "a rmdir"}, {"unlinkat", "an unlink"},
		{"lookup", "a path lookup"},
	}
	for _, c := range calls {
		for _, f := range stack {
			name, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f), "[<0>]")), "+")
			if strings.Contains(name, c.frame) {
				return c.what
			}
		}
	}
	return ""
}

// kubeletThreadNames names kubelet threads with what their kernel stacks
// say: "kubelet thread 812 (state D, wchan request_wait_answer, in a stat)".
func kubeletThreadNames(ts []layout.Task) []string {
	var out []string
	for _, t := range ts {
		s := fmt.Sprintf("kubelet thread %d (state %s, wchan %s", t.TID, t.State, orUnknown(t.Wchan))
		if c := kernelCall(t.Stack); c != "" {
			s += ", in " + c
		}
		out = append(out, s+")")
	}
	return out
}

// kubeletWait is what the kernel's view says of kubelet threads blocked
// in a hung mount when the bundle has no goroutine dump of the kubelet.
type kubeletWait struct {
	// housekeeping: the mount is the volume directory of a pod no pod
	// list knows, so the thread is the kubelet's housekeeping and its
	// sync loop is stopped.
	housekeeping bool
	summary      string
	explanation  string
}

// kubeletWaitIn words kubelet threads (tied to the mount by the evidence)
// waiting in a hung mount whose mountpoints are mps.
func (st *state) kubeletWaitIn(mps []string, threads []layout.Task) kubeletWait {
	var w kubeletWait
	if len(threads) == 0 {
		return w
	}
	names := listOf(kubeletThreadNames(threads), 3)
	var uids []string
	for _, mp := range mps {
		if m := rePodVolumePath.FindStringSubmatch(mp + "/"); m != nil && !contains(uids, m[1]) {
			uids = append(uids, m[1])
		}
	}
	const confirm = "The kubelet's goroutine dump would confirm it and show for how long: it needs a kubelet credential allowed its pprof endpoints (get nodes/proxy: --kubelet-token with --kubelet-pprof, the opt-in of docs/kubernetes.md)."
	if len(uids) == 0 {
		w.summary = "; a kubelet thread waits in it"
		w.explanation = "Without the kubelet's goroutine dump, its threads' kernel stacks show " + names +
			" waiting in this mount, which is not a pod's volume directory: what the kubelet was doing there is not in this bundle. " + confirm
		return w
	}
	var orphaned, listed, unlisted []string
	var lists []string
	for _, uid := range uids {
		l, consulted := st.podListingOf(uid)
		for _, c := range consulted {
			if !contains(lists, c) {
				lists = append(lists, c)
			}
		}
		switch l {
		case podOrphaned:
			orphaned = append(orphaned, uid)
		case podListed:
			listed = append(listed, st.podName(uid))
		default:
			unlisted = append(unlisted, uid)
		}
	}
	switch {
	case len(orphaned) > 0:
		w.housekeeping = true
		w.summary = fmt.Sprintf("; the kubelet's housekeeping is stuck on it (inferred from a kubelet thread's kernel stack and the orphaned pod %s), so no new pod starts on this node", orphaned[0])
		w.explanation = fmt.Sprintf("Without the kubelet's goroutine dump, the kernel's view says it: %s waits in this mount, and the mount is a volume directory of pod %s, which no pod list of this bundle knows (%s): a pod that no longer exists. "+
			"The kubelet visits the volume directories of pods that no longer exist in its housekeeping (HandlePodCleanups → cleanupOrphanedPodDirs), which runs inside the sync loop: "+
			"the sync loop is stopped there, and no pod of this node is started, updated or torn down until the mount answers (incident 003). This is inferred from the kernel stack and the pod UID. ",
			names, listOf(orphaned, 3), strings.Join(lists, ", "))
		w.explanation += confirm
	case len(unlisted) > 0:
		w.summary = fmt.Sprintf("; a kubelet thread waits in it, in the volume directory of pod %s, which the bundle's missing pod lists cannot place", unlisted[0])
		w.explanation = fmt.Sprintf("Without the kubelet's goroutine dump, the kernel's view shows %s waiting in the volume directory of pod %s. Whether that pod still exists is unknown: the bundle holds no pod list (no kubelet /pods, no container runtime sandboxes, no API view). "+
			"If it no longer exists, this is the kubelet's housekeeping of deleted pods' volume directories, and the sync loop that starts every new pod is stopped on this mount (incident 003); if it does, the pod's own volume setup or teardown is stuck. ",
			names, listOf(unlisted, 3))
		w.explanation += confirm
	default:
		w.summary = fmt.Sprintf("; a kubelet thread waits in it, in the volume of pod %s", listed[0])
		w.explanation = fmt.Sprintf("Without the kubelet's goroutine dump, the kernel's view shows %s waiting in the volume directory of pod %s, which %s still lists: the kubelet's work on that pod (its volume setup, teardown or status) is stuck on this mount, not necessarily its housekeeping of deleted pods. ",
			names, listOf(listed, 3), strings.Join(lists, ", "))
		w.explanation += confirm
	}
	return w
}
