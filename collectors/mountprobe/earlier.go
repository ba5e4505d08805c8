package mountprobe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// Probes of earlier runs still stuck: a FUSE or network mount whose server
// has read a request and never answers keeps the probing thread in D state,
// where not even SIGKILL ends it. Each run used to leave one more such
// probe per hung mount. A probing worker's note (see
// isolate.AddWorkerNote) has a line for each probe it runs, naming the
// filesystem and the thread; a later run finds the threads still stuck
// with such a line and does not probe those filesystems again.

// opMountEarlier is the worker operation that lists earlier probes still
// stuck. It reads other processes' /proc files, so it runs in a worker.
const opMountEarlier = "mountprobe.earlier"

// notePrefix starts the note of a probing worker.
const notePrefix = "mountprobe "

// mpNote is what a line of a probing worker's note says.
type mpNote struct {
	Dev     string    // the filesystem's major:minor
	Started time.Time // when the probe started
	TID     int       // the worker's thread running the probe; 0: not said
	Path    string    // the path probed
}

// String is the line as written in the worker's environment.
func (n mpNote) String() string {
	return n.Short() + " path=" + strconv.QuoteToASCII(n.Path)
}

// Short is the line without the path, written when the worker's note has
// no room for the path.
func (n mpNote) Short() string {
	s := fmt.Sprintf("%sdev=%s started=%d", notePrefix, n.Dev, n.Started.UnixMilli())
	if n.TID > 0 {
		s += " tid=" + strconv.Itoa(n.TID)
	}
	return s
}

// parseNote reads a line written by String or Short; the path may be
// missing (see Short), and the thread (lines of versions that ran one
// probe per worker).
func parseNote(s string) (mpNote, bool) {
	rest, ok := strings.CutPrefix(s, notePrefix)
	if !ok {
		return mpNote{}, false
	}
	var n mpNote
	for rest != "" {
		key, val, ok := strings.Cut(rest, "=")
		if !ok || strings.ContainsRune(key, ' ') {
			return mpNote{}, false
		}
		if key == "path" {
			p, err := strconv.Unquote(val)
			if err != nil {
				return mpNote{}, false
			}
			n.Path = p
			break
		}
		val, rest, _ = strings.Cut(val, " ")
		switch key {
		case "dev":
			maj, min, ok := strings.Cut(val, ":")
			if !ok || !digits(maj) || !digits(min) {
				return mpNote{}, false
			}
			n.Dev = val
		case "started":
			ms, err := strconv.ParseInt(val, 10, 64)
			if err != nil || ms <= 0 {
				return mpNote{}, false
			}
			n.Started = time.UnixMilli(ms).UTC()
		case "tid":
			tid, err := strconv.Atoi(val)
			if !digits(val) || err != nil || tid <= 0 {
				return mpNote{}, false
			}
			n.TID = tid
		}
	}
	if n.Dev == "" || n.Started.IsZero() {
		return mpNote{}, false
	}
	return n, true
}

func digits(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

type earlierRequest struct {
	Proc string `json:"proc"`
	// OlderThan: a probe started less long ago may be another run's,
	// still within its deadline.
	OlderThanMS int64 `json:"older_than_ms"`
}

// mpEarlier is one earlier probe still stuck.
type mpEarlier struct {
	PID     int       `json:"pid"`
	TID     int       `json:"tid,omitempty"`
	Dev     string    `json:"dev"`
	Started time.Time `json:"started"`
	Path    string    `json:"path,omitempty"`
}

// earlierOp lists the probes of workers of this binary (same executable
// name, run by our user) whose thread is in D state and whose note line is older than the
// request says. Only those workers are read beyond /proc/<pid>/stat and
// their threads' stat: exe, cmdline and environ are read from stuck
// workers of ours alone, which hold no lock of their memory, and through
// a stuck thread's own directory: a killed worker's main thread has
// exited unless it is the one stuck, and a thread that exited shows no
// memory.
func earlierOp(rq earlierRequest) (any, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program: %w", err)
	}
	name := filepath.Base(self)
	pids, err := hostfs.ListPIDs(rq.Proc)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", rq.Proc, err)
	}
	cutoff := time.Now().Add(-time.Duration(rq.OlderThanMS) * time.Millisecond)
	me := os.Getpid()
	out := []mpEarlier{}
	// The note comes first in a worker's environment.
	buf := make([]byte, isolate.NoteSize+256)
	for _, pid := range pids {
		if pid == me {
			continue
		}
		dir := filepath.Join(rq.Proc, strconv.Itoa(pid))
		// Most processes are told apart by their program alone.
		if exe, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != name {
			continue
		}
		// Its name, arguments and environment are whatever the process
		// chose: another user's process can copy all three (and put a
		// thread in D state on a FUSE mount of its own) to make this run
		// leave any mount unprobed. Only a process of the user we run as
		// is ours; status says so without the task's memory (and still
		// does when the main thread has exited).
		if !sameUser(dir) {
			continue
		}
		stuck := threadsD(dir)
		if len(stuck) == 0 {
			continue
		}
		tdir := filepath.Join(dir, "task", strconv.Itoa(stuck[0]))
		exe, err := os.Readlink(filepath.Join(tdir, "exe"))
		if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != name {
			continue
		}
		cmd, err := hostfs.ReadSmall(filepath.Join(tdir, "cmdline"), buf[:4096])
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if len(args) < 2 || args[1] != isolate.ModeWorker {
			continue
		}
		environ, err := hostfs.ReadSmall(filepath.Join(tdir, "environ"), buf)
		if err != nil {
			continue
		}
		out = append(out, stuckInNote(pid, environ, stuck, cutoff)...)
	}
	return out, nil
}

