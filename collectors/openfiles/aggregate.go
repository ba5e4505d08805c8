package openfiles

// Holders by device and by mount, for the summary.

import (
	"slices"
	"sort"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// aggregate builds the holder summaries.
type aggregate struct {
	host     uint64
	devs     map[string]*devAgg
	mounts   map[mountKey]*mountAgg
	unknown  map[int]*ofHolders
	kthreads []layout.KernelThreadRef
}

type mountKey struct {
	ns uint64
	id int
}

type holderKey struct{ pid, tid int }

type ofHolders struct {
	byKey map[holderKey]*layout.FileHolder
	order []holderKey
}

func (h *ofHolders) add(p *layout.OpenFilesProcess, u ofUse) {
	k := holderKey{p.PID, u.tid}
	fh := h.byKey[k]
	if fh == nil {
		if h.byKey == nil {
			h.byKey = map[holderKey]*layout.FileHolder{}
		}
		fh = &layout.FileHolder{PID: p.PID, TID: u.tid, Comm: p.Comm, Namespace: u.ns}
		if u.tid != 0 {
			for _, t := range p.Threads {
				if t.TID == u.tid {
					fh.Comm = t.Comm
				}
			}
		}
		h.byKey[k] = fh
		h.order = append(h.order, k)
	}
	fh.UseCount++
	if len(fh.Uses) < maxHolderUses && !slices.Contains(fh.Uses, u.what) {
		fh.Uses = append(fh.Uses, u.what)
	}
	if u.path != "" && len(fh.Paths) < maxHolderPaths && !slices.Contains(fh.Paths, u.path) {
		fh.Paths = append(fh.Paths, u.path)
	}
}

func (h *ofHolders) list() []layout.FileHolder {
	out := make([]layout.FileHolder, 0, len(h.order))
	for _, k := range h.order {
		out = append(out, *h.byKey[k])
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].TID < out[j].TID
	})
	return out
}

type devAgg struct {
	major, minor uint32
	holders      ofHolders
}

type mountAgg struct {
	ref     mountRef
	holders ofHolders
}

func newOFAggregate(host uint64) *aggregate {
	return &aggregate{host: host, devs: map[string]*devAgg{}, mounts: map[mountKey]*mountAgg{}, unknown: map[int]*ofHolders{}}
}

func (a *aggregate) add(p *layout.OpenFilesProcess, uses []ofUse) {
	for _, u := range uses {
		if u.unknownMount != 0 {
			h := a.unknown[u.unknownMount]
			if h == nil {
				h = &ofHolders{}
				a.unknown[u.unknownMount] = h
			}
			h.add(p, u)
			continue
		}
		if u.mount != nil {
			m := u.mount.mount()
			if procfs.Classify(*m) == procfs.ClassPseudo && !u.devNode {
				// /dev/null, /proc/..., cgroup files: everyone holds
				// those, and they never keep a volume busy.
				continue
			}
			k := mountKey{u.mount.ns.inode, m.ID}
			ma := a.mounts[k]
			if ma == nil {
				ma = &mountAgg{ref: *u.mount}
				a.mounts[k] = ma
			}
			ma.holders.add(p, u)
		}
		if u.dev == "" || (u.major == 0 && u.mount == nil && !u.devNode) {
			// A mapping of kernel-internal shared memory (memfd, SysV
			// shm) is on no mount anyone can unmount.
			continue
		}
		if u.mount != nil && !u.devNode && procfs.Classify(*u.mount.mount()) == procfs.ClassPseudo {
			continue
		}
		d := a.devs[u.dev]
		if d == nil {
			d = &devAgg{major: u.major, minor: u.minor}
			a.devs[u.dev] = d
		}
		d.holders.add(p, u)
	}
}

// summarize fills the device and mount summaries, adding block devices
// that are mounted but held by no process, and kernel threads per device.
func (s *ofScanner) summarize(sum *layout.OpenFilesSummary, a *aggregate) {
	type devInfo struct {
		major, minor     uint32
		fstypes, sources []string
	}
	info := map[string]*devInfo{}
	note := func(dev string, major, minor uint32) *devInfo {
		d := info[dev]
		if d == nil {
			d = &devInfo{major: major, minor: minor}
			info[dev] = d
		}
		return d
	}
	for _, n := range s.spaces {
		for _, m := range n.mounts {
			if procfs.Classify(m) == procfs.ClassPseudo {
				continue
			}
			_, held := a.devs[m.Dev()]
			if m.Major == 0 && !held {
				continue
			}
			d := note(m.Dev(), m.Major, m.Minor)
			if !slices.Contains(d.fstypes, m.FSType) {
				d.fstypes = append(d.fstypes, m.FSType)
			}
			if !slices.Contains(d.sources, m.Source) {
				d.sources = append(d.sources, m.Source)
			}
		}
	}
	for dev, d := range a.devs {
		note(dev, d.major, d.minor)
	}
	devs := make([]string, 0, len(info))
	for dev := range info {
		devs = append(devs, dev)
	}
	sort.Slice(devs, func(i, j int) bool {
		a, b := info[devs[i]], info[devs[j]]
		if a.major != b.major {
			return a.major < b.major
		}
		return a.minor < b.minor
	})
	for _, dev := range devs {
		d := info[dev]
		dh := layout.DeviceHolders{Dev: dev, Major: d.major, Minor: d.minor, FSTypes: d.fstypes, Sources: d.sources, Holders: []layout.FileHolder{}}
		if agg := a.devs[dev]; agg != nil {
			dh.Holders = agg.holders.list()
		}
		dh.Block = s.devs.Lookup(d.major, d.minor)
		if dh.Block != nil && dh.Block.Name != "" {
			for _, kt := range a.kthreads {
				if layout.KernelThreadNamesDevice(kt.Comm, dh.Block.Name) || layout.KernelThreadNamesDevice(kt.Comm, dev) {
					dh.KernelThreads = append(dh.KernelThreads, kt)
				}
			}
		}
		sum.Devices = append(sum.Devices, dh)
	}
	keys := make([]mountKey, 0, len(a.mounts))
	for k := range a.mounts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i].ns == a.host) != (keys[j].ns == a.host) {
			return keys[i].ns == a.host
		}
		if keys[i].ns != keys[j].ns {
			return keys[i].ns < keys[j].ns
		}
		return keys[i].id < keys[j].id
	})
	ids := make([]int, 0, len(a.unknown))
	for id := range a.unknown {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		sum.UnknownMounts = append(sum.UnknownMounts, layout.UnknownMountHolders{MountID: id, Holders: a.unknown[id].list()})
	}
	for _, k := range keys {
		ma := a.mounts[k]
		m := ma.ref.mount()
		sum.Mounts = append(sum.Mounts, layout.MountHolders{Namespace: k.ns, Host: k.ns == a.host && a.host != 0, MountID: m.ID,
			MountPoint: m.MountPoint, Dev: m.Dev(), FSType: m.FSType, Source: m.Source, Holders: ma.holders.list()})
	}
}
