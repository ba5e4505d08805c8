package mountprobe

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// One probe: the worker's stat and statfs, and what a hung one was blocked in.

type mpRequest struct {
	Path string `json:"path"`
	// Dev (major:minor) and StartedMS make the line of the worker's note
	// that names this probe to a later run while it runs (see
	// earlier.go); no note without Dev.
	Dev       string `json:"dev,omitempty"`
	StartedMS int64  `json:"started_ms,omitempty"`
}

// response is what one probe found. Failures are data here, not
// errors, so that stat's errno and statfs's are both kept.
type response struct {
	Stat        *isolate.StatResult   `json:"stat,omitempty"`
	StatErr     string                `json:"stat_err,omitempty"`
	StatErrno   int                   `json:"stat_errno,omitempty"`
	StatNS      int64                 `json:"stat_ns"`
	Statfs      *isolate.StatfsResult `json:"statfs,omitempty"`
	StatfsErr   string                `json:"statfs_err,omitempty"`
	StatfsErrno int                   `json:"statfs_errno,omitempty"`
	StatfsNS    int64                 `json:"statfs_ns"`
}

// probeOp runs in a worker: lstat (the mountpoint is crossed, a
// symlink at the end is not followed) then statfs. statfs is tried even
// when stat failed, since their errors can differ.
func probeOp(rq mpRequest) (any, error) {
	var r response
	if rq.Dev != "" {
		// The worker runs this probe on a thread of its own, which the
		// note names: a later run counts the probe stuck only while
		// that thread is. Without a note it would only probe this
		// mount again.
		n := mpNote{Dev: rq.Dev, Started: time.UnixMilli(rq.StartedMS).UTC(), TID: unix.Gettid(), Path: rq.Path}
		if remove, err := isolate.AddWorkerNote(n.String(), n.Short()); err == nil {
			defer remove()
		}
	}
	t := time.Now()
	var st unix.Stat_t
	if err := unix.Lstat(rq.Path, &st); err != nil {
		r.StatErr, r.StatErrno = err.Error(), mpErrno(err)
	} else {
		s := isolate.StatFromUnix(&st)
		r.Stat = &s
	}
	r.StatNS = time.Since(t).Nanoseconds()
	t = time.Now()
	var sf unix.Statfs_t
	if err := unix.Statfs(rq.Path, &sf); err != nil {
		r.StatfsErr, r.StatfsErrno = err.Error(), mpErrno(err)
	} else {
		r.Statfs = &isolate.StatfsResult{Type: sf.Type, Bsize: sf.Bsize, Blocks: sf.Blocks, Bfree: sf.Bfree,
			Bavail: sf.Bavail, Files: sf.Files, Ffree: sf.Ffree, Flags: sf.Flags, Namelen: sf.Namelen}
	}
	r.StatfsNS = time.Since(t).Nanoseconds()
	return r, nil
}

func mpErrno(err error) int {
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return 0
}

// findFusectl lists mounts of fusectl, the FUSE control filesystem:
// /sys/fs/fuse/connections normally, then wherever the mount tables show
// one (it has a single superblock, so every mount shows every connection)
// as long as no network or FUSE mount lies on its path.
func findFusectl(env *collectors.Env, order []*mpNamespace) []string {
	std := env.SysPath("fs/fuse/connections")
	var out []string
	for _, ns := range order {
		for _, m := range ns.mounts {
			if m.FSType != "fusectl" {
				continue
			}
			p := ns.prefix + m.MountPoint
			if p == std {
				out = append([]string{std}, out...)
			} else if safePath(ns, m.MountPoint) && len(out) < 8 {
				out = append(out, p)
			}
		}
	}
	return out
}

// fuseWaiting reads a FUSE connection's count of requests waiting for its
// daemon (queued plus being served), from the first fusectl mount that
// answers. fusectl is a kernel pseudo filesystem: reading it cannot block
// on the daemon.
func (p *prober) fuseWaiting(conn uint32) *int {
	for _, dir := range p.fusectl {
		r, err := isolate.ReadFileLimited(path.Join(dir, strconv.FormatUint(uint64(conn), 10), "waiting"), 64)
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(r.Data)))
		if err != nil {
			continue
		}
		return &n
	}
	return nil
}

