package procfs

import (
	"bytes"
	"regexp"
	"strings"
)

// Which pod and container a process runs in, as the kubelet and the
// container runtimes name them in cgroup paths and pod directories:
//
//	0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b4e0c2a_7f3d_4a51_9c0e_2d5e8f6a7b90.slice/cri-containerd-<64 hex>.scope
//	11:memory:/kubepods/burstable/pod1b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90/<64 hex>
//
// and /var/lib/kubelet/pods/<uid>/etc-hosts behind a container's /etc/hosts.
// A static pod's UID is 32 hex digits without dashes.

var (
	cgroupPodRe       = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32})(?:\.slice)?(?:/|$)`)
	cgroupContainerRe = regexp.MustCompile(`(?:^|/)(?:cri-containerd-|crio-|docker-|containerd-|libpod-)?([0-9a-f]{64})(?:\.scope)?$`)
	podDirRe          = regexp.MustCompile(`(?:^|/)pods/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})/(?:etc-hosts|containers/|volumes/|volume-subpaths/)`)
	podUIDRe          = regexp.MustCompile(`^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$`)
)

// SelfCgroup is what a process's /proc/<pid>/cgroup says about where it
// runs.
type SelfCgroup struct {
	// Path is the cgroup path that names a pod or container, or else the
	// unified (v2) path, or else the first line's.
	Path string
	// PodUID is the Kubernetes pod's UID ("" outside a pod), with dashes.
	PodUID string
	// ContainerID is the container's 64-hex-digit ID ("" if none).
	ContainerID string
}

// ParseSelfCgroup reads a /proc/<pid>/cgroup file ("hierarchy:controllers:
// path" lines). Inside a private cgroup namespace the paths are "/" and
// name nothing: then PodUID and ContainerID are empty.
func ParseSelfCgroup(data []byte) SelfCgroup {
	var out SelfCgroup
	first := true
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		_, after, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		ctrl, path, ok := bytes.Cut(after, []byte(":"))
		if !ok || len(path) == 0 {
			continue
		}
		p := string(path)
		pod := cgroupPodRe.FindStringSubmatch(p)
		ctr := cgroupContainerRe.FindStringSubmatch(p)
		if pod != nil || ctr != nil {
			out.Path = p
			if pod != nil {
				out.PodUID = PodUIDFromCgroup(pod[1])
			}
			if ctr != nil {
				out.ContainerID = ctr[1]
			}
			return out
		}
		if first || len(ctrl) == 0 {
			out.Path = p
			first = false
		}
	}
	return out
}

// PodUIDFromCgroup turns a cgroup's spelling of a pod UID (the systemd
// driver writes underscores for dashes) back into the UID.
func PodUIDFromCgroup(s string) string { return strings.ReplaceAll(s, "_", "-") }

// ValidPodUID reports whether s looks like a pod UID: a UUID in lowercase,
// or a static pod's 32 hex digits.
func ValidPodUID(s string) bool { return podUIDRe.MatchString(s) }

// PodUIDFromMountRoot returns the pod UID when root (a mountinfo root
// field: the path inside the mounted filesystem) is inside a kubelet pod
// directory's per-pod files (etc-hosts, a container's termination log, a
// volume): what a container's /etc/hosts or /dev/termination-log is bound
// from.
func PodUIDFromMountRoot(root string) (string, bool) {
	m := podDirRe.FindStringSubmatch(root)
	if m == nil {
		return "", false
	}
	return m[1], true
}
