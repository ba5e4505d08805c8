package signatures

import (
	"reflect"
	"testing"
)

type idKey struct{ ID, Key string }

func ids(ms []Match) []idKey {
	var out []idKey
	for _, m := range ms {
		out = append(out, idKey{m.ID, m.Key})
	}
	return out
}

func TestMatchLine(t *testing.T) {
	const uid = "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"
	const hex64 = "5e1cdf132517df24402e476e0f3b25db9ca5514928d6b0028cd51fd40ea50fce"
	for _, tc := range []struct {
		line string
		want []idKey
	}{
		{`nfs: server 10.0.0.7 not responding, still trying`, []idKey{{"nfs-not-responding", "10.0.0.7"}}},
		{`[ 12.5] nfs: server nas.lan OK`, []idKey{{"nfs-ok", "nas.lan"}}},
		{`libceph: mon0 (1)10.0.0.1:6789 session lost, hunting for new mon`, []idKey{{"libceph-session-lost", "mon0 (1)10.0.0.1:6789"}}},
		{`libceph: mon1 (1)10.0.0.2:6789 session established`, []idKey{{"libceph-session-established", "mon1 (1)10.0.0.2:6789"}}},
		{`INFO: task kworker/1:2:123 blocked for more than 120 seconds.`, []idKey{{"kernel-hung-task", "kworker/1:2:123"}}},
		// The kubelet's signature, and the errno text it wraps.
		{`E1121 operation_generator.go: UnmountVolume.TearDown failed for volume "v" (UniqueName: "kubernetes.io/csi/drv^vol-1") : unlinkat /var/lib/kubelet/pods/x: device or resource busy`,
			[]idKey{{"teardown-busy", "kubernetes.io/csi/drv^vol-1"}, {"unlinkat-busy", "/var/lib/kubelet/pods/x"}}},
		// A generic failure wording gives way to the error it wraps.
		{`E0102 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/rbd.csi.ceph.com^0001-x podName: nodeName:}" failed. Error: MountVolume.MountDevice failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/rbd.csi.ceph.com^0001-x") pod "web-0" (UID: "` + uid + `") : rpc error: code = Aborted desc = an operation with the given Volume ID 0001-x already exists`,
			[]idKey{{"csi-operation-exists", "0001-x"}}},
		{`E0102 nestedpendingoperations.go:348] MountVolume.SetUp failed for volume "pvc-1" : secret "x" not found`, []idKey{{"mount-failed", "pvc-1"}}},
		// The kubelet's per-pod unmap of a block volume is named by its
		// operation, not by the "failed to unmap" of the error it wraps; its
		// global UnmountDevice stays the device's.
		{`E0116 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/drv^pvc-1 podName:` + uid + ` nodeName:}" failed. Error: UnmapVolume.UnmapBlockVolume failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/drv^pvc-1") pod "` + uid + `" (UID: "` + uid + `") : blkUtil.DetachFileDevice failed. globalUnmapPath:, podUID: ` + uid + `, bindMount: true: failed to unmap device from map path. mapPath is empty`,
			[]idKey{{"unmap-volume-failed", "kubernetes.io/csi/drv^pvc-1"}}},
		{`E0116 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/drv^pvc-1 podName:` + uid + ` nodeName:}" failed. Error: UnmapVolume.UnmapPodDevice failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/drv^pvc-1") pod "` + uid + `" (UID: "` + uid + `") : failed to unmap device`,
			[]idKey{{"unmap-volume-failed", "kubernetes.io/csi/drv^pvc-1"}}},
		{`E0116 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/drv^pvc-1 podName: nodeName:}" failed. Error: UnmountDevice failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/drv^pvc-1") on node "n1" : the device is in use when it was no longer expected to be in use`,
			[]idKey{{"unmount-device-failed", "kubernetes.io/csi/drv^pvc-1"}}},
		// Case variants and an older wording without UniqueName.
		{`E0412 reconciler.go:237] operationExecutor.UnmountVolume failed: UnmountVolume.Teardown failed for volume "pvc-1" : remove /var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~csi/pvc-1/mount: directory not empty`,
			[]idKey{{"teardown-not-empty", "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount"}}},
		{`rpc error: code = Aborted desc = an operation with the given Volume ID vol-9 already exists`, []idKey{{"csi-operation-exists", "vol-9"}}},
		// Before 1.21: format.Pod's name_namespace(uid).
		{`I0101 kubelet_pods.go:915] Pod "web-0_default(` + uid + `)" is terminated, but some volumes have not been cleaned up`,
			[]idKey{{"pod-volumes-not-cleaned-up", uid}}},
		{`I0101 kubelet.go:2296] "Pod is terminated, but some volumes have not been cleaned up" pod="default/web-0" podUID="` + uid + `"`,
			[]idKey{{"pod-volumes-not-cleaned-up", uid}}},
		{`{"ts":1700000000.1,"caller":"kubelet/kubelet.go:2296","msg":"Pod is terminated, but some volumes have not been cleaned up","v":3,"pod":{"name":"web-0","namespace":"default"},"podUID":"` + uid + `"}`,
			[]idKey{{"pod-volumes-not-cleaned-up", uid}}},
		{`E0101 kubelet_volumes.go:140] Orphaned pod "` + uid + `" found, but volume paths are still present on disk : There were a total of 3 errors similar to this. Turn up verbosity to see them.`,
			[]idKey{{"orphaned-pod-volume-paths", uid}}},
		{`E0101 kubelet_volumes.go:147] Failed to remove orphaned pod "` + uid + `" dir; err: remove /var/lib/kubelet/pods/` + uid + `/volumes: device or resource busy`,
			[]idKey{{"orphaned-pod-remove-failed", uid}}},
		{`runc: unmount /run/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm: device or resource busy`, []idKey{{"runtime-shm-busy", "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm"}}},
		{`E0101 remote_runtime.go:222] "StopPodSandbox from runtime service failed" err="rpc error: code = DeadlineExceeded desc = context deadline exceeded" podSandboxID="abc"`,
			[]idKey{{"runtime-deadline-exceeded", ""}}},
		// The runtime's own words for a timed-out shim call: containerd's
		// errdefs wrapping, CRI-O's; a pull timeout is not one.
		{`time="2019-05-16T15:05:02Z" level=error msg="Failed to handle event &TaskExit{ContainerID:` + hex64 + `,ID:` + hex64 + `,Pid:1,} for ` + hex64 + `" error="failed to handle container TaskExit event: failed to stop container: context deadline exceeded: unknown"`,
			[]idKey{{"runtime-deadline-exceeded", hex64}}},
		{`time="2017-11-27T23:43:11Z" level=error msg="converting task to protobuf" error="context deadline exceeded: unknown" id=` + hex64 + ` module="containerd/tasks"`,
			[]idKey{{"runtime-deadline-exceeded", hex64}}},
		{`time="2023-08-25 15:57:45.212984245+08:00" level=info msg="CreateCtr: context was either canceled or the deadline was exceeded: context deadline exceeded" id=a734f153-e8c4-4e29-bb8b-7846d862d604 name=/runtime.v1.RuntimeService/CreateContainer`,
			[]idKey{{"runtime-deadline-exceeded", "CreateContainer"}}},
		{`level=error msg="PullImage \"x\" failed" error="failed to pull and unpack image: context deadline exceeded"`, nil},
		// csi-driver-host-path's JSON record of each call (klog -v=5, its
		// format in pkg/hostpath/server.go at v1.18.0): an empty "Error" is
		// a success, whatever paths the request names; a filled one is not.
		{`I1207 15:10:01.123456       1 server.go:156] gRPCCall: {"Method":"/csi.v1.Node/NodeStageVolume","Request":{"volume_id":"3f1c0e5a-3c1b-11f0-9a4e-0242ac110002","staging_target_path":"/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/5e1cdf13/globalmount","volume_capability":{"AccessType":{"Mount":{}},"access_mode":{"mode":7}}},"Response":{},"Error":"","FullError":null}`, nil},
		{`I1207 15:10:01.123456       1 server.go:156] gRPCCall: {"Method":"/csi.v1.Node/NodeUnpublishVolume","Request":{"volume_id":"3f1c0e5a-3c1b-11f0-9a4e-0242ac110002","target_path":"/var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~csi/pvc-1/mount"},"Response":{},"Error":"","FullError":null}`,
			[]idKey{{"csi-node-unpublish", "3f1c0e5a-3c1b-11f0-9a4e-0242ac110002"}}},
		{`{"ts":1733584201.5,"msg":"gRPCCall: {\"Method\":\"/csi.v1.Node/NodeStageVolume\",\"Request\":{\"staging_target_path\":\"/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount\"},\"Response\":{},\"Error\":\"\",\"FullError\":null}"}`, nil},
		{`I1207 15:10:01.123456       1 server.go:156] gRPCCall: {"Method":"/csi.v1.Node/NodeStageVolume","Request":{"volume_id":"3f1c0e5a-3c1b-11f0-9a4e-0242ac110002","staging_target_path":"/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/5e1cdf13/globalmount"},"Response":null,"Error":"rpc error: code = NotFound desc = volume id 3f1c0e5a-3c1b-11f0-9a4e-0242ac110002 does not exist in the volumes list","FullError":{}}`,
			[]idKey{{"csi-unstage-failed", "3f1c0e5a-3c1b-11f0-9a4e-0242ac110002"}}},
		// The kubelet's first seconds: not a stuck PLEG.
		{`PLEG is not healthy: pleg has yet to be successful`, nil},
		{`an ordinary line`, nil},
		{``, nil},
	} {
		if got := ids(MatchLine([]byte(tc.line))); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("MatchLine(%q) = %+v, want %+v", tc.line, got, tc.want)
		}
	}
}

