package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/jsonstream"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// Readers of the mounts collector's files: mounts.json's namespaces and devices, and the raw mount tables.

// readMounts reads mounts/mounts.json (layout.MountsReport), one
// mount and one device at a time. Format 2's tables are kept (within
// maxMounts) until the end of the file, where every namespace that names
// one gets its mounts from it, numbered as its own: the namespaces are
// then taken in their order, as format 1 gives them.
func (st *state) readMounts(_ string, r io.Reader) error {
	st.mountsSeen = true
	dec := jsonstream.NewDecoder(r)
	mt := &mountTables{byHash: map[string]*tableRecs{}}
	var nss []nsRead
	var devs []deviceRead
	newer := false
	err := jsonstream.WalkObject(dec, func(key string) error {
		switch key {
		case "format":
			var f int
			if err := dec.Decode(&f); err != nil {
				return err
			}
			if err := layout.CheckMountsFormat(f); err != nil {
				newer = true
				return err
			}
			return nil
		case "host_namespace":
			return dec.Decode(&st.hostNS)
		case "nodesnap":
			var ms layout.MountsSelf
			if err := dec.Decode(&ms); err != nil {
				return err
			}
			if len(ms.Namespaces) > maxDeviceNS {
				ms.Namespaces = ms.Namespaces[:maxDeviceNS]
			}
			if len(ms.PIDs) > maxSelfPIDs {
				ms.PIDs = ms.PIDs[:maxSelfPIDs]
			}
			if len(ms.ExcludedDevices) > layout.MaxExcludedDevices {
				ms.ExcludedDevices = ms.ExcludedDevices[:layout.MaxExcludedDevices]
			}
			st.selfMounts = &ms
			return nil
		case "tables":
			return jsonstream.WalkArray(dec, func() error { return mt.read(dec) })
		case "namespaces":
			return jsonstream.WalkArray(dec, func() error {
				n, err := st.readMountNamespace(dec, mt.kept)
				if err == nil {
					mt.kept += len(n.mounts)
					nss = append(nss, n)
				}
				return err
			})
		case "devices":
			return jsonstream.WalkArray(dec, func() error { return st.readDevice(dec, &devs) })
		}
		return jsonstream.SkipValue(dec)
	})
	// What was read before an error is kept, as a reader of format 1
	// kept it namespace by namespace; a format this code does not know
	// is not interpreted at all.
	var errs []error
	for i := range nss {
		if newer {
			break
		}
		if err := st.addMountNamespace(&nss[i], mt); err != nil && len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	if !newer {
		if err := st.addDevices(devs, nss, mt); err != nil && len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	for i := range st.mounts {
		if st.hostNS != 0 && st.mounts[i].NS == st.hostNS {
			st.mounts[i].Host = true
		}
	}
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return jsonstream.EndOfInput(dec)
}

// mountTables are format 2's tables as read so far.
type mountTables struct {
	byHash map[string]*tableRecs
	// kept counts the mounts held, of tables and namespaces, against
	// maxMounts.
	kept int
}

type tableRecs struct {
	mounts       []mountRec
	ids, parents []int
	cut          bool // past maxMounts: its namespaces are not read
}

// read reads one table of mounts.json's tables.
func (mt *mountTables) read(dec *json.Decoder) error {
	t := &tableRecs{}
	var hash string
	err := jsonstream.WalkObject(dec, func(key string) error {
		switch key {
		case "hash":
			return dec.Decode(&hash)
		case "mounts":
			return jsonstream.WalkArray(dec, func() error {
				var m layout.NamespaceMount
				if err := dec.Decode(&m); err != nil {
					return err
				}
				if mt.kept >= maxMounts {
					t.cut = true
					return nil
				}
				mt.kept++
				t.mounts = append(t.mounts, mountRecOf(&m))
				t.ids, t.parents = append(t.ids, m.ID), append(t.parents, m.ParentID)
				return nil
			})
		}
		return jsonstream.SkipValue(dec)
	})
	if err != nil {
		return err
	}
	if _, dup := mt.byHash[hash]; !dup {
		mt.byHash[hash] = t
	}
	return nil
}

func mountRecOf(m *layout.NamespaceMount) mountRec {
	return mountRec{ID: m.ID, ParentID: m.ParentID, Dev: m.Dev(), Major: m.Major,
		Root: m.Root, MountPoint: m.MountPoint, FSType: m.FSType, Source: m.Source,
		Propagation: m.Propagation.String(), Class: m.Class}
}

// nsRead is one namespace of mounts.json as read: its mounts, or (format
// 2) its table's hash and its numbers.
type nsRead struct {
	ni          *nsInfo
	mounts      []mountRec
	table       string
	ids         [][2]int
	rootParents []int
}

// readMountNamespace reads one namespace; kept is how many mounts are
// held already.
func (st *state) readMountNamespace(dec *json.Decoder, kept int) (nsRead, error) {
	n := nsRead{ni: &nsInfo{}}
	ni := n.ni
	err := jsonstream.WalkObject(dec, func(key string) error {
		switch key {
		case "inode":
			return dec.Decode(&ni.Inode)
		case "host":
			return dec.Decode(&ni.Host)
		case "mountinfo":
			return dec.Decode(&ni.Mountinfo)
		case "process_count":
			return dec.Decode(&ni.ProcessCount)
		case "nodesnap":
			return dec.Decode(&ni.Nodesnap)
		case "table":
			return dec.Decode(&n.table)
		case "mount_ids":
			return dec.Decode(&n.ids)
		case "root_parents":
			return dec.Decode(&n.rootParents)
		case "processes":
			return jsonstream.WalkArray(dec, func() error {
				if len(ni.Processes) >= maxNSProcesses {
					return jsonstream.SkipValue(dec)
				}
				var p layout.NamespaceProcess
				if err := dec.Decode(&p); err != nil {
					return err
				}
				ni.Processes = append(ni.Processes, p)
				return nil
			})
		case "mounts":
			return jsonstream.WalkArray(dec, func() error {
				var m layout.NamespaceMount
				if err := dec.Decode(&m); err != nil {
					return err
				}
				if kept+len(n.mounts) >= maxMounts {
					return nil
				}
				n.mounts = append(n.mounts, mountRecOf(&m))
				return nil
			})
		}
		return jsonstream.SkipValue(dec)
	})
	return n, err
}

// addMountNamespace records one namespace read, its mounts from its table
// when it names one. A table missing, or numbers that do not fit it, is
// an error; the namespace is recorded without mounts all the same.
func (st *state) addMountNamespace(n *nsRead, mt *mountTables) error {
	ni, mounts := n.ni, n.mounts
	var terr error
	if n.table != "" && mounts == nil {
		t := mt.byHash[n.table]
		switch {
		case t == nil:
			terr = fmt.Errorf("mount namespace %d: its table %q is not in mounts.json", ni.Inode, n.table)
		case t.cut || len(st.mounts) >= maxMounts:
			// Past the bound, as format 1's mounts would be.
		default:
			ids, parents, err := layout.RenumberMounts(t.ids, t.parents, n.ids, n.rootParents)
			if err != nil {
				terr = fmt.Errorf("mount namespace %d: %w", ni.Inode, err)
				break
			}
			mounts = make([]mountRec, len(t.mounts))
			for j := range mounts {
				mounts[j] = t.mounts[j]
				mounts[j].ID, mounts[j].ParentID = ids[j], parents[j]
			}
		}
	}
	if ni.Host && st.hostNS == 0 {
		st.hostNS = ni.Inode
	}
	if ni.Nodesnap != "" && !ni.Host && len(st.selfNS) < maxDeviceNS {
		st.selfNS[ni.Inode] = ni.Nodesnap
	}
	for i := range mounts {
		mounts[i].NS, mounts[i].Host = ni.Inode, ni.Host
	}
	if room := maxMounts - len(st.mounts); len(mounts) > room {
		mounts = mounts[:max(room, 0)]
	}
	st.mounts = append(st.mounts, mounts...)
	if ni.Mountinfo != "" {
		st.mountinfoPath[ni.Inode] = layout.DirMounts + "/" + ni.Mountinfo
	}
	st.nsInfo[ni.Inode] = ni
	return terr
}

// deviceLite is a device of the index with its namespaces left raw: only
// devices mounted nowhere but outside the host's namespace are looked at
// namespace by namespace, and the rest (tens of thousands of tmpfs and
// overlay devices on a busy node) are never decoded further.
type deviceLite struct {
	Dev                      string              `json:"dev"`
	Major                    uint32              `json:"major"`
	Minor                    uint32              `json:"minor"`
	Sources                  []string            `json:"sources"`
	FSTypes                  []string            `json:"fs_types"`
	Class                    string              `json:"class"`
	Block                    *layout.BlockDevice `json:"block"`
	InHostNamespace          bool                `json:"in_host_namespace"`
	OnlyOutsideHostNamespace bool                `json:"only_outside_host_namespace"`
	Namespaces               json.RawMessage     `json:"namespaces"`
	Tables                   json.RawMessage     `json:"tables"`
}

// deviceRead is a device of the index that may be held outside the
// host's namespace, as read: its namespaces named by table (format 3)
// are filled once the tables and namespaces are all read.
type deviceRead struct {
	d      layout.MountDevice
	tables []layout.MountDeviceTable
}

func (st *state) readDevice(dec *json.Decoder, devs *[]deviceRead) error {
	// Most devices are mounted in the host's namespace: their raw bytes
	// say so, and decoding them (each carries its namespaces' process
	// lists) would cost more than the rest of the analysis.
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	if v, ok := rawBool(raw, "only_outside_host_namespace"); ok && !v {
		if bytes.Contains(raw, []byte("only_in_nodesnap")) {
			if v, ok := rawBool(raw, "only_in_nodesnap_namespaces"); ok && v {
				st.selfOnlyN++
				var l struct {
					Dev string `json:"dev"`
				}
				if json.Unmarshal(raw, &l) == nil && len(st.selfOnlyDevs) < layout.MaxExcludedDevices {
					st.selfOnlyDevs = append(st.selfOnlyDevs, l.Dev)
				}
			}
		}
		return nil
	}
	// Of the rest, a container's own tmpfs and overlay mounts are most:
	// not a block device, and no kubelet or runtime path in sight.
	// (A device naming tables has its mount points there, not here.)
	if rawHas(raw, `"major": 0,`, `"major":0,`) && !containsAny(raw, dataPathMarkers) && !bytes.Contains(raw, []byte(`"tables"`)) {
		return nil
	}
	var l deviceLite
	if err := json.Unmarshal(raw, &l); err != nil {
		return err
	}
	if !l.OnlyOutsideHostNamespace {
		return nil
	}
	d := layout.MountDevice{Dev: l.Dev, Major: l.Major, Minor: l.Minor, Sources: l.Sources, FSTypes: l.FSTypes, Class: l.Class,
		Block: l.Block, InHostNamespace: l.InHostNamespace, OnlyOutsideHostNamespace: true}
	if len(l.Namespaces) > 0 {
		if err := json.Unmarshal(l.Namespaces, &d.Namespaces); err != nil {
			return fmt.Errorf("device %s: %w", l.Dev, err)
		}
	}
	var tables []layout.MountDeviceTable
	if len(l.Tables) > 0 {
		if err := json.Unmarshal(l.Tables, &tables); err != nil {
			return fmt.Errorf("device %s: %w", l.Dev, err)
		}
	}
	if len(*devs) < maxDevicesRead {
		*devs = append(*devs, deviceRead{d: d, tables: tables})
	}
	return nil
}

// maxDevicesRead bounds the devices held outside the host's namespace
// kept until the end of mounts.json.
const maxDevicesRead = 100000

// addDevices records the devices read that may be held outside the host's
// namespace, in their order, each namespace a device names by its table
// given the entry its record and table make (format 3 read as format 1).
func (st *state) addDevices(devs []deviceRead, nss []nsRead, mt *mountTables) error {
	var errs []error
	var pos map[uint64]int
	numbers := map[uint64][]int{} // a namespace's mount IDs, table line by line
	for k := range devs {
		d := &devs[k].d
		if len(devs[k].tables) > 0 {
			if pos == nil {
				pos = make(map[uint64]int, len(nss))
				for i := range nss {
					if _, dup := pos[nss[i].ni.Inode]; !dup {
						pos[nss[i].ni.Inode] = i
					}
				}
			}
			if err := expandDeviceTables(d, devs[k].tables, nss, pos, mt, numbers); err != nil && len(errs) < 10 {
				errs = append(errs, err)
			}
		}
		if !heldCandidate(d) {
			continue
		}
		if _, ok := st.devices[d.Dev]; !ok {
			st.deviceOrder = append(st.deviceOrder, d.Dev)
		}
		st.devices[d.Dev] = &deviceRec{MountDevice: *d}
	}
	return errors.Join(errs...)
}

// expandDeviceTables gives device d an entry for each namespace its tables
// name, as layout.ExpandDeviceTables does, from the namespaces and tables
// as analyze holds them.
func expandDeviceTables(d *layout.MountDevice, tables []layout.MountDeviceTable, nss []nsRead, pos map[uint64]int, mt *mountTables, numbers map[uint64][]int) error {
	seen := map[uint64]bool{}
	for k := range d.Namespaces {
		seen[d.Namespaces[k].Namespace] = true
	}
	var errs []error
	for _, g := range tables {
		t := mt.byHash[g.Table]
		var lines []int
		if t != nil {
			for j := range t.mounts {
				if t.mounts[j].Dev == d.Dev && t.mounts[j].Class != procfs.ClassPseudo.String() {
					lines = append(lines, j)
				}
			}
		}
		for _, inode := range g.Namespaces {
			i, ok := pos[inode]
			switch {
			case !ok || nss[i].table != g.Table || t == nil:
				errs = append(errs, fmt.Errorf("device %s: mount namespace %d is not one of table %q", d.Dev, inode, g.Table))
				continue
			case seen[inode]:
				errs = append(errs, fmt.Errorf("device %s: mount namespace %d is listed twice", d.Dev, inode))
				continue
			case len(lines) == 0 && !t.cut:
				errs = append(errs, fmt.Errorf("device %s: mount namespace %d does not mount it", d.Dev, inode))
				continue
			}
			seen[inode] = true
			n := &nss[i]
			ids, ok := numbers[inode]
			if !ok {
				var err error
				if ids, _, err = layout.RenumberMounts(t.ids, t.parents, n.ids, n.rootParents); err != nil {
					ids = nil // its namespace says so already
				}
				numbers[inode] = ids
			}
			var ms []layout.MountDeviceMount
			for _, j := range lines {
				m := &t.mounts[j]
				id := 0
				if j < len(ids) {
					id = ids[j]
				}
				ms = append(ms, layout.MountDeviceMount{MountID: id, MountPoint: m.MountPoint, Root: m.Root,
					Source: m.Source, FSType: m.FSType, Propagation: m.Propagation})
			}
			ns := layout.MountNamespace{Inode: inode, Host: n.ni.Host, Nodesnap: n.ni.Nodesnap,
				ProcessCount: n.ni.ProcessCount, Processes: n.ni.Processes}
			d.Namespaces = append(d.Namespaces, layout.DeviceNamespaceOf(&ns, ms))
		}
	}
	at := func(k int) int {
		if i, ok := pos[d.Namespaces[k].Namespace]; ok {
			return i
		}
		return len(nss)
	}
	sort.SliceStable(d.Namespaces, func(a, b int) bool { return at(a) < at(b) })
	return errors.Join(errs...)
}

// rawBool finds `"key": true|false` in a JSON object's bytes, at any depth
// (ok is false when absent or ambiguous: then the caller decodes). Only for
// keys that appear once per object.
func rawBool(raw []byte, key string) (v, ok bool) {
	k := []byte(`"` + key + `"`)
	i := bytes.Index(raw, k)
	if i < 0 || bytes.Contains(raw[i+len(k):], k) {
		return false, false
	}
	rest := bytes.TrimLeft(raw[i+len(k):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return false, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		return true, true
	case bytes.HasPrefix(rest, []byte("false")):
		return false, true
	}
	return false, false
}

// readMountinfo reads a raw mounts/ns/<inode>.mountinfo (bundles written
// before 2026-11-24; development builds before 2026-11 have
// mounts/ns/<inode>/mountinfo), keeping the lines evidence may quote (see
// keepMountinfoLine).
func (st *state) readMountinfo(name string, r io.Reader) error {
	id, ok := strings.CutSuffix(path.Base(name), ".mountinfo")
	if !ok {
		id = path.Base(path.Dir(name))
	}
	ns, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return nil // not one of the collector's
	}
	if _, ok := st.mountinfoPath[ns]; !ok {
		st.mountinfoPath[ns] = name
	}
	return eachLine(r, func(b []byte, n int, cut bool) error {
		st.keepMountinfoLine(ns, st.hostNS != 0 && ns == st.hostNS, b, n, cut)
		return nil
	})
}

// readMountinfoTables reads mounts/mountinfo.txt (and its further parts):
// every namespace's raw table after its header line
// (layout.FormatMountinfoHeader). The header says which namespace the
// lines that follow belong to, and whether it is the host's, so the file
// reads the same before or after mounts.json. A table written as another
// namespace's renumbered (same-as, mounts.json format 4) is rebuilt from
// that copy, which comes before it in the same file (see
// mountinfoCopies).
func (st *state) readMountinfoTables(name string, r io.Reader) error {
	var ns uint64
	var host bool
	copies := newMountinfoCopies()
	err := eachLine(r, func(b []byte, n int, cut bool) error {
		if layout.IsMountinfoHeader(b) {
			copies.end()
			h, ok := layout.ParseMountinfoHeader(b)
			if !ok || cut {
				ns = 0 // lines of a table nobody can name are not quoted
				return nil
			}
			ns, host = h.Inode, h.Host || (st.hostNS != 0 && h.Inode == st.hostNS)
			if _, ok := st.mountinfoPath[ns]; !ok {
				st.mountinfoPath[ns] = name
			}
			if h.SameAs != 0 {
				copies.rebuild(st, h, host)
				ns = 0 // no text of its own
				return nil
			}
			copies.begin(h)
			return nil
		}
		if ns != 0 {
			st.keepMountinfoLine(ns, host, b, n, cut)
			copies.line(b, n, cut)
		}
		return nil
	})
	copies.end()
	if n := len(copies.errs); n > 0 {
		e := copies.errs[0]
		if n > 1 {
			e += fmt.Sprintf(" (and %d more such tables)", n-1)
		}
		st.unreadable = append(st.unreadable, unreadable{Path: name, Err: e})
	}
	return err
}

// keepMountinfoLine keeps line n of namespace ns's raw table when evidence
// may quote it: mounts outside the host's namespace of a block device, a
// network or FUSE filesystem, or under a kubelet or runtime directory; in
// the host's namespace only the last two.
func (st *state) keepMountinfoLine(ns uint64, host bool, b []byte, n int, cut bool) {
	id, anyNS, outside := mountinfoWanted(b)
	if anyNS || (!host && outside) {
		st.storeMountinfoLine(ns, id, n, b, cut)
	}
}

// mountinfoWanted says whether evidence may quote a mountinfo line: in
// any namespace (anyNS), or only outside the host's (outside).
func mountinfoWanted(b []byte) (id int, anyNS, outside bool) {
	ms, _ := procfs.ParseMountInfo(b)
	if len(ms) != 1 {
		return 0, false, false
	}
	m := ms[0]
	class := procfs.Classify(m)
	if class == procfs.ClassPseudo {
		return m.ID, false, false
	}
	return m.ID, class == procfs.ClassNetwork || class == procfs.ClassFUSE || dataPath(m.MountPoint), m.Major != 0
}

// storeMountinfoLine keeps line n (b) as namespace ns's mount id's, within
// the reader's bounds.
func (st *state) storeMountinfoLine(ns uint64, id, n int, b []byte, cut bool) {
	if len(st.mountinfoLines) >= maxMountinfoLines || st.mountinfoBytes >= maxMountinfoBytes {
		st.mountinfoSpare++
		return
	}
	l := keepLine(n, b, cut)
	st.mountinfoBytes += len(l.Text)
	st.mountinfoLines[nsMount{ns, id}] = l
}
