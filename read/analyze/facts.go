package analyze

import (
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Facts are what a bundle shows beyond its findings, in the shape a
// picture needs (nodesnap report draws them): who holds each device, the
// shape of the kubelet's, runtime's and CSI directories, and the
// kubelet's goroutines by frame. They come from analyze's own pass, so a
// process, pod and container are named as the findings name them. Only
// an analysis run with Options.Facts fills them.
type Facts struct {
	// HeldDevices are the devices held where an unmount on the host
	// cannot free them (mounted only outside the host's mount namespace,
	// mounted or used in another namespace, or the device node held
	// open), with who holds them: the device → mount namespace →
	// process → pod graph. Devices mounted only outside the host's
	// namespace come first.
	HeldDevices []HeldDevice `json:"held_devices"`
	// HeldDevicesOmitted counts devices past MaxFactDevices.
	HeldDevicesOmitted int `json:"held_devices_omitted,omitempty"`
	// DirShape is dirshape's record (nil without it): each root's
	// largest directories and .deleting~ leftovers.
	DirShape *layout.DirShapeReport `json:"dirshape,omitempty"`
	// KubeletGoroutines are the kubelet's goroutines by frame (nil
	// without its debug=2 dump).
	KubeletGoroutines *GoroutineCount `json:"kubelet_goroutines,omitempty"`
}

// Bounds on the held-device graph.
const (
	MaxFactDevices    = 40
	MaxFactNamespaces = 12 // per device
	MaxFactHolders    = 16 // per namespace
)

// HeldDevice is one device and who holds it.
type HeldDevice struct {
	Dev string `json:"dev"`
	// Name is the device's kernel name (rbd3, loop0) when it is a block
	// device, else its first mount source.
	Name    string   `json:"name"`
	FSTypes []string `json:"fs_types,omitempty"`
	Sources []string `json:"sources,omitempty"`
	// Image is what backs it (rbd pool/image, loop file, dm name).
	Image                    string `json:"image,omitempty"`
	InHostNamespace          bool   `json:"in_host_namespace"`
	OnlyOutsideHostNamespace bool   `json:"only_outside_host_namespace"`
	// Namespaces mount it or have a process holding a file on it.
	Namespaces        []HolderNamespace `json:"namespaces"`
	NamespacesOmitted int               `json:"namespaces_omitted,omitempty"`
	// KernelThreads name the device (jbd2/rbd3-8).
	KernelThreads []string `json:"kernel_threads,omitempty"`
}

// HolderNamespace is one mount namespace holding a device.
type HolderNamespace struct {
	Inode uint64 `json:"inode"`
	Host  bool   `json:"host"`
	// Nodesnap is "own" or "pod" for nodesnap's own namespaces.
	Nodesnap string `json:"nodesnap,omitempty"`
	// MountPoints are where the namespace mounts the device (none when
	// it only holds files on it).
	MountPoints []string `json:"mount_points,omitempty"`
	// ProcessCount is how many processes the namespace has (0 when not
	// known); Holders are some of them, or, for the host's namespace,
	// only the processes with a file on the device.
	ProcessCount   int      `json:"process_count"`
	Holders        []Holder `json:"holders"`
	HoldersOmitted int      `json:"holders_omitted,omitempty"`
}

// Holder is one process in a namespace holding a device.
type Holder struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Uses are its files on the device ("cwd", "fd 3"); empty when it
	// holds the device only by living in a namespace that mounts it.
	Uses []string `json:"uses,omitempty"`
	// Pod is the pod and container it runs in, in the findings' words
	// ("in pod ns/name, container c"); "" outside a pod.
	Pod string `json:"pod,omitempty"`
}

// GoroutineCount is a goroutine dump counted by frame (see
// goroutinedump).
type GoroutineCount struct {
	Path    string         `json:"path"`
	Total   int            `json:"total"`
	ByFrame map[string]int `json:"by_frame"`
}

// facts builds the Facts of the bundle read.
func (st *state) facts() *Facts {
	f := &Facts{DirShape: st.shape}
	if st.goroutineCount != nil {
		st.goroutineCount.End()
		f.KubeletGoroutines = &GoroutineCount{Path: layout.KubeletGoroutineDebug2Path, Total: st.goroutineCount.Total, ByFrame: st.goroutineCount.ByFrame}
	}
	devs := map[string]bool{}
	var order []string
	for _, dev := range st.deviceOrder {
		d := st.devices[dev]
		if d != nil && (d.Block != nil || d.OnlyOutsideHostNamespace) && !d.OnlyInNodesnapNamespaces {
			devs[dev] = true
			order = append(order, dev)
		}
	}
	var held []string
	for dev, h := range st.devHolders {
		if !devs[dev] && h.Block != nil && len(h.Holders) > 0 {
			held = append(held, dev)
		}
	}
	sort.Strings(held)
	order = append(order, held...)
	for _, dev := range order {
		hd := st.heldDevice(dev)
		if !hd.heldAside() {
			continue
		}
		if len(f.HeldDevices) >= MaxFactDevices {
			f.HeldDevicesOmitted++
			continue
		}
		f.HeldDevices = append(f.HeldDevices, hd)
	}
	sort.SliceStable(f.HeldDevices, func(i, j int) bool {
		return f.HeldDevices[i].OnlyOutsideHostNamespace && !f.HeldDevices[j].OnlyOutsideHostNamespace
	})
	return f
}