// reportHung tells the run that a mount hangs, by its host path: the
// mountpoint itself in the host's namespace, the path under --root in
// nodesnap's own, /proc/<pid>/root/... in any other; a mount of nodesnap's
// own outside --root by the path it was probed at.
func (p *prober) reportHung(it *mpItem) {
	if it.ns.host {
		p.env.Host().ReportHungMount(hostfs.Clean(it.rec.Mountpoint), it.hangEvidence)
		return
	}
	p.env.Host().ReportHungSeen(it.rec.ProbePath, it.hangEvidence)
}

// probe runs one probe and fills the record.
func (p *prober) probe(ctx context.Context, it *mpItem) {
	it.rec.Probed = true
	start := time.Now()
	it.rec.StartedMS = shared.Millis(start.Sub(p.started))
	var res response
	rq := mpRequest{Path: it.rec.ProbePath, Dev: it.rec.Dev, StartedMS: start.UnixMilli()}
	err := p.env.Do(ctx, opMountProbe, it.rec.ProbePath, rq, &res)
	elapsed := time.Since(start)
	it.rec.DoneMS = shared.Millis(time.Since(p.started))
	var he *isolate.HungError
	switch {
	case err != nil && ctx.Err() != nil && !errors.As(err, &he):
		it.rec.Result = layout.ProbeUnfinished
		it.rec.SkipReason = fmt.Sprintf("cut short after %s by the collector's deadline", elapsed.Round(time.Millisecond))
		return
	case errors.As(err, &he):
		if ctx.Err() != nil && elapsed < p.probeTimeout {
			it.rec.Result = layout.ProbeUnfinished
			it.rec.SkipReason = fmt.Sprintf("cut short after %s by the collector's deadline", elapsed.Round(time.Millisecond))
			return
		}
		it.rec.Result = layout.ProbeHung
		it.rec.LatencyMS = shared.Millis(he.Timeout)
		it.hangEvidence = he.Evidence
		it.rec.BlockedIn = blockedIn(he.Evidence)
		it.rec.Diagnosis = fmt.Sprintf("stat/statfs did not answer within %s", p.probeTimeout)
		if it.rec.FUSE != nil {
			it.rec.FUSE.WaitingAfter = p.fuseWaiting(it.rec.FUSE.Conn)
			if w := it.rec.FUSE.WaitingBefore; w != nil && *w > 0 {
				it.rec.Diagnosis += fmt.Sprintf("; its FUSE daemon is alive but not answering: %d request(s) were already waiting before the probe", *w)
			} else {
				it.rec.Diagnosis += "; its FUSE daemon is alive (the connection is open) but does not answer"
			}
		}
		return
	case err != nil:
		it.rec.Result = layout.ProbeError
		it.rec.Error = err.Error()
		var oe *isolate.OpError
		if errors.As(err, &oe) && oe.Errno != 0 {
			it.rec.Errno = unix.ErrnoName(oe.Errno)
		}
		return
	}
	it.rec.StatMS = float64(res.StatNS) / 1e6
	it.rec.StatfsMS = float64(res.StatfsNS) / 1e6
	it.rec.LatencyMS = it.rec.StatMS + it.rec.StatfsMS
	if res.Stat != nil {
		it.rec.StatDev = fmt.Sprintf("%d:%d", unix.Major(res.Stat.Dev), unix.Minor(res.Stat.Dev))
	}
	if s := res.Statfs; s != nil {
		it.rec.Statfs = mpStatfs(s)
	}
	errno, msg := res.StatErrno, res.StatErr
	if msg == "" {
		errno, msg = res.StatfsErrno, res.StatfsErr
	}
	if msg == "" {
		it.rec.Result = layout.ProbeOK
		if f := it.rec.FUSE; f != nil && f.WaitingBefore != nil && *f.WaitingBefore > 0 {
			it.rec.Diagnosis = fmt.Sprintf("its FUSE daemon answered, but %d request(s) were already waiting on it: slow, or stuck on some requests", *f.WaitingBefore)
		}
		return
	}
	it.rec.Result = layout.ProbeError
	it.rec.Error = msg
	if errno != 0 {
		it.rec.Errno = unix.ErrnoName(unix.Errno(errno))
	}
	it.rec.Diagnosis = diagnose(unix.Errno(errno), it)
	if it.rec.FUSE != nil {
		it.rec.FUSE.WaitingAfter = p.fuseWaiting(it.rec.FUSE.Conn)
	}
}

