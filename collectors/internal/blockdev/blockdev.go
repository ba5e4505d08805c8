// Package blockdev reads the facts collectors record about a block device
// (its name, size, holders, backing file) from sysfs, once per device.
package blockdev

import (
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// Cache reads sysfs facts about block devices once each.
type Cache struct {
	sys   string
	byDev map[[2]uint32]*layout.BlockDevice
	// byName maps a kernel name (loop3) to its device, filled by
	// LookupName.
	byName map[string]*nameEntry
}

type nameEntry struct {
	major, minor uint32
	ok           bool
}

// NewCache returns an empty cache over the sysfs root sys.
func NewCache(sys string) *Cache {
	return &Cache{sys: sys, byDev: map[[2]uint32]*layout.BlockDevice{}, byName: map[string]*nameEntry{}}
}

// Lookup returns sysfs facts for a block device, or nil when major:minor
// is not a block device (major 0 is the kernel's anonymous devices: tmpfs,
// overlay, nfs, fuse...). sysfs attributes are kernel memory: reading
// them touches no filesystem that can hang.
func (c *Cache) Lookup(major, minor uint32) *layout.BlockDevice {
	if major == 0 {
		return nil
	}
	k := [2]uint32{major, minor}
	if b, ok := c.byDev[k]; ok {
		return b
	}
	dir := c.sys + "/dev/block/" + strconv.FormatUint(uint64(major), 10) + ":" + strconv.FormatUint(uint64(minor), 10)
	b := readBlockDevice(c.sys, dir)
	c.byDev[k] = b
	return b
}

// lookupName returns the device number of /dev/<name> when name is a block
// device the kernel knows (from /sys/class/block/<name>/dev).
func (c *Cache) LookupName(name string) (uint32, uint32, bool) {
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return 0, 0, false
	}
	if e, ok := c.byName[name]; ok {
		return e.major, e.minor, e.ok
	}
	e := &nameEntry{}
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

func readBlockDevice(sys, dir string) *layout.BlockDevice {
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