func TestExtract(t *testing.T) {
	const uid = "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"
	for _, tc := range []struct {
		line string
		want Objects
	}{
		{`Pod "web-0_default(` + uid + `)" is terminated`, Objects{PodUID: uid, Pod: "default/web-0"}},
		{`"msg" pod="kube-system/csi-node-x" podUID="` + uid + `"`, Objects{PodUID: uid, Pod: "kube-system/csi-node-x"}},
		{`{"pod":{"name":"web-0","namespace":"ns1"},"podUID":"` + uid + `"}`, Objects{PodUID: uid, Pod: "ns1/web-0"}},
		{`err="UnmountVolume.TearDown failed for volume \"data\" (UniqueName: \"kubernetes.io/csi/x^v\") pod \"` + uid + `\""`,
			Objects{PodUID: uid, Volume: "kubernetes.io/csi/x^v"}},
		{`rbd: unmap for spec (pool/img) failed (exit status 16): (rbd: sysfs write failed rbd: unmap failed: (16) Device or resource busy) /dev/rbd3`,
			Objects{Device: "/dev/rbd3"}},
		{`remove /var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~csi/pvc-9/mount: device or resource busy`,
			Objects{PodUID: uid, Volume: "pvc-9", Path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-9/mount"}},
		{`nfs: server 10.1.2.3 not responding`, Objects{Server: "10.1.2.3"}},
		// A path is taken whole, from where it starts: a kubelet root
		// under /var/<any>, microk8s's snap tree, a path in brackets, a
		// file:/// URL; never a tail of another path.
		{`unmounter failed to load volume data file [/var/data/kubelet/pods/` + uid + `/volumes/kubernetes.io~csi/pvc-9/mount]: open`,
			Objects{PodUID: uid, Volume: "pvc-9", Path: "/var/data/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-9/mount"}},
		{`remove /var/snap/microk8s/common/var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~csi/pvc-9/mount: device or resource busy`,
			Objects{PodUID: uid, Volume: "pvc-9", Path: "/var/snap/microk8s/common/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-9/mount"}},
		{`mount file:///var/lib/docker/volumes/x failed`, Objects{Path: "/var/lib/docker/volumes/x"}},
		{`/data/k8s/pv1 is not a mountpoint`, Objects{Path: "/data/k8s/pv1"}},
		{`exec /usr/local/bin/data/tool: exit status 1`, Objects{}},
		// vsphere-csi's "for volume: <id>, err: ...".
		{`msg="/csi.v1.Node/NodeUnpublishVolume: REP 0491: rpc error: code = Internal desc = error getting block device for volume: 268e7aa8-754e-4869-a5c2-258f87232f6c, err: lstat devtmpfs: no such file or directory"`,
			Objects{Volume: "268e7aa8-754e-4869-a5c2-258f87232f6c"}},
	} {
		if got := Extract([]byte(tc.line)); got != tc.want {
			t.Errorf("Extract(%q) =\n %+v, want\n %+v", tc.line, got, tc.want)
		}
	}
}

func TestClassesWellFormed(t *testing.T) {
	for _, c := range Classes {
		if c.ID == "" || c.Meaning == "" || len(c.Words) == 0 || len(c.Sources) == 0 {
			t.Errorf("class %+v: ID, Meaning, Words and Sources are required", c.ID)
		}
		if c.Example != "" {
			ms := MatchLine([]byte(c.Example))
			if len(ms) == 0 || ms[0].ID != c.ID {
				t.Errorf("class %s: its example matches %+v", c.ID, ids(ms))
			}
		}
	}
}
