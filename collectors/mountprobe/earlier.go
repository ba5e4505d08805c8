package mountprobe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/isolate"
)

// Probes of earlier runs still stuck: a FUSE or network mount whose server
// has read a request and never answers keeps the probing worker in D state,
// where not even SIGKILL ends it. Each run used to leave one more such
// worker per hung mount. A probing worker now carries a note (see
// isolate.SetWorkerNote) naming the filesystem it probes; a later run finds
// the workers still stuck with such a note and does not probe those
// filesystems again.

// opMountEarlier is the worker operation that lists earlier probes still
// stuck. It reads other processes' /proc files, so it runs in a worker.
const opMountEarlier = "mountprobe.earlier"

// mpNotePrefix starts the note of a probing worker.
const mpNotePrefix = "mountprobe "

// mpNote is what a probing worker's note says.
type mpNote struct {
	Dev     string    // the filesystem's major:minor
	Started time.Time // when the probe started
	Path    string    // the path probed
}

// String is the note as written in the worker's environment.
func (n mpNote) String() string {
	return fmt.Sprintf("%sdev=%s started=%d path=%s", mpNotePrefix, n.Dev, n.Started.UnixMilli(), strconv.QuoteToASCII(n.Path))
}

// mpParseNote reads a note written by String; the path may be missing
// (a note too long for its room is written without it).
func mpParseNote(s string) (mpNote, bool) {
	rest, ok := strings.CutPrefix(s, mpNotePrefix)
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
			if !ok || !mpDigits(maj) || !mpDigits(min) {
				return mpNote{}, false
			}
			n.Dev = val
		case "started":
			ms, err := strconv.ParseInt(val, 10, 64)
			if err != nil || ms <= 0 {
				return mpNote{}, false
			}
			n.Started = time.UnixMilli(ms).UTC()
		}
	}
	if n.Dev == "" || n.Started.IsZero() {
		return mpNote{}, false
	}
	return n, true
}

func mpDigits(s string) bool {
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

// mpNoteFor is the note of a probe of path on filesystem dev, without the
// path when it does not fit.
func mpNoteFor(dev, path string, started time.Time) string {
	n := mpNote{Dev: dev, Started: started, Path: path}
	if s := n.String(); len(s) <= isolate.NoteSize {
		return s
	}
	return fmt.Sprintf("%sdev=%s started=%d", mpNotePrefix, dev, started.UnixMilli())
}

type mpEarlierRequest struct {
	Proc string `json:"proc"`
	// OlderThan: a probe started less long ago may be another run's,
	// still within its deadline.
	OlderThanMS int64 `json:"older_than_ms"`
}

// mpEarlier is one earlier probe still stuck.
type mpEarlier struct {
	PID     int       `json:"pid"`
	Dev     string    `json:"dev"`
	Started time.Time `json:"started"`
	Path    string    `json:"path,omitempty"`
}

// mpEarlierOp lists the workers of this binary (same executable name)
// with a thread in D state and a probe note older than the request says.
// Only those are read beyond /proc/<pid>/stat and exe (which take no lock
// of the task's memory): cmdline and environ are read from stuck workers
// of ours alone, which hold no such lock.
func mpEarlierOp(rq mpEarlierRequest) (any, error) {
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
		exe, err := os.Readlink(filepath.Join(dir, "exe"))
		if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != name {
			continue
		}
		if !mpAnyThreadD(dir) {
			continue
		}
		cmd, err := hostfs.ReadSmall(filepath.Join(dir, "cmdline"), buf[:4096])
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if len(args) < 2 || args[1] != isolate.ModeWorker {
			continue
		}
		environ, err := hostfs.ReadSmall(filepath.Join(dir, "environ"), buf)
		if err != nil {
			continue
		}
		s, ok := isolate.WorkerNote(environ)
		if !ok {
			continue
		}
		n, ok := mpParseNote(s)
		if !ok || n.Started.After(cutoff) {
			continue
		}
		out = append(out, mpEarlier{PID: pid, Dev: n.Dev, Started: n.Started, Path: n.Path})
	}
	return out, nil
}

// mpAnyThreadD reports whether a thread of the process at dir is in
// uninterruptible sleep: a Go worker blocks in a syscall on any thread.
func mpAnyThreadD(dir string) bool {
	tids, err := hostfs.ListPIDs(filepath.Join(dir, "task"))
	if err != nil {
		return false
	}
	var b [512]byte
	for _, tid := range tids {
		st, err := hostfs.ReadSmall(filepath.Join(dir, "task", strconv.Itoa(tid), "stat"), b[:])
		if err != nil {
			continue
		}
		s := string(st)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'D' {
			return true
		}
	}
	return false
}

// findEarlier asks a worker for the earlier runs' probes still stuck and
// marks the mounts of their filesystems hung, unprobed. It returns how
// many such workers there are.
func (p *mpProber) findEarlier(ctx context.Context, items []*mpItem) int {
	var found []mpEarlier
	err := p.env.Do(ctx, opMountEarlier, p.env.ProcPath(), mpEarlierRequest{Proc: p.env.ProcPath(), OlderThanMS: p.probeTimeout.Milliseconds()}, &found)
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
