package collectors

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/procfs"
	"github.com/nodesnap/nodesnap/isolate"
)

// opDirShapeScan scans one root (or one mount) in a worker: one item per
// root, so a root on a hung filesystem costs one item and the others are
// still scanned.
const opDirShapeScan = "dirshape.scan"

// DirShapeDefaultRoots are scanned when no --dirshape-root is given: the
// kubelet's pod and plugin directories (and, with VolumeMounts, each pod
// or container-runtime volume that is a mount of its own), the container
// runtimes' volume and
// state directories, and the state directories of common CSI drivers and
// local-volume provisioners. Roots that do not exist are reported absent.
var DirShapeDefaultRoots = []string{
	"/var/lib/kubelet/pods",
	"/var/lib/kubelet/plugins",
	"/var/lib/docker/volumes",
	"/var/lib/containerd",
	"/var/lib/containers/storage",
	"/var/lib/csi-hostpath-data",
	"/var/lib/rook",
	"/var/lib/longhorn",
	"/var/openebs",
	"/opt/local-path-provisioner",
}

// DirShapeOptions are dirshape's settings.
type DirShapeOptions struct {
	// Roots are host paths; empty means DirShapeDefaultRoots.
	Roots []string `json:"roots,omitempty"`
	// MaxEntries and MaxTime bound the scan of each root; past either the
	// scan stops and its counts are lower bounds.
	MaxEntries uint64        `json:"max_entries"`
	MaxTime    time.Duration `json:"max_time"`
	// Top is how many of the largest directories are kept per root.
	Top int `json:"top"`
	// MaxDepth bounds how deep a scan descends.
	MaxDepth int `json:"max_depth"`
	// CrossMounts scans every other mount under a root too, each as its
	// own root. Without it no scan enters another mount.
	CrossMounts bool `json:"cross_mounts"`
	// VolumeMounts scans each mount under the kubelet's
	// pods/<uid>/volumes/<plugin>/<volume>, and each Docker, Podman or
	// nerdctl (containerd) volume's _data that is a mount of its own (a
	// local-driver volume on a device), as its own root.
	VolumeMounts bool `json:"volume_mounts"`
}

func dsDefaultOptions() DirShapeOptions {
	return DirShapeOptions{MaxEntries: 10_000_000, MaxTime: 20 * time.Second, Top: 20, MaxDepth: 256, VolumeMounts: true}
}

var dirshapeOpts = dsDefaultOptions()

func init() {
	Register(Spec{
		Name:           "dirshape",
		Description:    "bounded directory-shape statistics of the kubelet, runtime and CSI directories: entry counts, largest directories, .deleting~ leftovers, ext4 nlink anomalies; never enters a hung mount",
		DefaultEnabled: true,
		DefaultTimeout: 60 * time.Second,
		After:          []string{"mountprobe"},
		Options:        &dirshapeOpts,
		Flags: func(fs *pflag.FlagSet) {
			fs.StringArrayVar(&dirshapeOpts.Roots, "dirshape-root", nil, "dirshape: a directory to scan (host path; repeatable; default: the kubelet, runtime and CSI directories)")
			fs.Uint64Var(&dirshapeOpts.MaxEntries, "dirshape-max-entries", dirshapeOpts.MaxEntries, "dirshape: stop scanning a root after this many entries (its counts are then lower bounds)")
			fs.DurationVar(&dirshapeOpts.MaxTime, "dirshape-max-time", dirshapeOpts.MaxTime, "dirshape: stop scanning a root after this long (its counts are then lower bounds)")
			fs.IntVar(&dirshapeOpts.Top, "dirshape-top", dirshapeOpts.Top, "dirshape: how many of the largest directories to report per root")
			fs.BoolVar(&dirshapeOpts.CrossMounts, "dirshape-cross-mounts", dirshapeOpts.CrossMounts, "dirshape: also scan the other mounts under each root (each as its own root; hung mounts are never entered)")
			fs.BoolVar(&dirshapeOpts.VolumeMounts, "dirshape-volume-mounts", dirshapeOpts.VolumeMounts, "dirshape: scan each pod volume, and each Docker/Podman/containerd volume, that is a mount of its own")
		},
		Run: collectDirshape,
	})
	isolate.RegisterOp(opDirShapeScan, isolate.Typed(func(rq DirShapeScanRequest) (any, error) {
		return ScanDirShape(rq), nil
	}))
}

// DirShapeReport is dirshape/shape.json.
type DirShapeReport struct {
	StartedAt  time.Time        `json:"started_at"`
	DurationMS float64          `json:"duration_ms"`
	Settings   DirShapeSettings `json:"settings"`
	Roots      []DirShapeRoot   `json:"roots"`
	// Totals over all roots.
	DeletingCount  uint64 `json:"deleting_count"`
	NlinkAnomalies int    `json:"nlink_anomalies"`
	// LowerBounds counts the roots whose scan stopped early.
	LowerBounds int      `json:"lower_bounds"`
	Notes       []string `json:"notes,omitempty"`
}

// DirShapeSettings are the bounds the scans ran with.
type DirShapeSettings struct {
	MaxEntries   uint64  `json:"max_entries"`
	MaxSeconds   float64 `json:"max_seconds"`
	Top          int     `json:"top"`
	MaxDepth     int     `json:"max_depth"`
	CrossMounts  bool    `json:"cross_mounts"`
	VolumeMounts bool    `json:"volume_mounts"`
}

// Root statuses, as in DirShapeRoot.Status.
const (
	DirShapeComplete       = "complete"
	DirShapeBudget         = "budget_exhausted"
	DirShapeAbsent         = "absent"
	DirShapeNotDir         = "not_a_directory"
	DirShapeSkippedHung    = "skipped_hung"
	DirShapeHung           = "hung"
	DirShapeFailed         = "error"
	DirShapeSkippedTimeout = "skipped_deadline"
)

