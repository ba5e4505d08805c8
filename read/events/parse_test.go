package events

import (
	"strings"
	"testing"
	"time"
)

var ref = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// want is what a record must be read as; "" and zero fields are not
// checked, except Outcome, which always is.
type want struct {
	ok        bool
	source    string
	kubelet   bool
	level     Level
	op        Op
	outcome   Outcome
	method    string
	code      string
	errno     string
	exit      int
	permanent bool
	keys      Keys
	msgHas    string
}

func TestParseFormats(t *testing.T) {
	cases := []struct {
		name string
		line string
		want want
	}{
		{"klog text kubelet journal", `Nov 21 09:10:01 node-1 kubelet[812]: E1121 09:10:01.123456     812 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f60718 podName: nodeName:}" failed. No retries permitted until 2026-11-21 09:12:03 (durationBeforeRetry 2m2s). Error: MountVolume.MountDevice failed for volume "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f" (UniqueName: "kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f60718") pod "web-0" (UID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d") : rpc error: code = NotFound desc = Failed to find device path /dev/xvdba. no device path for device "/dev/xvdba" volume "vol-0a1b2c3d4e5f60718" is found`,
			want{ok: true, source: "kubelet", kubelet: true, level: LevelError, op: OpStage, outcome: OutcomeFailed, code: "NotFound", permanent: true,
				keys: Keys{Handle: "vol-0a1b2c3d4e5f60718", PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f", PodUID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"}}},
		{"klog structured", `E1121 09:10:01.123456  4321 reconciler.go:123] "operationExecutor.MountVolume failed" err="MountVolume.SetUp failed for volume \"data\" (UniqueName: \"kubernetes.io/nfs/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d-data\") pod \"web-0\" (UID: \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\") : mount failed: exit status 32\nMounting command: mount\nMounting arguments: -t nfs 10.0.0.5:/exports/data /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~nfs/data\nOutput: mount.nfs: access denied by server while mounting 10.0.0.5:/exports/data" pod="default/web-0"`,
			want{ok: true, kubelet: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, exit: 32, permanent: true,
				keys: Keys{Pod: "default/web-0", PodUID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d", Server: "10.0.0.5:/exports/data"}, msgHas: "access denied by server"}},
		{"kubelet success", `I1121 09:10:05.000001     812 operation_generator.go:721] "MountVolume.SetUp succeeded for volume \"pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f\" (UniqueName: \"kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d4e5f60718\") pod \"web-0\" (UID: \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\") " pod="default/web-0"`,
			want{ok: true, kubelet: true, level: LevelInfo, op: OpMount, outcome: OutcomeSucceeded, keys: Keys{Handle: "vol-0a1b2c3d4e5f60718"}}},
		{"csi-lib GRPC error", `2026-11-21T09:10:01.000000000Z stderr F E1121 09:10:01.000000       1 utils.go:101] "GRPC error" err="rpc error: code = NotFound desc = volume \"vol-0123456789abcdef0\" not found: no such device"`,
			want{ok: true, level: LevelError, outcome: OutcomeFailed, code: "NotFound", permanent: true, keys: Keys{Handle: "vol-0123456789abcdef0"}}},
		{"ceph-csi request id", `I1121 09:10:01.000000   18322 utils.go:195] ID: 18322 Req-ID: 0001-0009-rook-ceph-0000000000000001-5e7b3c9a-1f2d-11ee-9a3b-0a580a800213 GRPC call: /csi.v1.Node/NodeStageVolume`,
			want{ok: false}},
		{"zap JSON", `{"level":"error","ts":"2026-11-21T09:10:01.123Z","caller":"node/node.go:123","msg":"NodePublishVolume failed","volume_id":"8a9c3f5e-1234-4bcd-9e8f-001122334455","target_path":"/var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f/mount","error":"mount failed: exit status 32: mount: wrong fs type, bad option, bad superblock on /dev/sdc"}`,
			want{ok: true, level: LevelError, op: OpPublish, outcome: OutcomeFailed, exit: 32, permanent: true, method: "NodePublishVolume",
				keys: Keys{Handle: "8a9c3f5e-1234-4bcd-9e8f-001122334455", PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f", Device: "/dev/sdc"}}},
		{"logrus JSON vsphere", `{"level":"error","time":"2026-11-21T09:10:01.123456789Z","caller":"osutils/linux_os_utils.go:300","msg":"error mounting volume. Parameters: {VolID:f3e4d5c6-7b8a-4c9d-8e0f-112233445566 FsType:ext4 Mount flags:[] Target:/var/lib/kubelet/plugins/kubernetes.io/csi/csi.vsphere.vmware.com/abc/globalmount} err: rpc error: code = Internal desc = error in formatting and mounting volume. Parameters: ... err: mount failed: exit status 32","TraceId":"00aa"}`,
			want{ok: true, level: LevelError, op: OpMount, outcome: OutcomeFailed, code: "Internal", exit: 32, permanent: true}},
		{"logfmt containerd rootfs", `Nov 21 09:10:01 node-1 containerd[700]: time="2026-11-21T09:10:01.123456789Z" level=error msg="failed to remove rootfs" error="unmount /run/containerd/io.containerd.runtime.v2.task/k8s.io/3f2a1b4c5d6e/rootfs: device or resource busy"`,
			want{ok: true, source: "containerd", level: LevelError, op: OpRootfsUnmount, outcome: OutcomeFailed, errno: "EBUSY",
				keys: Keys{Path: "/run/containerd/io.containerd.runtime.v2.task/k8s.io/3f2a1b4c5d6e/rootfs"}}},
		{"logfmt containerd sandbox network teardown", `Nov 21 09:10:01 node-1 containerd[700]: time="2026-11-21T09:10:01.123456789Z" level=error msg="StopPodSandbox for \"9a8b7c6d5e4f30211a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081\" failed" error="failed to destroy network for sandbox \"9a8b7c6d5e4f30211a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081\": plugin type=\"bridge\" failed (delete): netplugin failed"`,
			want{ok: true, source: "containerd", level: LevelError, op: OpSandboxRemove, outcome: OutcomeFailed,
				keys: Keys{Sandbox: "9a8b7c6d5e4f30211a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081"}}},
		{"logfmt containerd netns busy", `time="2026-11-21T09:10:01.123456789Z" level=error msg="PodSandboxStatus for \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\" failed" error="failed to get sandbox ip: check network namespace closed: remove netns: unlinkat /var/run/netns/cni-11112222-3333-4444-5555-666677778888: device or resource busy"`,
			want{ok: true, level: LevelError, op: OpSandboxRemove, outcome: OutcomeFailed, errno: "EBUSY",
				keys: Keys{Sandbox: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}},
		{"umount output quoted alone", `Nov 21 09:10:01 node-1 kubelet[812]: Output: umount: can't unmount /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f/mount: Invalid argument`,
			want{ok: true, op: OpUnmount, outcome: OutcomeFailed, errno: "EINVAL", permanent: false, keys: Keys{PV: "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f"}}},
		{"mount output quoted alone", `Nov 21 09:10:01 node-1 kubelet[812]: mount: wrong fs type, bad option, bad superblock on /dev/sdc,`,
			want{ok: true, op: OpMount, outcome: OutcomeFailed, keys: Keys{Device: "/dev/sdc"}}},
		{"path in a field of its own", `E1121 09:10:01.000000 helper.go:75 fuse mount helper exited, pid: 31, path: /var/lib/nomad/csi/staging/web/data-b, error: signal: killed`,
			want{ok: true, op: OpMount, outcome: OutcomeFailed, keys: Keys{Path: "/var/lib/nomad/csi/staging/web/data-b"}}},
		{"path in a JSON field", `{"level":"error","msg":"mount helper exited","target_path":"/var/lib/nomad/csi/per-alloc/abc/data-c/rw","error":"signal: killed"}`,
			want{ok: true, level: LevelError, outcome: OutcomeFailed, keys: Keys{Path: "/var/lib/nomad/csi/per-alloc/abc/data-c/rw"}}},
		{"pod volume dir removal busy", `E1121 09:10:01.000000     812 kubelet_volumes.go:154] orphaned pod found, but error occurred: remove /var/lib/k0s/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~projected/kube-api-access-x1y2z: device or resource busy`,
			want{ok: true, op: OpTeardown, outcome: OutcomeFailed, errno: "EBUSY", keys: Keys{PodUID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"}}},
		{"rust tracing mayastor", `2026-11-21T09:10:01.123456Z ERROR csi_node::node: NodeStageVolume failed volume_id="ec4e66fd-3b33-4439-b504-d49aba53da26" error=Status { code: Internal, message: "Failed to stage volume ec4e66fd-3b33-4439-b504-d49aba53da26: failed to connect to nvmf target: connection timed out" }`,
			want{ok: true, level: LevelError, op: OpStage, outcome: OutcomeFailed, errno: "ETIMEDOUT", keys: Keys{Handle: "ec4e66fd-3b33-4439-b504-d49aba53da26"}}},
		{"host-path gRPC success", `2026-11-21T09:10:01.000000000Z stderr F I1121 09:10:01.000000       1 server.go:104] GRPC call: /csi.v1.Node/NodePublishVolume`,
			want{ok: false}},
		{"host-path gRPCCall JSON success", `I1121 09:10:01.000000       1 server.go:117] gRPCCall: {"Method":"/csi.v1.Node/NodePublishVolume","Request":{"volume_id":"4b7f2d7e-1a2b-11ee-8c3d-0242ac120002","target_path":"/var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f/mount"},"Response":{},"Error":"","FullError":null}`,
			want{ok: true, op: OpPublish, outcome: OutcomeSucceeded, method: "NodePublishVolume"}},
		{"host-path gRPCCall JSON failure", `I1121 09:10:01.000000       1 server.go:117] gRPCCall: {"Method":"/csi.v1.Node/NodeStageVolume","Request":{"volume_id":"4b7f2d7e-1a2b-11ee-8c3d-0242ac120002"},"Response":null,"Error":"rpc error: code = NotFound desc = volume id 4b7f2d7e-1a2b-11ee-8c3d-0242ac120002 does not exist","FullError":{"code":5}}`,
			want{ok: true, op: OpStage, outcome: OutcomeFailed, code: "NotFound", permanent: true}},
		{"kernel I/O error", `Nov 21 09:10:01 node-1 kernel: blk_update_request: I/O error, dev sdb, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0`,
			want{ok: true, source: "kernel", op: OpIO, outcome: OutcomeFailed, errno: "EIO", permanent: true, keys: Keys{Device: "/dev/sdb"}}},
		{"dmesg buffer I/O", `[12345.678901] Buffer I/O error on dev rbd0, logical block 0, async page read`,
			want{ok: true, source: "kernel", op: OpIO, outcome: OutcomeFailed, errno: "EIO", keys: Keys{Device: "/dev/rbd0"}}},
		{"iscsid login refused", `Nov 21 09:10:01 node-1 iscsid[612]: iscsid: Login authentication failed with target iqn.2003-01.org.linux-iscsi.storage:sn.1234 portal 10.0.0.7:3260`,
			want{ok: true, source: "iscsid", op: OpAttach, outcome: OutcomeFailed, permanent: true, keys: Keys{IQN: "iqn.2003-01.org.linux-iscsi.storage:sn.1234", Portal: "10.0.0.7:3260"}}},
		{"kubelet in k0s", `Nov 21 09:10:01 node-1 k0s[3011]: time="2026-11-21 09:10:01" level=info msg="E1121 09:10:01.000000    3050 pod_workers.go:1294] \"Error syncing pod, skipping\" err=\"unmounted volumes=[data], unattached volumes=[data kube-api-access-x7k2p]: timed out waiting for the condition\" pod=\"default/web-0\" podUID=0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d" component=kubelet stream=stderr`,
			want{ok: true, kubelet: true, source: "kubelet", op: OpMount, outcome: OutcomeFailed, keys: Keys{PodUID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"}}},
		{"runtime netns busy", `Nov 21 09:10:01 node-1 crio[901]: time="2026-11-21 09:10:01.1Z" level=error msg="failed to remove network namespace /var/run/netns/cni-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d: device or resource busy"`,
			want{ok: true, source: "crio", op: OpSandboxRemove, outcome: OutcomeFailed, errno: "EBUSY", keys: Keys{Path: "/var/run/netns/cni-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"}}},
		{"sandbox network teardown, no storage object", `Oct 02 23:27:34 node containerd[2639]: time="2019-10-02T23:27:34.439359450Z" level=error msg="StopPodSandbox for \"cae59246074a\" failed" error="failed to destroy network for sandbox \"cae59246074a\": del cmd: failed to process delete request"`,
			want{ok: false}},
		// kubernetes-sigs/azuredisk-csi-driver#1104: mount-utils skipping
		// an unmount of a path already gone is no failure.
		{"unmount skipped", `W1203 13:17:32.854292       1 mount_helper_common.go:34] Warning: Unmount skipped because path does not exist: /mnt/resource/k8s/kubelet/pods/93c4a8f4-81f6-4211-b1ff-d66177310394/volumes/kubernetes.io~csi/pvc-1ad4dbfd-f4c3-4af8-80e7-7956f671608e/mount`,
			want{ok: true, op: OpUnmount, outcome: OutcomeSucceeded}},
		{"zap GRPC error naming its volume by a bare UUID", `{"level":"error","ts":"2026-11-21T09:10:11Z","logger":"driver.node","msg":"GRPC error","error":"rpc error: code = NotFound desc = failed to find LV: 2f0a7c6e-1b9d-4e3f-8a5c-7d6e5f4a3b2c"}`,
			want{ok: true, level: LevelError, op: OpCSICall, outcome: OutcomeFailed, code: "NotFound", permanent: true, keys: Keys{Handle: "2f0a7c6e-1b9d-4e3f-8a5c-7d6e5f4a3b2c"}}},
		{"a function name's verb", `time="2026-11-21T09:10:01Z" level=error msg="AttachDisk: volume d-0a1b2c3d4e5f6a7b8c9d could not find its device /dev/vdc"`,
			want{ok: true, level: LevelError, op: OpAttach, outcome: OutcomeFailed, keys: Keys{Device: "/dev/vdc"}}},
		{"volume in the call form", `E1121 09:10:01.000000       1 utils.go:81] GRPC error: rpc error: code = Internal desc = volume(share-01#data) mount //files.example.net/data on /var/lib/kubelet/plugins/kubernetes.io/csi/smb.example.com/0a1b/globalmount failed: permission denied`,
			want{ok: true, level: LevelError, outcome: OutcomeFailed, code: "Internal", errno: "EACCES", keys: Keys{Handle: "share-01#data"}}},
		{"a word after server is no server", `level=error ts=2026-11-21T09:10:01Z component=grpc-server msg="handler failed" err="rpc error: code = Internal desc = failed to stage volume pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"`,
			want{ok: true, level: LevelError, outcome: OutcomeFailed, code: "Internal", keys: Keys{PV: "pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"}}},
		{"Python logging", `2026-11-21 09:10:01,123:ERROR:node:NodeStageVolume failed for pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f: [Errno 5] Input/output error: '/dev/sdd'`,
			want{ok: true, level: LevelError, op: OpStage, outcome: OutcomeFailed, errno: "EIO", permanent: true, keys: Keys{PV: "pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f", Device: "/dev/sdd"}}},
		{"a reader's stamp before klog", `2026-11-21T09:10:01.000000000Z E1121 09:10:01.000000       1 node.go:300] failed to find the serial of disk pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f at /dev/nvme3n1`,
			want{ok: true, level: LevelError, op: OpCSICall, outcome: OutcomeFailed, keys: Keys{PV: "pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"}}},
		{"an iSCSI target's failure without a verb", `time="2026-11-21T09:10:01Z" level=error msg="could not parse the sessions" output="10.0.0.7:3260,1 iqn.2001-05.com.example:storage.lun7"`,
			want{ok: true, level: LevelError, op: OpAttach, outcome: OutcomeFailed, keys: Keys{IQN: "iqn.2001-05.com.example:storage.lun7", Portal: "10.0.0.7:3260"}}},
		{"a csi-lib handle joined by #", `E1121 09:10:01.000000       1 utils.go:81] GRPC error: rpc error: code = Internal desc = statfs failed for files.example.org#export/data#pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f## (the export is gone)`,
			want{ok: true, level: LevelError, outcome: OutcomeFailed, code: "Internal", keys: Keys{Handle: "files.example.org#export/data#pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f##", PV: "pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"}}},
		{"an ARM disk ID and a device under /dev/disk", `E1121 09:10:01.000000       1 utils.go:81] GRPC error: rpc error: code = Internal desc = disk /subscriptions/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/resourceGroups/rg-x/providers/Microsoft.Compute/disks/data-7 not at /dev/disk/cloud/scsi0/lun9(lun: 9)`,
			want{ok: true, level: LevelError, outcome: OutcomeFailed, code: "Internal", keys: Keys{Handle: "/subscriptions/0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d/resourceGroups/rg-x/providers/Microsoft.Compute/disks/data-7", Device: "/dev/disk/cloud/scsi0/lun9"}}},
		{"a driver's error about a volume by its UUID, without a verb", "2026-11-21T09:10:01.123Z\tERROR\tnode/node.go:210\tcannot read the block size of volume \"5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e\": exit status 1",
			want{ok: true, level: LevelError, op: OpCSICall, outcome: OutcomeFailed, exit: 1, keys: Keys{Handle: "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e"}}},
		{"go-kit's hyphenated keys", `level=error ts=2026-11-21T09:10:01Z component=linux-mount-service msg="failed to stage" volume-id=4711 staging-target-path=/var/lib/kubelet/plugins/kubernetes.io/csi/pv/data/globalmount device-path=/dev/disk/by-id/scsi-0ACME_Volume_4711`,
			want{ok: true, level: LevelError, op: OpStage, outcome: OutcomeFailed, keys: Keys{Handle: "4711", Path: "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/data/globalmount", Device: "/dev/disk/by-id/scsi-0ACME_Volume_4711"}}},
		{"a character device's error is no storage failure", `time="2026-11-21T09:10:01Z" level=error msg="could not open /dev/kmsg for the kernel's messages" error="permission denied"`, want{ok: false}},
		{"a program's own words before a colon are no disk", `E1121 09:10:01.000000       1 client.go:40] cloud sdk: request timeout`, want{ok: false}},
		{"iSCSI session info is no failure", `iscsid: Connection1:0 to [target: iqn.2001-05.com.example:storage.lun7, portal: 10.0.0.7,3260] through [iface: default] is operational now`, want{ok: false}},
		{"ordinary noise", `I1121 09:10:01.000000     812 kubelet.go:2355] "SyncLoop UPDATE" source="api" pods=["default/web-0"]`, want{ok: false}},
		{"stats noise", `E0511 19:25:35.523245    2583 summary.go:92] Failed to get system container stats for "/system.slice/kubelet.service": failed to get cgroup stats`, want{ok: false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			w := c.want
			if ok != w.ok {
				t.Fatalf("ok = %v, want %v (event %+v)", ok, w.ok, ev)
			}
			if !ok {
				return
			}
			check := func(what string, got, want any, zero any) {
				t.Helper()
				if want != zero && got != want {
					t.Errorf("%s = %v, want %v (event %+v)", what, got, want, ev)
				}
			}
			check("source", ev.Source, w.source, "")
			check("level", ev.Level, w.level, LevelUnknown)
			check("op", ev.Op, w.op, OpNone)
			check("outcome", ev.Outcome, w.outcome, OutcomeNone)
			check("method", ev.Method, w.method, "")
			check("code", ev.Err.Code, w.code, "")
			check("errno", ev.Err.Errno, w.errno, "")
			check("exit", ev.Err.Exit, w.exit, 0)
			if w.kubelet && !ev.Kubelet {
				t.Errorf("not read as the kubelet's: %+v", ev)
			}
			if w.permanent {
				if p, _ := ev.Permanent(); !p {
					t.Errorf("not permanent: %+v", ev.Err)
				}
			}
			check("pod", ev.Keys.Pod, w.keys.Pod, "")
			check("pod UID", ev.Keys.PodUID, w.keys.PodUID, "")
			check("PV", ev.Keys.PV, w.keys.PV, "")
			check("handle", ev.Keys.Handle, w.keys.Handle, "")
			check("device", ev.Keys.Device, w.keys.Device, "")
			check("sandbox", ev.Keys.Sandbox, w.keys.Sandbox, "")
			check("path", ev.Keys.Path, w.keys.Path, "")
			check("server", ev.Keys.Server, w.keys.Server, "")
			check("portal", ev.Keys.Portal, w.keys.Portal, "")
			check("IQN", ev.Keys.IQN, w.keys.IQN, "")
			if w.msgHas != "" && !containsStr(ev.Err.Message, w.msgHas) {
				t.Errorf("message %q lacks %q", ev.Err.Message, w.msgHas)
			}
		})
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && indexOf(s, sub) >= 0
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// A ceph-csi error line names no method: the parser takes it from the
// request's call line.
func TestParseCephRequestMethod(t *testing.T) {
	p := NewParser(ref)
	lines := []string{
		`I1121 09:10:01.000000   18322 utils.go:195] ID: 18322 Req-ID: 0001-0009-rook-ceph-0000000000000001-5e7b3c9a-1f2d-11ee-9a3b-0a580a800213 GRPC call: /csi.v1.Node/NodeStageVolume`,
		`I1121 09:10:01.000000   18322 utils.go:195] ID: 18323 Req-ID: 0001-0009-rook-ceph-0000000000000001-77777777-1f2d-11ee-9a3b-0a580a800213 GRPC call: /csi.v1.Node/NodeUnpublishVolume`,
		`E1121 09:10:02.000000   18322 utils.go:200] ID: 18322 Req-ID: 0001-0009-rook-ceph-0000000000000001-5e7b3c9a-1f2d-11ee-9a3b-0a580a800213 GRPC error: rpc error: code = Internal desc = an error (exit status 32) occurred while running mount args: [-t ceph 10.0.0.1:6789:/volumes/csi/csi-vol-5e7b3c9a /var/lib/kubelet/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/abc/globalmount] stderr: mount error 110 = Connection timed out`,
	}
	var ev Event
	var ok bool
	for _, l := range lines {
		ev, ok = p.Parse([]byte(l))
	}
	if !ok || ev.Op != OpStage || ev.Outcome != OutcomeFailed || ev.Method != "NodeStageVolume" {
		t.Fatalf("got ok=%v %+v", ok, ev)
	}
	if ev.Keys.Handle != "0001-0009-rook-ceph-0000000000000001-5e7b3c9a-1f2d-11ee-9a3b-0a580a800213" || ev.Err.Exit != 32 || ev.Err.Code != "Internal" {
		t.Fatalf("keys or error wrong: %+v %+v", ev.Keys, ev.Err)
	}
	ok2 := func() bool {
		ev, ok := p.Parse([]byte(`I1121 09:10:03.000000   18322 utils.go:212] ID: 18323 Req-ID: 0001-0009-rook-ceph-0000000000000001-77777777-1f2d-11ee-9a3b-0a580a800213 GRPC response: {}`))
		return ok && ev.Op == OpUnpublish && ev.Outcome == OutcomeSucceeded
	}()
	if !ok2 {
		t.Fatal("a GRPC response of a request is not read as its method's success")
	}
}

// The request table is bounded: a log of many requests keeps the newest.
func TestParserRequestsBounded(t *testing.T) {
	p := NewParser(ref)
	for i := range 10 * maxRequests {
		p.Parse([]byte("I1121 09:10:01.000000 1 utils.go:195] ID: " + itoa(i) + " Req-ID: x GRPC call: /csi.v1.Node/NodeStageVolume failed"))
	}
	if len(p.methods) > maxRequests || len(p.order) > maxRequests {
		t.Fatalf("%d methods kept, at most %d wanted", len(p.methods), maxRequests)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for i > 0 {
		b = append([]byte{byte('0' + i%10)}, b...)
		i /= 10
	}
	return string(b)
}

func TestResolves(t *testing.T) {
	if !Resolves(OpPublish, OpMount) || !Resolves(OpStage, OpStage) || Resolves(OpStage, OpMount) || Resolves(OpUnmount, OpMount) {
		t.Fatal("Resolves pairs operations wrongly")
	}
}

// A driver that logs its request as "<Method>: called with args {...}"
// and then a "GRPC error" without a method: the error is that call's, on
// the volume its request names.
func TestCalledWithArgsRequest(t *testing.T) {
	p := NewParser(ref)
	lines := []string{
		`I1121 09:10:01.000000       1 nodeserver.go:541] NodeExpandVolume: called with args {"capacity_range":{"required_bytes":1073741824},"volume_id":"5b0e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b","volume_path":"/var/lib/kubelet/plugins/kubernetes.io/csi/pv/data-0/globalmount"}`,
		`E1121 09:10:01.100000       1 utils.go:92] [ID:4711] GRPC error: rpc error: code = Internal desc = could not resize the file system: exit status 1`,
	}
	var ev Event
	var ok bool
	for _, l := range lines {
		ev, ok = p.Parse([]byte(l))
	}
	if !ok || ev.Op != OpResize || ev.Outcome != OutcomeFailed || ev.Keys.Handle != "5b0e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b" {
		t.Fatalf("got ok=%v op=%q outcome=%v keys=%+v", ok, ev.Op, ev.Outcome, ev.Keys)
	}
}

// A driver's failed call that names no object is about the object the
// records just before it named (the mount command it ran); not about one
// named many records earlier.
func TestFailedCallTakesTheObjectJustBefore(t *testing.T) {
	const pv = "pvc-2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
	cmd := `executing mount command: mount -t nfs 10.0.0.9:/export/` + pv + ` /var/lib/kubelet/plugins/kubernetes.io/csi/nfs.example.com/0a1b2c/globalmount`
	fail := `{"level":"error","message":"handler error - method: NodeStageVolume error: {\"code\":32,\"stderr\":\"mount.nfs: access denied by server\"}","timestamp":"2026-11-21T09:10:02.000Z"}`
	read := func(lines ...string) (Event, bool) {
		p := NewParser(ref)
		var ev Event
		var ok bool
		for _, l := range lines {
			ev, ok = p.Parse([]byte(l))
		}
		return ev, ok
	}
	ev, ok := read(cmd, fail)
	if !ok || ev.Op != OpStage || ev.Keys.PV != pv {
		t.Errorf("got ok=%v op=%q keys=%+v", ok, ev.Op, ev.Keys)
	}
	lines := []string{cmd}
	for i := 0; i < maxLookback+1; i++ {
		lines = append(lines, `{"level":"info","message":"new request - method: Probe","timestamp":"2026-11-21T09:10:01.000Z"}`)
	}
	if ev, _ := read(append(lines, fail)...); ev.Keys.PV != "" {
		t.Errorf("an object named %d records before taken as the call's: %+v", maxLookback+1, ev.Keys)
	}
}

// mount-utils writes a failed mount's arguments and output on lines of
// their own; when the error's head is cut, the output's failure is about
// what the arguments line just before it named.
func TestMountOutputTakesItsArguments(t *testing.T) {
	p := NewParser(ref)
	lines := []string{
		`Mounting arguments: -t cifs -o vers=3.0,<masked> //files.example.net/share-a /var/lib/kubelet/plugins/kubernetes.io/csi/pv/share-a/globalmount`,
		`Output: mount error(13): Permission denied`,
	}
	var ev Event
	var ok bool
	for _, l := range lines {
		ev, ok = p.Parse([]byte(l))
	}
	if !ok || ev.Op != OpMount || ev.Outcome != OutcomeFailed || !strings.Contains(ev.Keys.Path+ev.Keys.Server, "share-a") {
		t.Fatalf("got ok=%v op=%q outcome=%v keys=%+v", ok, ev.Op, ev.Outcome, ev.Keys)
	}
}

// A driver's line announcing a call on an object (no request dump, no
// error) gives the objects of the call's error that names none; Python
// gRPC's server logger reports the last call's failure.
func TestAnnouncedCallNamesItsError(t *testing.T) {
	read := func(lines ...string) Event {
		p := NewParser(ref)
		var ev Event
		for _, l := range lines {
			ev, _ = p.Parse([]byte(l))
		}
		return ev
	}
	ev := read(`I1121 09:10:01.000000       1 node.go:118] NodePublishVolume on volume "share-0a1b2c3d" has options ro`,
		`E1121 09:10:01.100000       1 utils.go:103] /csi.v1.Node/NodePublishVolume failed with error: rpc error: code = PermissionDenied desc = access refused`)
	if ev.Outcome != OutcomeFailed || ev.Op != OpPublish || ev.Keys.Volume != "share-0a1b2c3d" {
		t.Errorf("announced call: got op=%q outcome=%v keys=%+v", ev.Op, ev.Outcome, ev.Keys)
	}
	ev = read(`2026-11-21 09:10:01 4242 INFO acme_csi.common [req-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d - - -] => GRPC NodeExpandVolume 5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e`,
		`2026-11-21 09:10:02 4242 ERROR acme_csi.common [req-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d - - -] !! GRPC NodeExpandVolume failed in 1s with PERMISSION_DENIED (not allowed): Exception`)
	if ev.Outcome != OutcomeFailed || ev.Method != "NodeExpandVolume" || ev.Err.Code != "PermissionDenied" || ev.Keys.Handle != "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e" {
		t.Errorf("oslo.log request: got method=%q outcome=%v code=%q keys=%+v", ev.Method, ev.Outcome, ev.Err.Code, ev.Keys)
	}
	ev = read(`2026-11-21 09:10:01,000:DEBUG:csi:Executing method '/csi.v1.Node/NodeStageVolume', with request:`,
		`2026-11-21 09:10:01,100:ERROR:grpc._server:Exception calling application: [Errno 2] No such file or directory: '/var/lib/kubelet/plugins/kubernetes.io/csi/pv/data-01/globalmount'`)
	if ev.Outcome != OutcomeFailed || ev.Method != "NodeStageVolume" || ev.Keys.Path != "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/data-01/globalmount" {
		t.Errorf("Python gRPC failure: got method=%q outcome=%v keys=%+v", ev.Method, ev.Outcome, ev.Keys)
	}
}
