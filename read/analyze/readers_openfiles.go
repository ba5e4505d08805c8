package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/jsonstream"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// Readers of the openfiles collector's files: holders of devices and mounts, and who writes into the kubelet's, runtime's and CSI data trees.

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

// readHolders reads openfiles/holders.json (layout.OpenFilesSummary).
func (st *state) readHolders(_ string, r io.Reader) error {
	st.holdersSeen = true
	dec := jsonstream.NewDecoder(r)
	trim := func(hs []layout.FileHolder) []layout.FileHolder {
		if len(hs) > maxHoldersKept {
			return hs[:maxHoldersKept]
		}
		return hs
	}
	err := jsonstream.WalkObject(dec, func(key string) error {
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
			return jsonstream.WalkArray(dec, func() error {
				var d layout.DeviceHolders
				if err := dec.Decode(&d); err != nil {
					return err
				}
				d.Holders = trim(d.Holders)
				st.devHolders[d.Dev] = &d
				return nil
			})
		case "mounts":
			return jsonstream.WalkArray(dec, func() error {
				var m layout.MountHolders
				if err := dec.Decode(&m); err != nil {
					return err
				}
				m.Holders = trim(m.Holders)
				st.mountHolders[nsMount{m.Namespace, m.MountID}] = &m
				return nil
			})
		}
		return jsonstream.SkipValue(dec)
	})
	if err != nil {
		return err
	}
	return jsonstream.EndOfInput(dec)
}

// ofLine is what readOpenFiles decodes of a processes.jsonl line.
type ofLine struct {
	PID       int              `json:"pid"`
	Comm      string           `json:"comm"`
	Namespace uint64           `json:"mnt_ns"`
	Cwd       *layout.OpenFile `json:"cwd"`
	FDs       []layout.OpenFD  `json:"fds"`
	Threads   []ofThread       `json:"threads"`
}

type ofThread struct {
	TID int              `json:"tid"`
	Cwd *layout.OpenFile `json:"cwd"`
}

// dataMarkers are substrings of paths in data trees; a processes.jsonl
// line without any is not decoded (most are not: /usr/lib, /dev/null,
// sockets).
var dataMarkers = [][]byte{[]byte("/var/lib/"), []byte("/volumes/"), []byte(".deleting~"), []byte("/var/openebs"), []byte("/opt/local-path-provisioner"), []byte("/data")}

// readOpenFiles reads openfiles/processes.jsonl (one
// layout.OpenFilesProcess per line), keeping the files and working
// directories that may be in a huge directory: who may be writing there.
// The file holds every open file of the node (a million on a busy one), so
// lines are decoded only when they can matter: see writerFilter.
func (st *state) readOpenFiles(_ string, r io.Reader) error {
	wf := st.writerFilter()
	return eachLine(r, func(b []byte, n int, cut bool) error {
		if !cut && bytes.Contains(b, devFUSEPath) {
			st.addFUSEHolder(b)
		}
		if wf.skip || cut || len(bytes.TrimSpace(b)) == 0 || !wf.wants(b) {
			return nil
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
		return nil
	})
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
			listed = listed || f.Path == layout.ShapePath
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
func fsRelative(r layout.DirShapeRoot, p string) (string, bool) {
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

func (st *state) addWriter(p *ofLine, use string, f *layout.OpenFile, line int) {
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

// devFUSEPath marks a processes.jsonl line with /dev/fuse open: a FUSE
// daemon (the kernel does not say which connection a descriptor serves).
var devFUSEPath = []byte(`"path":"/dev/fuse"`)

// addFUSEHolder keeps a process holding /dev/fuse (bounded).
func (st *state) addFUSEHolder(b []byte) {
	if len(st.fuseHolders) >= 256 {
		return
	}
	var p ofLine
	if json.Unmarshal(b, &p) != nil {
		return
	}
	h := layout.FUSEDevHolder{PID: p.PID, Comm: p.Comm, MountNS: p.Namespace}
	for _, fd := range p.FDs {
		if fd.Path == "/dev/fuse" {
			h.FDs++
		}
	}
	if h.FDs > 0 {
		st.fuseHolders = append(st.fuseHolders, h)
	}
}
