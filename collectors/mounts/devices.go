package mounts

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// The device index: which namespaces and processes hold each filesystem, and what block device it is.

func blockName(b *layout.BlockDevice) string {
	if b == nil || b.Name == "" {
		return ""
	}
	s := " (" + b.Name
	if b.BackingFile != "" {
		s += ", backed by " + b.BackingFile
	}
	return s + ")"
}

func describeHolders(d *layout.MountDevice) string {
	var parts []string
	for _, n := range d.Namespaces {
		if n.Nodesnap != "" {
			continue
		}
		var ps []string
		for _, p := range n.Processes {
			ps = append(ps, fmt.Sprintf("%s[%d]", p.Comm, p.PID))
			if len(ps) == 5 {
				ps = append(ps, "...")
				break
			}
		}
		parts = append(parts, fmt.Sprintf("namespace %d (%s)", n.Namespace, strings.Join(ps, " ")))
	}
	return strings.Join(parts, "; ")
}

// BuildMountDeviceIndex makes the device index from parsed namespaces:
// one entry per major:minor that any namespace mounts (pseudo filesystems
// left out), sorted by device, each with every namespace and mountpoint
// that mounts it and whether the host namespace is among them.
func BuildMountDeviceIndex(nss []layout.MountNamespace) []layout.MountDevice {
	type key struct{ major, minor uint32 }
	byDev := map[key]*layout.MountDevice{}
	var keys []key
	for _, ns := range nss {
		var cur map[key]int // device → index in its Namespaces, for this ns
		for _, m := range ns.Mounts {
			if m.Class == procfs.ClassPseudo.String() {
				continue
			}
			k := key{m.Major, m.Minor}
			d := byDev[k]
			if d == nil {
				d = &layout.MountDevice{Dev: m.Dev(), Major: m.Major, Minor: m.Minor, Class: m.Class}
				byDev[k] = d
				keys = append(keys, k)
			}
			if !slices.Contains(d.Sources, m.Source) {
				d.Sources = append(d.Sources, m.Source)
			}
			if !slices.Contains(d.FSTypes, m.FSType) {
				d.FSTypes = append(d.FSTypes, m.FSType)
			}
			if cur == nil {
				cur = map[key]int{}
			}
			i, ok := cur[k]
			if !ok {
				// Enough to name the holders; the full list of processes
				// is in namespaces[] once, not repeated for every device
				// the namespace mounts (it made mounts.json quadratic on
				// a node with many namespaces).
				dn := layout.DeviceNamespaceOf(&ns, nil)
				d.Namespaces = append(d.Namespaces, dn)
				i = len(d.Namespaces) - 1
				cur[k] = i
				if ns.Host {
					d.InHostNamespace = true
				}
			}
			d.Namespaces[i].Mounts = append(d.Namespaces[i].Mounts, layout.DeviceMountOf(&m))
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].major != keys[j].major {
			return keys[i].major < keys[j].major
		}
		return keys[i].minor < keys[j].minor
	})
	out := make([]layout.MountDevice, 0, len(keys))
	for _, k := range keys {
		d := byDev[k]
		d.OnlyOutsideHostNamespace = !d.InHostNamespace
		out = append(out, *d)
	}
	return out
}
