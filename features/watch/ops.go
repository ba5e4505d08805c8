package watch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/inroot"
)

// Worker operations of the watcher. They run in isolated worker processes
// (the watcher's pools), never in the watcher itself: each reads /proc of
// other processes, a device, the journal or a directory tree that may sit
// on a hung mount.
const (
	opTasks   = "watch-tasks"
	opKmsg    = "watch-kmsg"
	opJournal = "watch-journal"
	opDirs    = "watch-dirs"
	opSeed    = "watch-seed"
)

func init() {
	isolate.RegisterOp(opTasks, isolate.Typed(scanTasks))
	isolate.RegisterOp(opKmsg, isolate.Typed(readKmsg))
	isolate.RegisterOp(opJournal, isolate.Typed(readJournal))
	isolate.RegisterOp(opDirs, isolate.Typed(scanDirs))
	isolate.RegisterOp(opSeed, isolate.Typed(seedStarts))
}

// TasksRequest asks for the tasks in D state.
type TasksRequest struct {
	Proc string `json:"proc"`
	// Self is the watcher's pid: it and its descendants (stuck probe
	// workers, a collection stuck on the very mount that fired) are not
	// the node's tasks.
	Self int `json:"self"`
	Max  int `json:"max"`
}

// TasksResult counts the tasks in D state.
type TasksResult struct {
	D int `json:"d"`
	// Examples are the first Max: "pid/tid comm wchan".
	Examples []string `json:"examples,omitempty"`
	Tasks    int      `json:"tasks"`
}

func scanTasks(rq TasksRequest) (any, error) {
	pids, err := numericEntries(rq.Proc)
	if err != nil {
		return nil, err
	}
	// The process tree, for the watcher's own descendants.
	parent := make(map[int]int, len(pids))
	type dtask struct {
		pid, tid int
		comm     string
	}
	var ds []dtask
	var res TasksResult
	buf := make([]byte, 0, 1024)
	for _, pid := range pids {
		pdir := filepath.Join(rq.Proc, strconv.Itoa(pid))
		if b, err := readSmall(filepath.Join(pdir, "stat"), buf); err == nil {
			if st, err := ParseTaskStat(b); err == nil {
				parent[pid] = st.PPID
			}
		}
		tids, err := numericEntries(filepath.Join(pdir, "task"))
		if err != nil {
			continue // gone meanwhile
		}
		for _, tid := range tids {
			b, err := readSmall(filepath.Join(pdir, "task", strconv.Itoa(tid), "stat"), buf)
			if err != nil {
				continue
			}
			res.Tasks++
			if st, err := ParseTaskStat(b); err == nil && st.State == 'D' {
				ds = append(ds, dtask{pid, tid, st.Comm})
			}
		}
	}
	ours := func(pid int) bool {
		for i := 0; i < 64 && pid > 1; i++ {
			if pid == rq.Self {
				return true
			}
			pid = parent[pid]
		}
		return false
	}
	for _, d := range ds {
		if rq.Self > 0 && ours(d.pid) {
			continue
		}
		res.D++
		if len(res.Examples) < rq.Max {
			wchan := ""
			if b, err := readSmall(filepath.Join(rq.Proc, strconv.Itoa(d.pid), "task", strconv.Itoa(d.tid), "wchan"), buf); err == nil {
				wchan = string(bytes.TrimSpace(b))
			}
			res.Examples = append(res.Examples, strings.TrimSpace(fmt.Sprintf("%d/%d %s %s", d.pid, d.tid, d.comm, wchan)))
		}
	}
	return res, nil
}

// numericEntries lists the numeric names of a directory (/proc, a task
// directory), without stat()ing them.
func numericEntries(dir string) ([]int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// readSmall reads a /proc file of at most 4 KiB into buf.
func readSmall(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	buf = buf[:cap(buf)]
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:n], nil
}

// KmsgRequest asks for the kernel log records after After.
type KmsgRequest struct {
	Path string `json:"path"`
	// After is the last record already seen; 0 means none yet: the
	// call reads to the log's current end and reports no line.
	After uint64 `json:"after"`
	Max   int    `json:"max"`
}