// blockedIn summarises where a hung probe's worker was blocked: the
// thread in uninterruptible sleep, or else the one not parked in a Go
// runtime wait (newer kernels name the futex wait futex_do_wait, which
// the evidence's own summary does not know yet).
func blockedIn(h *layout.HangEvidence) string {
	if h == nil {
		return ""
	}
	parked := func(w string) bool {
		return w == "" || w == "0" || strings.HasPrefix(w, "futex") || strings.Contains(w, "epoll") || strings.Contains(w, "ep_poll") ||
			strings.Contains(w, "nanosleep") || strings.HasPrefix(w, "pipe_") || strings.HasSuffix(w, "pipe_read")
	}
	if b := h.Blocked; b != nil && (b.State == "D" || !parked(b.Wchan)) {
		return h.String()
	}
	for _, t := range h.Tasks {
		if !parked(t.Wchan) {
			top := ""
			if len(t.Stack) > 0 {
				top = " in " + t.Stack[0]
			}
			return fmt.Sprintf("pid %d tid %d state %s wchan %s%s", h.PID, t.TID, t.State, t.Wchan, top)
		}
	}
	return h.String()
}

// diagnose says what a failed probe usually means.
func diagnose(e unix.Errno, it *mpItem) string {
	fuse := procfs.IsFUSE(it.rec.FSType)
	switch e {
	case unix.ENOTCONN:
		if fuse {
			return "FUSE daemon gone: its connection was aborted or its server exited (Transport endpoint is not connected); the mount stays until unmounted"
		}
		return "Transport endpoint is not connected: the filesystem lost its server"
	case unix.ESTALE:
		return "Stale file handle: the export, volume or directory behind this mount was removed or replaced on the server"
	case unix.EIO:
		return "Input/output error: the device or server failed the request"
	case unix.EACCES, unix.EPERM:
		if fuse {
			return "permission denied: a FUSE mount without allow_other answers only its owner (not by itself a fault of the filesystem)"
		}
		return "permission denied to nodesnap"
	case unix.ENOENT:
		if it.ns.prefix != "" {
			return "not found: the mount or the process it was reached through (pid " + strconv.Itoa(it.ns.rep) + ") went away during the run"
		}
		return "not found: unmounted during the run"
	case unix.ENODEV, unix.ENXIO:
		return "device gone: the block device or FUSE connection behind this mount no longer exists"
	case unix.EHOSTDOWN, unix.EHOSTUNREACH, unix.ETIMEDOUT, unix.ECONNREFUSED, unix.ECONNRESET:
		return "the filesystem's server cannot be reached"
	case unix.ECONNABORTED:
		return "the FUSE connection was aborted while the probe waited"
	}
	return ""
}

func mpStatfs(s *isolate.StatfsResult) *layout.MountProbeStatfs {
	f := &layout.MountProbeStatfs{BlockSize: s.Bsize, Inodes: s.Files, InodesFree: s.Ffree,
		ReadOnly: s.Flags&unix.ST_RDONLY != 0}
	f.TypeMagic = typeMagic(s.Type)
	if s.Bsize > 0 {
		bs := uint64(s.Bsize)
		f.TotalBytes, f.FreeBytes, f.AvailBytes = s.Blocks*bs, s.Bfree*bs, s.Bavail*bs
	}
	if s.Blocks > 0 {
		f.UsedPct = round1(100 * float64(s.Blocks-s.Bfree) / float64(s.Blocks))
	}
	if s.Files > 0 && s.Files >= s.Ffree {
		f.InodesUsedPct = round1(100 * float64(s.Files-s.Ffree) / float64(s.Files))
	}
	return f
}

// magics holds each filesystem magic's text once: thousands of mounts of
// a few types would otherwise each hold their own copy.
var magics sync.Map // int64 -> string

func typeMagic(t int64) string {
	if v, ok := magics.Load(t); ok {
		return v.(string)
	}
	m := fmt.Sprintf("0x%x", uint64(t))
	if n := shared.FSMagic[t]; n != "" {
		m += " (" + n + ")"
	}
	magics.Store(t, m)
	return m
}
