package signatures

// Class is one signature: the stable words of the upstream messages it
// stands for, and what their lines mean.
type Class struct {
	ID string
	// Meaning says what a line of the class means on the node.
	Meaning string
	// Words must all be in the format (and so in the line). Each may
	// list alternatives separated by "|". Matching is ASCII
	// case-insensitive but for each word's first byte, which is found
	// exactly (fast): write a word from a byte whose case does not vary
	// ("rphaned pod" for "Orphaned pod" and "orphaned pod").
	Words []string
	// Needs must also be in a line, not in the format: the text of the
	// error the format wraps ("resource busy"). A class with Needs is a
	// variant of the class of its Words, placed before it.
	Needs []string
	// Unless: a line or format containing any of these is not of the
	// class.
	Unless []string
	// Key is the kind of object the class is keyed by.
	Key KeyKind
	// KeyRe, when set, extracts the key (its first non-empty group)
	// before the generic extraction of Key's kind.
	KeyRe *KeyRegexp
	// Sources are the components whose messages these are ("kubelet",
	// "kernel", ...): for the documentation, and for the classes whose
	// messages are not Go format strings (the kernel's, errno texts).
	Sources []string
	// Fallback classes are the generic wordings of a failed operation
	// ("MountVolume.SetUp failed", "failed to unmount"): a line falls in
	// one (the first that matches) only when it matches no other class,
	// so the error it wraps ("an operation with the given Volume ID ...
	// already exists", "transport endpoint is not connected") names it.
	Fallback bool
	// Independent classes are evidence a line may carry beside its own
	// signature (a directory being deleted, a driver's unpublish call).
	Independent bool
	// Trace: the lines after a hit that continue it (a kernel call trace)
	// belong to it.
	Trace bool
	// EvidenceOnly: ordinary lines, evidence beside a finding, never one
	// alone.
	EvidenceOnly bool
	// Example is a line of the class as a node writes it, for the
	// documentation and the tests.
	Example string
}

// grpcCallSucceeded marks a driver's record of a gRPC call that returned
// no error: csi-driver-host-path's (and the mock drivers') JSON call log,
// `gRPCCall: {"Method":…,"Request":…,"Response":{},"Error":"","FullError":null}`,
// whose "Error" field is empty on success — plain, or quoted once inside a
// structured line. Its request names staging and target paths, which is
// all the generic CSI failure wordings look for beside "rror".
// (A stop-gap until analyze reads records as events with their outcome.)
var grpcCallSucceeded = []string{`"Error":""`, `\"Error\":\"\"`}

// q is a quote as a log writes it: plain, or escaped once or more (klog
// quotes an error holding quotes: `err="... \"x\" ..."`).
const q = `\\*"`

