package events

import "testing"

// A runtime mounting a container's or sandbox's rootfs (the snapshot's
// overlay) while creating it is its own operation, about the pod being
// created: not a volume's mount, and not the snapshot's directories.
func TestRootfsMountIsContainerCreation(t *testing.T) {
	const uid = "5b0e2c1a-7d3f-4e8a-9c6b-1f2e3d4c5b6a"
	cases := []struct {
		name      string
		line      string
		op        Op
		pod, path string
	}{
		{name: "kubelet: a sandbox's rootfs overlay cannot be mounted", op: OpRootfsMount, pod: "kube-system/kube-proxy-x7k2p",
			line: `Jan 12 03:04:05 worker-3 kubelet[2211]: E0112 03:04:05.123456    2211 kuberuntime_sandbox.go:68] CreatePodSandbox for pod "kube-proxy-x7k2p_kube-system(` + uid + `)" failed: rpc error: code = Unknown desc = failed to create containerd task: failed to mount rootfs component &{overlay overlay [workdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/61/work upperdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/61/fs lowerdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/1/fs]}: invalid argument: unknown`},
		{name: "kubelet: a static pod (its UID the manifest's hash) cannot get its sandbox", op: OpRootfsMount, pod: "kube-system/kube-scheduler-cp-0",
			line: `Jan 12 03:04:05 cp-0 kubelet[459]: E0112 03:04:05.123456     459 kuberuntime_sandbox.go:68] CreatePodSandbox for pod "kube-scheduler-cp-0_kube-system(7d5d3c0a6786e517a8973fa06754cb75)" failed: rpc error: code = Unknown desc = failed to start sandbox container: failed to create containerd task: failed to mount rootfs component &{overlay overlay [workdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/61/work]}: invalid argument: unknown`},
		{name: "kubelet, structured: a container's rootfs", op: OpRootfsMount, pod: "shop/db-0",
			line: `Jan 12 03:04:05 worker-3 kubelet[2211]: E0112 03:04:05.123456    2211 pod_workers.go:1300] "Error syncing pod, skipping" err="failed to \"StartContainer\" for \"db\" with RunContainerError: \"failed to create containerd task: failed to create shim task: failed to mount rootfs component &{overlay overlay [index=off workdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/9/work]}: no space left on device: unknown\"" pod="shop/db-0" podUID="` + uid + `"`},
		{name: "a rootfs unmount is still a removal", op: OpRootfsUnmount,
			line: `time="2024-01-12T03:04:05.123456789Z" level=error msg="failed to unmount rootfs" error="unmount /run/containerd/io.containerd.runtime.v2.task/k8s.io/7c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d/rootfs: device or resource busy"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if !ok {
				t.Fatalf("not parsed")
			}
			if ev.Op != c.op || ev.Outcome != OutcomeFailed {
				t.Fatalf("op %q outcome %v, want %q failed", ev.Op, ev.Outcome, c.op)
			}
			if c.pod != "" && ev.Keys.Pod != c.pod {
				t.Errorf("pod %q, want %q (keys %+v)", ev.Keys.Pod, c.pod, ev.Keys)
			}
			if c.op == OpRootfsMount {
				if ev.Keys.Path != "" {
					t.Errorf("path %q: the snapshot's directory is not the object", ev.Keys.Path)
				}
				if kind, _ := ev.Keys.Object(); kind != "pod" {
					t.Errorf("object kind %q, want pod (keys %+v)", kind, ev.Keys)
				}
			}
		})
	}
}
