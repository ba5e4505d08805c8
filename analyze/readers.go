package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/procfs"
)

// Readers: one per collector file. Each keeps what the rules need and
// nothing else; big files are decoded one record at a time.

const (
	maxKeptTasks      = 5000
	maxKeptProbes     = 5000
	maxMountinfoLines = 50_000
	maxMountinfoBytes = 16 << 20
	maxHoldersKept    = 32
	maxDeviceNS       = 64
	maxKernelThreads  = 20_000
	// A node has at most pid_max (4M) tasks and rarely more than a few
	// hundred thousand mounts; past these, a bundle is hostile.
	maxProcs  = 1_000_000
	maxMounts = 1_000_000
	// maxSelfPIDs bounds nodesnap's own processes kept from a bundle.
	maxSelfPIDs = 10_000
)

// readTasks reads processes/tasks.json: an array of collectors.Task, one
// per line.
func (st *state) readTasks(_ string, r io.Reader) error {
	st.tasksSeen = true
	dec := newDecoder(r)
	err := walkArray(dec, func() error {
		var t collectors.Task
		if err := dec.Decode(&t); err != nil {
			return err
		}
		st.addTask(&t)
		return nil
	})
	if err != nil {
		return err
	}
	return endOfInput(dec)
}

func (st *state) addTask(t *collectors.Task) {
	if t.PID == t.TID && len(st.procs) < maxProcs {
		p := &procInfo{PID: t.PID, PPID: t.PPID, Comm: t.Comm, State: t.State, MountNS: t.MountNS, Kernel: t.Kernel,
			PodUID: t.PodUID, ContainerID: t.ContainerID}
		if len(t.Cmdline) > 0 {
			p.Cmdline = shorten(strings.Join(t.Cmdline, " "), 512)
		}
		st.procs[t.PID] = p
		if t.Kernel && len(st.kthreads) < maxKernelThreads {
			st.kthreads = append(st.kthreads, collectors.KernelThreadRef{PID: t.PID, Comm: t.Comm})
		}
	}
	if t.State == "D" || fsWait(t.Wchan) {
		if len(st.tasks) < maxKeptTasks {
			st.tasks = append(st.tasks, *t)
		} else {
			st.tasksDropped++
		}
	}
}

