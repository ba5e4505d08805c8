package openfiles

// One process at a time: its namespaces, descriptors and mapped files, placed on mounts.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// ofPidNS is the mount namespace of each task of one process.
type ofPidNS struct {
	leader uint64 // the main thread's (or first live task's)
	tasks  []ofTaskNS
}

// taskNamespaces reads the ns/mnt link of every task of pid.
func (s *ofScanner) taskNamespaces(pid int) ofPidNS {
	tids, nss, err := hostfs.TaskNamespaces(s.proc, pid)
	if err != nil {
		return ofPidNS{}
	}
	r := ofPidNS{tasks: make([]ofTaskNS, 0, len(tids))}
	for i, tid := range tids {
		ns := nss[i]
		if ns == 0 {
			continue
		}
		if tid == pid {
			r.leader = ns
		}
		r.tasks = append(r.tasks, ofTaskNS{tid, ns})
	}
	if r.leader == 0 && len(r.tasks) > 0 {
		r.leader = r.tasks[0].ns
	}
	return r
}

// scanProcess reads one process. It runs on several goroutines at once:
// the scanner's maps are read-only by now, except the device cache.
func (s *ofScanner) scanProcess(ctx context.Context, pid int) result {
	dir := s.proc + "/" + strconv.Itoa(pid)
	// Every read below is relative to the process's directory, opened
	// once: one path component each instead of /proc/<pid>/...
	pd, err := hostfs.OpenDir(dir)
	if err != nil {
		return result{gone: true}
	}
	defer pd.Close()
	var statBuf [2048]byte
	statData, err := pd.ReadSmall("stat", statBuf[:])
	if err != nil {
		return result{gone: true}
	}
	st, err := procfs.ParseStat(statData)
	if err != nil {
		return result{gone: true}
	}
	if st.IsKernelThread() {
		return result{kthread: &layout.KernelThreadRef{PID: pid, Comm: st.Comm}}
	}
	ns, ok := s.pidNS[pid]
	if !ok {
		// Started after the namespace pass.
		link, err := pd.Readlink("ns/mnt")
		if err != nil {
			return result{gone: true}
		}
		if ns, err = procfs.ParseMountNS(link); err != nil {
			return result{gone: true}
		}
	}
	p := &layout.OpenFilesProcess{PID: pid, PPID: st.PPID, Comm: st.Comm, Namespace: ns}
	r := result{proc: p}
	space := s.spaces[ns]
	addErr := func(what string, err error) {
		if !shared.Gone(err) {
			p.Errors = append(p.Errors, fmt.Sprintf("%s: %v", what, err))
		}
	}

	for _, what := range []string{"exe", "cwd", "root"} {
		link, err := pd.Readlink(what)
		if err != nil {
			addErr(what, err)
			continue
		}
		f := s.placeByPath(space, link)
		switch what {
		case "exe":
			p.Exe = f
		case "cwd":
			p.Cwd = f
		default:
			p.Root = f
		}
		r.uses = append(r.uses, s.useOf(0, ns, what, f))
	}

	s.scanFDs(pd, ns, p, &r)

	for _, t := range s.threads[pid] {
		td := "task/" + strconv.Itoa(t.tid)
		var cb [128]byte
		comm, _ := pd.ReadSmall(td+"/comm", cb[:])
		th := layout.OpenFilesThread{TID: t.tid, Comm: strings.TrimSuffix(string(comm), "\n"), Namespace: t.ns}
		tspace := s.spaces[t.ns]
		if link, err := pd.Readlink(td + "/cwd"); err == nil {
			th.Cwd = s.placeByPath(tspace, link)
			r.uses = append(r.uses, s.useOf(t.tid, t.ns, "cwd", th.Cwd))
		}
		if link, err := pd.Readlink(td + "/root"); err == nil {
			th.Root = s.placeByPath(tspace, link)
			r.uses = append(r.uses, s.useOf(t.tid, t.ns, "root", th.Root))
		}
		p.Threads = append(p.Threads, th)
	}

	if s.opts.Maps && ctx.Err() == nil {
		if res, ok := s.prefetch.get(ctx, pid); ok {
			if !res.Gone {
				s.applyMaps(res.mapsResult, space, p, &r)
			}
		} else {
			s.scanMaps(ctx, dir, space, p, &r)
		}
	}
	return r
}