// KmsgResult holds the new records.
type KmsgResult struct {
	Last  uint64   `json:"last"`
	Lines []string `json:"lines,omitempty"`
	// Lost counts records the kernel overwrote before they were read,
	// and records past Max.
	Lost int `json:"lost,omitempty"`
}

// kmsgFD is /dev/kmsg kept open in the worker between calls: the watcher's
// pool for it has one worker, so the same process serves every call and
// reads on from where it stopped. A replaced worker reopens it and skips
// the records already seen.
var kmsgFD = -1

func readKmsg(rq KmsgRequest) (any, error) {
	if kmsgFD < 0 {
		fd, err := unix.Open(rq.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: rq.Path, Err: err}
		}
		kmsgFD = fd
	}
	res := KmsgResult{Last: rq.After}
	buf := make([]byte, 8192) // a record is at most 8 KiB (CONSOLE_EXT_LOG_MAX)
	// The first call reads the ring through to learn the newest record's
	// sequence number and reports nothing: only what the kernel logs from
	// now on counts (the ring's past is the collection's to read). A
	// worker that replaces a stuck one reads the ring again from its
	// start and skips what was seen.
	skipAll := rq.After == 0
	for {
		n, err := unix.Read(kmsgFD, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EPIPE) {
			res.Lost++ // overwritten before we read it
			continue
		}
		if errors.Is(err, unix.EAGAIN) || n <= 0 {
			break
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: rq.Path, Err: err}
		}
		rec, perr := ParseKmsgRecord(buf[:n])
		if perr != nil {
			continue
		}
		if rec.Seq <= rq.After {
			continue // read again after a worker was replaced
		}
		res.Last = rec.Seq
		if skipAll {
			continue
		}
		if len(res.Lines) < rq.Max {
			res.Lines = append(res.Lines, clip(rec.Message, 2000))
		} else {
			res.Lost++
		}
	}
	return res, nil
}

// JournalRequest asks for the journal entries after Cursor.
type JournalRequest struct {
	// Dir is a journal directory; Root the host's root when Dir is empty.
	Dir   string    `json:"dir,omitempty"`
	Root  string    `json:"root,omitempty"`
	Units []string  `json:"units"`
	After string    `json:"after,omitempty"`
	Since time.Time `json:"since"`
	Max   int       `json:"max"`
	// Timeout bounds journalctl, or the native read (below the
	// worker's own deadline).
	Timeout time.Duration `json:"timeout"`
}

// JournalResult holds the new entries, oldest first.
type JournalResult struct {
	Cursor  string         `json:"cursor,omitempty"`
	Entries []JournalEntry `json:"entries,omitempty"`
}

// journalMaxBytes bounds what one read of the journal keeps.
const journalMaxBytes = 4 << 20

func readJournal(rq JournalRequest) (any, error) {
	if !onPath("journalctl") {
		// No journalctl (the DaemonSet's image): the files themselves.
		return readJournalNative(rq)
	}
	args := []string{"--no-pager", "-q", "-o", "json", "-n", strconv.Itoa(rq.Max)}
	switch {
	case rq.Dir != "":
		args = append(args, "-D", rq.Dir)
	case rq.Root != "" && rq.Root != "/":
		args = append(args, "--root", rq.Root)
	}
	if rq.After != "" {
		args = append(args, "--after-cursor", rq.After)
	} else {
		args = append(args, "--since", "@"+strconv.FormatInt(rq.Since.Unix(), 10))
	}
	args = append(args, unitMatches(rq.Units)...)
	var out limitedBuffer
	out.max = journalMaxBytes
	var errb limitedBuffer
	errb.max = 4096
	r, err := isolate.Run(context.Background(), rq.Timeout, isolate.Spec{Path: "journalctl", Args: args, Stdout: &out, Stderr: &errb})
	if err != nil {
		return nil, fmt.Errorf("journalctl: %w", err)
	}
	if r.TimedOut {
		return nil, fmt.Errorf("journalctl did not finish within %s", rq.Timeout)
	}
	if r.ExitCode != 0 && out.Len() == 0 {
		return nil, fmt.Errorf("journalctl exited with status %d: %s", r.ExitCode, strings.TrimSpace(errb.String()))
	}
	res := JournalResult{Cursor: rq.After}
	sc := bufio.NewScanner(&out.Buffer)
	sc.Buffer(make([]byte, 0, 64<<10), journalMaxBytes)
	for sc.Scan() {
		e, err := ParseJournalJSON(sc.Bytes())
		if err != nil {
			continue
		}
		res.Cursor = e.Cursor
		e.Cursor = ""
		e.Message = clip(e.Message, 4000)
		res.Entries = append(res.Entries, e)
	}
	return res, nil
}

