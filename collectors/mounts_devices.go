package collectors

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/procfs"
)

// The device index: which namespaces and processes hold each filesystem, and what block device it is.

func mntBlockName(b *layout.BlockDevice) string {
	if b == nil || b.Name == "" {
		return ""
	}
	s := " (" + b.Name
	if b.BackingFile != "" {
		s += ", backed by " + b.BackingFile
	}
	return s + ")"
}

func mntDescribeHolders(d *layout.MountDevice) string {
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
				dn := layout.MountDeviceNamespace{Namespace: ns.Inode, Host: ns.Host, ProcessCount: ns.ProcessCount}
				if !ns.Host {
					// Enough to name the holders; the full list is in
					// namespaces[] once, not repeated for every device
					// the namespace mounts (it made mounts.json
					// quadratic on a node with many namespaces).
					dn.Processes = ns.Processes[:min(len(ns.Processes), layout.MaxDeviceNamespaceProcesses)]
				}
				d.Namespaces = append(d.Namespaces, dn)
				i = len(d.Namespaces) - 1
				cur[k] = i
				if ns.Host {
					d.InHostNamespace = true
				}
			}
			d.Namespaces[i].Mounts = append(d.Namespaces[i].Mounts, layout.MountDeviceMount{
				MountID: m.ID, MountPoint: m.MountPoint, Root: m.Root, Source: m.Source,
				FSType: m.FSType, Propagation: m.Propagation.String(),
			})
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

// mntBlockCache reads sysfs facts about block devices once each.
type mntBlockCache struct {
	sys   string
	byDev map[[2]uint32]*layout.BlockDevice
	// byName maps a kernel name (loop3) to its device, filled by
	// lookupName.
	byName map[string]*mntNameEntry
}

type mntNameEntry struct {
	major, minor uint32
	ok           bool
}

func mntNewBlockCache(sys string) *mntBlockCache {
	return &mntBlockCache{sys: sys, byDev: map[[2]uint32]*layout.BlockDevice{}, byName: map[string]*mntNameEntry{}}
}

// lookup returns sysfs facts for a block device, or nil when major:minor
// is not a block device (major 0 is the kernel's anonymous devices: tmpfs,
// overlay, nfs, fuse...). sysfs attributes are kernel memory: reading
// them touches no filesystem that can hang.
func (c *mntBlockCache) lookup(major, minor uint32) *layout.BlockDevice {
	if major == 0 {
		return nil
	}
	k := [2]uint32{major, minor}
	if b, ok := c.byDev[k]; ok {
		return b
	}
	dir := c.sys + "/dev/block/" + strconv.FormatUint(uint64(major), 10) + ":" + strconv.FormatUint(uint64(minor), 10)
	b := mntReadBlockDevice(c.sys, dir)
	c.byDev[k] = b
	return b
}

// lookupName returns the device number of /dev/<name> when name is a block
// device the kernel knows (from /sys/class/block/<name>/dev).
func (c *mntBlockCache) lookupName(name string) (uint32, uint32, bool) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return 0, 0, false
	}
	if e, ok := c.byName[name]; ok {
		return e.major, e.minor, e.ok
	}
	e := &mntNameEntry{}
	c.byName[name] = e
	var buf [64]byte
	b, err := hostfs.ReadSmall(c.sys+"/class/block/"+name+"/dev", buf[:])
	if err != nil {
		return 0, 0, false
	}
	maj, mnr, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	a, err1 := strconv.ParseUint(maj, 10, 32)
	z, err2 := strconv.ParseUint(mnr, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	e.major, e.minor, e.ok = uint32(a), uint32(z), true
	return e.major, e.minor, true
}

func mntReadBlockDevice(sys, dir string) *layout.BlockDevice {
	var buf [4096]byte
	read := func(name string) string {
		b, err := hostfs.ReadSmall(dir+"/"+name, buf[:])
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	uevent := read("uevent")
	if uevent == "" {
		return nil
	}
	b := &layout.BlockDevice{}
	for _, line := range strings.Split(uevent, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "DEVNAME":
			b.Name = v
		case "PARTN":
			b.Partition, _ = strconv.Atoi(v)
		}
	}
	switch {
	case strings.HasPrefix(b.Name, "loop"):
		b.BackingFile = read("loop/backing_file")
	case strings.HasPrefix(b.Name, "dm-"):
		b.DMName = read("dm/name")
		b.DMUUID = read("dm/uuid")
	case strings.HasPrefix(b.Name, "nbd"):
		b.NBDPid, _ = strconv.Atoi(read("pid"))
	case strings.HasPrefix(b.Name, "rbd") && b.Partition == 0:
		// /sys/bus/rbd/devices/<id>/ for /dev/rbd<id>.
		if id := strings.TrimPrefix(b.Name, "rbd"); id != "" && strings.Trim(id, "0123456789") == "" {
			rbd := sys + "/bus/rbd/devices/" + id + "/"
			if p, err := hostfs.ReadSmall(rbd+"pool", buf[:]); err == nil {
				b.RBDPool = strings.TrimSpace(string(p))
			}
			if p, err := hostfs.ReadSmall(rbd+"name", buf[:]); err == nil {
				b.RBDImage = strings.TrimSpace(string(p))
			}
		}
	}
	return b
}
