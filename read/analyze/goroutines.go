package analyze

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/read/goroutinedump"
)

// A Go goroutine dump comes in two forms:
//
//	debug=2: "goroutine 123 [syscall, 12 minutes]:" then, per frame, a
//	         function line and a tab-indented file:line; blank line between
//	         goroutines. The wait state and how long are in the header.
//	debug=1: "12 @ 0x43a1f6 0x4b2c1a ..." then "#\t0x4710a5\tpkg.fn+0x25\tfile:line"
//	         per frame: goroutines with identical stacks counted together,
//	         no wait state.
//
// parseGoroutines reads either, keeping only the goroutines whose stacks
// contain one of the functions of interest, so memory does not grow with
// the dump.

// goroutine is one goroutine (or, from debug=1, one stack shared by Count
// goroutines).
type goroutine struct {
	// Path is the dump's bundle path.
	Path  string
	ID    int
	Count int
	// State is the wait reason ("syscall", "semacquire", "IO wait");
	// Minutes how long it has been waiting (0 when under a minute or not
	// printed).
	State   string
	Minutes int
	// Header is the header line, with its line number.
	Header Line
	// Frames are the function names, innermost first.
	Frames []string
	// Lines are the header and function lines, for evidence.
	Lines []Line
}

func (g *goroutine) has(fn string) bool {
	for _, f := range g.Frames {
		if strings.Contains(f, fn) {
			return true
		}
	}
	return false
}

// goroutineDump is what is kept of one dump.
type goroutineDump struct {
	Path string
	// Total counts every goroutine in the dump.
	Total int
	// Kept are the goroutines whose stacks matched; Dropped counts
	// matching ones beyond the bound.
	Kept    []goroutine
	Dropped int
	// Waiters counts goroutines blocked on a mutex or semaphore (state
	// semacquire or sync.Mutex.Lock), by the first non-runtime, non-sync
	// frame under the lock: who is waiting for what.
	Waiters map[string]int
	// WaiterSample is one waiting goroutine per key, for evidence.
	WaiterSample map[string]goroutine
}

const (
	maxKeptGoroutines = 200
	maxFrames         = 64
	maxWaiterKeys     = 500
)

// goroutineInterest are the functions whose goroutines are kept: the
// kubelet's housekeeping and pod cleanup (incident 003) and a runtime's
// recursive removal of a volume (incident 001).
var goroutineInterest = []string{
	"cleanupOrphanedPodDirs", "HandlePodCleanups", "getPodVolumePathListFromDisk",
	// Mount-point and stat checks of any caller (reconciler, volume
	// plugins, mount-utils): on a dead mount they never return.
	"IsLikelyNotMountPoint", "IsNotMountPoint", "IsMountPoint", "PathExists", "IsCorruptedMnt",
	"os.Stat", "os.Lstat", "os.statNolog", "syscall.Statfs", "unix.Statfs", "getVfsStats",
	"os.RemoveAll", "removeAllFrom", "nlinkat", "unlinkat", "Unlinkat",
	"(*Root).Remove", "(*Root).Get",
	"syncLoopIteration",
}

func interesting(frames []string) bool {
	for _, f := range frames {
		for _, want := range goroutineInterest {
			if strings.Contains(f, want) {
				return true
			}
		}
	}
	return keepForMountCall(frames)
}

func parseGoroutines(path string, r io.Reader) (*goroutineDump, error) {
	return parseGoroutinesCounting(path, r, nil)
}

// parseGoroutinesCounting is parseGoroutines feeding every line to count
// too, when not nil (Options.Facts: the goroutines by frame).
func parseGoroutinesCounting(path string, r io.Reader, count *goroutinedump.Counter) (*goroutineDump, error) {
	d := &goroutineDump{Path: path, Waiters: map[string]int{}, WaiterSample: map[string]goroutine{}}
	lr := newLineReader(r)
	var cur *goroutine
	finish := func() {
		if cur == nil {
			return
		}
		d.Total += max(cur.Count, 1)
		if key := waitKey(cur); key != "" {
			if _, ok := d.Waiters[key]; ok || len(d.Waiters) < maxWaiterKeys {
				d.Waiters[key] += max(cur.Count, 1)
				if _, ok := d.WaiterSample[key]; !ok {
					d.WaiterSample[key] = *cur
				}
			}
		}
		if interesting(cur.Frames) {
			if len(d.Kept) < maxKeptGoroutines {
				d.Kept = append(d.Kept, *cur)
			} else {
				d.Dropped++
			}
		}
		cur = nil
	}
	for {
		b, n, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return d, err
		}
		if count != nil {
			if cut {
				count.Line("\t") // too long to be a frame: skipped
			} else {
				count.Line(string(b))
			}
		}
		line := bytes.TrimRight(b, " \t")
		switch {
		case len(line) == 0:
			finish()
		case bytes.HasPrefix(line, []byte("goroutine ")) && bytes.HasSuffix(line, []byte(":")):
			finish()
			if g, ok := parseGoroutineHeader(string(line)); ok {
				g.Path = path
				g.Header = keepLine(n, b, cut)
				g.Lines = []Line{g.Header}
				cur = &g
			}
		case line[0] >= '0' && line[0] <= '9' && bytes.Contains(line, []byte(" @ ")):
			// debug=1 block header: "N @ 0x..."
			finish()
			cnt, _ := strconv.Atoi(string(line[:bytes.IndexByte(line, ' ')]))
			cur = &goroutine{Path: path, Count: max(cnt, 1), Header: keepLine(n, b, cut)}
			cur.Lines = []Line{cur.Header}
		case cur == nil:
		case line[0] == '#':
			// "#\t0x4710a5\tpkg.fn+0x25\tfile:line"
			f := bytes.Fields(line[1:])
			if len(f) >= 2 && len(cur.Frames) < maxFrames {
				fn := string(f[1])
				if i := strings.LastIndex(fn, "+0x"); i > 0 {
					fn = fn[:i]
				}
				cur.Frames = append(cur.Frames, fn)
				cur.Lines = append(cur.Lines, keepLine(n, b, cut))
			}
		case line[0] == '\t':
			// file:line of the frame above
		default:
			if len(cur.Frames) < maxFrames {
				fn := string(line)
				if strings.HasPrefix(fn, "created by ") {
					fn = strings.TrimPrefix(fn, "created by ")
					if i := strings.Index(fn, " in goroutine "); i > 0 {
						fn = fn[:i]
					}
				} else if i := strings.LastIndexByte(fn, '('); i > 0 && strings.HasSuffix(fn, ")") {
					fn = fn[:i]
				}
				cur.Frames = append(cur.Frames, fn)
				cur.Lines = append(cur.Lines, keepLine(n, b, cut))
			}
		}
	}
	finish()
	return d, nil
}

