package collectors

import (
	"os"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

const selfUID = "1b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90"

func TestPodUIDFromOwnMounts(t *testing.T) {
	for _, c := range []struct {
		name, mountinfo, want string
	}{
		{"etc-hosts", "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:1 /var/lib/kubelet/pods/" + selfUID + "/etc-hosts /etc/hosts rw - ext4 /dev/sda1 rw\n", selfUID},
		{"a copy of the node's kubelet tree only", "3 1 0:50 / /host/var/lib/kubelet/pods/" + selfUID + "/volumes/kubernetes.io~projected/t rw - tmpfs tmpfs rw\n", ""},
		{"the host", "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n", ""},
		{"garbage", "not mountinfo\n\x00", ""},
	} {
		if got := podUIDFromOwnMounts([]byte(c.mountinfo)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestIdentifySelf(t *testing.T) {
	t.Setenv(PodUIDEnv, strings.ToUpper(selfUID))
	t.Setenv(PodNameEnv, "nodesnap-node1")
	t.Setenv(PodNamespaceEnv, "nodesnap")
	s := IdentifySelf()
	ns, err := hostfs.NSInode("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != os.Getpid() || s.MountNamespace != ns || s.PIDNamespace == 0 {
		t.Errorf("self %+v, want pid %d mount namespace %d and a pid namespace", s, os.Getpid(), ns)
	}
	if s.Pod == nil || s.Pod.UID != selfUID || s.Pod.Source != "env" || s.Pod.Name != "nodesnap-node1" || s.Pod.Namespace != "nodesnap" {
		t.Errorf("pod %+v from the environment", s.Pod)
	}
	// A value that is not a pod UID is not taken (nor written into the
	// bundle): the UID then comes from the cgroup or the mounts, if any.
	t.Setenv(PodUIDEnv, "../../etc/passwd")
	if s := IdentifySelf(); s.Pod != nil && (s.Pod.Source == "env" || !procfs.ValidPodUID(s.Pod.UID)) {
		t.Errorf("pod %+v from a bad $%s", s.Pod, PodUIDEnv)
	}
}
