package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/nodesnap/nodesnap/internal/inroot"
)

// A worker's note: what it is working on, readable by a later run from
// /proc/<pid>/environ even when the worker is stuck in the kernel and can
// no longer answer. A worker stuck on a hung mount whose server has read
// the request cannot be killed; knowing it is there lets a later run leave
// that mount alone instead of leaving one more stuck worker per run.
//
// A worker serves several items at once: its note has one line per item
// that asked for one (AddWorkerNote).
//
// Pool workers are started with WorkerNoteVar set to NoteSize spaces; the
// worker overwrites that value in place, in its own initial environment
// block (through /proc/self/mem, the block being ordinary stack memory),
// which is what the kernel shows in /proc/<pid>/environ.

// WorkerNoteVar is the environment variable that carries a worker's note.
const WorkerNoteVar = "NODESNAP_WORKER_NOTE"

// NoteSize is the room for a note, in bytes.
const NoteSize = 4096

var (
	noteOnce sync.Once
	noteMem  *os.File
	noteAddr int64
	noteErr  error
	noteMu   sync.Mutex
)

// AddWorkerNote adds a line to this worker's note, for as long as the
// item that calls it runs: a worker serves several items at once, and its
// note names each of them, one line each. When the lines no longer fit in
// NoteSize, the longest are written in their short form (short, "" for
// none); a line that fits in neither form is refused, and the note stays as
// it was. remove takes the line out again. A line holding a newline or a
// NUL byte is refused; outside a pool worker (no room reserved) it is an
// error too.
func AddWorkerNote(line, short string) (remove func(), err error) {
	for _, s := range []string{line, short} {
		if strings.ContainsAny(s, "\n\x00") {
			return nil, fmt.Errorf("worker note line %q holds a newline or a NUL byte", s)
		}
	}
	if line == "" {
		return nil, errors.New("empty worker note line")
	}
	noteOnce.Do(findNote)
	if noteErr != nil {
		return nil, noteErr
	}
	l := &noteLine{full: line, short: short}
	noteMu.Lock()
	defer noteMu.Unlock()
	lines := make([]*noteLine, 0, len(noteLines)+1)
	lines = append(append(lines, noteLines...), l)
	text, ok := composeNote(lines)
	if !ok {
		return nil, fmt.Errorf("no room left in the worker note (%d bytes) for a line of %d bytes beside %d others", NoteSize, len(line), len(noteLines))
	}
	if err := writeNote(text); err != nil {
		return nil, err
	}
	noteLines = lines
	return func() {
		noteMu.Lock()
		defer noteMu.Unlock()
		for i, x := range noteLines {
			if x == l {
				noteLines = append(noteLines[:i:i], noteLines[i+1:]...)
				text, _ := composeNote(noteLines) // fewer lines fit
				_ = writeNote(text)
				return
			}
		}
	}, nil
}

// noteLine is one item's line of the note.
type noteLine struct{ full, short string }

// noteLines are the lines of this worker's note, oldest first; guarded by
// noteMu.
var noteLines []*noteLine

// composeNote joins lines with newlines, each in its full form while the
// whole fits in NoteSize, else the lines that gain the most in their short
// form; ok is false when even that does not fit.
func composeNote(lines []*noteLine) (string, bool) {
	short := make([]bool, len(lines))
	size := func() int {
		n := max(len(lines)-1, 0)
		for i, l := range lines {
			if short[i] {
				n += len(l.short)
			} else {
				n += len(l.full)
			}
		}
		return n
	}
	n := size()
	if n > NoteSize {
		order := make([]int, 0, len(lines))
		for i, l := range lines {
			if l.short != "" && len(l.short) < len(l.full) {
				order = append(order, i)
			}
		}
		sort.SliceStable(order, func(a, b int) bool {
			la, lb := lines[order[a]], lines[order[b]]
			return len(la.full)-len(la.short) > len(lb.full)-len(lb.short)
		})
		for _, i := range order {
			if n <= NoteSize {
				break
			}
			short[i] = true
			n -= len(lines[i].full) - len(lines[i].short)
		}
		if n > NoteSize {
			return "", false
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		if short[i] {
			b.WriteString(l.short)
		} else {
			b.WriteString(l.full)
		}
	}
	return b.String(), true
}

// writeNote writes text, padded with spaces, over the reserved value.
// noteMu is held.
func writeNote(text string) error {
	buf := make([]byte, NoteSize)
	n := copy(buf, text)
	for i := n; i < len(buf); i++ {
		buf[i] = ' '
	}
	if _, err := noteMem.WriteAt(buf, noteAddr); err != nil {
		return fmt.Errorf("writing the worker note: %w", err)
	}
	return nil
}

// findNote locates the reserved value in this process's initial
// environment block: env_start from /proc/self/stat plus its offset in
// /proc/self/environ.
func findNote() {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		noteErr = fmt.Errorf("reading /proc/self/stat: %w", err)
		return
	}
	envStart, err := statEnvStart(stat)
	if err != nil {
		noteErr = err
		return
	}
	environ, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		noteErr = fmt.Errorf("reading /proc/self/environ: %w", err)
		return
	}
	off := noteOffset(environ)
	if off < 0 {
		noteErr = errors.New("no room for a worker note: not a pool worker")
		return
	}
	f, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		noteErr = fmt.Errorf("opening /proc/self/mem: %w", err)
		return
	}
	noteMem, noteAddr = f, int64(envStart)+int64(off)
}

// statEnvStart returns env_start, the 50th field of /proc/<pid>/stat.
func statEnvStart(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc/self/stat: no command name")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 50-3+1 {
		return 0, errors.New("/proc/self/stat: no env_start field (kernel older than 3.5)")
	}
	v, err := strconv.ParseUint(f[50-3], 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("/proc/self/stat: env_start %q unreadable", f[50-3])
	}
	return v, nil
}

// noteOffset is where the reserved value starts in an environ block, or
// -1 when it is absent or shorter than NoteSize.
func noteOffset(environ []byte) int {
	key := []byte(WorkerNoteVar + "=")
	for off := 0; off < len(environ); {
		end := bytes.IndexByte(environ[off:], 0)
		if end < 0 {
			end = len(environ) - off
		}
		if bytes.HasPrefix(environ[off:off+end], key) {
			if end-len(key) < NoteSize {
				return -1
			}
			return off + len(key)
		}
		off += end + 1
	}
	return -1
}

// WorkerNote returns the note in another process's environ block (as read
// from /proc/<pid>/environ), and whether it holds one.
func WorkerNote(environ []byte) (string, bool) {
	off := noteOffset(environ)
	if off < 0 {
		return "", false
	}
	v := environ[off:]
	if i := bytes.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	note := strings.TrimRight(string(v), " ")
	return note, note != ""
}

// workerEnv is a fresh worker's environment: ours, with room for a note
// first, so that a reader finds it within the first NoteSize bytes or so
// however large the rest is.
func workerEnv() []string {
	env := make([]string, 0, len(os.Environ())+1)
	env = append(env, WorkerNoteVar+"="+strings.Repeat(" ", NoteSize))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, WorkerNoteVar+"=") && !strings.HasPrefix(kv, inroot.EnvVar+"=") {
			env = append(env, kv)
		}
	}
	return env
}
