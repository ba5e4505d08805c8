package layout

import (
	"errors"
	"fmt"
	"sort"

	"github.com/nodesnap/nodesnap/internal/procfs"
)

// The device index without the copies of shared tables (mounts.json
// format 3). At a thousand namespaces made from one template every
// device of the template lists a thousand namespaces, each with its
// mounts and processes: most of mounts.json. Those entries say nothing
// their namespace's record and table do not, so a device names, per
// table, the namespaces whose entry is exactly what the table and the
// record make (MountDevice.Tables), and lists the rest in full.

// DeviceMountOf is m as the device index lists it.
func DeviceMountOf(m *NamespaceMount) MountDeviceMount {
	return MountDeviceMount{MountID: m.ID, MountPoint: m.MountPoint, Root: m.Root, Source: m.Source,
		FSType: m.FSType, Propagation: m.Propagation.String()}
}

// DeviceNamespaceOf is namespace ns's entry under a device it mounts
// with mounts: the host's without its processes (listed once in
// namespaces[]), another's with at most MaxDeviceNamespaceProcesses.
func DeviceNamespaceOf(ns *MountNamespace, mounts []MountDeviceMount) MountDeviceNamespace {
	dn := MountDeviceNamespace{Namespace: ns.Inode, Host: ns.Host, ProcessCount: ns.ProcessCount, Mounts: mounts}
	if !ns.Host {
		dn.Nodesnap = ns.Nodesnap
		dn.Processes = ns.Processes[:min(len(ns.Processes), MaxDeviceNamespaceProcesses)]
	}
	return dn
}

// deviceMountsOf is ms's mounts of device major:minor, pseudo filesystems
// left out, in their order.
func deviceMountsOf(ms []NamespaceMount, major, minor uint32) []MountDeviceMount {
	var out []MountDeviceMount
	for j := range ms {
		if ms[j].Major == major && ms[j].Minor == minor && ms[j].Class != procfs.ClassPseudo.String() {
			out = append(out, DeviceMountOf(&ms[j]))
		}
	}
	return out
}

// CompactDeviceIndex rewrites rep's device index in format 3: under every
// device, the entries of namespaces that name a table and are exactly
// what ExpandDeviceTables would make from them move to Tables. A device
// whose entries are not in the order of rep.Namespaces is left whole, so
// that expanding gives back the same index. Namespaces must hold their
// mounts (as the collector has them before writing).
func CompactDeviceIndex(rep *MountsReport) {
	pos := make(map[uint64]int, len(rep.Namespaces))
	for i := range rep.Namespaces {
		if _, dup := pos[rep.Namespaces[i].Inode]; !dup {
			pos[rep.Namespaces[i].Inode] = i
		}
	}
	// Each namespace's mounts by device, for the namespaces that may be
	// left out (made when first needed).
	type devKey struct{ major, minor uint32 }
	byDev := make([]map[devKey][]int32, len(rep.Namespaces))
	mountsOf := func(i int, major, minor uint32) []int32 {
		if byDev[i] == nil {
			ms := rep.Namespaces[i].Mounts
			m := make(map[devKey][]int32, 8)
			for j := range ms {
				if ms[j].Class != procfs.ClassPseudo.String() {
					k := devKey{ms[j].Major, ms[j].Minor}
					m[k] = append(m[k], int32(j))
				}
			}
			byDev[i] = m
		}
		return byDev[i][devKey{major, minor}]
	}
	for di := range rep.Devices {
		d := &rep.Devices[di]
		if len(d.Tables) > 0 || !inNamespaceOrder(d.Namespaces, pos) {
			continue
		}
		kept := d.Namespaces[:0:0]
		group := map[string]int{}
		for k := range d.Namespaces {
			dn := &d.Namespaces[k]
			i := pos[dn.Namespace]
			ns := &rep.Namespaces[i]
			if ns.Host || dn.Host || ns.Table == "" || !sameDeviceEntry(dn, ns, mountsOf(i, d.Major, d.Minor)) {
				kept = append(kept, *dn)
				continue
			}
			g, ok := group[ns.Table]
			if !ok {
				g = len(d.Tables)
				group[ns.Table] = g
				d.Tables = append(d.Tables, MountDeviceTable{Table: ns.Table})
			}
			d.Tables[g].Namespaces = append(d.Tables[g].Namespaces, ns.Inode)
		}
		if len(d.Tables) > 0 {
			d.Namespaces = kept
		}
	}
}