// fsWait reports whether a wait channel is a filesystem's or a block
// layer's: a task sleeping there waits on a mount or a device. A process
// on a hung FUSE mount sleeps in request_wait_answer (state S or D).
func fsWait(w string) bool {
	if w == "" {
		return false
	}
	for _, s := range []string{"request_wait_answer", "fuse_", "nfs", "rpc_wait", "ceph", "rbd", "xprt", "cifs", "smb2", "afs_", "io_schedule", "folio_wait", "wait_on_page", "jbd2", "blk_mq_", "iscsi", "nbd_"} {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// readMounts reads mounts/mounts.json (collectors.MountsReport), one
// mount and one device at a time.
func (st *state) readMounts(_ string, r io.Reader) error {
	st.mountsSeen = true
	dec := newDecoder(r)
	err := walkObject(dec, func(key string) error {
		switch key {
		case "host_namespace":
			return dec.Decode(&st.hostNS)
		case "nodesnap":
			var ms collectors.MountsSelf
			if err := dec.Decode(&ms); err != nil {
				return err
			}
			if len(ms.Namespaces) > maxDeviceNS {
				ms.Namespaces = ms.Namespaces[:maxDeviceNS]
			}
			if len(ms.PIDs) > maxSelfPIDs {
				ms.PIDs = ms.PIDs[:maxSelfPIDs]
			}
			if len(ms.ExcludedDevices) > collectors.MaxExcludedDevices {
				ms.ExcludedDevices = ms.ExcludedDevices[:collectors.MaxExcludedDevices]
			}
			st.selfMounts = &ms
			return nil
		case "namespaces":
			return walkArray(dec, func() error { return st.readMountNamespace(dec) })
		case "devices":
			return walkArray(dec, func() error { return st.readDevice(dec) })
		}
		return skipValue(dec)
	})
	if err != nil {
		return err
	}
	for i := range st.mounts {
		if st.hostNS != 0 && st.mounts[i].NS == st.hostNS {
			st.mounts[i].Host = true
		}
	}
	return endOfInput(dec)
}

func (st *state) readMountNamespace(dec *json.Decoder) error {
	ni := &nsInfo{}
	var mounts []mountRec
	err := walkObject(dec, func(key string) error {
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
		case "processes":
			return walkArray(dec, func() error {
				if len(ni.Processes) >= maxNSProcesses {
					return skipValue(dec)
				}
				var p collectors.NamespaceProcess
				if err := dec.Decode(&p); err != nil {
					return err
				}
				ni.Processes = append(ni.Processes, p)
				return nil
			})
		case "mounts":
			return walkArray(dec, func() error {
				var m collectors.NamespaceMount
				if err := dec.Decode(&m); err != nil {
					return err
				}
				if len(st.mounts)+len(mounts) >= maxMounts {
					return nil
				}
				mounts = append(mounts, mountRec{ID: m.ID, ParentID: m.ParentID, Dev: m.Dev(), Major: m.Major,
					Root: m.Root, MountPoint: m.MountPoint, FSType: m.FSType, Source: m.Source,
					Propagation: m.Propagation.String(), Class: m.Class})
				return nil
			})
		}
		return skipValue(dec)
	})
	if err != nil {
		return err
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
		st.mountinfoPath[ni.Inode] = "mounts/" + ni.Mountinfo
	}
	st.nsInfo[ni.Inode] = ni
	return nil
}

// deviceLite is a device of the index with its namespaces left raw: only
// devices mounted nowhere but outside the host's namespace are looked at
// namespace by namespace, and the rest (tens of thousands of tmpfs and
// overlay devices on a busy node) are never decoded further.
type deviceLite struct {
	Dev                      string                  `json:"dev"`
	Major                    uint32                  `json:"major"`
	Minor                    uint32                  `json:"minor"`
	Sources                  []string                `json:"sources"`
	FSTypes                  []string                `json:"fs_types"`
	Class                    string                  `json:"class"`
	Block                    *collectors.BlockDevice `json:"block"`
	InHostNamespace          bool                    `json:"in_host_namespace"`
	OnlyOutsideHostNamespace bool                    `json:"only_outside_host_namespace"`
	Namespaces               json.RawMessage         `json:"namespaces"`
}

func (st *state) readDevice(dec *json.Decoder) error {
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
				if json.Unmarshal(raw, &l) == nil && len(st.selfOnlyDevs) < collectors.MaxExcludedDevices {
					st.selfOnlyDevs = append(st.selfOnlyDevs, l.Dev)
				}
			}
		}
		return nil
	}
	// Of the rest, a container's own tmpfs and overlay mounts are most:
	// not a block device, and no kubelet or runtime path in sight.
	if rawHas(raw, `"major": 0,`, `"major":0,`) && !containsAny(raw, dataPathMarkers) {
		return nil
	}
	var l deviceLite
	if err := json.Unmarshal(raw, &l); err != nil {
		return err
	}
	if !l.OnlyOutsideHostNamespace {
		return nil
	}
	d := collectors.MountDevice{Dev: l.Dev, Major: l.Major, Minor: l.Minor, Sources: l.Sources, FSTypes: l.FSTypes, Class: l.Class,
		Block: l.Block, InHostNamespace: l.InHostNamespace, OnlyOutsideHostNamespace: true}
	if len(l.Namespaces) > 0 {
		if err := json.Unmarshal(l.Namespaces, &d.Namespaces); err != nil {
			return fmt.Errorf("device %s: %w", l.Dev, err)
		}
	}
	if !heldCandidate(&d) {
		return nil
	}
	if _, ok := st.devices[d.Dev]; !ok {
		st.deviceOrder = append(st.deviceOrder, d.Dev)
	}
	st.devices[d.Dev] = &deviceRec{MountDevice: d}
	return nil
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