// unitMatches are the journal matches of units, as journalctl takes them
// and journalfile.ParseMatch reads them: identifiers OR units, two groups
// joined by "+"; none (every entry) without units.
func unitMatches(units []string) []string {
	if len(units) == 0 {
		return nil
	}
	var m []string
	for _, u := range units {
		m = append(m, "SYSLOG_IDENTIFIER="+u)
	}
	m = append(m, "+")
	for _, u := range units {
		m = append(m, "_SYSTEMD_UNIT="+u+".service")
	}
	return m
}

// onPath tells whether an executable of that name is on the PATH.
func onPath(name string) bool {
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d == "" {
			d = "."
		}
		var st unix.Stat_t
		p := filepath.Join(d, name)
		if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && unix.Access(p, unix.X_OK) == nil {
			return true
		}
	}
	return false
}

// limitedBuffer keeps the first max bytes written and discards the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.Len(); room > 0 {
		l.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// DirsRequest asks for a bounded scan of the kubelet's pod directories.
type DirsRequest struct {
	Root string `json:"root"`
	Max  int    `json:"max"`
	// Skip are paths not to enter: mounts found hung.
	Skip []string `json:"skip,omitempty"`
}

// DirsResult is what the scan found.
type DirsResult struct {
	Deleting []string `json:"deleting,omitempty"`
	// DeletingCount counts every .deleting~ directory (Deleting keeps
	// the first few).
	DeletingCount int `json:"deleting_count"`
	// OverLimit are directories whose link count is pinned at 1 by
	// ext4's dir_nlink: past 64,998 subdirectories.
	OverLimit []string `json:"over_limit,omitempty"`
	Entries   int      `json:"entries"`
	Truncated bool     `json:"truncated,omitempty"`
}

// scanDirs walks <kubelet root>, <root>/pods and each pod's volumes to
// the volume directories (pods/<uid>/volumes/<plugin>/<name>), where the
// kubelet renames what it is tearing down to <name>.deleting~<n>: a
// bounded walk of at most Max entries, never into a path of Skip.
func scanDirs(rq DirsRequest) (any, error) {
	var res DirsResult
	skip := map[string]bool{}
	for _, s := range rq.Skip {
		skip[s] = true
	}
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		// Depth 0 is a volume directory, often a mountpoint: it is
		// named, never stat()ed or entered.
		if depth <= 0 || skip[dir] || res.Entries >= rq.Max {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return nil
		}
		if st.Nlink == 1 && isExt4(dir) {
			res.OverLimit = append(res.OverLimit, dir)
		}
		f, err := inroot.Process().File(dir, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read-only: nothing to lose
		for res.Entries < rq.Max {
			names, err := f.Readdirnames(1024)
			for _, n := range names {
				res.Entries++
				p := filepath.Join(dir, n)
				if strings.Contains(n, ".deleting~") {
					res.DeletingCount++
					if len(res.Deleting) < 10 {
						res.Deleting = append(res.Deleting, p)
					}
					continue
				}
				// A pod directory gone meanwhile, or unreadable, is
				// counted, not fatal.
				_ = walk(p, depth-1)
			}
			if err != nil {
				break
			}
		}
		if res.Entries >= rq.Max {
			res.Truncated = true
		}
		return nil
	}
	// The pods directory is walked to the volume directories' names
	// (pods, uid, volumes, plugin: listed; name: named only).
	if err := walk(filepath.Join(rq.Root, "pods"), 4); err != nil && !errors.Is(err, syscall.ENOENT) {
		return nil, fmt.Errorf("the kubelet's pods directory: %w", err)
	}
	return res, nil
}

func isExt4(dir string) bool {
	var sfs unix.Statfs_t
	return unix.Statfs(dir, &sfs) == nil && sfs.Type == unix.EXT4_SUPER_MAGIC
}
