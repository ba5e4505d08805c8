package dirshape

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/internal/inroot"
)

// The scan of one directory tree, in a worker: getdents only, bounded in entries and time, never entering another mount.

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
	// MaxDirTime bounds the reading of one huge directory (one that
	// fills a getdents buffer): past it the directory is left with its
	// count a lower bound and its inode's estimate, and the scan goes
	// on. Zero: no bound but MaxTime.
	MaxDirTime time.Duration `json:"max_dir_time,omitempty"`
	// LargeBuffer is the getdents buffer of a directory found big; zero:
	// 1 MiB (benchmarks compare sizes).
	LargeBuffer int `json:"large_buffer,omitempty"`
	Top         int `json:"top"`
	MaxDepth    int `json:"max_depth"`
	// KeepDeleting bounds the leftovers listed one by one (counts are
	// always complete); KeepGroups the directories holding them.
	KeepDeleting int `json:"keep_deleting"`
	KeepGroups   int `json:"keep_groups"`
	// NoOpenat2 forces the mount-table fallback (for tests).
	NoOpenat2 bool `json:"no_openat2,omitempty"`
}

// nlinkLimit is the most subdirectories an ext4 directory counts in
// st_nlink (EXT4_LINK_MAX 65000, less "." and its parent's link); past it
// the dir_nlink feature pins st_nlink at 1.
const nlinkLimit = 64998

const (
	bufSize      = 32 << 10
	sampleMax    = 20
	anomalyMax   = 100
	typeMountDir = 0xff // pseudo d_type: a directory that is a mountpoint
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
	// big is set once a directory fills a getdents buffer: its inode is
	// read then (st), it gets a large buffer, and MaxDirTime applies.
	big       bool
	bigSince  time.Time
	st        unix.Stat_t
	stOK      bool
	cut       bool
	nameBytes uint64
	// delOf/delIdx: this directory is a leftover of that group.
	delOf  *layout.DeletingGroup
	delIdx int
	// group holds the leftovers found in this directory.
	group *layout.DeletingGroup
}

type dsTrie struct {
	kids  map[string]*dsTrie
	mount bool
}

type scanner struct {
	req      DirShapeScanRequest
	out      *layout.DirShapeRoot
	path     []byte
	stack    []dsLevel
	bufs     [][]byte
	bigBufs  [][]byte
	fsMagic  int64
	cuts     int
	firstCut string // why the counts are lower bounds: the largest directory left
	cutSize  uint64
	top      []layout.DirShapeDir // min-heap on Entries
	deadline time.Time
	stopped  string
	openat2  bool
	noatime  bool
	rootDev  uint64
	groups   []*layout.DeletingGroup
	// bigOpen is the number of big directories on the stack; counted
	// the subdirectories listed in one but not entered (mayEnter).
	bigOpen int
	counted uint64
}

// ScanDirShape counts the entries below one root, depth first, holding one
// getdents buffer and one open directory per level: memory depends on the
// depth, never on the number of entries. It reads d_type and stats only
// the directories it reports; it never follows a symlink below the root
// and never enters another mount (openat2 RESOLVE_NO_XDEV, or the mount
// table on kernels without it). It is for use inside isolated workers
// (and tests): on a hung filesystem it blocks.
func ScanDirShape(req DirShapeScanRequest) layout.DirShapeRoot {
	if req.Display == "" {
		req.Display = req.Path
	}
	if req.Top <= 0 {
		req.Top = defaults.Top
	}
	if req.MaxDepth <= 0 {
		req.MaxDepth = defaults.MaxDepth
	}
	if req.KeepDeleting <= 0 {
		req.KeepDeleting = 2000
	}
	if req.KeepGroups <= 0 {
		req.KeepGroups = 500
	}
	out := layout.DirShapeRoot{Path: req.Display, Largest: []layout.DirShapeDir{}, NlinkAnomalies: []layout.DirShapeDir{}, Deleting: []layout.DeletingGroup{}}
	start := time.Now()
	s := &scanner{req: req, out: &out, noatime: true}
	if req.MaxTime > 0 {
		s.deadline = start.Add(req.MaxTime)
	}
	s.path = append(make([]byte, 0, 4096), strings.TrimSuffix(req.Display, "/")...)

	// The root itself may be a symlink (a relocated /var/lib/docker, say)
	// and is followed; nothing below it is.
	fd, err := inroot.Process().Open(req.Path, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			out.Status = layout.DirShapeAbsent
		case errors.Is(err, unix.ENOTDIR):
			out.Status = layout.DirShapeNotDir
		default:
			out.Status = layout.DirShapeFailed
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
		s.fsMagic = int64(sf.Type)
		out.FSMagic = fmt.Sprintf("0x%x", uint64(sf.Type))
		if n := shared.FSMagic[sf.Type]; n != "" {
			out.FSMagic += " (" + n + ")"
		}
	}
	s.openat2 = !req.NoOpenat2 && haveOpenat2(fd)
	out.Method = "openat2"
	var trie *dsTrie
	if !s.openat2 {
		out.Method = "mount-table"
		trie = buildTrie(req.Path, req.Exclude)
	}
	s.stack = make([]dsLevel, 0, req.MaxDepth+2)
	s.push(fd, len(s.path), trie, nil, -1)
	s.run()
	s.finalize(time.Since(start))
	return out
}