func (s *ofScanner) scanFDs(pd *hostfs.Dir, ns uint64, p *layout.OpenFilesProcess, r *result) {
	fdDir, err := pd.Sub("fd")
	if err != nil {
		if !shared.Gone(err) {
			p.Errors = append(p.Errors, fmt.Sprintf("fd: %v", err))
		}
		return
	}
	defer fdDir.Close()
	names, err := fdDir.Names()
	if err != nil && len(names) == 0 {
		if !shared.Gone(err) {
			p.Errors = append(p.Errors, fmt.Sprintf("fd: %v", err))
		}
		return
	}
	fds := make([]int, 0, len(names))
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil && v >= 0 {
			fds = append(fds, v)
		}
	}
	slices.Sort(fds)
	var infoBuf [4096]byte
	// A descriptor whose fdinfo cannot be read is listed without it.
	infoDir, infoErr := pd.Sub("fdinfo")
	if infoErr == nil {
		defer infoDir.Close()
	}
	readInfo := func(num string) ([]byte, error) {
		if infoErr != nil {
			return nil, infoErr
		}
		return infoDir.ReadSmall(num, infoBuf[:])
	}
	for _, fd := range fds {
		num := strconv.Itoa(fd)
		link, err := fdDir.Readlink(num)
		if err != nil {
			continue // closed meanwhile
		}
		p.FDCount++
		l := procfs.ParseLink(link)
		switch l.Kind {
		case procfs.LinkSocket:
			p.Sockets++
			continue
		case procfs.LinkPipe:
			p.Pipes++
			continue
		case procfs.LinkAnonInode:
			if p.AnonInodes == nil {
				p.AnonInodes = map[string]int{}
			}
			p.AnonInodes[l.Name]++
			continue
		case procfs.LinkPath, procfs.LinkDevice, procfs.LinkMemfd:
		default:
			p.OtherFDs++
			continue
		}
		o := layout.OpenFD{FD: fd, OpenFile: layout.OpenFile{Path: l.Path, Kind: l.Kind, Deleted: l.Deleted}}
		if l.Kind == procfs.LinkMemfd {
			o.Path = "/memfd:" + l.Name
		}
		// fdinfo is formatted by procfs from the struct file; it does not
		// call into the file's filesystem.
		if b, err := readInfo(num); err == nil {
			if fi, err := procfs.ParseFDInfo(b); err == nil {
				o.Pos, o.Flags, o.Inode = fi.Pos, fi.FlagsString(), fi.Ino
				if fi.MntID >= 0 {
					o.MountID = fi.MntID
				}
				if ref, ok := s.byID[fi.MntID]; ok && fi.MntID >= 0 {
					m := ref.mount()
					o.MountPoint, o.Dev = m.MountPoint, m.Dev()
					r.uses = append(r.uses, ofUse{ns: ns, what: "fd " + num, path: o.Path, dev: o.Dev,
						major: m.Major, minor: m.Minor, mount: &ref})
				} else if fi.MntID > 0 && l.Kind == procfs.LinkPath {
					// A mount in no namespace's table: most often a
					// filesystem unmounted lazily (umount -l) while in
					// use, which keeps its device busy.
					r.uses = append(r.uses, ofUse{ns: ns, what: "fd " + num, path: o.Path, unknownMount: fi.MntID})
				}
			}
		}
		if l.Kind == procfs.LinkDevice {
			if maj, mnr, ok := s.blockDevByPath(l.Path); ok {
				o.DeviceNode = strconv.FormatUint(uint64(maj), 10) + ":" + strconv.FormatUint(uint64(mnr), 10)
				r.uses = append(r.uses, ofUse{ns: ns, what: "fd " + num + " (device node)", path: o.Path,
					dev: o.DeviceNode, major: maj, minor: mnr, devNode: true})
			}
		}
		if len(p.FDs) < s.opts.MaxFDs {
			p.FDs = append(p.FDs, o)
		} else {
			p.FDsOmitted++
		}
	}
}