// readMountinfo reads a raw mounts/ns/<inode>.mountinfo (bundles of
// development builds before 2026-11 have mounts/ns/<inode>/mountinfo), keeping the lines
// that evidence may quote: mounts outside the host's namespace of a block
// device, a network or FUSE filesystem, or under a kubelet or runtime
// directory; in the host's namespace only the last two.
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
	lr := newLineReader(r)
	for {
		b, n, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		ms, _ := procfs.ParseMountInfo(b)
		if len(ms) != 1 {
			continue
		}
		m := ms[0]
		class := procfs.Classify(m)
		if class == procfs.ClassPseudo {
			continue
		}
		host := st.hostNS != 0 && ns == st.hostNS
		keep := class == procfs.ClassNetwork || class == procfs.ClassFUSE || dataPath(m.MountPoint)
		if !host && m.Major != 0 {
			keep = true
		}
		if !keep {
			continue
		}
		if len(st.mountinfoLines) >= maxMountinfoLines || st.mountinfoBytes >= maxMountinfoBytes {
			st.mountinfoSpare++
			continue
		}
		l := keepLine(n, b, cut)
		st.mountinfoBytes += len(l.Text)
		st.mountinfoLines[nsMount{ns, m.ID}] = l
	}
}

// dataPathParts mark a path in a kubelet, runtime or CSI tree.
var dataPathParts = []string{"/kubelet/", "/docker/", "/containerd/", "/containers/", "/csi", "/volumes/", "/merged", "/rootfs", ".deleting~", "/rook/", "/longhorn/", "/openebs/"}

var dataPathMarkers = func() [][]byte {
	var out [][]byte
	for _, s := range dataPathParts {
		out = append(out, []byte(s))
	}
	return out
}()

// dataPath reports whether a path is in a kubelet, runtime or CSI tree.
func dataPath(p string) bool {
	for _, s := range dataPathParts {
		if strings.Contains(p, s) {
			return true
		}
	}
	return false
}

// rawHas reports whether raw contains any of the strings.
func rawHas(raw []byte, subs ...string) bool {
	for _, s := range subs {
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
	}
	return false
}

// readHolders reads openfiles/holders.json (collectors.OpenFilesSummary).
func (st *state) readHolders(_ string, r io.Reader) error {
	st.holdersSeen = true
	dec := newDecoder(r)
	trim := func(hs []collectors.FileHolder) []collectors.FileHolder {
		if len(hs) > maxHoldersKept {
			return hs[:maxHoldersKept]
		}
		return hs
	}
	err := walkObject(dec, func(key string) error {
		switch key {
		case "host_namespace":
			var ns uint64
			if err := dec.Decode(&ns); err != nil {
				return err
			}
			if st.hostNS == 0 {
				// Without the mounts collector, this is where the host's
				// namespace is known from.
				st.hostNS = ns
			}
			return nil
		case "devices":
			return walkArray(dec, func() error {
				var d collectors.DeviceHolders
				if err := dec.Decode(&d); err != nil {
					return err
				}
				d.Holders = trim(d.Holders)
				st.devHolders[d.Dev] = &d
				return nil
			})
		case "mounts":
			return walkArray(dec, func() error {
				var m collectors.MountHolders
				if err := dec.Decode(&m); err != nil {
					return err
				}
				m.Holders = trim(m.Holders)
				st.mountHolders[nsMount{m.Namespace, m.MountID}] = &m
				return nil
			})
		}
		return skipValue(dec)
	})
	if err != nil {
		return err
	}
	return endOfInput(dec)
}

// ofLine is what readOpenFiles decodes of a processes.jsonl line.
type ofLine struct {
	PID       int                  `json:"pid"`
	Comm      string               `json:"comm"`
	Namespace uint64               `json:"mnt_ns"`
	Cwd       *collectors.OpenFile `json:"cwd"`
	FDs       []collectors.OpenFD  `json:"fds"`
	Threads   []ofThread           `json:"threads"`
}

type ofThread struct {
	TID int                  `json:"tid"`
	Cwd *collectors.OpenFile `json:"cwd"`
}

// dataMarkers are substrings of paths in data trees; a processes.jsonl
// line without any is not decoded (most are not: /usr/lib, /dev/null,
// sockets).
var dataMarkers = [][]byte{[]byte("/var/lib/"), []byte("/volumes/"), []byte(".deleting~"), []byte("/var/openebs"), []byte("/opt/local-path-provisioner"), []byte("/data")}

