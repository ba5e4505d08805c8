// Package analyze reads a nodesnap bundle and names the causes of a
// node's storage trouble: the incidents of ../shared/incidents and the
// signatures listed there.
//
// The bundle is read in one streaming pass (bundle.WalkReader: nothing is
// extracted to disk, unsafe archives are refused). Each collector file
// goes to one reader (readers.go) that keeps only the facts the rules
// need; big files are decoded a record at a time, and log files are
// matched line by line against the signatures of logs.go. When the walk
// ends, the rules (rules_*.go, one file per family) join those facts into
// findings: one finding per cause, with the evidence from every collector
// that saw it. Rules that join several collectors run first and claim the
// log lines they use; the generic log rules then report only what no
// cause explained.
//
// Finding IDs are stable:
//
//	mount-held-in-foreign-namespace     a device or kubelet/runtime mount held only outside the host's namespace (incident 002, moby#22260)
//	nodesnap-own-namespace-excluded     (info) nodesnap ran in a mount namespace of its own (a pod): left out of the holder analysis
//	csi-published-state-lost            the CSI driver's state says unpublished, the target is mounted (incident 004)
//	csi-published-not-mounted           the driver says published, nothing is mounted
//	csi-vol-data-without-mount          a CSI volume directory with vol_data.json and no mount
//	volume-mounted-for-unknown-pod      pod volume mounts of a pod the kubelet does not run
//	hung-mount                          a mount that did not answer the probe, with the tasks and kubelet goroutines stuck on it (incident 003)
//	mount-not-probed                    a mount mountprobe did not reach before its deadline, with the tasks and dirshape timeout that say it hangs
//	fuse-transport-not-connected        a FUSE mount whose daemon is gone (ENOTCONN)
//	mount-probe-error                   a mount answering ESTALE, EIO, ...
//	tasks-blocked-in-kernel             D-state tasks no hung mount explains
//	kubelet-syncloop-unhealthy          healthz [-]syncloop, pod cleanup goroutines stuck, no hung mount found
//	kubelet-healthz-failing             other failing kubelet health checks
//	kubelet-pleg-unhealthy              "PLEG is not healthy"
//	volume-dir-deleting-leftovers       leaked <volume>.deleting~NNN directories (incident 000)
//	huge-directory, ext4-nlink-overflow directories past 100,000 entries or ext4's 64,998-subdirectory link limit (incident 001)
//	runtime-volume-removal-blocking     a runtime goroutine in os.RemoveAll holding the volume lock others wait on (incident 001)
//	volume-teardown-busy                UnmountVolume.TearDown failing with EBUSY, retried with backoff
//	volume-unmount-device-failed        UnmountDevice / rbd unmap failing (byte-array output decoded)
//	pod-volumes-not-cleaned-up          "Pod is terminated, but some volumes have not been cleaned up"
//	orphaned-pod-volume-paths           "orphaned pod ... found, but volume paths are still present on disk" (or, kubelet 1.26+, "... remove the volumes dir: not a directory")
//	csi-operation-already-exists        "an operation with the given Volume ID ... already exists"
//	staging-mount-still-referenced      "... is still mounted by other references"
//	container-rootfs-busy               "unlinkat .../merged: device or resource busy"
//	csi-driver-not-published            "Volume ... is not published at ..., nothing to do"
//	kernel-hung-task                    "INFO: task ... blocked for more than 120 seconds"
//	ceph-session-lost                   "libceph: monN ... session lost"
//	nfs-server-not-responding           "nfs: server ... not responding"
//	fuse-transport-not-connected-logged "Transport endpoint is not connected" in a log, no dead mount found
//	decoded-command-output              a log line's byte-array command output, decoded
//	unreadable-evidence                 a collector file that could not be decoded
//	evidence-incomplete                 collectors that timed out, failed or were interrupted
//	evidence-missing                    evidence the run left out: the size cap, --timeout, an interrupt, no root
//	analyze-internal-error              a rule that failed (a bug)
//	earlier-log-lines                   (info) signature lines of an earlier kubelet instance, before the window, about another node or an earlier device of the same name
//
// Log lines count only when the running kubelet instance wrote them, in the
// collection window, about this node (scope.go), and mechanisms that depend
// on the kubelet's version say which version they assumed (kubeversion.go).
package analyze
