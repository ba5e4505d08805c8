package collectors

// nodesnap's own run is never evidence against the node. In a pod, its
// mount namespace is the container's, a copy of the node's mounts made
// when the pod started, and the mounts collector would otherwise list it
// among the holders of a mount the node has since unmounted (incident
// 002's signature), or its workers among the processes using a volume.

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// Environment variables naming nodesnap's pod; the manifests in
// deploy/kubernetes set them from the downward API.
const (
	PodUIDEnv       = "NODESNAP_POD_UID"
	PodNameEnv      = "NODESNAP_POD_NAME"
	PodNamespaceEnv = "NODESNAP_POD_NAMESPACE"
)

// IdentifySelf describes the calling process (the supervisor): its pid,
// namespaces, cgroup and pod. It reads only the caller's own /proc/self
// files, which are kernel memory: nothing there can hang.
func IdentifySelf() *bundle.Self {
	s := &bundle.Self{PID: os.Getpid()}
	if ns, err := hostfs.NSInode("/proc/self/ns/mnt"); err == nil {
		s.MountNamespace = ns
	}
	if link, err := hostfs.Readlink("/proc/self/ns/pid"); err == nil {
		if v, ok := nsInode(link, "pid"); ok {
			s.PIDNamespace = v
		}
	}
	var cg procfs.SelfCgroup
	if b, err := hostfs.ReadProc("/proc/self/cgroup", make([]byte, 64<<10)); err == nil {
		cg = procfs.ParseSelfCgroup(b)
		s.Cgroup, s.ContainerID = cg.Path, cg.ContainerID
	}
	pod := &bundle.SelfPod{Namespace: os.Getenv(PodNamespaceEnv), Name: os.Getenv(PodNameEnv)}
	switch uid := strings.ToLower(strings.TrimSpace(os.Getenv(PodUIDEnv))); {
	case procfs.ValidPodUID(uid):
		pod.UID, pod.Source = uid, "env"
	case cg.PodUID != "":
		pod.UID, pod.Source = cg.PodUID, "cgroup"
	default:
		// In a private cgroup namespace the cgroup names nothing; the
		// kubelet's pod directory behind /etc/hosts or
		// /dev/termination-log still does.
		if b, err := readOwnMountinfo(); err == nil {
			if uid := podUIDFromOwnMounts(b); uid != "" {
				pod.UID, pod.Source = uid, "mountinfo"
			}
		}
	}
	if pod.UID != "" {
		s.Pod = pod
	}
	return s
}

// readOwnMountinfo reads the caller's own mount table in a worker under a
// deadline: unlike the rest of /proc/self, the read takes the namespace's
// lock, which an unmount stuck on a dead server can hold, and the
// supervisor must never wait on that.
func readOwnMountinfo() ([]byte, error) {
	pool := isolate.NewPool(1, 2*time.Second)
	defer pool.Close()
	var r isolate.ReadFileResult
	if err := pool.Do(context.Background(), isolate.OpReadFile, isolate.ReadFileRequest{Path: "/proc/self/mountinfo", Max: 32 << 20}, &r); err != nil {
		return nil, err
	}
	return r.Data, nil
}

// podUIDFromOwnMounts finds the pod UID in a container's own mount table:
// a mount whose root is a per-pod file of the kubelet and whose mount point
// is not itself in a kubelet pod directory (the node's, or a copy of it).
func podUIDFromOwnMounts(mountinfo []byte) string {
	ms, _ := procfs.ParseMountInfo(mountinfo)
	for _, m := range ms {
		if strings.Contains(m.MountPoint, "/pods/") {
			continue
		}
		if uid, ok := procfs.PodUIDFromMountRoot(m.Root); ok {
			return uid
		}
	}
	return ""
}

// nsInode parses a namespace link ("pid:[4026531836]").
func nsInode(link, kind string) (uint64, bool) {
	v, ok := strings.CutPrefix(link, kind+":[")
	if !ok {
		return 0, false
	}
	v, ok = strings.CutSuffix(v, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}