// readOpenFiles reads openfiles/processes.jsonl (one
// collectors.OpenFilesProcess per line), keeping the files and working
// directories that may be in a huge directory: who may be writing there.
// The file holds every open file of the node (a million on a busy one), so
// lines are decoded only when they can matter: see writerFilter.
func (st *state) readOpenFiles(_ string, r io.Reader) error {
	wf := st.writerFilter()
	if wf.skip {
		return nil // the walk drains the rest
	}
	lr := newLineReader(r)
	for {
		b, n, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if cut || len(bytes.TrimSpace(b)) == 0 || !wf.wants(b) {
			continue
		}
		var p ofLine
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if p.Cwd != nil {
			st.addWriter(&p, "cwd", p.Cwd, n)
		}
		for _, t := range p.Threads {
			if t.Cwd != nil {
				st.addWriter(&p, "cwd of thread "+strconv.Itoa(t.TID), t.Cwd, n)
			}
		}
		for i := range p.FDs {
			fd := &p.FDs[i]
			use := "fd " + strconv.Itoa(fd.FD)
			if fd.Flags != "" {
				use += " (" + fd.Flags + ")"
			}
			st.addWriter(&p, use, &fd.OpenFile, n)
		}
	}
}

// writerFilter decides which processes.jsonl lines to decode. Bundles
// list dirshape before openfiles (entries are sorted), so the huge
// directories are usually known by then:
//   - no dirshape in the bundle, or no huge directory in it: no line;
//   - huge directories known: host processes whose line names one of
//     their paths, and processes of the namespaces that mount the huge
//     directory's filesystem at or above it (a container sees it under
//     its own path);
//   - dirshape in the bundle but not read yet (another order): every line
//     with a data path, and every process outside the host's namespace.
type writerFilter struct {
	skip bool
	// paths: a host line must contain one; nsTags: a line of another
	// namespace must contain one (`"mnt_ns":N,`); all: any line.
	paths   [][]byte
	nsTags  [][]byte
	hostTag []byte
	generic bool
}

func (st *state) writerFilter() *writerFilter {
	wf := &writerFilter{}
	if st.hostNS != 0 {
		wf.hostTag = []byte(`"mnt_ns":` + strconv.FormatUint(st.hostNS, 10) + `,`)
	}
	if st.shape == nil {
		listed := false
		for _, f := range st.manifest.Files {
			listed = listed || f.Path == "dirshape/shape.json"
		}
		wf.skip, wf.generic = !listed, listed
		return wf
	}
	huge := st.hugeDirs()
	if len(huge) == 0 {
		wf.skip = true
		return wf
	}
	nss := map[uint64]bool{}
	for _, h := range huge {
		wf.paths = append(wf.paths, []byte(h.dir.Path))
		rel, ok := fsRelative(h.root, h.dir.Path)
		for _, m := range st.mounts {
			if m.Host || m.Dev != h.root.Dev || !ok {
				continue
			}
			_, below := pathWithin(rel, m.Root, false)
			_, above := pathWithin(m.Root, rel, false)
			if below || above || m.Root == "/" {
				nss[m.NS] = true
			}
		}
	}
	for ns := range nss {
		wf.nsTags = append(wf.nsTags, []byte(`"mnt_ns":`+strconv.FormatUint(ns, 10)+`,`))
	}
	return wf
}

func (wf *writerFilter) wants(line []byte) bool {
	host := len(wf.hostTag) > 0 && bytes.Contains(line, wf.hostTag)
	if wf.generic {
		// Processes in containers see volumes under their own paths
		// (/data): their lines are always decoded.
		return (len(wf.hostTag) > 0 && !host) || containsAny(line, dataMarkers)
	}
	if host || len(wf.hostTag) == 0 {
		return containsAny(line, wf.paths) || containsAny(line, wf.nsTags)
	}
	return containsAny(line, wf.nsTags)
}