// Classes in match order. A line falls in every class it matches, but
// for the Fallback classes: the first of them that matches, and only when
// no other class did. A variant (with Needs) comes before its base; the
// extractor classifies a format in the first class whose words it holds,
// variants left out.
var Classes = []Class{
	// --- kubelet: volume teardown ---
	{ID: "teardown-busy", Sources: []string{"kubelet"}, Key: KeyVolume,
		Meaning: "the kubelet cannot tear the volume down: removing its directory fails with EBUSY, retried with backoff",
		Words:   []string{"earDown failed|earDown.failed"}, Needs: []string{"resource busy"},
		Example: `E0102 03:04:05.678901    1234 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/hostpath.csi.k8s.io^vol-1 podName:0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d nodeName:}" failed. No retries permitted until 2024-01-02 03:04:37 (durationBeforeRetry 32s). Error: UnmountVolume.TearDown failed for volume "data" (UniqueName: "kubernetes.io/csi/hostpath.csi.k8s.io^vol-1") pod "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d" (UID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d") : remove /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-1/mount: device or resource busy`},
	{ID: "teardown-not-empty", Sources: []string{"kubelet"}, Key: KeyPath,
		KeyRe:   keyRe(`(?:remove|rmdir\(\) volume at path) (/[^\s:"\\]+/volumes/[^\s:"\\]+)`),
		Meaning: "the kubelet cannot remove a volume's directory: it still holds files (\"directory not empty\"), usually data written after the mount was gone",
		Words:   []string{"earDown failed|earDown.failed|ear down|rmdir|failed to remove dir|failed to clean mount dir|ould not tear"},
		Needs:   []string{"directory not empty"}, Unless: []string{"/merged", "storage/overlay", "rphaned pod"},
		Example: `E0412 08:15:02.114233    2211 nestedpendingoperations.go:301] Operation for "{volumeName:kubernetes.io/empty-dir/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d-cache podName:0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d nodeName:}" failed. No retries permitted until 2021-04-12 08:17:04 (durationBeforeRetry 2m2s). Error: "UnmountVolume.TearDown failed for volume \"cache\" (UniqueName: \"kubernetes.io/empty-dir/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d-cache\") pod \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\" (UID: \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\") : remove /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~empty-dir/cache: directory not empty"`},
	{ID: "teardown-failed", Fallback: true, Sources: []string{"kubelet"}, Key: KeyVolume,
		Meaning: "the kubelet's TearDown of a pod's volume fails and is retried with backoff; the pod stays Terminating",
		Words:   []string{"earDown failed|earDown.failed|nmountVolume.NewUnmounter failed|nmountVolume.MarkVolumeAsUnmounted failed|nmountVolume.FindPluginByName failed"}},
	{ID: "teardown-succeeded", Sources: []string{"kubelet"}, Key: KeyVolume, EvidenceOnly: true,
		Meaning: "the kubelet reports the volume's TearDown succeeded",
		Words:   []string{"earDown succeeded"}},
	{ID: "still-mounted-by-other-references", Sources: []string{"kubelet"}, Key: KeyPath,
		KeyRe:   keyRe(`device mount path ` + q + `([^"\\]+)`),
		Meaning: "the kubelet will not unmount a device's staging path: other mounts still reference the device",
		Words:   []string{"still mounted by other references"}},
	{ID: "unmount-device-failed", Sources: []string{"kubelet", "ceph-csi"}, Key: KeyDevice,
		KeyRe:   keyRe(`UniqueName: ` + q + `([^"\\]+)|unmap device (/dev/[A-Za-z0-9]+)|rbd: unmap for spec \(([^)\s]+)\)|rbd args: \[unmap ([^\s\]]+)`),
		Meaning: "the kubelet cannot unmount/unmap the device",
		Words:   []string{"nmountDevice failed|nmap failed|failed to unmap|nmap for spec|rbd args: [unmap |is still in use|device is in use when|GetDeviceMountPath failed"},
		// The kubelet's per-pod unmap operations are unmap-volume-failed
		// whatever their wrapped error says ("failed to unmap device from
		// map path"): the operation's name says what failed, for which pod.
		Unless:  []string{"still mounted by other references", "in use by node", "ailed to check if device", "ountVolume.GetDeviceMountPath", "apVolume.GetDeviceMountPath", "nmapVolume.UnmapBlockVolume failed", "nmapVolume.UnmapPodDevice failed"},
		Example: `E0102 03:04:05.000000       1 nodeserver.go:900] ID: 77 Req-ID: 0001-0009-rook-ceph-0000000000000002-4f7c2d1e rbd: unmap for spec (replicapool/csi-vol-4f7c2d1e) failed (exit status 16): (rbd: sysfs write failed rbd: unmap failed: (16) Device or resource busy)`},
	{ID: "unmap-volume-failed", Fallback: true, Sources: []string{"kubelet"}, Key: KeyVolume,
		Meaning: "the kubelet cannot unmap a block volume from a pod",
		Words:   []string{"nmapVolume failed|nmapDevice failed|nmapVolume.UnmapPodDevice failed|nmapVolume.UnmapBlockVolume failed|nmapVolume.UnmapDevice failed"}},
	{ID: "mount-failed", Fallback: true, Sources: []string{"kubelet"}, Key: KeyVolume,
		Meaning: "the kubelet cannot mount a pod's volume (MountVolume.SetUp, MountDevice or WaitForAttach failed); the pod stays ContainerCreating",
		Words:   []string{"ountVolume.SetUp failed|ountVolume.GetDeviceMountPath failed|apVolume.GetDeviceMountPath failed|ountVolume.MountDevice failed|ountVolume.WaitForAttach failed|apVolume.MapPodDevice failed|apVolume.SetUpDevice failed|apVolume.WaitForAttach failed|apVolume.MapBlockVolume failed|apVolume.MarkVolumeAsMounted failed|ountVolume.MarkVolumeAsMounted failed|ountVolume.NewMounter initialization failed"}},
	{ID: "volume-attach-mount-timeout", Fallback: true, Sources: []string{"kubelet"}, Key: KeyPod,
		Meaning: "the kubelet gave up waiting for a pod's volumes to be attached or mounted; the pod stays ContainerCreating and its sync is retried",
		Words:   []string{"nable to attach or mount volumes|imeout expired waiting for volumes to attach or mount|nable to mount volumes for pod"}},
	{ID: "pod-volumes-not-cleaned-up", Sources: []string{"kubelet"}, Key: KeyPod,
		Meaning: "the pod is terminated but the kubelet waits for its volumes to be cleaned up",
		Words:   []string{"some volumes have not been cleaned up"}},
	// --- kubelet: orphaned pods (housekeeping) ---
	{ID: "rmdir-volume-busy", Sources: []string{"kubelet"}, Key: KeyPod,
		Meaning: "removing a volume directory of a deleted pod fails with EBUSY",
		Words:   []string{"failed to rmdir() "}, Needs: []string{"busy"}},
	{ID: "orphaned-pod-volumes-dir-not-removed", Sources: []string{"kubelet"}, Key: KeyPod,
		Meaning: "the kubelet cannot remove a deleted pod's volumes directory (a leftover file such as vol_data.json)",
		Words:   []string{"rphaned pod", "trying to remove the volumes dir|failed to remove volumes subdir"}},
	{ID: "orphaned-pod-volume-paths", Sources: []string{"kubelet"}, Key: KeyPod,
		Meaning: "a deleted pod's volume paths are still on disk",
		Words:   []string{"rphaned pod", "still present on disk|volumes are not cleaned up|volumes not yet removed"}},
	{ID: "orphaned-pods-cleanup-failed", Sources: []string{"kubelet"}, Key: KeyPod,
		Meaning: "the kubelet's housekeeping fails to clean up deleted pods' directories",
		Words:   []string{"ailed cleaning up orphaned pod|rror cleaning up orphaned pod|ailed cleaning pods"}, Unless: []string{"user namespace"}},
	{ID: "orphaned-pod-remove-failed", Fallback: true, Sources: []string{"kubelet"}, Key: KeyPod,
		Meaning: "the kubelet fails to remove a deleted pod's directory",
		Words:   []string{"rphaned pod", "ailed|rror|err:"}, Unless: []string{"user namespace", "Cleaned up", "cgroup"}},
	// --- kubelet: sync loop, PLEG, runtime ---
	{ID: "pleg-unhealthy", Sources: []string{"kubelet"},
		Meaning: "the kubelet's pod lifecycle event generator is stuck",
		Words:   []string{"PLEG is not healthy|pleg was last seen active"}, Unless: []string{"pleg has yet to be successful"}},
	{ID: "syncloop-slow", Sources: []string{"kubelet"},
		Meaning: "the kubelet's sync loop is not running on time",
		Words:   []string{"sync Loop took longer than expected|syncloop failed|syncLoop is not healthy|ousekeeping took longer than expected"}},
	{ID: "runtime-deadline-exceeded", Sources: []string{"kubelet", "containerd", "cri-o"}, Key: KeyText,
		KeyRe:   keyRe(`^(?:.*?(?:podSandboxID|sandboxID)=\\*"?([0-9a-f]{64})|.*?podUID=\\*"?([0-9a-fA-F-]{36})|.*?(?:StopPodSandbox|RemovePodSandbox|StopContainer|RemoveContainer) for \\*"([0-9a-f]{64})|.*?containerID=\\*"?([0-9a-f]{64})|.*?(?:ContainerID:|\bid=)([0-9a-f]{64})|.*?(ListPodSandbox|ListContainers|PodSandboxStatus|ContainerStatus|RunPodSandbox|CreateContainer|StartContainer|ExecSync|Version))`),
		Meaning: "a call of the kubelet to the container runtime timed out (DeadlineExceeded): the runtime is stuck, often on a container's mount",
		// containerd renders a shim call that timed out as "context
		// deadline exceeded: unknown" (the errdefs wrapping of a ttrpc
		// error), CRI-O as "context was either canceled or the deadline
		// was exceeded": the same timeout in the runtime's own words.
		Words: []string{"DeadlineExceeded|context deadline exceeded: unknown|the deadline was exceeded"},
		// A CSI node plugin's own gRPC server error ("GRPC error: ...")
		// and its volume stats call are a driver's, not a runtime's.
		Unless:  []string{"MountVolume", "UnmountVolume", "MountDevice", "UnmountDevice", "NodeStage", "NodeUnstage", "NodePublish", "NodeUnpublish", "/csi.v1.", "NodeGetVolumeStats", "GRPC error:"},
		Example: `E1103 10:22:41.550012    1187 remote_runtime.go:128] "StopPodSandbox from runtime service failed" err="rpc error: code = DeadlineExceeded desc = context deadline exceeded" podSandboxID="9d2a6e0c5a1b"`},
	// --- CSI drivers ---
	{ID: "csi-operation-exists", Sources: []string{"ceph-csi", "csi-driver-nfs", "csi-driver-smb", "azuredisk", "aws-ebs", "gcp-pd"}, Key: KeyVolume,
		KeyRe:   keyRe(`Volume ID ([^\s"\\]+) already exists`),
		Meaning: "the CSI driver refuses an operation on a volume: one is already in progress",
		Words:   []string{"operation with the given Volume ID|peration for volume|ending operation", "already exists|in progress|already in progress"}},
	{ID: "csi-not-published", Sources: []string{"hostpath"}, Key: KeyVolume,
		KeyRe:   keyRe(`[Vv]olume ` + q + `([^"\\]+)` + q + ` is not published`),
		Meaning: "the CSI driver says the volume is not published (nothing to unmount)",
		Words:   []string{"is not published at", "nothing to do"},
		Example: `I0102 03:04:05.000000       1 nodeserver.go:220] Volume "vol-7c1d" is not published at "/var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-1/mount", nothing to do.`},
	{ID: "csi-unstage-failed", Fallback: true, Sources: []string{"ceph-csi", "aws-ebs", "azuredisk", "gcp-pd", "vsphere", "longhorn", "topolvm", "csi-driver-nfs", "csi-driver-smb", "hostpath"}, Key: KeyVolume,
		Meaning: "the CSI driver fails to unstage a volume (unmount its staging path or detach its device)",
		Words:   []string{"nstage|staging|nstaging|NodeUnstageVolume", "fail|could not|unable|rror"}, Unless: append([]string{"succeeded", "successfully", "NodeExpand", "SupportsStageUnstage"}, grpcCallSucceeded...)},
	{ID: "csi-unpublish-failed", Fallback: true, Sources: []string{"ceph-csi", "aws-ebs", "azuredisk", "gcp-pd", "vsphere", "longhorn", "topolvm", "csi-driver-nfs", "csi-driver-smb", "hostpath"}, Key: KeyVolume,
		Meaning: "the CSI driver fails to unpublish a volume (unmount its target path)",
		Words:   []string{"npublish|NodeUnpublishVolume|nmount target|nmounting target|emove mount target", "fail|could not|unable|rror"}, Unless: append([]string{"succeeded", "successfully", "is not published at"}, grpcCallSucceeded...)},
	{ID: "csi-unmount-error", Fallback: true, Sources: []string{"csi-lib-utils"}, Key: KeyVolume,
		Meaning: "a CSI driver's node call that unmounts a volume returned an error (its gRPC error log line)",
		Words:   []string{"GRPC error", "umount|unmount"},
		Example: `E0121 15:24:24.356452       1 grpc.go:79] GRPC error: rpc error: code = Internal desc = unable to umount the volume pvc-f5e204ba err : stat /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-f5e204ba/mount: input/output error`},
	{ID: "umount-target-busy", Sources: []string{"util-linux"}, Key: KeyPath,
		KeyRe:   keyRe(`umount: (/[^\s:"\\]+): target is busy`),
		Meaning: "the umount command refuses a mount point that is in use (\"target is busy\")",
		Words:   []string{"umount: ", "target is busy"},
		Example: `Output: umount: /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-1/mount: target is busy.`},
	// --- runtimes ---
	{ID: "runtime-shm-busy", Sources: []string{"containerd", "cri-o", "dockerd"}, Key: KeyPath,
		KeyRe:   keyRe(`(/[^\s:"\\]*/shm)\\*"?:? *(?:device or )?resource busy`),
		Meaning: "the runtime cannot unmount or remove a container's /dev/shm mount: it is busy, often held in another mount namespace",
		Words:   []string{"/shm"}, Needs: []string{"resource busy"},
		Example: `time="2023-05-02T10:11:12Z" level=error msg="failed to unmount sandbox shm" error="unmount /run/containerd/io.containerd.grpc.v1.cri/sandboxes/9d2a6e0c5a1b/shm: device or resource busy"`},
	{ID: "runtime-rootfs-not-empty", Sources: []string{"containerd", "cri-o", "dockerd"}, Key: KeyPath,
		KeyRe:   keyRe(`(/[^\s:"\\]*/merged)`),
		Meaning: "the runtime cannot remove a container's rootfs mountpoint: directory not empty (still mounted elsewhere, or written into after the unmount)",
		Words:   []string{"/merged", "directory not empty"}, Unless: []string{"unlinkat "},
		Example: `time="2023-05-02T10:11:12Z" level=error msg="failed to remove rootfs" error="remove /var/lib/containers/storage/overlay/8c1e2f/merged: directory not empty"`},
	{ID: "unlinkat-busy", Sources: []string{"containerd", "cri-o", "dockerd"}, Key: KeyPath,
		KeyRe:   keyRe(`unlinkat (/[^\s:"\\]+)`),
		Meaning: "the runtime cannot remove a container's filesystem: it is still mounted (EBUSY)",
		Words:   []string{"unlinkat "}, Needs: []string{"resource busy"},
		Example: `time="2023-05-02T10:11:12Z" level=error msg="Handler for DELETE /v1.41/containers/3f9a returned error: container 3f9a: driver \"overlay2\" failed to remove root filesystem: unlinkat /var/lib/docker/overlay2/8c1e2f/merged: device or resource busy"`},
	{ID: "runtime-remove-failed", Fallback: true, Sources: []string{"containerd", "cri-o", "dockerd"}, Key: KeyPath,
		Meaning: "the runtime fails to remove a container or its root filesystem",
		Words:   []string{"ailed to remove root filesystem|rror removing mounted layer|ailed to remove rootfs|ailed to remove container|ailed to remove volatile|ailed to remove sandbox|ailed to cleanup rootfs|ailed to delete container|rror removing container"}},
	{ID: "unmount-failed", Fallback: true, Sources: []string{"kubelet", "mount-utils", "containerd", "dockerd", "azuredisk", "gcp-pd"}, Key: KeyPath,
		Meaning: "an unmount fails (the mount helper's own error)",
		Words:   []string{"nmount failed|rror unmounting|ailed to unmount|nable to unmount|ailed to exec unmount|nable to umount|ailed to umount|rror umounting"}, Unless: []string{"successfully", "CanMount"}},
	// --- kernel and errno texts (not Go format strings) ---
	{ID: "kernel-hung-task", Sources: []string{"kernel"}, Key: KeyTask, Trace: true,
		KeyRe:   keyRe(`task (\S+?:\d+) blocked for more than`),
		Meaning: "a task is blocked in the kernel (hung task)",
		Words:   []string{"blocked for more than"},
		Example: `[12345.678901] INFO: task kubelet:2211 blocked for more than 120 seconds.`},
	{ID: "libceph-session-lost", Sources: []string{"kernel"}, Key: KeyServer,
		KeyRe:   keyRe(`libceph: (mon\d+ \S+)`),
		Meaning: "the kernel ceph client lost its monitor session",
		Words:   []string{"libceph", "session lost"},
		Example: `[ 4411.002] libceph: mon0 (1)10.0.0.11:6789 session lost, hunting for new mon`},
	{ID: "libceph-session-established", Sources: []string{"kernel"}, Key: KeyServer, EvidenceOnly: true,
		KeyRe:   keyRe(`libceph: (mon\d+ \S+)`),
		Meaning: "the kernel ceph client (re-)established its monitor session",
		Words:   []string{"libceph", "session established"},
		Example: `[ 4411.019] libceph: mon1 (1)10.0.0.12:6789 session established`},
	{ID: "nfs-not-responding", Sources: []string{"kernel"}, Key: KeyServer,
		KeyRe:   keyRe(`nfs: server (\S+) not responding`),
		Meaning: "an NFS server is not responding",
		Words:   []string{"nfs: server", "not responding"},
		Example: `[ 9120.4] nfs: server 10.0.0.7 not responding, still trying`},
	{ID: "nfs-ok", Sources: []string{"kernel"}, Key: KeyServer, EvidenceOnly: true,
		KeyRe:   keyRe(`nfs: server (\S+) OK`),
		Meaning: "the NFS server responds again",
		Words:   []string{"nfs: server", " OK"},
		Example: `[ 9180.1] nfs: server 10.0.0.7 OK`},
	{ID: "iscsi-connection-error", Sources: []string{"kernel", "iscsid"}, Key: KeyServer,
		KeyRe:   keyRe(`(connection\d+:\d+)|iSCSI connection (\d+:\d+) error|connect to ([0-9a-fA-F.:\[\]]+):3260 failed`),
		Meaning: "the kernel's or iscsid's iSCSI connection errors",
		Words:   []string{"detected conn error|ping timeout of|Kernel reported iSCSI connection|connect to "},
		Needs:   []string{"conn error|ping timeout|error (|:3260 failed"},
		Example: `[ 812.441] connection1:0: detected conn error (1020)`},
	{ID: "filesystem-error", Sources: []string{"kernel"}, Key: KeyDevice,
		KeyRe:   keyRe(`\(device ([^)\s]+)\)|EXT4-fs \(([^)\s]+)\): Remounting|XFS \(([^)\s]+)\): .*(?:[Cc]orrupt|shut ?down|I/O [Ee]rror|metadata)|I/O error on dev(?:ice)? ([A-Za-z0-9_-]+)|I/O error, dev ([A-Za-z0-9_-]+)`),
		Meaning: "the kernel's filesystem errors",
		Words:   []string{"EXT4-fs error|Remounting filesystem read-only|Detected aborted journal|XFS (|Buffer I/O error on dev|I/O error, dev "},
		Unless:  []string{"Mounting V", "Ending clean mount", "Unmounting Filesystem", "Quotacheck", "EXT4-fs warning"},
		Example: `[ 9912.1] EXT4-fs error (device rbd0): ext4_find_entry:1455: inode #2: comm kubelet: reading directory lblock 0`},
	{ID: "transport-not-connected", Sources: []string{"errno"}, Key: KeyPath,
		KeyRe:   keyRe(`(/[^\s:"'\\]+)[\s"'\\]*:\s*[Tt]ransport endpoint is not connected`),
		Meaning: "a FUSE mount's daemon is gone",
		Words:   []string{"ransport endpoint is not connected"},
		Example: `E0102 03:04:05.678901    2211 kubelet_volumes.go:100] stat /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-1/mount: transport endpoint is not connected`},
	// --- evidence a line carries beside its own signature ---
	{ID: "csi-node-unpublish", Sources: []string{"ceph-csi", "aws-ebs", "azuredisk", "gcp-pd", "vsphere", "longhorn", "topolvm", "csi-driver-nfs", "csi-driver-smb", "hostpath"}, Key: KeyVolume, Independent: true,
		Meaning: "a CSI driver's NodeUnpublishVolume call",
		Words:   []string{"NodeUnpublishVolume"},
		Example: `I0102 03:04:05.000000       1 utils.go:195] ID: 41 Req-ID: 0001-0009-rook-ceph-0000000000000002-4f7c2d1e GRPC call: /csi.v1.Node/NodeUnpublishVolume`},
	{ID: "deleting-dir", Sources: []string{"kubelet"}, Key: KeyPath, Independent: true,
		KeyRe:   keyRe(`(/[^\s"\\]*?)\.deleting~`),
		Meaning: "a directory being removed (renamed .deleting~ first)",
		Words:   []string{".deleting~"},
		Example: `E0102 03:04:05.678901    2211 kubelet_volumes.go:100] removing /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~empty-dir/cache.deleting~123: file exists`},
}