// heldDevice joins the mount index's namespaces of dev with the
// processes holding files on it.
func (st *state) heldDevice(dev string) HeldDevice {
	hd := HeldDevice{Dev: dev}
	byNS := map[uint64]*HolderNamespace{}
	var nsOrder []uint64
	nsOf := func(ns uint64) *HolderNamespace {
		if n := byNS[ns]; n != nil {
			return n
		}
		n := &HolderNamespace{Inode: ns, Host: ns != 0 && ns == st.hostNS, Nodesnap: st.selfNS[ns]}
		if info := st.nsInfo[ns]; info != nil {
			n.ProcessCount = info.ProcessCount
			if info.Nodesnap != "" {
				n.Nodesnap = info.Nodesnap
			}
		}
		byNS[ns] = n
		nsOrder = append(nsOrder, ns)
		return n
	}
	addHolder := func(n *HolderNamespace, h Holder) {
		for i := range n.Holders {
			if n.Holders[i].PID == h.PID {
				n.Holders[i].Uses = append(n.Holders[i].Uses, h.Uses...)
				return
			}
		}
		if len(n.Holders) >= MaxFactHolders {
			n.HoldersOmitted++
			return
		}
		if p := st.procs[h.PID]; p != nil {
			h.Pod = st.podOf(p)
			if h.Comm == "" {
				h.Comm = p.Comm
			}
		}
		n.Holders = append(n.Holders, h)
	}
	if d := st.devices[dev]; d != nil {
		hd.FSTypes, hd.Sources, hd.InHostNamespace, hd.OnlyOutsideHostNamespace = d.FSTypes, d.Sources, d.InHostNamespace, d.OnlyOutsideHostNamespace
		hd.Name, hd.Image = devNode(d.Block), blockImage(d.Block)
		for _, ns := range d.Namespaces {
			n := nsOf(ns.Namespace)
			n.Host = n.Host || ns.Host
			if ns.Nodesnap != "" {
				n.Nodesnap = ns.Nodesnap
			}
			if ns.ProcessCount > 0 {
				n.ProcessCount = ns.ProcessCount
			}
			for _, m := range ns.Mounts {
				n.MountPoints = append(n.MountPoints, m.MountPoint)
			}
			for _, p := range ns.Processes {
				addHolder(n, Holder{PID: p.PID, Comm: p.Comm})
			}
		}
	}
	if h := st.devHolders[dev]; h != nil {
		if hd.Name == "" {
			hd.Name, hd.Image = devNode(h.Block), blockImage(h.Block)
		}
		if hd.FSTypes == nil {
			hd.FSTypes, hd.Sources = h.FSTypes, h.Sources
		}
		for _, fh := range h.Holders {
			addHolder(nsOf(fh.Namespace), Holder{PID: fh.PID, Comm: fh.Comm, Uses: fh.Uses})
		}
		for _, k := range h.KernelThreads {
			hd.KernelThreads = append(hd.KernelThreads, st.procName(k.PID, k.Comm))
		}
	}
	if hd.Name == "" && len(hd.Sources) > 0 {
		hd.Name = hd.Sources[0]
	}
	if hd.Name == "" {
		hd.Name = dev
	}
	for _, ns := range nsOrder {
		if len(hd.Namespaces) >= MaxFactNamespaces {
			hd.NamespacesOmitted++
			continue
		}
		hd.Namespaces = append(hd.Namespaces, *byNS[ns])
	}
	// The namespaces that hold it from outside the host first.
	sort.SliceStable(hd.Namespaces, func(i, j int) bool { return !hd.Namespaces[i].Host && hd.Namespaces[j].Host })
	return hd
}

// heldAside reports whether the device is held where the host's own
// unmount cannot free it: mounted only outside the host's namespace,
// mounted or used by a process in another namespace, or its device node
// held open. A disk the host mounts and uses is not drawn.
func (hd *HeldDevice) heldAside() bool {
	if hd.OnlyOutsideHostNamespace {
		return true
	}
	for _, n := range hd.Namespaces {
		if !n.Host && n.Nodesnap == "" && (len(n.MountPoints) > 0 || len(n.Holders) > 0) {
			return true
		}
		for _, h := range n.Holders {
			for _, u := range h.Uses {
				if strings.Contains(u, "device node") {
					return true
				}
			}
		}
	}
	return false
}

func devNode(b *layout.BlockDevice) string {
	if b == nil || b.Name == "" {
		return ""
	}
	return "/dev/" + b.Name
}

func blockImage(b *layout.BlockDevice) string {
	switch {
	case b == nil:
		return ""
	case b.RBDImage != "":
		return "rbd " + strings.TrimPrefix(b.RBDPool+"/"+b.RBDImage, "/")
	case b.BackingFile != "":
		return "loop " + b.BackingFile
	case b.DMName != "":
		return "dm " + b.DMName
	}
	return ""
}