// inNamespaceOrder says whether every entry names a namespace of pos, in
// strictly increasing position.
func inNamespaceOrder(dns []MountDeviceNamespace, pos map[uint64]int) bool {
	last := -1
	for k := range dns {
		i, ok := pos[dns[k].Namespace]
		if !ok || i <= last {
			return false
		}
		last = i
	}
	return true
}

// sameDeviceEntry says whether dn is exactly DeviceNamespaceOf(ns, its
// mounts at lines of ns.Mounts).
func sameDeviceEntry(dn *MountDeviceNamespace, ns *MountNamespace, lines []int32) bool {
	want := DeviceNamespaceOf(ns, nil)
	if len(lines) == 0 || len(dn.Mounts) != len(lines) || dn.ProcessCount != want.ProcessCount ||
		dn.Nodesnap != want.Nodesnap || !sameProcesses(dn.Processes, want.Processes) {
		return false
	}
	for k, j := range lines {
		if dn.Mounts[k] != DeviceMountOf(&ns.Mounts[j]) {
			return false
		}
	}
	return true
}

func sameProcesses(a, b []NamespaceProcess) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].PID != b[i].PID || a[i].Comm != b[i].Comm || a[i].Threads != b[i].Threads || len(a[i].Tasks) != len(b[i].Tasks) {
			return false
		}
		for j := range a[i].Tasks {
			if a[i].Tasks[j] != b[i].Tasks[j] {
				return false
			}
		}
	}
	return true
}

// ExpandDeviceTables makes every device's Tables entries again (format
// 3 read as format 1): each namespace named gets the entry its record and
// mounts make, in the order of rep.Namespaces among the others. The
// namespaces must hold their mounts (ExpandMountTables, which calls
// this). A name that is not a namespace of that table, or one that does
// not mount the device, is an error and gets no entry.
func ExpandDeviceTables(rep *MountsReport) error {
	var pos map[uint64]int
	var errs []error
	for di := range rep.Devices {
		d := &rep.Devices[di]
		if len(d.Tables) == 0 {
			continue
		}
		if pos == nil {
			pos = make(map[uint64]int, len(rep.Namespaces))
			for i := range rep.Namespaces {
				if _, dup := pos[rep.Namespaces[i].Inode]; !dup {
					pos[rep.Namespaces[i].Inode] = i
				}
			}
		}
		seen := map[uint64]bool{}
		for k := range d.Namespaces {
			seen[d.Namespaces[k].Namespace] = true
		}
		for _, g := range d.Tables {
			for _, inode := range g.Namespaces {
				i, ok := pos[inode]
				switch {
				case !ok || rep.Namespaces[i].Table != g.Table:
					errs = append(errs, fmt.Errorf("device %s: mount namespace %d is not one of table %q", d.Dev, inode, g.Table))
					continue
				case seen[inode]:
					errs = append(errs, fmt.Errorf("device %s: mount namespace %d is listed twice", d.Dev, inode))
					continue
				}
				seen[inode] = true
				ns := &rep.Namespaces[i]
				ms := deviceMountsOf(ns.Mounts, d.Major, d.Minor)
				if len(ms) == 0 {
					errs = append(errs, fmt.Errorf("device %s: mount namespace %d does not mount it", d.Dev, inode))
					continue
				}
				d.Namespaces = append(d.Namespaces, DeviceNamespaceOf(ns, ms))
			}
		}
		at := func(k int) int {
			if i, ok := pos[d.Namespaces[k].Namespace]; ok {
				return i
			}
			return len(rep.Namespaces)
		}
		sort.SliceStable(d.Namespaces, func(a, b int) bool { return at(a) < at(b) })
		d.Tables = nil
	}
	if len(errs) > 10 {
		errs = append(errs[:10], fmt.Errorf("and %d more errors in the device index", len(errs)-10))
	}
	return errors.Join(errs...)
}