// fsRelative is a host path's path inside the filesystem of the scanned
// root's mount (the mount's root is taken to be the filesystem's root).
func fsRelative(r collectors.DirShapeRoot, p string) (string, bool) {
	switch r.Mountpoint {
	case "":
		return "", false
	case "/":
		return p, true
	}
	rest, ok := pathWithin(p, r.Mountpoint, false)
	if !ok {
		return "", false
	}
	if rest == "" {
		rest = "/"
	}
	return rest, true
}

func containsAny(b []byte, subs [][]byte) bool {
	for _, s := range subs {
		if bytes.Contains(b, s) {
			return true
		}
	}
	return false
}

func (st *state) addWriter(p *ofLine, use string, f *collectors.OpenFile, line int) {
	if f.Path == "" || f.Path[0] != '/' || f.Kind != procfs.LinkPath {
		return
	}
	data := dataPath(f.Path) || strings.HasPrefix(f.Path, "/data") || strings.HasPrefix(f.Path, "/var/lib/")
	// A file on a mount other than the root, in a container: a volume.
	volume := p.Namespace != st.hostNS && f.MountPoint != "" && f.MountPoint != "/" && !systemPath(f.MountPoint)
	if !data && !volume {
		return
	}
	dir := f.Path
	if !strings.HasPrefix(use, "cwd") {
		dir = path.Dir(f.Path)
	}
	k := writerKey{p.PID, dir}
	if st.writerSeen[k] {
		return
	}
	if len(st.writers) >= maxWriters {
		st.writersDropped++
		return
	}
	st.writerSeen[k] = true
	st.writers = append(st.writers, writerRec{PID: p.PID, Comm: p.Comm, Namespace: p.Namespace, Use: use,
		Path: f.Path, Dev: f.Dev, MountID: f.MountID, MountPoint: f.MountPoint, Line: line})
}

