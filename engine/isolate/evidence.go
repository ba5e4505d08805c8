package isolate

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// evidenceReadTimeout bounds each /proc read of a child's state. These files
// (stack, syscall) take the task's exec lock, which only an exec holds; a
// read still runs in a goroutine that may be abandoned, so the caller never
// waits on it past this.
const evidenceReadTimeout = 500 * time.Millisecond

// CaptureEvidence reads the state of every thread of pid, and of its direct
// children, from /proc. It never blocks for longer than a few read timeouts.
func CaptureEvidence(pid int) *layout.HangEvidence {
	h := captureEvidence(pid, 0)
	if b := pickBlocked(h); b != nil {
		c := *b
		h.Blocked = &c
	}
	return h
}

// pickBlocked chooses the thread that best says where a process tree is
// stuck: one in uninterruptible sleep anywhere in the tree, else one not
// parked in an idle wait, else the main thread of the deepest process (a
// shell waiting for its child says less than the child).
func pickBlocked(h *layout.HangEvidence) *layout.TaskEvidence {
	var dstate, busy, leaf *layout.TaskEvidence
	var walk func(*layout.HangEvidence)
	walk = func(e *layout.HangEvidence) {
		for i := range e.Tasks {
			t := &e.Tasks[i]
			if dstate == nil && t.State == "D" {
				dstate = t
			}
			if busy == nil && !runtimeWait(*t) {
				busy = t
			}
		}
		if len(e.Children) == 0 && len(e.Tasks) > 0 {
			leaf = &e.Tasks[0]
		}
		for _, c := range e.Children {
			walk(c)
		}
	}
	walk(h)
	switch {
	case dstate != nil:
		return dstate
	case busy != nil:
		return busy
	}
	return leaf
}

func captureEvidence(pid, depth int) *layout.HangEvidence {
	h := &layout.HangEvidence{PID: pid}
	base := filepath.Join("/proc", strconv.Itoa(pid))
	h.Comm = strings.TrimSpace(readProcBounded(filepath.Join(base, "comm")))
	tids := listTasks(base)
	for _, tid := range tids {
		h.Tasks = append(h.Tasks, taskEvidence(base, tid))
	}
	if depth < 2 {
		for _, tid := range tids {
			for _, c := range strings.Fields(readProcBounded(filepath.Join(base, "task", strconv.Itoa(tid), "children"))) {
				if cpid, err := strconv.Atoi(c); err == nil {
					h.Children = append(h.Children, captureEvidence(cpid, depth+1))
				}
			}
		}
	}
	if len(h.Tasks) == 0 {
		h.Note = "process state could not be read (already gone, or /proc not readable)"
	}
	return h
}

// CaptureTaskEvidence reads the state of one thread, tid, of pid: the
// thread a worker runs a hung item on. Its other threads serve other
// items and say nothing about this one.
func CaptureTaskEvidence(pid, tid int) *layout.HangEvidence {
	base := filepath.Join("/proc", strconv.Itoa(pid))
	h := &layout.HangEvidence{PID: pid}
	h.Comm = strings.TrimSpace(readProcBounded(filepath.Join(base, "comm")))
	te := taskEvidence(base, tid)
	if te.State == "" {
		h.Note = "the state of thread " + strconv.Itoa(tid) + " could not be read (already gone, or /proc not readable)"
		return h
	}
	h.Tasks = []layout.TaskEvidence{te}
	c := te
	h.Blocked = &c
	return h
}

// taskEvidence reads one thread's state under base, /proc/<pid>.
func taskEvidence(base string, tid int) layout.TaskEvidence {
	tb := filepath.Join(base, "task", strconv.Itoa(tid))
	te := layout.TaskEvidence{TID: tid}
	te.Comm = strings.TrimSpace(readProcBounded(filepath.Join(tb, "comm")))
	te.State = taskState(readProcBounded(filepath.Join(tb, "stat")))
	te.Wchan = strings.TrimSpace(readProcBounded(filepath.Join(tb, "wchan")))
	te.Syscall = strings.TrimSpace(readProcBounded(filepath.Join(tb, "syscall")))
	for _, l := range strings.Split(readProcBounded(filepath.Join(tb, "stack")), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			te.Stack = append(te.Stack, l)
		}
	}
	return te
}

// runtimeWait reports whether a thread is parked in one of the Go runtime's
// idle waits, which say nothing about where the work hung.
func runtimeWait(t layout.TaskEvidence) bool {
	switch t.Wchan {
	case "futex_wait_queue", "futex_wait_queue_me", "futex_do_wait", "futex_wait", "do_epoll_wait", "ep_poll", "hrtimer_nanosleep", "do_nanosleep", "pipe_read", "pipe_write", "anon_pipe_read", "do_wait", "kernel_wait4", "0", "":
		return true
	}
	return false
}

func listTasks(base string) []int {
	d, err := os.Open(filepath.Join(base, "task"))
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var tids []int
	for _, n := range names {
		if t, err := strconv.Atoi(n); err == nil {
			tids = append(tids, t)
		}
	}
	sort.Ints(tids)
	return tids
}

// taskState extracts the one-letter state from a /proc stat line; the comm
// field may hold spaces and parentheses, so it is cut at the last ')'.
func taskState(stat string) string {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || i+3 > len(stat) {
		return ""
	}
	return stat[i+2 : i+3]
}

// readProcBounded reads a small /proc file of one of our own children with
// a deadline. The read runs in a goroutine; if it does not return in time it
// is abandoned (the goroutine ends when the kernel lets it).
func readProcBounded(path string) string {
	ch := make(chan string, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			ch <- ""
			return
		}
		defer f.Close()
		buf := make([]byte, 16<<10)
		n, _ := readFull(f, buf)
		ch <- string(buf[:n])
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(evidenceReadTimeout):
		return ""
	}
}

func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil || m == 0 {
			return n, err
		}
	}
	return n, nil
}