// DirShapeRoot is the shape of one scanned root.
type DirShapeRoot struct {
	// Path is the host path; Kind is root, volume_mount or mount.
	Path   string `json:"path"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	// Complete is true when every entry was counted. Otherwise
	// CountsAreLowerBounds is set and StopReason says why.
	Complete             bool   `json:"complete"`
	CountsAreLowerBounds bool   `json:"counts_are_lower_bounds"`
	StopReason           string `json:"stop_reason,omitempty"`
	Error                string `json:"error,omitempty"`
	// Mountpoint and FSType describe the mount holding the root (from
	// the mount table); FSMagic is its statfs type; Dev its st_dev.
	Mountpoint string `json:"mountpoint,omitempty"`
	FSType     string `json:"fstype,omitempty"`
	FSMagic    string `json:"fs_magic,omitempty"`
	Dev        string `json:"dev,omitempty"`
	// Entries counts every name below the root (the root itself not
	// included), like `find ROOT -xdev -mindepth 1 | wc -l`.
	Entries   uint64 `json:"total_entries"`
	Dirs      uint64 `json:"dirs"`
	Files     uint64 `json:"files"`
	Symlinks  uint64 `json:"symlinks"`
	Other     uint64 `json:"other"`
	EmptyDirs uint64 `json:"empty_dirs"`
	MaxDepth  int    `json:"max_depth"`
	// DepthLimited counts directories not entered because they are
	// deeper than the depth bound.
	DepthLimited uint64 `json:"depth_limited,omitempty"`
	// Largest are the directories with the most entries, largest first.
	Largest []DirShapeDir `json:"largest_dirs"`
	// NlinkAnomalies are directories with more than 64,998
	// subdirectories whose st_nlink is 1: ext4's dir_nlink overflow, the
	// signature of incident 001.
	NlinkAnomalies []DirShapeDir `json:"nlink_anomalies"`
	// Deleting groups every *.deleting~* name by its parent directory.
	Deleting              []DeletingGroup `json:"deleting"`
	DeletingCount         uint64          `json:"deleting_count"`
	DeletingGroupsOmitted uint64          `json:"deleting_groups_omitted,omitempty"`
	// MountsNotEntered counts mountpoints met below the root and left
	// alone; some are listed.
	MountsNotEntered       uint64   `json:"mounts_not_entered"`
	MountsNotEnteredSample []string `json:"mounts_not_entered_sample,omitempty"`
	// Unreadable counts directories that could not be opened or read.
	Unreadable       uint64          `json:"unreadable"`
	UnreadableSample []DirShapeError `json:"unreadable_sample,omitempty"`
	DurationMS       float64         `json:"duration_ms"`
	EntriesPerSecond float64         `json:"entries_per_second"`
	// Method is how mounts were kept out: "openat2" (the kernel refuses
	// to cross a mount) or "mount-table" (older kernels).
	Method string `json:"method,omitempty"`
}

// DirShapeDir is one directory.
type DirShapeDir struct {
	Path    string `json:"path"`
	Entries uint64 `json:"entries"`
	Subdirs uint64 `json:"subdirs"`
	// InodeSize is st_size of the directory itself: on ext4 it grows
	// with the number of entries it ever held and never shrinks.
	InodeSize int64  `json:"inode_size"`
	Nlink     uint64 `json:"nlink"`
	// Partial is set when the directory was not read to the end:
	// Entries and Subdirs are lower bounds.
	Partial      bool `json:"partial,omitempty"`
	NlinkAnomaly bool `json:"nlink_anomaly,omitempty"`
}

// DirShapeError is one directory that could not be read.
type DirShapeError struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// DeletingGroup is every *.deleting~* name in one directory. The kubelet
// renames a volume directory to <name>.deleting~<random> before removing
// it; each failed removal leaves one behind (incident 000).
type DeletingGroup struct {
	Parent string `json:"parent"`
	Count  uint64 `json:"count"`
	// Empty and NotEmpty count the leftovers that are directories and
	// were read; Unknown the rest (not directories, mountpoints,
	// unreadable, or past the scan's budget).
	Empty    uint64 `json:"empty"`
	NotEmpty uint64 `json:"not_empty"`
	Unknown  uint64 `json:"unknown"`
	// Originals are the distinct names before ".deleting~".
	Originals        []DeletingOriginal `json:"originals"`
	OriginalsOmitted uint64             `json:"originals_omitted,omitempty"`
	// Entries lists leftovers one by one, up to a bound.
	Entries        []DeletingEntry `json:"entries"`
	EntriesOmitted uint64          `json:"entries_omitted,omitempty"`

	origIdx map[string]int
}

// DeletingOriginal is the volume directory a group of leftovers came
// from.
type DeletingOriginal struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
	// Exists says whether the original name is still in the directory
	// (null when that could not be checked).
	Exists *bool `json:"exists"`
	// Mounted is true when the original, or something under it, is a
	// mountpoint in the host's (or nodesnap's) mount table; Mounts lists
	// some of them.
	Mounted bool     `json:"mounted"`
	Mounts  []string `json:"mounts,omitempty"`
}

// DeletingEntry is one *.deleting~* name.
type DeletingEntry struct {
	Name     string `json:"name"`
	Original string `json:"original"`
	Suffix   string `json:"suffix"`
	// Type is dir, file, symlink or other.
	Type string `json:"type"`
	// Entries is how many names the leftover directory holds (a lower
	// bound when Partial); Empty is null when it was not read.
	Entries    uint64 `json:"entries"`
	Empty      *bool  `json:"empty"`
	Partial    bool   `json:"partial,omitempty"`
	Mountpoint bool   `json:"mountpoint,omitempty"`
}

// deletingMarker is what the kubelet's RenameDirectory puts between a
// volume directory's name and a random number.
const deletingMarker = ".deleting~"

// ParseDeletingName splits a name matching *.deleting~* at the last
// ".deleting~" into the original name and the suffix (the kubelet's
// random digits). ok is false for any other name.
func ParseDeletingName(name string) (original, suffix string, ok bool) {
	i := strings.LastIndex(name, deletingMarker)
	if i < 0 {
		return "", "", false
	}
	return name[:i], name[i+len(deletingMarker):], true
}

// Bounds on what one group keeps in detail.
const (
	DeletingKeepOriginals = 256
)

// Add counts one leftover and keeps it in Entries while fewer than keep
// are kept. It returns its index in Entries, or -1. Resolve must be
// called for it once what it holds is known.
func (g *DeletingGroup) Add(e DeletingEntry, keep int) int {
	g.Count++
	if g.origIdx == nil {
		g.origIdx = map[string]int{}
		for i, o := range g.Originals {
			g.origIdx[o.Name] = i
		}
	}
	if i, ok := g.origIdx[e.Original]; ok {
		g.Originals[i].Count++
	} else if len(g.Originals) < DeletingKeepOriginals {
		g.origIdx[e.Original] = len(g.Originals)
		g.Originals = append(g.Originals, DeletingOriginal{Name: e.Original, Count: 1})
	} else {
		g.OriginalsOmitted++
	}
	if len(g.Entries) >= keep {
		g.EntriesOmitted++
		return -1
	}
	g.Entries = append(g.Entries, e)
	return len(g.Entries) - 1
}

// Resolve records what reading leftover idx (from Add; -1 for one not
// kept in detail) found: read is false when it was not read at all,
// complete false when it was read only in part.
func (g *DeletingGroup) Resolve(idx int, entries uint64, read, complete bool) {
	var e *DeletingEntry
	if idx >= 0 && idx < len(g.Entries) {
		e = &g.Entries[idx]
		e.Entries = entries
		e.Partial = read && !complete
	}
	switch {
	case read && entries > 0:
		g.NotEmpty++
		if e != nil {
			f := false
			e.Empty = &f
		}
	case read && complete:
		g.Empty++
		if e != nil {
			t := true
			e.Empty = &t
		}
	default:
		g.Unknown++
	}
}

// MarkDeletingMounted fills each original's Mounted and Mounts from
// mounted, which lists the mountpoints at or under a path.
func MarkDeletingMounted(groups []DeletingGroup, mounted func(p string) []string) {
	for gi := range groups {
		g := &groups[gi]
		for oi := range g.Originals {
			o := &g.Originals[oi]
			ms := mounted(path.Join(g.Parent, o.Name))
			o.Mounted = len(ms) > 0
			if len(ms) > 4 {
				ms = ms[:4]
			}
			o.Mounts = ms
		}
	}
}

// DirShapeScanRequest asks ScanDirShape for the shape of one root.
type DirShapeScanRequest struct {
	// Path is the root as nodesnap sees it; Display is the path used in
	// the result (the host's path).
	Path    string `json:"path"`
	Display string `json:"display"`
	// Exclude are the mountpoints below Path (as nodesnap sees them),
	// used to stay out of mounts where openat2 is missing.
	Exclude    []string      `json:"exclude,omitempty"`
	MaxEntries uint64        `json:"max_entries"`
	MaxTime    time.Duration `json:"max_time"`
	Top        int           `json:"top"`
	MaxDepth   int           `json:"max_depth"`
	// KeepDeleting bounds the leftovers listed one by one (counts are
	// always complete); KeepGroups the directories holding them.
	KeepDeleting int `json:"keep_deleting"`
	KeepGroups   int `json:"keep_groups"`
	// NoOpenat2 forces the mount-table fallback (for tests).
	NoOpenat2 bool `json:"no_openat2,omitempty"`
}

// dsNlinkLimit is the most subdirectories an ext4 directory counts in
// st_nlink (EXT4_LINK_MAX 65000, less "." and its parent's link); past it
// the dir_nlink feature pins st_nlink at 1.
const dsNlinkLimit = 64998

const (
	dsBufSize      = 32 << 10
	dsSampleMax    = 20
	dsAnomalyMax   = 100
	dsTypeMountDir = 0xff // pseudo d_type: a directory that is a mountpoint
)

type dsLevel struct {
	fd      int
	buf     []byte
	off, n  int
	pathLen int
	entries uint64
	subdirs uint64
	trie    *dsTrie
	eof     bool
	failed  bool
	// delOf/delIdx: this directory is a leftover of that group.
	delOf  *DeletingGroup
	delIdx int
	// group holds the leftovers found in this directory.
	group *DeletingGroup
}

type dsTrie struct {
	kids  map[string]*dsTrie
	mount bool
}

type dsScanner struct {
	req      DirShapeScanRequest
	out      *DirShapeRoot
	path     []byte
	stack    []dsLevel
	bufs     [][]byte
	top      []DirShapeDir // min-heap on Entries
	deadline time.Time
	stopped  string
	openat2  bool
	noatime  bool
	rootDev  uint64
	groups   []*DeletingGroup
}

// ScanDirShape counts the entries below one root, depth first, holding one
// getdents buffer and one open directory per level: memory depends on the
// depth, never on the number of entries. It reads d_type and stats only
// the directories it reports; it never follows a symlink below the root
// and never enters another mount (openat2 RESOLVE_NO_XDEV, or the mount
// table on kernels without it). It is for use inside isolated workers
// (and tests): on a hung filesystem it blocks.
func ScanDirShape(req DirShapeScanRequest) DirShapeRoot {
	if req.Display == "" {
		req.Display = req.Path
	}
	if req.Top <= 0 {
		req.Top = 20
	}
	if req.MaxDepth <= 0 {
		req.MaxDepth = 256
	}
	if req.KeepDeleting <= 0 {
		req.KeepDeleting = 2000
	}
	if req.KeepGroups <= 0 {
		req.KeepGroups = 500
	}
	out := DirShapeRoot{Path: req.Display, Largest: []DirShapeDir{}, NlinkAnomalies: []DirShapeDir{}, Deleting: []DeletingGroup{}}
	start := time.Now()
	s := &dsScanner{req: req, out: &out, noatime: true}
	if req.MaxTime > 0 {
		s.deadline = start.Add(req.MaxTime)
	}
	s.path = append(make([]byte, 0, 4096), strings.TrimSuffix(req.Display, "/")...)

	// The root itself may be a symlink (a relocated /var/lib/docker, say)
	// and is followed; nothing below it is.
	fd, err := unix.Open(req.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			out.Status = DirShapeAbsent
		case errors.Is(err, unix.ENOTDIR):
			out.Status = DirShapeNotDir
		default:
			out.Status = DirShapeFailed
			out.Error = fmt.Sprintf("opening %s: %v", req.Display, err)
		}
		return out
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		s.rootDev = st.Dev
		out.Dev = fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	}
	var sf unix.Statfs_t
	if unix.Fstatfs(fd, &sf) == nil {
		out.FSMagic = fmt.Sprintf("0x%x", uint64(sf.Type))
		if n := mpFSMagic[sf.Type]; n != "" {
			out.FSMagic += " (" + n + ")"
		}
	}
	s.openat2 = !req.NoOpenat2 && dsHaveOpenat2(fd)
	out.Method = "openat2"
	var trie *dsTrie
	if !s.openat2 {
		out.Method = "mount-table"
		trie = dsBuildTrie(req.Path, req.Exclude)
	}
	s.stack = make([]dsLevel, 0, req.MaxDepth+2)
	s.push(fd, len(s.path), trie, nil, -1)
	s.run()
	s.finalize(time.Since(start))
	return out
}

// dsHaveOpenat2 tells whether openat2 works here (Linux >= 5.6, and not
// refused by a seccomp filter).
func dsHaveOpenat2(dirfd int) bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_XDEV}
	fd, err := unix.Openat2(dirfd, ".", &how)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

func dsBuildTrie(root string, exclude []string) *dsTrie {
	t := &dsTrie{}
	root = path.Clean(root)
	for _, m := range exclude {
		rel, ok := strings.CutPrefix(path.Clean(m), root+"/")
		if root == "/" {
			rel, ok = strings.CutPrefix(path.Clean(m), "/")
		}
		if !ok || rel == "" {
			continue
		}
		n := t
		for _, c := range strings.Split(rel, "/") {
			if n.kids == nil {
				n.kids = map[string]*dsTrie{}
			}
			k := n.kids[c]
			if k == nil {
				k = &dsTrie{}
				n.kids[c] = k
			}
			n = k
		}
		n.mount = true
	}
	if t.kids == nil {
		return nil
	}
	return t
}

func (s *dsScanner) buf(depth int) []byte {
	for len(s.bufs) <= depth {
		s.bufs = append(s.bufs, nil)
	}
	if s.bufs[depth] == nil {
		s.bufs[depth] = make([]byte, dsBufSize)
	}
	return s.bufs[depth]
}

func (s *dsScanner) push(fd, pathLen int, trie *dsTrie, delOf *DeletingGroup, delIdx int) {
	s.stack = append(s.stack, dsLevel{fd: fd, buf: s.buf(len(s.stack)), pathLen: pathLen, trie: trie, delOf: delOf, delIdx: delIdx})
}

func (s *dsScanner) curPath() string {
	if len(s.path) == 0 {
		return "/"
	}
	return string(s.path)
}

func (s *dsScanner) childPath(name []byte) string {
	if len(s.path) == 0 {
		return "/" + string(name)
	}
	return string(s.path) + "/" + string(name)
}

func (s *dsScanner) run() {
	for len(s.stack) > 0 {
		lv := &s.stack[len(s.stack)-1]
		if s.stopped != "" {
			s.pop(true)
			continue
		}
		if lv.off >= lv.n {
			if lv.eof {
				s.pop(false)
				continue
			}
			n, err := unix.Getdents(lv.fd, lv.buf)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				s.unreadable(s.curPath(), fmt.Errorf("reading directory: %w", err))
				lv.failed, lv.eof = true, true
				continue
			}
			if n <= 0 {
				lv.eof = true
				continue
			}
			lv.off, lv.n = 0, n
		}
		typ, nameZ, ok := dsNextDirent(lv)
		if !ok {
			continue
		}
		name := nameZ[:len(nameZ)-1]
		if len(name) == 0 || (name[0] == '.' && (len(name) == 1 || (len(name) == 2 && name[1] == '.'))) {
			continue
		}
		s.entry(lv, typ, name, nameZ)
	}
}

// dsNextDirent takes the next linux_dirent64 record from the level's
// buffer: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name
// (NUL-terminated). It returns the name with its NUL. A record that does
// not fit the buffer ends the buffer; the kernel never writes one.
func dsNextDirent(lv *dsLevel) (typ uint8, nameZ []byte, ok bool) {
	b := lv.buf[lv.off:lv.n]
	if len(b) < 20 {
		lv.off = lv.n
		return 0, nil, false
	}
	reclen := int(binary.NativeEndian.Uint16(b[16:18]))
	if reclen < 20 || reclen > len(b) {
		lv.off = lv.n
		return 0, nil, false
	}
	lv.off += reclen
	raw := b[19:reclen]
	nul := bytes.IndexByte(raw, 0)
	if nul < 0 {
		return 0, nil, false
	}
	return b[18], raw[:nul+1], true
}

func (s *dsScanner) entry(lv *dsLevel, typ uint8, name, nameZ []byte) {
	out := s.out
	out.Entries++
	lv.entries++
	if depth := len(s.stack); depth > out.MaxDepth {
		out.MaxDepth = depth
	}
	if typ == unix.DT_UNKNOWN {
		typ = s.resolveType(lv, nameZ)
	}
	isDir := typ == unix.DT_DIR || typ == dsTypeMountDir
	switch {
	case isDir:
		out.Dirs++
		lv.subdirs++
	case typ == unix.DT_REG:
		out.Files++
	case typ == unix.DT_LNK:
		out.Symlinks++
	default:
		out.Other++
	}
	var delOf *DeletingGroup
	delIdx := -1
	if bytes.IndexByte(name, '~') >= 0 {
		if orig, suffix, ok := ParseDeletingName(string(name)); ok {
			out.DeletingCount++
			delOf = s.groupFor(lv)
			if delOf != nil {
				delIdx = delOf.Add(DeletingEntry{Name: string(name), Original: orig, Suffix: suffix, Type: dsTypeName(typ), Mountpoint: typ == dsTypeMountDir}, s.req.KeepDeleting)
			}
		}
	}
	if s.req.MaxEntries > 0 && out.Entries >= s.req.MaxEntries {
		s.stopped = fmt.Sprintf("entry budget of %d reached", s.req.MaxEntries)
	} else if out.Entries&1023 == 0 && !s.deadline.IsZero() && time.Now().After(s.deadline) {
		s.stopped = fmt.Sprintf("time budget of %s reached", s.req.MaxTime)
	}
	if isDir && s.stopped == "" && typ != dsTypeMountDir && s.descend(lv, name, nameZ, delOf, delIdx) {
		return
	}
	if typ == dsTypeMountDir {
		s.mountNotEntered(name)
	}
	if delOf != nil {
		delOf.Resolve(delIdx, 0, false, false)
	}
}

func dsTypeName(typ uint8) string {
	switch typ {
	case unix.DT_DIR, dsTypeMountDir:
		return "dir"
	case unix.DT_REG:
		return "file"
	case unix.DT_LNK:
		return "symlink"
	}
	return "other"
}

// groupFor returns the leftover group of the directory at the top of the
// stack, creating it; nil past the bound on groups.
func (s *dsScanner) groupFor(lv *dsLevel) *DeletingGroup {
	if lv.group != nil {
		return lv.group
	}
	if len(s.groups) >= s.req.KeepGroups {
		s.out.DeletingGroupsOmitted++
		return nil
	}
	lv.group = &DeletingGroup{Parent: s.curPath()}
	s.groups = append(s.groups, lv.group)
	return lv.group
}

func (s *dsScanner) mountNotEntered(name []byte) {
	s.out.MountsNotEntered++
	if len(s.out.MountsNotEnteredSample) < dsSampleMax {
		s.out.MountsNotEnteredSample = append(s.out.MountsNotEnteredSample, s.childPath(name))
	}
}

func (s *dsScanner) unreadable(p string, err error) {
	s.out.Unreadable++
	if len(s.out.UnreadableSample) < dsSampleMax {
		s.out.UnreadableSample = append(s.out.UnreadableSample, DirShapeError{Path: p, Error: err.Error()})
	}
}

// descend opens a subdirectory and pushes it; false when it was not
// entered (a mount, too deep, unreadable).
func (s *dsScanner) descend(lv *dsLevel, name, nameZ []byte, delOf *DeletingGroup, delIdx int) bool {
	var trie *dsTrie
	if lv.trie != nil {
		if k := lv.trie.kids[string(name)]; k != nil {
			if k.mount {
				s.mountNotEntered(name)
				if delOf != nil && delIdx >= 0 {
					delOf.Entries[delIdx].Mountpoint = true
				}
				return false
			}
			trie = k
		}
	}
	if len(s.stack) > s.req.MaxDepth {
		s.out.DepthLimited++
		return false
	}
	fd, err := s.openDir(lv.fd, nameZ)
	if errors.Is(err, unix.EXDEV) {
		s.mountNotEntered(name)
		if delOf != nil && delIdx >= 0 {
			delOf.Entries[delIdx].Mountpoint = true
		}
		return false
	}
	if err != nil {
		s.unreadable(s.childPath(name), err)
		return false
	}
	if !s.openat2 {
		// Without openat2 a mount missing from the table is only
		// noticed here, after opening it.
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Dev != s.rootDev {
			_ = unix.Close(fd)
			s.mountNotEntered(name)
			return false
		}
	}
	s.path = append(s.path, '/')
	s.path = append(s.path, name...)
	s.push(fd, len(s.path), trie, delOf, delIdx)
	return true
}

const dsOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openDir opens one directory entry below dirfd without following a
// symlink and, with openat2, without crossing into another mount (EXDEV).
// nameZ is NUL-terminated, so no copy is made.
func (s *dsScanner) openDir(dirfd int, nameZ []byte) (int, error) {
	for {
		flags := dsOpenFlags
		if s.noatime {
			flags |= unix.O_NOATIME
		}
		var fd uintptr
		var e unix.Errno
		if s.openat2 {
			how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
			fd, _, e = unix.Syscall6(unix.SYS_OPENAT2, uintptr(dirfd), uintptr(unsafe.Pointer(&nameZ[0])), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		} else {
			fd, _, e = unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&nameZ[0])), uintptr(flags), 0, 0, 0)
		}
		switch {
		case e == 0:
			return int(fd), nil
		case e == unix.EINTR:
			continue
		case e == unix.EPERM && s.noatime:
			// O_NOATIME needs ownership or CAP_FOWNER (not given in a
			// user namespace); reading may then update atimes.
			s.noatime = false
			continue
		}
		return -1, e
	}
}

// resolveType finds the type of an entry whose d_type the filesystem did
// not fill in, without crossing into a mount: an O_PATH open that refuses
// mount crossings, then fstat of that.
func (s *dsScanner) resolveType(lv *dsLevel, nameZ []byte) uint8 {
	if lv.trie != nil {
		if k := lv.trie.kids[string(nameZ[:len(nameZ)-1])]; k != nil && k.mount {
			return dsTypeMountDir
		}
	}
	var st unix.Stat_t
	if s.openat2 {
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS}
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT2, uintptr(lv.fd), uintptr(unsafe.Pointer(&nameZ[0])), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		if e == unix.EXDEV {
			return dsTypeMountDir
		}
		if e != 0 {
			return unix.DT_UNKNOWN
		}
		err := unix.Fstat(int(fd), &st)
		_ = unix.Close(int(fd))
		if err != nil {
			return unix.DT_UNKNOWN
		}
	} else if unix.Fstatat(lv.fd, string(nameZ[:len(nameZ)-1]), &st, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT) != nil {
		return unix.DT_UNKNOWN
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if !s.openat2 && st.Dev != s.rootDev {
			return dsTypeMountDir
		}
		return unix.DT_DIR
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFLNK:
		return unix.DT_LNK
	}
	return unix.DT_UNKNOWN
}

// pop finishes the directory at the top of the stack. partial is set when
// the scan stopped before reading it to the end.
func (s *dsScanner) pop(partial bool) {
	lv := &s.stack[len(s.stack)-1]
	partial = partial || lv.failed
	if lv.group != nil && !partial {
		s.checkOriginals(lv)
	}
	if s.wantTop(lv.entries) || lv.subdirs > dsNlinkLimit {
		d := DirShapeDir{Path: s.curPath(), Entries: lv.entries, Subdirs: lv.subdirs, Partial: partial}
		var st unix.Stat_t
		if unix.Fstat(lv.fd, &st) == nil {
			d.InodeSize, d.Nlink = st.Size, uint64(st.Nlink)
			if lv.subdirs > dsNlinkLimit && st.Nlink == 1 {
				d.NlinkAnomaly = true
				if len(s.out.NlinkAnomalies) < dsAnomalyMax {
					s.out.NlinkAnomalies = append(s.out.NlinkAnomalies, d)
				}
			}
		}
		if s.wantTop(lv.entries) {
			s.pushTop(d)
		}
	}
	if lv.entries == 0 && !partial {
		s.out.EmptyDirs++
	}
	if lv.delOf != nil {
		lv.delOf.Resolve(lv.delIdx, lv.entries, true, !partial)
	}
	_ = unix.Close(lv.fd)
	s.stack = s.stack[:len(s.stack)-1]
	if n := len(s.stack); n > 0 {
		s.path = s.path[:s.stack[n-1].pathLen]
	}
}

// checkOriginals reads the directory a second time, by name only, to see
// which leftovers' original names are still there. Only directories
// holding leftovers pay for it.
func (s *dsScanner) checkOriginals(lv *dsLevel) {
	g := lv.group
	if _, err := unix.Seek(lv.fd, 0, 0); err != nil {
		return
	}
	found := make([]bool, len(g.Originals))
	tmp := dsLevel{fd: lv.fd, buf: lv.buf}
	for {
		if !s.deadline.IsZero() && time.Now().After(s.deadline) {
			return
		}
		n, err := unix.Getdents(lv.fd, tmp.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		if n <= 0 {
			break
		}
		tmp.off, tmp.n = 0, n
		for tmp.off < tmp.n {
			_, nameZ, ok := dsNextDirent(&tmp)
			if !ok {
				continue
			}
			if i, ok := g.origIdx[string(nameZ[:len(nameZ)-1])]; ok {
				found[i] = true
			}
		}
	}
	for i := range g.Originals {
		f := found[i]
		g.Originals[i].Exists = &f
	}
}

func (s *dsScanner) wantTop(entries uint64) bool {
	return len(s.top) < s.req.Top || entries > s.top[0].Entries
}

// pushTop keeps the req.Top largest directories in a min-heap.
func (s *dsScanner) pushTop(d DirShapeDir) {
	h := s.top
	if len(h) < s.req.Top {
		h = append(h, d)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p].Entries <= h[i].Entries {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
		s.top = h
		return
	}
	h[0] = d
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].Entries < h[m].Entries {
			m = l
		}
		if r < len(h) && h[r].Entries < h[m].Entries {
			m = r
		}
		if m == i {
			break
		}
		h[m], h[i] = h[i], h[m]
		i = m
	}
}

func (s *dsScanner) finalize(elapsed time.Duration) {
	out := s.out
	out.Largest = append(out.Largest, s.top...)
	sort.SliceStable(out.Largest, func(i, j int) bool {
		if out.Largest[i].Entries != out.Largest[j].Entries {
			return out.Largest[i].Entries > out.Largest[j].Entries
		}
		return out.Largest[i].Path < out.Largest[j].Path
	})
	for _, g := range s.groups {
		out.Deleting = append(out.Deleting, *g)
	}
	sort.SliceStable(out.Deleting, func(i, j int) bool { return out.Deleting[i].Parent < out.Deleting[j].Parent })
	out.DurationMS = mpMS(elapsed)
	if elapsed > 0 {
		out.EntriesPerSecond = float64(int64(float64(out.Entries) / elapsed.Seconds()))
	}
	switch {
	case s.stopped != "":
		out.Status = DirShapeBudget
		out.CountsAreLowerBounds = true
		out.StopReason = s.stopped + ": every count is a lower bound"
	case out.Unreadable > 0 || out.DepthLimited > 0:
		out.Status = DirShapeComplete
		out.CountsAreLowerBounds = true
		out.StopReason = fmt.Sprintf("%d directories could not be read and %d were too deep to enter: counts below them are missing", out.Unreadable, out.DepthLimited)
	default:
		out.Status = DirShapeComplete
		out.Complete = true
	}
}

// dsUnit is one root to scan.
type dsUnit struct {
	seen    string // as nodesnap sees it (under --root)
	display string // the host's path
	kind    string
	res     DirShapeRoot
}

type dsCollector struct {
	env        *Env
	opts       DirShapeOptions
	selfMounts []procfs.Mount
	hostMounts []procfs.Mount
	soft       time.Time
	mu         sync.Mutex
	notes      []string
}

func collectDirshape(ctx context.Context, env *Env) error {
	opts := dsDefaultOptions()
	if err := env.Options(&opts); err != nil {
		return err
	}
	if opts.Top <= 0 {
		opts.Top = 20
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 256
	}
	started := time.Now()
	c := &dsCollector{env: env, opts: opts, soft: time.Now().Add(time.Hour)}
	if dl, ok := ctx.Deadline(); ok {
		c.soft = dl.Add(-min(2*time.Second, time.Until(dl)/4))
	}

	// Our own table says which mounts lie below each root (our path
	// walks cross them); the host's (pid 1's) which volumes the kubelet
	// still has mounted.
	var err error
	c.selfMounts, err = c.readMounts(ctx, env.ProcPath("self", "mountinfo"))
	if err != nil {
		c.notef("nodesnap's own mount table could not be read (%v): mounts below the roots are not listed, and pod volume mounts are not scanned", err)
	}
	c.hostMounts, err = c.readMounts(ctx, env.ProcPath("1", "mountinfo"))
	if err != nil {
		c.hostMounts = c.selfMounts
	}

	roots := opts.Roots
	if len(roots) == 0 {
		roots = DirShapeDefaultRoots
	}
	units := c.units(roots)
	c.scanAll(ctx, units)

	rep := DirShapeReport{StartedAt: started.UTC(), Settings: DirShapeSettings{
		MaxEntries: opts.MaxEntries, MaxSeconds: opts.MaxTime.Seconds(), Top: opts.Top, MaxDepth: opts.MaxDepth,
		CrossMounts: opts.CrossMounts, VolumeMounts: opts.VolumeMounts}, Roots: []DirShapeRoot{}}
	present := 0
	for _, u := range units {
		r := u.res
		MarkDeletingMounted(r.Deleting, c.mountedUnder)
		rep.DeletingCount += r.DeletingCount
		rep.NlinkAnomalies += len(r.NlinkAnomalies)
		if r.CountsAreLowerBounds {
			rep.LowerBounds++
		}
		if r.Status != DirShapeAbsent {
			present++
		}
		rep.Roots = append(rep.Roots, r)
	}
	rep.DurationMS = mpMS(time.Since(started))
	rep.Notes = c.notes
	if err := env.WriteJSON("shape.json", rep); err != nil {
		return err
	}
	if err := env.WriteFile("summary.txt", []byte(dsSummary(&rep))); err != nil {
		return err
	}
	if rep.LowerBounds > 0 {
		env.Notef("%d root(s) were not scanned to the end: their counts are lower bounds", rep.LowerBounds)
	}
	if present == 0 && len(opts.Roots) == 0 {
		return fmt.Errorf("none of the kubelet, runtime or CSI directories exist: %w", ErrUnsupported)
	}
	return nil
}

func (c *dsCollector) notef(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// readMounts reads a mount table in a worker: the read takes the kernel's
// namespace lock, which an unmount stuck on a dead server can hold.
func (c *dsCollector) readMounts(ctx context.Context, p string) ([]procfs.Mount, error) {
	var res isolate.ReadFileResult
	if err := c.env.Do(ctx, isolate.OpReadFile, p, isolate.ReadFileRequest{Path: p, Max: 32 << 20}, &res); err != nil {
		return nil, err
	}
	ms, _ := procfs.ParseMountInfo(res.Data)
	return ms, nil
}

// displayPath is the host's path for a path nodesnap sees.
func (c *dsCollector) displayPath(seen string) string {
	if hp, ok := mpUnroot(c.env.Root, seen); ok {
		return hp
	}
	return seen
}

// units lists the roots and, as asked, the mounts below them, each to be
// scanned on its own.
func (c *dsCollector) units(roots []string) []*dsUnit {
	var units []*dsUnit
	seen := map[string]bool{}
	add := func(u *dsUnit) {
		if seen[u.seen] {
			return
		}
		seen[u.seen] = true
		u.res = DirShapeRoot{Path: u.display, Kind: u.kind, Largest: []DirShapeDir{}, NlinkAnomalies: []DirShapeDir{}, Deleting: []DeletingGroup{}}
		units = append(units, u)
	}
	for _, r := range roots {
		r = path.Clean("/" + r)
		add(&dsUnit{seen: c.env.HostPath(r), display: r, kind: "root"})
	}
	const maxMountUnits = 2000
	n := 0
	for _, r := range roots {
		rs := c.env.HostPath(path.Clean("/" + r))
		for _, m := range c.selfMounts {
			rel, ok := strings.CutPrefix(m.MountPoint, strings.TrimSuffix(rs, "/")+"/")
			if !ok || rel == "" || procfs.IsPseudoFS(m.FSType) {
				continue
			}
			kind := ""
			switch {
			case c.opts.VolumeMounts && (dsIsPodVolume(rs, rel) || dsIsRuntimeVolume(rs, rel)):
				kind = "volume_mount"
			case c.opts.CrossMounts:
				kind = "mount"
			default:
				continue
			}
			if n >= maxMountUnits {
				c.notef("more than %d mounts below the roots: the rest were not scanned", maxMountUnits)
				return units
			}
			n++
			add(&dsUnit{seen: m.MountPoint, display: c.displayPath(m.MountPoint), kind: kind})
		}
	}
	return units
}

// dsIsPodVolume reports whether rel, a mountpoint relative to root, is a
// pod volume (or below one): <uid>/volumes/<plugin>/<volume>/..., with
// root the kubelet's pods directory (or the kubelet directory itself).
func dsIsPodVolume(root, rel string) bool {
	parts := strings.Split(rel, "/")
	if path.Base(root) != "pods" {
		if len(parts) == 0 || parts[0] != "pods" {
			return false
		}
		parts = parts[1:]
	}
	return len(parts) >= 4 && parts[1] == "volumes"
}

// dsIsRuntimeVolume reports whether rel, a mountpoint relative to root, is
// a container runtime's named volume (or below one): the _data directory
// of volumes/<name>/_data (Docker: /var/lib/docker/volumes, Podman:
// /var/lib/containers/storage/volumes) or volumes/<namespace>/<name>/_data
// (nerdctl, containerd's Docker-like CLI). A local-driver volume created
// with a device (docker volume create -o device=...) is mounted there.
func dsIsRuntimeVolume(root, rel string) bool {
	parts := strings.Split(strings.Trim(path.Join(root, rel), "/"), "/")
	start := len(strings.Split(strings.Trim(root, "/"), "/"))
	for i := start; i < len(parts); i++ {
		if parts[i] != "_data" {
			continue
		}
		if (i >= 2 && parts[i-2] == "volumes") || (i >= 3 && parts[i-3] == "volumes") {
			return true
		}
	}
	return false
}

// mountOf returns the mount holding p (as nodesnap sees it).
func (c *dsCollector) mountOf(p string) (procfs.Mount, bool) {
	var best procfs.Mount
	found := false
	for _, m := range c.selfMounts {
		mp := m.MountPoint
		if p == mp || mp == "/" || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/") {
			if !found || len(mp) >= len(best.MountPoint) {
				best, found = m, true
			}
		}
	}
	return best, found
}

// mountedUnder lists mountpoints at or below a host path, from the host's
// table and from nodesnap's own (where the same place is under --root).
func (c *dsCollector) mountedUnder(p string) []string {
	var out []string
	check := func(ms []procfs.Mount, q string) {
		for _, m := range ms {
			if m.MountPoint == q || strings.HasPrefix(m.MountPoint, q+"/") {
				out = append(out, m.MountPoint)
			}
		}
	}
	check(c.hostMounts, p)
	if sp := c.env.HostPath(p); sp != p || len(out) == 0 {
		check(c.selfMounts, sp)
	}
	sort.Strings(out)
	out = dsUniq(out)
	return out
}

func dsUniq(s []string) []string {
	j := 0
	for i, v := range s {
		if i == 0 || v != s[j-1] {
			s[j] = v
			j++
		}
	}
	return s[:j]
}

func (c *dsCollector) scanAll(ctx context.Context, units []*dsUnit) {
	workers := max(c.env.Workers, 1)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for _, u := range units {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.scan(ctx, u)
		}()
	}
	wg.Wait()
}

// dsScanGrace is added to a scan's own time budget for its worker's hard
// deadline: starting, and sending the answer back.
const dsScanGrace = 5 * time.Second

func (c *dsCollector) scan(ctx context.Context, u *dsUnit) {
	env := c.env
	r := &u.res
	if m, ok := c.mountOf(u.seen); ok {
		r.Mountpoint, r.FSType = c.displayPath(m.MountPoint), m.FSType
	}
	if env.IsHung(u.seen) || env.IsHung(u.display) {
		r.Status = DirShapeSkippedHung
		r.CountsAreLowerBounds = true
		r.StopReason = "on or below a mount found hung earlier in this run: not touched"
		return
	}
	remaining := time.Until(c.soft)
	if remaining < time.Second || ctx.Err() != nil {
		r.Status = DirShapeSkippedTimeout
		r.CountsAreLowerBounds = true
		r.StopReason = "the collector's deadline came before this root's turn"
		return
	}
	// One short probe first: a root on a hung filesystem costs one probe
	// deadline, not a scan's.
	var st isolate.StatResult
	err := env.Do(ctx, isolate.OpStat, u.seen, isolate.StatRequest{Path: u.seen, Follow: true}, &st)
	var he *isolate.HungError
	switch {
	case errors.As(err, &he):
		c.hung(u, he)
		return
	case errors.Is(err, unix.ENOENT):
		r.Status = DirShapeAbsent
		r.Mountpoint, r.FSType = "", ""
		return
	case err != nil:
		r.Status = DirShapeFailed
		r.Error = err.Error()
		return
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		r.Status = DirShapeNotDir
		return
	}
	budget := c.opts.MaxTime
	if budget <= 0 || budget > remaining-dsScanGrace {
		budget = max(remaining-dsScanGrace, remaining/2)
	}
	req := DirShapeScanRequest{Path: u.seen, Display: u.display, MaxEntries: c.opts.MaxEntries, MaxTime: budget,
		Top: c.opts.Top, MaxDepth: c.opts.MaxDepth}
	prefix := strings.TrimSuffix(u.seen, "/") + "/"
	for _, m := range c.selfMounts {
		if strings.HasPrefix(m.MountPoint, prefix) {
			req.Exclude = append(req.Exclude, m.MountPoint)
		}
	}
	hard := min(budget+dsScanGrace, time.Until(c.soft))
	var res DirShapeRoot
	err = env.Pool().DoTimeout(ctx, hard, opDirShapeScan, req, &res)
	switch {
	case errors.As(err, &he):
		c.hung(u, he)
		return
	case err != nil:
		r.Status = DirShapeFailed
		r.Error = err.Error()
		return
	}
	res.Kind, res.Mountpoint, res.FSType = u.kind, r.Mountpoint, r.FSType
	*r = res
}

// hung records a root whose probe or scan did not answer, and tells the
// run, so later collectors stay out of it.
func (c *dsCollector) hung(u *dsUnit, he *isolate.HungError) {
	r := &u.res
	r.Status = DirShapeHung
	r.CountsAreLowerBounds = true
	r.Error = he.Error()
	r.StopReason = "its filesystem did not answer: nothing was counted"
	c.env.ReportHungMount(u.seen, he.Evidence)
	c.env.Partialf("%s did not answer within %s", u.display, he.Timeout)
}

func dsSummary(r *DirShapeReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dirshape: %d root(s) in %.2fs (each bounded by %d entries and %gs; top %d directories)\n",
		len(r.Roots), r.DurationMS/1000, r.Settings.MaxEntries, r.Settings.MaxSeconds, r.Settings.Top)
	fmt.Fprintf(&b, ".deleting~ leftovers: %d; ext4 nlink anomalies: %d; roots with lower-bound counts: %d\n",
		r.DeletingCount, r.NlinkAnomalies, r.LowerBounds)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	var absent []string
	for _, x := range r.Roots {
		if x.Status == DirShapeAbsent {
			absent = append(absent, x.Path)
		}
	}
	if len(absent) > 0 {
		fmt.Fprintf(&b, "absent: %s\n", strings.Join(absent, ", "))
	}
	for _, x := range r.Roots {
		if x.Status == DirShapeAbsent {
			continue
		}
		fmt.Fprintf(&b, "\n%s  [%s", x.Path, x.Kind)
		if x.FSType != "" {
			fmt.Fprintf(&b, ", %s on %s", x.FSType, x.Mountpoint)
		}
		fmt.Fprintf(&b, "]  %s\n", x.Status)
		if x.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", x.Error)
		}
		switch x.Status {
		case DirShapeNotDir, DirShapeFailed, DirShapeSkippedHung, DirShapeHung, DirShapeSkippedTimeout:
			if x.StopReason != "" {
				fmt.Fprintf(&b, "  %s\n", x.StopReason)
			}
			continue
		}
		if x.CountsAreLowerBounds {
			fmt.Fprintf(&b, "  COUNTS ARE LOWER BOUNDS: %s\n", x.StopReason)
		}
		fmt.Fprintf(&b, "  entries %d (dirs %d, files %d, symlinks %d, other %d), empty dirs %d, max depth %d\n",
			x.Entries, x.Dirs, x.Files, x.Symlinks, x.Other, x.EmptyDirs, x.MaxDepth)
		fmt.Fprintf(&b, "  %.0f entries/s over %.1fms; %d mount(s) below not entered; %d unreadable\n",
			x.EntriesPerSecond, x.DurationMS, x.MountsNotEntered, x.Unreadable)
		for _, d := range x.NlinkAnomalies {
			fmt.Fprintf(&b, "  NLINK ANOMALY: %s has %d subdirectories but st_nlink %d (ext4 dir_nlink overflow)\n", d.Path, d.Subdirs, d.Nlink)
		}
		if len(x.Largest) > 0 {
			fmt.Fprintf(&b, "  largest directories (entries, subdirs, inode size, nlink):\n")
			for _, d := range x.Largest {
				more := ""
				if d.Partial {
					more = "  (not read to the end: at least)"
				}
				fmt.Fprintf(&b, "    %10d %10d %12d %6d  %s%s\n", d.Entries, d.Subdirs, d.InodeSize, d.Nlink, d.Path, more)
			}
		}
		for _, g := range x.Deleting {
			fmt.Fprintf(&b, "  .deleting~ in %s: %d (empty %d, not empty %d, unknown %d)\n", g.Parent, g.Count, g.Empty, g.NotEmpty, g.Unknown)
			for _, o := range g.Originals {
				state := "exists: unknown"
				if o.Exists != nil {
					state = fmt.Sprintf("exists: %v", *o.Exists)
				}
				mounted := "not mounted"
				if o.Mounted {
					mounted = "STILL MOUNTED at " + strings.Join(o.Mounts, ", ")
				}
				fmt.Fprintf(&b, "    original %s: %d leftover(s), %s, %s\n", o.Name, o.Count, state, mounted)
			}
		}
	}
	return b.String()
}
