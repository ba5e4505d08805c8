package procfs

import (
	"bytes"
	"fmt"
	"math"
)

// PFKthread is the PF_KTHREAD bit of Stat.Flags (include/linux/sched.h).
// It is the reliable test for a kernel thread: comm can be set to anything
// ("[kworker/0:1]" by a user process, say), and ppid 2 is only a
// convention.
const PFKthread = 0x00200000

// Stat is the part of /proc/<pid>/stat (or /proc/<pid>/task/<tid>/stat)
// nodesnap uses; see proc_pid_stat(5) for the fields.
type Stat struct {
	// PID is the process (or, in a task's stat, thread) ID.
	PID int `json:"pid"`
	// Comm is the command name, up to 15 bytes for a user task and longer
	// for some kernel threads ("kworker/u8:2-events_unbound"). It may
	// contain any byte but NUL, spaces and parentheses included.
	Comm string `json:"comm"`
	// State is one letter: R running, S sleeping, D uninterruptible (disk)
	// sleep, Z zombie, T stopped, t tracing stop, X dead, I idle, P parked.
	State string `json:"state"`
	// PPID, PGRP and Session are the parent, process group and session IDs.
	PPID    int `json:"ppid"`
	PGRP    int `json:"pgrp"`
	Session int `json:"session"`
	// TTYNr is the controlling terminal's device number, 0 if none.
	TTYNr int `json:"tty_nr"`
	// TPGID is the terminal's foreground process group, -1 if none.
	TPGID int `json:"tpgid"`
	// Flags holds the kernel's PF_* flags; see PFKthread.
	Flags uint64 `json:"flags"`
	// MinFlt and MajFlt count minor and major page faults.
	MinFlt uint64 `json:"minflt"`
	MajFlt uint64 `json:"majflt"`
	// UTime and STime are user and system CPU time in clock ticks.
	UTime uint64 `json:"utime"`
	STime uint64 `json:"stime"`
	// Priority and Nice are the scheduling priority and nice value.
	Priority int `json:"priority"`
	Nice     int `json:"nice"`
	// NumThreads is the number of threads in the process.
	NumThreads int `json:"num_threads"`
	// StartTime is when the task started, in clock ticks after boot.
	StartTime uint64 `json:"starttime"`
	// VSize is the virtual memory size in bytes.
	VSize uint64 `json:"vsize"`
	// RSS is the resident set size in pages (of the node's page size, which
	// is not 4 KiB on every arm64 node).
	RSS uint64 `json:"rss"`
}

// IsKernelThread reports whether PF_KTHREAD is set.
func (s Stat) IsKernelThread() bool { return s.Flags&PFKthread != 0 }

// statFields is how many fields after the comm ParseStat needs (state
// through rss). Every kernel nodesnap can meet writes at least these.
const statFields = 22

// ParseStat parses /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat.
//
// The comm is not escaped in this file and may hold spaces, parentheses and
// even newlines ("(tmux: server)", "(a) b)"), so the comm runs from the
// first '(' to the last ')': the numeric fields after it cannot contain one.
// The only allocation is the Comm string.
func ParseStat(data []byte) (Stat, error) {
	var s Stat
	if isBlank(data) {
		return s, fmt.Errorf("%w: stat", ErrEmpty)
	}
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 0 || closing < open {
		return s, malformed("stat: comm is not in parentheses")
	}
	pid, ok := parseDec(trimSpace(data[:open]))
	if !ok {
		return s, malformed("stat: pid is not a decimal number")
	}

	var f [statFields][]byte
	rest := data[closing+1:]
	for i := range f {
		f[i], rest = nextField(rest)
		if len(f[i]) == 0 {
			return s, missing(fmt.Sprintf("stat: %d fields after comm, want at least %d", i, statFields))
		}
	}
	if len(f[0]) != 1 {
		return s, malformed("stat: state is not one letter")
	}

	var errField int
	signed := func(i int) int {
		v, ok := parseInt(f[i])
		if !ok && errField == 0 {
			errField = i
		}
		return v
	}
	unsigned := func(i int) uint64 {
		v, ok := parseUint(f[i], 10, math.MaxUint64)
		if !ok && errField == 0 {
			errField = i
		}
		return v
	}
	s.PID = pid
	s.State = string(f[0]) // one byte: the runtime does not allocate for it
	s.PPID = signed(1)
	s.PGRP = signed(2)
	s.Session = signed(3)
	s.TTYNr = signed(4)
	s.TPGID = signed(5)
	s.Flags = unsigned(6)
	s.MinFlt = unsigned(7)
	s.MajFlt = unsigned(9)
	s.UTime = unsigned(11)
	s.STime = unsigned(12)
	s.Priority = signed(15)
	s.Nice = signed(16)
	s.NumThreads = signed(17)
	s.StartTime = unsigned(19)
	s.VSize = unsigned(20)
	s.RSS = unsigned(21)
	if errField != 0 {
		// Field numbers in proc_pid_stat(5) count pid as 1 and comm as 2.
		return Stat{}, fmt.Errorf("%w: stat: field %d is not a number", ErrMalformed, errField+3)
	}
	s.Comm = string(data[open+1 : closing])
	return s, nil
}