// haveOpenat2 tells whether openat2 works here (Linux >= 5.6, and not
// refused by a seccomp filter).
func haveOpenat2(dirfd int) bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_XDEV}
	fd, err := unix.Openat2(dirfd, ".", &how)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

func buildTrie(root string, exclude []string) *dsTrie {
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

func (s *scanner) buf(depth int) []byte {
	for len(s.bufs) <= depth {
		s.bufs = append(s.bufs, nil)
	}
	if s.bufs[depth] == nil {
		s.bufs[depth] = make([]byte, bufSize)
	}
	return s.bufs[depth]
}

func (s *scanner) push(fd, pathLen int, trie *dsTrie, delOf *layout.DeletingGroup, delIdx int) {
	s.stack = append(s.stack, dsLevel{fd: fd, buf: s.buf(len(s.stack)), pathLen: pathLen, trie: trie, delOf: delOf, delIdx: delIdx})
}

func (s *scanner) curPath() string {
	if len(s.path) == 0 {
		return "/"
	}
	return string(s.path)
}

func (s *scanner) childPath(name []byte) string {
	if len(s.path) == 0 {
		return "/" + string(name)
	}
	return string(s.path) + "/" + string(name)
}

func (s *scanner) run() {
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
			if s.leaveBig(lv) {
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
			if !lv.big && n > len(lv.buf)-1024 {
				s.bigDir(lv)
			}
		}
		typ, nameZ, ok := nextDirent(lv)
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

// nextDirent takes the next linux_dirent64 record from the level's
// buffer: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name
// (NUL-terminated). It returns the name with its NUL. A record that does
// not fit the buffer ends the buffer; the kernel never writes one.
func nextDirent(lv *dsLevel) (typ uint8, nameZ []byte, ok bool) {
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

func (s *scanner) entry(lv *dsLevel, typ uint8, name, nameZ []byte) {
	out := s.out
	out.Entries++
	lv.entries++
	lv.nameBytes += uint64(len(name))
	if depth := len(s.stack); depth > out.MaxDepth {
		out.MaxDepth = depth
	}
	if typ == unix.DT_UNKNOWN {
		typ = s.resolveType(lv, nameZ)
	}
	isDir := typ == unix.DT_DIR || typ == typeMountDir
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
	var delOf *layout.DeletingGroup
	delIdx := -1
	if bytes.IndexByte(name, '~') >= 0 {
		if orig, suffix, ok := layout.ParseDeletingName(string(name)); ok {
			out.DeletingCount++
			delOf = s.groupFor(lv)
			if delOf != nil {
				delIdx = delOf.Add(layout.DeletingEntry{Name: string(name), Original: orig, Suffix: suffix, Type: typeName(typ), Mountpoint: typ == typeMountDir}, s.req.KeepDeleting)
			}
		}
	}
	if s.req.MaxEntries > 0 && out.Entries >= s.req.MaxEntries {
		s.stopped = fmt.Sprintf("entry budget of %d reached", s.req.MaxEntries)
	} else if out.Entries&1023 == 0 && !s.deadline.IsZero() && time.Now().After(s.deadline) {
		s.stopped = fmt.Sprintf("time budget of %s reached", s.req.MaxTime)
	}
	if isDir && s.stopped == "" && typ != typeMountDir {
		if !s.mayEnter() {
			s.counted++
		} else if s.descend(lv, name, nameZ, delOf, delIdx) {
			return
		}
	}
	if typ == typeMountDir {
		s.mountNotEntered(name)
	}
	if delOf != nil {
		delOf.Resolve(delIdx, 0, false, false)
	}
}

func typeName(typ uint8) string {
	switch typ {
	case unix.DT_DIR, typeMountDir:
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
func (s *scanner) groupFor(lv *dsLevel) *layout.DeletingGroup {
	if lv.group != nil {
		return lv.group
	}
	if len(s.groups) >= s.req.KeepGroups {
		s.out.DeletingGroupsOmitted++
		return nil
	}
	lv.group = &layout.DeletingGroup{Parent: s.curPath()}
	s.groups = append(s.groups, lv.group)
	return lv.group
}

func (s *scanner) mountNotEntered(name []byte) {
	s.out.MountsNotEntered++
	if len(s.out.MountsNotEnteredSample) < sampleMax {
		s.out.MountsNotEnteredSample = append(s.out.MountsNotEnteredSample, s.childPath(name))
	}
}

func (s *scanner) unreadable(p string, err error) {
	s.out.Unreadable++
	if len(s.out.UnreadableSample) < sampleMax {
		s.out.UnreadableSample = append(s.out.UnreadableSample, layout.DirShapeError{Path: p, Error: err.Error()})
	}
}

// descend opens a subdirectory and pushes it; false when it was not
// entered (a mount, too deep, unreadable).
func (s *scanner) descend(lv *dsLevel, name, nameZ []byte, delOf *layout.DeletingGroup, delIdx int) bool {
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

const openFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openDir opens one directory entry below dirfd without following a
// symlink and, with openat2, without crossing into another mount (EXDEV).
// nameZ is NUL-terminated, so no copy is made.
func (s *scanner) openDir(dirfd int, nameZ []byte) (int, error) {
	for {
		flags := openFlags
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
func (s *scanner) resolveType(lv *dsLevel, nameZ []byte) uint8 {
	if lv.trie != nil {
		if k := lv.trie.kids[string(nameZ[:len(nameZ)-1])]; k != nil && k.mount {
			return typeMountDir
		}
	}
	var st unix.Stat_t
	if s.openat2 {
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS}
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT2, uintptr(lv.fd), uintptr(unsafe.Pointer(&nameZ[0])), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		if e == unix.EXDEV {
			return typeMountDir
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
			return typeMountDir
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
func (s *scanner) pop(partial bool) {
	lv := &s.stack[len(s.stack)-1]
	partial = partial || lv.failed || lv.cut
	if lv.group != nil && !partial {
		s.checkOriginals(lv)
	}
	if lv.big || s.wantTop(lv.entries) || lv.subdirs > nlinkLimit {
		s.record(lv, partial)
	}
	if lv.entries == 0 && !partial {
		s.out.EmptyDirs++
	}
	if lv.delOf != nil {
		lv.delOf.Resolve(lv.delIdx, lv.entries, true, !partial)
	}
	if lv.big {
		s.bigOpen--
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
func (s *scanner) checkOriginals(lv *dsLevel) {
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
			_, nameZ, ok := nextDirent(&tmp)
			if !ok {
				continue
			}
			if i, ok := g.OriginalIndex(string(nameZ[:len(nameZ)-1])); ok {
				found[i] = true
			}
		}
	}
	for i := range g.Originals {
		f := found[i]
		g.Originals[i].Exists = &f
	}
}

func (s *scanner) wantTop(entries uint64) bool {
	return len(s.top) < s.req.Top || entries > s.top[0].Size()
}

// pushTop keeps the req.Top largest directories in a min-heap.
func (s *scanner) pushTop(d layout.DirShapeDir) {
	h := s.top
	if len(h) < s.req.Top {
		h = append(h, d)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if h[p].Size() <= h[i].Size() {
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
		if l < len(h) && h[l].Size() < h[m].Size() {
			m = l
		}
		if r < len(h) && h[r].Size() < h[m].Size() {
			m = r
		}
		if m == i {
			break
		}
		h[m], h[i] = h[i], h[m]
		i = m
	}
}
