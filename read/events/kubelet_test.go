package events

import "testing"

// The kubelet's and the runtimes' records read by structure: the
// operation from the kubelet's source file when the message names none
// of its operations, the objects from its own keys and older text forms,
// a runtime's container storage by what it names and what is done to it.
// The lines are written in each writer's form with made-up objects.
func TestKubeletAndRuntimeStructure(t *testing.T) {
	const uid = "5b0e2c1a-7d3f-4e8a-9c6b-1f2e3d4c5b6a"
	const ctr = "7c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d"
	cases := []struct {
		name       string
		line       string
		ok         bool
		op         Op
		outcome    Outcome
		keys       Keys
		volume     string
		permanent  bool
		notPermBut string
	}{
		{name: "desired state: a claim not bound (text form)", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `Jan 12 03:04:05 worker-3 kubelet[2211]: E0112 03:04:05.123456    2211 desired_state_of_world_populator.go:273] Error processing volume "scratch" for pod "builder-7f9c_ci(` + uid + `)": error processing PVC "ci"/"scratch-claim": PVC ci/scratch-claim has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")`,
			keys: Keys{Pod: "ci/builder-7f9c", PodUID: uid}, volume: "scratch"},
		{name: "desired state: structured, no plugin", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `E0112 03:04:05.123456    2211 desired_state_of_world_populator.go:311] "Failed to add volume to desiredStateOfWorld" err="failed to get Plugin from volumeSpec for volume \"d-abc123\" err=no volume plugin matched" pod="ci/builder-7f9c" volumeName="scratch" volumeSpecName="d-abc123"`,
			keys: Keys{Pod: "ci/builder-7f9c"}, volume: "d-abc123"},
		{name: "orphaned pod cleanup is a teardown, not a mount", ok: true, op: OpTeardown, outcome: OutcomeFailed,
			line: `E0112 03:04:05.123456    2211 kubelet_volumes.go:65] pod "` + uid + `" found, but error fail to check mount point "/var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~nfs/shared": stat /var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~nfs/shared: invalid argument`,
			keys: Keys{PodUID: uid}, volume: "shared"},
		{name: "older text form: pod name_namespace without UID", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `E0112 03:04:05.123456    2211 kubelet.go:1206] Unable to mount volumes for pod "db-1-x7k2p_shop": exit status 32; skipping pod`,
			keys: Keys{Pod: "shop/db-1-x7k2p"}, permanent: true},
		{name: "a container's volumeMount (subPath) is the pod's mount", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `E0112 03:04:05.123456    2211 kubelet_pods.go:212] failed to create subPath directory for volumeMount "cache" of container "app": mkdir /var/lib/kubelet/pods/` + uid + `/volume-subpaths/cache/app/0: permission denied`,
			keys: Keys{PodUID: uid}, volume: "cache"},
		{name: "structured subPath record: its multi-line err=< ... > joined, then its keys", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `E0112 03:04:05.123456    2211 kubelet_pods.go:364] "Failed to prepare subPath for volumeMount of the container" err=< error mounting /srv/cache: mount failed: exit status 32 Mounting command: mount Mounting arguments: --no-canonicalize -o bind /proc/2211/fd/88 /var/lib/kubelet/pods/` + uid + `/volume-subpaths/cache/app/0 Output: mount: wrong fs type > containerName="app" volumeMountName="cache"`,
			keys: Keys{PodUID: uid}, volume: "cache", permanent: true},
		{name: "JSON logging: the subPath record's volumeMountName is the pod's volume", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `{"ts":1710237600123.456,"caller":"kubelet/kubelet_pods.go:364","msg":"Failed to prepare subPath for volumeMount of the container","pod":{"name":"web-0","namespace":"shop"},"err":"error mounting /srv/cache: mount failed: exit status 32","containerName":"app","volumeMountName":"cache"}`,
			keys: Keys{Pod: "shop/web-0"}, volume: "cache", permanent: true},
		{name: "a volumeMountName key alone names no operation", ok: false,
			line: `I0112 03:04:05.123456    2211 kubelet_pods.go:300] "Creating hosts mount for container" pod="shop/web-0" containerName="app" volumeMountName="cache"`},
		{name: "JSON logging: klog's object reference for the pod", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `{"ts":1710237600123.456,"caller":"kubelet/kubelet.go:1720","msg":"Unable to attach or mount volumes for pod; skipping pod","pod":{"name":"web-0","namespace":"shop"},"err":"unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: context deadline exceeded"}`,
			keys: Keys{Pod: "shop/web-0"}, volume: "data"},
		{name: "1.6's list of unattached/unmounted volumes", ok: true, op: OpMount, outcome: OutcomeFailed,
			line: `E0407 12:02:18.299458   22419 pod_workers.go:182] Error syncing pod ` + uid + ` ("etl-1491566400-6lkgw_batch(` + uid + `)"), skipping: timeout expired waiting for volumes to attach/mount for pod "batch"/"etl-1491566400-6lkgw". list of unattached/unmounted volumes=[scratch default-token-6pw37]`,
			keys: Keys{PodUID: uid, Pod: "batch/etl-1491566400-6lkgw"}, volume: "scratch"},
		{name: "text form's unique name of a pod's own volume", ok: true, op: OpTeardown, outcome: OutcomeFailed,
			line: `E0312 10:00:00.123456    5678 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/nfs/` + uid + `-share podName:` + uid + ` nodeName:}" failed. No retries permitted until 2024-03-12 10:02:02 (durationBeforeRetry 2m2s). Error: UnmountVolume.TearDown failed for volume "share" (UniqueName: "kubernetes.io/nfs/` + uid + `-share") pod "` + uid + `" (UID: "` + uid + `") : unmount failed: exit status 16`,
			keys: Keys{PodUID: uid}, volume: "share"},
		{name: "structured unique name of a pod's own volume", ok: true, op: OpTeardown, outcome: OutcomeFailed,
			line: `E0112 03:04:05.123456    2211 reconciler_common.go:169] "operationExecutor.UnmountVolume failed" err="UnmountVolume.TearDown failed: remove busy" volume="kubernetes.io/configmap/` + uid + `-settings" podUID="` + uid + `"`,
			keys: Keys{PodUID: uid}, volume: "settings"},
		{name: "structured unique name of a CSI volume", ok: true, op: OpTeardown, outcome: OutcomeFailed,
			line: `E0112 03:04:05.123456    2211 reconciler_common.go:169] "operationExecutor.UnmountVolume failed" err="UnmountVolume.TearDown failed: rpc error: code = Internal desc = busy" uniqueName="kubernetes.io/csi/disk.example.com^vol-77aa88bb" podUID="` + uid + `"`,
			keys: Keys{Handle: "vol-77aa88bb", PodUID: uid}},
		{name: "containerd: a dead shim's bundle not cleaned", ok: true, op: OpRootfsUnmount, outcome: OutcomeFailed,
			line: `time="2026-03-01T10:00:00.000000000Z" level=warning msg="failed to clean up after shim disconnected" error="io.containerd.runc.v2: open /run/containerd/io.containerd.runtime.v2.task/k8s.io/` + ctr + `/runtime: no such file or directory: exit status 1" id=` + ctr + ` namespace=k8s.io`,
			keys: Keys{Sandbox: ctr}},
		{name: "a command line's flag is not the operation", ok: true, op: OpRootfsUnmount, outcome: OutcomeFailed,
			line: `time="2026-03-01T10:00:00.000000000Z" level=error msg="failed to delete dead shim" cmd="/usr/bin/containerd-shim-x -publish-binary /usr/bin/containerd -id ` + ctr + ` delete" error="exit status 1" id=` + ctr,
			keys: Keys{Sandbox: ctr}},
		{name: "dockerd: a mounted layer not removed", ok: true, op: OpRootfsUnmount, outcome: OutcomeFailed,
			line: `time="2026-03-01T10:00:00.000000000Z" level=error msg="Error removing mounted layer ` + ctr + `: remove /var/lib/docker/overlay2/` + ctr[:60] + `abcd/merged: device or resource busy"`,
			keys: Keys{Sandbox: ctr}},
		{name: "runtime NotFound on removal: gone already, not permanent", ok: true, op: OpRootfsUnmount, outcome: OutcomeFailed,
			line: `time="2026-03-01T10:00:00.000000000Z" level=error msg="failed to delete bundle" error="rpc error: code = NotFound desc = not found: unmount rootfs" id=` + ctr,
			keys: Keys{Sandbox: ctr}, notPermBut: "NotFound"},
		{name: "a failure logged at debug level is expected by its writer", ok: false,
			line: `time="2026-03-01T10:00:00.000000000Z" level=debug msg="failed to delete task" error="rpc error: code = NotFound desc = container not created: not found" id=` + ctr},
		{name: "a shim's cleanup warnings quoted whole are no failure", ok: false,
			line: `time="2026-03-01T10:00:00.000000000Z" level=warning msg="cleanup warnings time=\"2026-03-01T10:00:00Z\" level=warning msg=\"failed to read init pid file\" error=\"open /run/containerd/io.containerd.runtime.v2.task/k8s.io/` + ctr + `/init.pid: no such file or directory\" runtime=io.containerd.runc.v2\n" namespace=k8s.io`},
		{name: "a runtime's warning with an error of its own is a failure", ok: true, op: OpRootfsUnmount, outcome: OutcomeFailed,
			line: `time="2026-03-01T10:00:00.000000000Z" level=warning msg="failed to cleanup rootfs mount" error="failed to unmount target /run/containerd/io.containerd.runtime.v2.task/k8s.io/` + ctr + `/rootfs: device or resource busy"`,
			keys: Keys{Sandbox: ctr}},
		{name: "a bundle that is no container's is not a runtime's", ok: false,
			line: `time="2026-03-01T10:00:00Z" level=error msg="Failed to delete support bundle" error="bundle sb-2 not found"`},
		{name: "the kubelet's gRPC channel to a plugin's socket failing", ok: true, op: OpConnect, outcome: OutcomeFailed,
			line: `Dec 29 10:55:03 gpu-7 kubelet[4417]: W1229 10:55:03.683705    4417 logging.go:59] [core] [Channel #12 SubChannel #13] grpc: addrConn.createTransport failed to connect to {Addr: "/var/lib/kubelet/plugins/disk.example.com/csi.sock", ServerName: "localhost", }. Err: connection error: desc = "transport: Error while dialing: dial unix /var/lib/kubelet/plugins/disk.example.com/csi.sock: connect: connection refused"`},
		{name: "a driver's own socket inside its container is not the kubelet's channel", ok: false,
			line: `W1229 10:55:03.683705       1 connection.go:170] Still connecting to unix:///csi/csi.sock`},
		{name: "shim cleanup without a failure", ok: false,
			line: `time="2026-03-01T10:00:00.000000000Z" level=info msg="cleaning up dead shim" namespace=k8s.io`},
		{name: "kubelet_volumes.go cleaning up is no failure", ok: false,
			line: `I0112 03:04:05.123456    2211 kubelet_volumes.go:160] "Cleaned up orphaned pod volumes dir" podUID="` + uid + `" path="/var/lib/kubelet/pods/` + uid + `/volumes"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v (event %+v)", ok, c.ok, ev)
			}
			if !ok {
				return
			}
			if c.op == OpConnect && ev.Keys.Path != "/var/lib/kubelet/plugins/disk.example.com/csi.sock" {
				t.Errorf("socket %q", ev.Keys.Path)
			}
			if ev.Op != c.op || ev.Outcome != c.outcome {
				t.Errorf("op %q outcome %v, want %q %v", ev.Op, ev.Outcome, c.op, c.outcome)
			}
			for _, kv := range [][3]string{{"pod", ev.Keys.Pod, c.keys.Pod}, {"pod UID", ev.Keys.PodUID, c.keys.PodUID},
				{"handle", ev.Keys.Handle, c.keys.Handle}, {"sandbox", ev.Keys.Sandbox, c.keys.Sandbox}, {"volume", ev.Keys.Volume, c.volume}} {
				if kv[2] != "" && kv[1] != kv[2] {
					t.Errorf("%s = %q, want %q (keys %+v)", kv[0], kv[1], kv[2], ev.Keys)
				}
			}
			p, why := ev.Permanent()
			if c.permanent && !p {
				t.Errorf("not permanent: %+v", ev.Err)
			}
			if c.notPermBut != "" {
				if ev.Err.Code != c.notPermBut {
					t.Errorf("code %q, want %q", ev.Err.Code, c.notPermBut)
				}
				if p {
					t.Errorf("permanent (%s), want not", why)
				}
			}
		})
	}
}