// blockDevByPath resolves /dev/<name> to a block device through sysfs,
// never through the device node.
func (s *ofScanner) blockDevByPath(p string) (uint32, uint32, bool) {
	name, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		return 0, 0, false
	}
	s.devsMu.Lock()
	defer s.devsMu.Unlock()
	return s.devs.LookupName(name)
}

func (s *ofScanner) scanMaps(ctx context.Context, dir string, space *ofNamespace, p *layout.OpenFilesProcess, r *result) {
	s.mu.Lock()
	dead := s.mapsDead
	s.mu.Unlock()
	if dead {
		return
	}
	if s.maps.acquire(ctx) != nil {
		return
	}
	var res mapsResult
	target := dir + "/maps"
	err := s.env.Do(ctx, opOpenFilesMaps, target, mapsRequest{Path: target, Max: s.mapsMax}, &res)
	s.maps.release()
	var he *isolate.HungError
	var oe *isolate.OpError
	switch {
	case errors.As(err, &he):
		p.MapsError = err.Error()
		// A stuck mmap lock is rarely alone: let one more read run at
		// once, so that several cost a deadline together, not in turn.
		s.maps.grow()
		if ctx.Err() == nil {
			s.env.Partialf("maps of pid %d (%s) did not answer within its deadline: its mmap lock is held (evidence in hung_items)", p.PID, p.Comm)
		}
		return
	case errors.As(err, &oe):
		if !shared.Gone(oe) {
			p.MapsError = err.Error()
		}
		return
	case err != nil:
		// The pool itself failed (cannot start workers): say so once.
		p.MapsError = err.Error()
		s.mu.Lock()
		if !s.mapsDead {
			s.mapsDead = true
			s.env.Partialf("mapped files not read: %v", err)
		}
		s.mu.Unlock()
		return
	}
	s.applyMaps(res, space, p, r)
}

// applyMaps adds a process's mapped files to its record and its uses.
func (s *ofScanner) applyMaps(res mapsResult, space *ofNamespace, p *layout.OpenFilesProcess, r *result) {
	if res.Truncated {
		p.MapsError = "maps truncated"
	}
	for _, m := range res.Files {
		f := s.placeByPath(space, m.Path)
		f.Deleted = m.Deleted
		f.Inode = m.Inode
		f.Dev = procfs.DevString(m.Major, m.Minor)
		p.Maps = append(p.Maps, *f)
		u := s.useOf(0, p.Namespace, "mem", f)
		u.major, u.minor, u.dev = m.Major, m.Minor, f.Dev
		r.uses = append(r.uses, u)
	}
}

// placeByPath parses a readlink target and places it on a mount of the
// namespace by its path.
func (s *ofScanner) placeByPath(space *ofNamespace, link string) *layout.OpenFile {
	l := procfs.ParseLink(link)
	f := &layout.OpenFile{Path: l.Path, Kind: l.Kind, Deleted: l.Deleted}
	switch {
	case l.Kind == procfs.LinkMemfd:
		f.Path = "/memfd:" + l.Name
	case f.Path == "":
		f.Path = link
	}
	if l.Kind != procfs.LinkPath && l.Kind != procfs.LinkDevice {
		return f
	}
	if i := space.mountFor(l.Path); i >= 0 {
		m := &space.mounts[i]
		f.MountID, f.MountPoint, f.Dev = m.ID, m.MountPoint, m.Dev()
	}
	return f
}

func (s *ofScanner) useOf(tid int, ns uint64, what string, f *layout.OpenFile) ofUse {
	u := ofUse{tid: tid, ns: ns, what: what, path: f.Path, dev: f.Dev}
	if f.MountID != 0 {
		if ref, ok := s.byID[f.MountID]; ok {
			u.mount = &ref
			u.major, u.minor = ref.mount().Major, ref.mount().Minor
		}
	}
	return u
}