// stuckInNote lists the probes named in a worker's note (from its
// environ) that started before cutoff and whose thread is one of stuck;
// a line that names no thread counts when any thread is stuck.
func stuckInNote(pid int, environ []byte, stuck []int, cutoff time.Time) []mpEarlier {
	note, ok := isolate.WorkerNote(environ)
	if !ok {
		return nil
	}
	var out []mpEarlier
	lines := strings.Split(note, "\n")
	// A worker runs at most WorkerItems items, one line each: a note with
	// more is not one a worker wrote.
	if len(lines) > isolate.WorkerItems() {
		return nil
	}
	for _, line := range lines {
		n, ok := parseNote(line)
		if !ok || n.Started.After(cutoff) || n.TID != 0 && !slices.Contains(stuck, n.TID) {
			// A probe that answered after its worker was killed, or
			// whose request its server never read, has ended.
			continue
		}
		out = append(out, mpEarlier{PID: pid, TID: n.TID, Dev: n.Dev, Started: n.Started, Path: n.Path})
	}
	return out
}

// sameUser reports whether the task at dir runs as the user we run as:
// real and effective uid both, from its status file. The owner of /proc/<pid>
// would not do: a process that makes itself not dumpable shows as root's.
func sameUser(dir string) bool {
	var b [4096]byte
	st, err := hostfs.ReadSmall(filepath.Join(dir, "status"), b[:])
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(st), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		me := strconv.Itoa(os.Geteuid())
		return len(f) >= 2 && f[0] == me && f[1] == me
	}
	return false
}

// threadsD lists the threads of the process at dir in uninterruptible
// sleep: a Go worker blocks in a syscall on any thread.
func threadsD(dir string) []int {
	tids, err := hostfs.ListPIDs(filepath.Join(dir, "task"))
	if err != nil {
		return nil
	}
	var b [512]byte
	var out []int
	for _, tid := range tids {
		st, err := hostfs.ReadSmall(filepath.Join(dir, "task", strconv.Itoa(tid), "stat"), b[:])
		if err != nil {
			continue
		}
		if ps, err := procfs.ParseStat(st); err == nil && ps.State == "D" {
			out = append(out, tid)
		}
	}
	return out
}

// findEarlier asks a worker for the earlier runs' probes still stuck and
// marks the mounts of their filesystems hung, unprobed. It returns how
// many such probes there are (a worker may hold several), the number
// counted against MaxStuck.
func (p *prober) findEarlier(ctx context.Context, items []*mpItem) int {
	var found []mpEarlier
	err := p.env.Do(ctx, opMountEarlier, p.env.ProcPath(), earlierRequest{Proc: p.env.ProcPath(), OlderThanMS: p.probeTimeout.Milliseconds()}, &found)
	if err != nil {
		p.notef("the probes of earlier runs still stuck could not be listed (%v): hung mounts are probed again", err)
		return 0
	}
	byDev := make(map[string]*mpEarlier, len(found))
	for i := range found {
		e := &found[i]
		if o := byDev[e.Dev]; o == nil || e.Started.Before(o.Started) {
			byDev[e.Dev] = e
		}
	}
	for _, it := range items {
		e := byDev[it.rec.Dev]
		if e == nil || it.hidden || it.autofs {
			continue
		}
		it.earlier = true
		it.rec.Result = layout.ProbeHung
		it.rec.EarlierProbe = &layout.MountProbeEarlier{PID: e.PID, Started: e.Started, Path: e.Path}
		it.rec.Diagnosis = fmt.Sprintf("a probe from an earlier run (pid %d, started %s) is still stuck on it; not probed again", e.PID, e.Started.Format(time.RFC3339))
		it.rec.BlockedIn = fmt.Sprintf("pid %d (an earlier run's probe, in D state)", e.PID)
	}
	return len(found)
}

// markKernelStuck marks hung, without a probe, the mounts of filesystems
// the kernel already shows stuck (Common.Stuck, from storageclients,
// which ran before): a probe would only add one more task stuck on them
// and cost a whole probe deadline. It returns how many mounts it marked.
func (p *prober) markKernelStuck(items []*mpItem) int {
	if len(p.env.Stuck) == 0 {
		return 0
	}
	byDev := make(map[string]*layout.KernelStuck, len(p.env.Stuck))
	for i := range p.env.Stuck {
		byDev[p.env.Stuck[i].Dev] = &p.env.Stuck[i]
	}
	n := 0
	for _, it := range items {
		ks := byDev[it.rec.Dev]
		if ks == nil || it.hidden || it.autofs {
			continue
		}
		n++
		if it.earlier {
			// Already hung without a probe (an earlier run's probe is
			// stuck on it); the kernel's own evidence says more.
			it.rec.KernelStuck = &layout.MountProbeKernel{Kind: ks.Kind, Name: ks.Name, Requests: ks.Requests, TIDs: ks.TIDs, Reason: ks.Reason}
			it.rec.Diagnosis = "already stuck in the kernel: " + ks.Reason + "; " + it.rec.Diagnosis
			continue
		}
		it.kernel = true
		it.rec.Result = layout.ProbeHung
		it.rec.KernelStuck = &layout.MountProbeKernel{Kind: ks.Kind, Name: ks.Name, Requests: ks.Requests, TIDs: ks.TIDs, Reason: ks.Reason}
		it.rec.Diagnosis = "already stuck in the kernel: " + ks.Reason + "; not probed, so no task is added to those stuck on it"
		it.rec.SkipReason = "reported hung from the kernel's own state (" + layout.DirStorageClients + "): a probe would block like the tasks already stuck on it"
		it.hangEvidence = ks.Evidence
		if ks.Evidence != nil {
			it.rec.BlockedIn = blockedIn(ks.Evidence)
		}
	}
	return n
}
