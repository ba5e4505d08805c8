package events

import "testing"

// Records cut inside a value or naming a path below a kubelet root that
// is not /var/lib/kubelet: a cut value names no object, and a path is the
// whole path the record wrote. The lines are written in the kubelet's
// forms with made-up objects.
func TestCutValuesAndWholePaths(t *testing.T) {
	const uid = "5b0e2c1a-7d3f-4e8a-9c6b-1f2e3d4c5b6a"
	cases := []struct {
		name        string
		line        string
		pod, podUID string
		volume      string
		path        string
	}{
		{name: "cut inside pod=: no pod, the volume is still read",
			line:   `E1222 15:07:00.752045    2896 kubelet.go:1731] "Unable to attach or mount volumes for pod; skipping pod" err="unmounted volumes=[data], unattached volumes=[data kube-api-access-x]: timed out waiting for the condition" pod="sh`,
			volume: "data"},
		{name: "cut inside podUID=: the pod is read, the UID is not",
			line: `E1222 15:07:00.752045    2896 pod_workers.go:1301] "Error syncing pod, skipping" err="unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: context deadline exceeded" pod="shop/web-0" podUID="5b0e2c1a-7d3f`,
			pod:  "shop/web-0", volume: "data"},
		{name: "cut inside volume=: the unique name is not taken",
			line:   `E0112 03:04:05.123456    2211 reconciler_common.go:160] "operationExecutor.UnmountVolume failed" err="UnmountVolume.TearDown failed: busy" podUID="` + uid + `" volume="kubernetes.io/csi/disk.exa`,
			podUID: uid},
		{name: "a kubelet rooted at /var/data: the whole path",
			line:   `E0304 16:11:05.124817   11037 reconciler_common.go:169] "operationExecutor.UnmountVolume failed (controllerAttachDetachEnabled false) for volume \"work\" (UniqueName: \"kubernetes.io/csi/s3.example.com^pvc-e7d1c230-6891-4f98-be7f-689848357a04\") pod \"` + uid + `\" (UID: \"` + uid + `\") : kubernetes.io/csi: unmounter failed to load volume data file [/var/data/kubelet/pods/` + uid + `/volumes/kubernetes.io~csi/pvc-e7d1c230-6891-4f98-be7f-689848357a04/mount]: no such file or directory"`,
			podUID: uid, path: "/var/data/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-e7d1c230-6891-4f98-be7f-689848357a04/mount"},
		{name: "microk8s' kubelet root holds /var/lib/kubelet: the whole path",
			line:   `E0912 23:43:22.198702 2636757 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/disk.example.com^vol-77aa88bb podName: nodeName:}" failed. No retries permitted until 2023-09-12 23:44:26.198630782 +0000 UTC m=+153.750913774 (durationBeforeRetry 1m4s). Error: MountVolume.SetUp failed for volume "pvc-b74e3544-6c0a-4c12-9c88-fb2c8a74433b" (UniqueName: "kubernetes.io/csi/disk.example.com^vol-77aa88bb") pod "redis-2" (UID: "` + uid + `") : rpc error: code = Internal desc = corrupt mount point /var/snap/microk8s/common/var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~csi/pvc-b74e3544-6c0a-4c12-9c88-fb2c8a74433b/mount`,
			podUID: uid, path: "/var/snap/microk8s/common/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-b74e3544-6c0a-4c12-9c88-fb2c8a74433b/mount"},
		{name: "a path at its boundary is as it was",
			line:   `E0112 03:04:05.123456    2211 kubelet_volumes.go:65] pod "` + uid + `" found, but error fail to check mount point "/var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~nfs/shared": stat /var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~nfs/shared: invalid argument`,
			podUID: uid, path: "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~nfs/shared"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// A record cut before its volume names no storage object
			// and is incomplete; its keys are still what it read.
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if ok != (c.volume != "" || c.path != "") {
				t.Errorf("ok = %v (event %+v)", ok, ev)
			}
			k := ev.Keys
			if c.name == "cut inside volume=: the unique name is not taken" && (k.Handle != "" || k.Volume != "") {
				t.Errorf("a cut unique name taken: %+v", k)
			}
			for _, kv := range [][3]string{{"pod", k.Pod, c.pod}, {"pod UID", k.PodUID, c.podUID}, {"volume", k.Volume, c.volume}, {"path", k.Path, c.path}} {
				if kv[1] != kv[2] && (kv[2] != "" || kv[0] == "pod" || kv[0] == "pod UID") {
					t.Errorf("%s = %q, want %q (keys %+v)", kv[0], kv[1], kv[2], k)
				}
			}
		})
	}
}

// wholePath widens only a path taken from inside a longer absolute one.
func TestWholePath(t *testing.T) {
	for _, c := range []struct{ text, p, want string }{
		{`file [/var/data/kubelet/pods/x/mount]`, "/data/kubelet/pods/x/mount", "/var/data/kubelet/pods/x/mount"},
		{`at /mnt/data/k/pods/x`, "/data/k/pods/x", "/mnt/data/k/pods/x"},
		{`path="/var/lib/kubelet/pods/x"`, "/var/lib/kubelet/pods/x", "/var/lib/kubelet/pods/x"},
		{`see http://example.com/data/x`, "/data/x", "/data/x"},
		{`name kubernetes.io~csi/data/x`, "/data/x", "/data/x"},
		{`nothing`, "", ""},
		{`/data/x at the start`, "/data/x", "/data/x"},
	} {
		if got := wholePath(c.text, c.p); got != c.want {
			t.Errorf("wholePath(%q, %q) = %q, want %q", c.text, c.p, got, c.want)
		}
	}
	for _, c := range []struct{ v, want string }{{`"sh`, ""}, {`shop/web-0`, "shop/web-0"}, {``, ``}} {
		if got := whole(c.v); got != c.want {
			t.Errorf("whole(%q) = %q, want %q", c.v, got, c.want)
		}
	}
}
