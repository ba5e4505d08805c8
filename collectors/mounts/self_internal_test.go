package mounts

import (
	"slices"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

func TestSelfProcesses(t *testing.T) {
	// 100 is the supervisor (nodesnap), 1 init, 50 a shell. 101 and 102
	// are collectors, 103 a test's helper started by the same parent
	// (another program), 110 a worker of 101, 111 journalctl run by 110.
	ppid := map[int]int{1: 0, 50: 1, 100: 50, 101: 100, 102: 100, 103: 100, 110: 101, 111: 110, 200: 1}
	comm := map[int]string{1: "systemd", 50: "bash", 100: "nodesnap", 101: "nodesnap", 102: "nodesnap", 103: "sleep", 110: "nodesnap", 111: "journalctl", 200: "kubelet"}
	for _, c := range []struct {
		name string
		me   int
		sup  int
		pids []int
	}{
		{"from a collector", 102, 100, []int{100, 101, 102, 110, 111}},
		{"from a collector whose name differs (a renamed binary)", 103, 100, []int{100, 101, 102, 103, 110, 111}},
		{"unknown self", 999, 0, nil},
		{"init has no parent", 1, 0, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sup, pids := SelfProcesses(ppid, comm, c.me)
			if sup != c.sup || !slices.Equal(pids, c.pids) {
				t.Errorf("got %d %v, want %d %v", sup, pids, c.sup, c.pids)
			}
		})
	}
	// A cycle in a hostile or racy scan ends.
	if _, pids := SelfProcesses(map[int]int{5: 6, 6: 5}, map[int]string{5: "x", 6: "x"}, 5); len(pids) != 2 {
		t.Errorf("cycle: %v", pids)
	}
}

const selfUID = "1b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90"

func mountAt(root, mp string) layout.NamespaceMount {
	return layout.NamespaceMount{Mount: procfs.Mount{Root: root, MountPoint: mp, Major: 253, Minor: 1}}
}

func TestPodNamespaces(t *testing.T) {
	nss := []layout.MountNamespace{
		{Inode: 1, Host: true, Mounts: []layout.NamespaceMount{mountAt("/var/lib/kubelet/pods/"+selfUID+"/etc-hosts", "/etc/hosts")}},
		{Inode: 2, Mounts: []layout.NamespaceMount{mountAt("/var/lib/kubelet/pods/"+selfUID+"/etc-hosts", "/etc/hosts")}},                          // own
		{Inode: 3, Mounts: []layout.NamespaceMount{mountAt("/var/lib/kubelet/pods/"+selfUID+"/containers/hold/a1", "/dev/termination-log")}},       // hold
		{Inode: 4, Mounts: []layout.NamespaceMount{mountAt("/", "/var/lib/kubelet/pods/"+selfUID+"/volumes/kubernetes.io~projected/t")}},           // a CSI driver's copy
		{Inode: 5, Mounts: []layout.NamespaceMount{mountAt("/var/lib/kubelet/pods/2b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90/etc-hosts", "/etc/hosts")}}, // another pod
		{Inode: 6, Mounts: []layout.NamespaceMount{mountAt("/var/lib/kubelet/pods/"+selfUID+"/etc-hosts", "/host/var/lib/kubelet/pods/x/etc-hosts")}},
	}
	if got := PodNamespaces(nss, 1, 2, selfUID); !slices.Equal(got, []uint64{3}) {
		t.Errorf("pod namespaces %v, want [3]", got)
	}
	if got := PodNamespaces(nss, 1, 2, ""); got != nil {
		t.Errorf("without a pod UID: %v", got)
	}
}

func TestMarkNodesnapNamespaces(t *testing.T) {
	dev := func(name string, host bool, nss ...uint64) layout.MountDevice {
		d := layout.MountDevice{Dev: name, InHostNamespace: host, OnlyOutsideHostNamespace: !host}
		if host {
			d.Namespaces = append(d.Namespaces, layout.MountDeviceNamespace{Namespace: 1, Host: true})
		}
		for _, n := range nss {
			d.Namespaces = append(d.Namespaces, layout.MountDeviceNamespace{Namespace: n})
		}
		return d
	}
	rep := layout.MountsReport{
		HostNamespace: 1,
		Namespaces:    []layout.MountNamespace{{Inode: 1, Host: true}, {Inode: 2}, {Inode: 3}, {Inode: 9}},
		Devices: []layout.MountDevice{
			dev("7:0", false, 2),    // only nodesnap's own
			dev("7:1", false, 2, 3), // nodesnap and its pod
			dev("7:2", false, 2, 9), // nodesnap and a real holder
			dev("7:3", true, 2),     // the host too
			dev("7:4", false, 9),    // a real holder only
		},
		Nodesnap: &layout.MountsSelf{MountNamespace: 2, Namespaces: []uint64{2, 3}},
	}
	MarkNodesnapNamespaces(&rep)
	want := map[string][2]bool{"7:0": {false, true}, "7:1": {false, true}, "7:2": {true, false}, "7:3": {false, false}, "7:4": {true, false}}
	for _, d := range rep.Devices {
		if w := want[d.Dev]; d.OnlyOutsideHostNamespace != w[0] || d.OnlyInNodesnapNamespaces != w[1] {
			t.Errorf("%s: only outside %v, only nodesnap %v; want %v", d.Dev, d.OnlyOutsideHostNamespace, d.OnlyInNodesnapNamespaces, w)
		}
		for _, n := range d.Namespaces {
			wantKind := map[uint64]string{2: layout.NodesnapOwn, 3: layout.NodesnapPod}[n.Namespace]
			if n.Nodesnap != wantKind {
				t.Errorf("%s namespace %d marked %q, want %q", d.Dev, n.Namespace, n.Nodesnap, wantKind)
			}
		}
	}
	if got := []string{rep.Namespaces[1].Nodesnap, rep.Namespaces[2].Nodesnap, rep.Namespaces[3].Nodesnap}; !slices.Equal(got, []string{"own", "pod", ""}) {
		t.Errorf("namespaces marked %v", got)
	}
	if rep.Nodesnap.ExcludedDeviceCount != 2 || !slices.Equal(rep.Nodesnap.ExcludedDevices, []string{"7:0", "7:1"}) {
		t.Errorf("excluded %d %v", rep.Nodesnap.ExcludedDeviceCount, rep.Nodesnap.ExcludedDevices)
	}
}
