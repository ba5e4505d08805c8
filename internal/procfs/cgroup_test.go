package procfs

import (
	"testing"
)

const (
	testUID = "1b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90"
	testCtr = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestParseSelfCgroup(t *testing.T) {
	for _, c := range []struct {
		name      string
		in        string
		path, pod string
		ctr       string
	}{
		{"v2 systemd driver, containerd",
			"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b4e0c2a_7f3d_4a51_9c0e_2d5e8f6a7b90.slice/cri-containerd-" + testCtr + ".scope\n",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b4e0c2a_7f3d_4a51_9c0e_2d5e8f6a7b90.slice/cri-containerd-" + testCtr + ".scope", testUID, testCtr},
		{"v1 cgroupfs driver: the first hierarchy that names the pod",
			"12:pids:/\n11:memory:/kubepods/burstable/pod" + testUID + "/" + testCtr + "\n0::/\n",
			"/kubepods/burstable/pod" + testUID + "/" + testCtr, testUID, testCtr},
		{"CRI-O", "0::/kubepods.slice/kubepods-pod1b4e0c2a_7f3d_4a51_9c0e_2d5e8f6a7b90.slice/crio-" + testCtr + ".scope\n",
			"/kubepods.slice/kubepods-pod1b4e0c2a_7f3d_4a51_9c0e_2d5e8f6a7b90.slice/crio-" + testCtr + ".scope", testUID, testCtr},
		{"static pod UID", "0::/kubepods/pod0123456789abcdef0123456789abcdef/" + testCtr + "\n",
			"/kubepods/pod0123456789abcdef0123456789abcdef/" + testCtr, "0123456789abcdef0123456789abcdef", testCtr},
		{"docker outside Kubernetes", "0::/system.slice/docker-" + testCtr + ".scope\n", "/system.slice/docker-" + testCtr + ".scope", "", testCtr},
		{"private cgroup namespace", "0::/\n", "/", "", ""},
		{"a host service", "0::/system.slice/sshd.service\n", "/system.slice/sshd.service", "", ""},
		{"v1 host: the first line", "9:name=systemd:/\n4:memory:/user.slice\n0::/\n", "/", "", ""},
		{"not a pod: podman's word", "0::/user.slice/podman-1234.scope\n", "/user.slice/podman-1234.scope", "", ""},
		{"short hex is no container", "0::/kubepods/pod" + testUID + "/abcdef\n", "/kubepods/pod" + testUID + "/abcdef", testUID, ""},
		{"garbage", "no colons\n::\n\x00\n", "", "", ""},
		{"empty", "", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ParseSelfCgroup([]byte(c.in))
			if got.Path != c.path || got.PodUID != c.pod || got.ContainerID != c.ctr {
				t.Errorf("got %+v, want path %q pod %q container %q", got, c.path, c.pod, c.ctr)
			}
		})
	}
}

func TestPodUIDFromMountRoot(t *testing.T) {
	for _, c := range []struct {
		root string
		uid  string
	}{
		{"/var/lib/kubelet/pods/" + testUID + "/etc-hosts", testUID},
		{"/pods/" + testUID + "/containers/collect/3f2a9c1e", testUID},
		{"/var/lib/kubelet/pods/" + testUID + "/volumes/kubernetes.io~configmap/cfg", testUID},
		{"/var/lib/kubelet/pods/" + testUID + "/volume-subpaths/data/app/0", testUID},
		{"/var/lib/kubelet/pods/" + testUID, ""},
		{"/var/lib/kubelet/pods/" + testUID + "/plugins/x", ""},
		{"/var/lib/kubelet/pods/NOT-A-UID/etc-hosts", ""},
		{"/data/mypods/" + testUID + "/etc-hosts", ""},
		{"/", ""},
		{"", ""},
	} {
		uid, ok := PodUIDFromMountRoot(c.root)
		if uid != c.uid || ok != (c.uid != "") {
			t.Errorf("PodUIDFromMountRoot(%q) = %q, %v; want %q", c.root, uid, ok, c.uid)
		}
	}
	for s, want := range map[string]bool{testUID: true, "0123456789abcdef0123456789abcdef": true, "1B4E0C2A-7F3D-4A51-9C0E-2D5E8F6A7B90": false, "": false, testUID + "x": false, "../../etc": false} {
		if ValidPodUID(s) != want {
			t.Errorf("ValidPodUID(%q) = %v", s, !want)
		}
	}
}