func systemPath(p string) bool {
	for _, s := range []string{"/proc", "/sys", "/dev", "/etc/", "/etc", "/usr", "/lib", "/bin", "/sbin", "/run/secrets", "/var/run/secrets"} {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// readProbes reads mountprobe/probes.json, keeping every probe that was
// not ok.
func (st *state) readProbes(_ string, r io.Reader) error {
	st.probesSeen = true
	dec := newDecoder(r)
	err := walkObject(dec, func(key string) error {
		if key != "probes" {
			return skipValue(dec)
		}
		return walkArray(dec, func() error {
			var p collectors.MountProbe
			if err := dec.Decode(&p); err != nil {
				return err
			}
			st.probeCounts[p.Result]++
			if p.Result != collectors.ProbeOK && len(st.probes) < maxKeptProbes {
				st.probes = append(st.probes, p)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	return endOfInput(dec)
}

// readShape reads dirshape/shape.json: bounded by the collector (top N
// directories, bounded leftover lists).
func (st *state) readShape(_ string, r io.Reader) error {
	var s collectors.DirShapeReport
	dec := newDecoder(r)
	if err := dec.Decode(&s); err != nil {
		return err
	}
	st.shape = &s
	return endOfInput(dec)
}

// readCSI reads csi/inventory.json (bounded by --csi-max-entries).
func (st *state) readCSI(_ string, r io.Reader) error {
	var inv collectors.CSIInventory
	dec := newDecoder(r)
	if err := dec.Decode(&inv); err != nil {
		return err
	}
	st.csi = &inv
	return endOfInput(dec)
}

// readHealthz reads kubelet/healthz.txt ("[+]ping ok", "[-]syncloop
// failed: reason withheld").
func (st *state) readHealthz(_ string, r io.Reader) error {
	lr := newLineReader(r)
	for {
		b, n, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(st.healthz) < 200 {
			st.healthz = append(st.healthz, keepLine(n, b, cut))
		}
		if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[-]")) && len(st.healthzBad) < 50 {
			st.healthzBad = append(st.healthzBad, keepLine(n, b, cut))
		}
	}
}

// readPods reads kubelet/pods.json (the kubelet's PodList), one pod at a
// time.
func (st *state) readPods(_ string, r io.Reader) error {
	dec := newDecoder(r)
	err := walkObject(dec, func(key string) error {
		if key != "items" {
			return skipValue(dec)
		}
		return walkArray(dec, func() error {
			var p struct {
				Metadata struct {
					UID               string  `json:"uid"`
					Name              string  `json:"name"`
					Namespace         string  `json:"namespace"`
					DeletionTimestamp *string `json:"deletionTimestamp"`
				} `json:"metadata"`
				Status struct {
					Phase                 string            `json:"phase"`
					ContainerStatuses     []containerStatus `json:"containerStatuses"`
					InitContainerStatuses []containerStatus `json:"initContainerStatuses"`
				} `json:"status"`
			}
			if err := dec.Decode(&p); err != nil {
				return err
			}
			for _, c := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
				st.addContainer(c.ContainerID, c.Name, p.Metadata.UID)
			}
			if p.Metadata.UID != "" {
				st.pods[p.Metadata.UID] = podRec{UID: p.Metadata.UID, Namespace: p.Metadata.Namespace, Name: p.Metadata.Name,
					Phase: p.Status.Phase, Deleting: p.Metadata.DeletionTimestamp != nil}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	st.podsSeen = true
	return endOfInput(dec)
}

// containerStatus is what readPods keeps of a pod's container status.
type containerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
}

// maxContainers bounds the container names kept (a node runs hundreds).
const maxContainers = 100000

// addContainer records a container's name; id may carry the runtime's
// scheme ("containerd://<id>", as the kubelet writes it).
func (st *state) addContainer(id, name, podUID string) {
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	if id == "" || len(st.containers) >= maxContainers {
		return
	}
	if old, ok := st.containers[id]; ok && old.Name != "" && name == "" {
		return
	}
	st.containers[id] = containerRec{Name: name, PodUID: podUID}
}

// readCRIContainers reads runtime/<runtime>/cri-containers.json (a CRI
// ListContainers answer in the protobuf JSON mapping), for the names of
// container IDs and their pods.
func (st *state) readCRIContainers(_ string, r io.Reader) error {
	dec := newDecoder(r)
	err := walkObject(dec, func(key string) error {
		if key != "containers" {
			return skipValue(dec)
		}
		return walkArray(dec, func() error {
			var c struct {
				ID       string `json:"id"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Labels map[string]string `json:"labels"`
			}
			if err := dec.Decode(&c); err != nil {
				return err
			}
			name := c.Metadata.Name
			if name == "" {
				name = c.Labels["io.kubernetes.container.name"]
			}
			st.addContainer(c.ID, name, c.Labels["io.kubernetes.pod.uid"])
			return nil
		})
	})
	if err != nil {
		return err
	}
	return endOfInput(dec)
}

// readCRIPods reads runtime/<runtime>/cri-pods.json (a CRI
// ListPodSandbox answer in the protobuf JSON mapping), one sandbox at a
// time, for the names of pod UIDs.
func (st *state) readCRIPods(_ string, r io.Reader) error {
	dec := newDecoder(r)
	err := walkObject(dec, func(key string) error {
		if key != "items" {
			return skipValue(dec)
		}
		return walkArray(dec, func() error {
			var p struct {
				Metadata struct {
					UID       string `json:"uid"`
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
				State string `json:"state"`
			}
			if err := dec.Decode(&p); err != nil {
				return err
			}
			m := p.Metadata
			// A pod has a new sandbox after each restart of it; a ready
			// one says more than an old one.
			if old, seen := st.runtimePods[m.UID]; m.UID != "" && (!seen || p.State == "SANDBOX_READY" || old.Name == "") {
				st.runtimePods[m.UID] = podRec{UID: m.UID, Namespace: m.Namespace, Name: m.Name}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	return endOfInput(dec)
}

func (st *state) readKubeletGoroutines(name string, r io.Reader) error {
	d, err := parseGoroutines(name, r)
	if d != nil {
		st.kubeDumps = append(st.kubeDumps, d)
	}
	return err
}

func (st *state) readRuntimeGoroutines(name string, r io.Reader) error {
	d, err := parseGoroutines(name, r)
	if d != nil {
		st.runtimeDump = append(st.runtimeDump, d)
	}
	return err
}