// parseGoroutineHeader parses "goroutine 123 [syscall, 12 minutes, locked
// to thread]:".
func parseGoroutineHeader(s string) (goroutine, bool) {
	rest := strings.TrimPrefix(s, "goroutine ")
	sp := strings.IndexByte(rest, ' ')
	if sp < 0 {
		return goroutine{}, false
	}
	id, err := strconv.Atoi(rest[:sp])
	if err != nil {
		return goroutine{}, false
	}
	g := goroutine{ID: id, Count: 1}
	open := strings.IndexByte(rest, '[')
	closing := strings.LastIndexByte(rest, ']')
	if open < 0 || closing < open {
		return g, true
	}
	parts := strings.Split(rest[open+1:closing], ",")
	g.State = strings.TrimSpace(parts[0])
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		if v, ok := strings.CutSuffix(p, " minutes"); ok {
			g.Minutes, _ = strconv.Atoi(v)
		} else if v, ok := strings.CutSuffix(p, " minute"); ok {
			g.Minutes, _ = strconv.Atoi(v)
		}
	}
	return g, true
}

// waitKey names what a goroutine blocked on a lock waits in: its first
// frame outside the runtime and sync packages. "" when it is not waiting
// on a lock (debug=1 stacks say so by their frames).
func waitKey(g *goroutine) string {
	lock := strings.HasPrefix(g.State, "semacquire") || strings.HasPrefix(g.State, "sync.Mutex.Lock") ||
		strings.HasPrefix(g.State, "sync.RWMutex")
	if g.State == "" {
		for _, f := range g.Frames {
			if strings.HasPrefix(f, "sync.(*Mutex).Lock") || strings.HasPrefix(f, "sync.(*RWMutex).") {
				lock = true
				break
			}
		}
	}
	if !lock {
		return ""
	}
	for _, f := range g.Frames {
		if strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "sync.") || strings.HasPrefix(f, "internal/sync.") {
			continue
		}
		return f
	}
	return ""
}

// describe says in a few words how long a goroutine has waited.
func (g *goroutine) describe() string {
	if g.State == "" {
		if g.Count > 1 {
			return strconv.Itoa(g.Count) + " goroutines"
		}
		return "goroutine"
	}
	s := "goroutine " + strconv.Itoa(g.ID) + " [" + g.State
	if g.Minutes > 0 {
		s += ", " + strconv.Itoa(g.Minutes) + " minutes"
	}
	return s + "]"
}

// mountCheckFuncs are the functions that touch a path's inode or its
// filesystem: a goroutine waiting in one of them in a syscall waits on
// that mount.
var mountCheckFuncs = []string{"IsLikelyNotMountPoint", "IsNotMountPoint", "IsMountPoint", "PathExists", "IsCorruptedMnt",
	"os.Stat", "os.Lstat", "os.statNolog", "os.lstatNolog", "syscall.Statfs", "unix.Statfs", "getVfsStats", "syscall.fstatat", "syscall.Stat"}

// stuckInMountCheck says whether a goroutine of the kubelet waits in a
// stat or mount-point check: in a syscall for at least a minute (a debug=2
// dump says so), or, without a state (debug=1), under such a check.
func (g *goroutine) stuckInMountCheck() bool {
	return g.inMountCheck() && g.State == "syscall" && g.Minutes >= 1
}

// inMountCheck says whether a goroutine's stack is under a stat or
// mount-point check, whatever its state.
func (g *goroutine) inMountCheck() bool {
	for _, fn := range mountCheckFuncs {
		if g.has(fn) {
			return true
		}
	}
	return false
}
