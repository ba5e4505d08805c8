package mounts

import (
	"slices"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// nodesnap's own processes, namespaces and pod: recorded, never evidence against the node.

// findSelf finds nodesnap in the scan: its own mount namespace (the
// supervisor's, passed down in Common.Self), its pod's other containers'
// namespaces, and its processes: the supervisor (this collector's parent,
// found through <proc>/self, which names the reader as that /proc numbers
// it) and its descendants.
func findSelf(env *collectors.Env, proc string, scan *nsScan, host uint64, nss []layout.MountNamespace) *layout.MountsSelf {
	ms := &layout.MountsSelf{Namespaces: []uint64{}}
	if env.Self != nil {
		ms.MountNamespace = env.Self.MountNamespace
		if env.Self.Pod != nil {
			ms.PodUID = env.Self.Pod.UID
		}
	}
	if ms.MountNamespace == 0 {
		ms.MountNamespace, _ = hostfs.NSInode("/proc/self/ns/mnt")
	}
	if link, err := hostfs.Readlink(proc + "/self"); err == nil {
		if me, err := strconv.Atoi(link); err == nil {
			ms.SupervisorPID, ms.PIDs = SelfProcesses(scan.ppid, scan.comms, me)
		}
	}
	if _, ok := scan.spaces[ms.MountNamespace]; !ok {
		// Not among the namespaces this /proc shows (a fixture root,
		// or a pod without the host's PID namespace): nothing of
		// nodesnap's own to leave out.
		ms.MountNamespace = 0
	}
	if ms.MountNamespace == 0 || ms.MountNamespace == host || host == 0 {
		return ms
	}
	ms.Namespaces = append(ms.Namespaces, ms.MountNamespace)
	ms.Namespaces = append(ms.Namespaces, PodNamespaces(nss, host, ms.MountNamespace, ms.PodUID)...)
	return ms
}

// PodNamespaces returns the mount namespaces of the pod uid's containers
// other than host and own: those with a mount bound from the pod's own
// kubelet directory (/etc/hosts, a termination log, a volume) at a mount
// point outside any kubelet pod directory. A copy of the node's kubelet
// tree (a CSI driver's) has its mount points in pod directories, and is
// not the pod.
func PodNamespaces(nss []layout.MountNamespace, host, own uint64, uid string) []uint64 {
	if uid == "" {
		return nil
	}
	var out []uint64
	for _, ns := range nss {
		if ns.Inode == host || ns.Inode == own || ns.Host {
			continue
		}
		for _, m := range ns.Mounts {
			if strings.Contains(m.MountPoint, "/pods/") {
				continue
			}
			if u, ok := procfs.PodUIDFromMountRoot(m.Root); ok && u == uid {
				out = append(out, ns.Inode)
				break
			}
		}
	}
	return out
}

// SelfProcesses returns the supervisor of the collector process me (its
// parent) and the supervisor's processes: itself, its children that run
// the same program (collectors: the supervisor of an in-process test run
// has other children), and everything below those (workers, the programs
// they run). ppid and comm cover every scanned process.
func SelfProcesses(ppid map[int]int, comm map[int]string, me int) (int, []int) {
	sup, ok := ppid[me]
	if !ok || sup <= 0 {
		return 0, nil
	}
	children := map[int][]int{}
	for pid, pp := range ppid {
		children[pp] = append(children[pp], pid)
	}
	out := []int{sup}
	queue := []int{}
	for _, c := range children[sup] {
		if comm[c] == comm[sup] || c == me {
			queue = append(queue, c)
		}
	}
	seen := map[int]bool{sup: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	slices.Sort(out)
	return sup, out
}

// MarkNodesnapNamespaces marks rep.Nodesnap's namespaces in the namespace
// list and the device index, and recomputes which devices are held only
// outside the host's namespace without them.
func MarkNodesnapNamespaces(rep *layout.MountsReport) {
	if rep.Nodesnap == nil || len(rep.Nodesnap.Namespaces) == 0 {
		return
	}
	kind := map[uint64]string{}
	for _, ns := range rep.Nodesnap.Namespaces {
		kind[ns] = layout.NodesnapPod
	}
	kind[rep.Nodesnap.MountNamespace] = layout.NodesnapOwn
	for i := range rep.Namespaces {
		if k, ok := kind[rep.Namespaces[i].Inode]; ok && !rep.Namespaces[i].Host {
			rep.Namespaces[i].Nodesnap = k
		}
	}
	for i := range rep.Devices {
		d := &rep.Devices[i]
		foreign := false
		for j := range d.Namespaces {
			n := &d.Namespaces[j]
			if k, ok := kind[n.Namespace]; ok && !n.Host {
				n.Nodesnap = k
			} else if !n.Host {
				foreign = true
			}
		}
		if d.InHostNamespace || foreign || !d.OnlyOutsideHostNamespace {
			continue
		}
		d.OnlyOutsideHostNamespace = false
		d.OnlyInNodesnapNamespaces = true
		rep.Nodesnap.ExcludedDeviceCount++
		if len(rep.Nodesnap.ExcludedDevices) < layout.MaxExcludedDevices {
			rep.Nodesnap.ExcludedDevices = append(rep.Nodesnap.ExcludedDevices, d.Dev)
		}
	}
}
