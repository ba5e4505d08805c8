package procfs

import (
	"bytes"
	"fmt"
	"math"
)

// IDSet is a task's real, effective, saved set and filesystem user or group
// IDs, in the order the Uid: and Gid: lines of /proc/<pid>/status list them.
type IDSet struct {
	Real      uint32 `json:"real"`
	Effective uint32 `json:"effective"`
	Saved     uint32 `json:"saved"`
	FS        uint32 `json:"fs"`
}

// Status is the part of /proc/<pid>/status (or a task's status) nodesnap
// uses; see proc_pid_status(5).
type Status struct {
	// Name is the command name, unescaped (the kernel writes a newline in
	// it as "\n" and a backslash as "\\").
	Name string `json:"name"`
	// State is the state letter, as in Stat.State.
	State string `json:"state"`
	// TGID is the thread group (process) ID, from Tgid:; PID is the task
	// (thread) ID, from Pid:.
	TGID int `json:"tgid"`
	PID  int `json:"pid"`
	// PPID is the parent's process ID, from PPid:.
	PPID int `json:"ppid"`
	// TracerPID is the ptrace tracer's process ID, 0 if not traced.
	TracerPID int `json:"tracer_pid"`
	// UID and GID are the task's user and group IDs.
	UID IDSet `json:"uid"`
	GID IDSet `json:"gid"`
	// NStgid, NSpid, NSpgid and NSsid list the thread group, task, process
	// group and session IDs in each PID namespace the task belongs to,
	// outermost (the reader's) first. A containerised process shows its
	// host PID and its in-container PID here.
	NStgid []int `json:"ns_tgid,omitempty"`
	NSpid  []int `json:"ns_pid,omitempty"`
	NSpgid []int `json:"ns_pgid,omitempty"`
	NSsid  []int `json:"ns_sid,omitempty"`
	// VmRSS is the resident set size in kB (named as in the file). It is 0 for
	// kernel threads and zombies, which have no address space (and no
	// VmRSS: line).
	VmRSS uint64 `json:"vm_rss_kb"`
	// Threads is the number of threads in the process.
	Threads int `json:"threads"`
	// VoluntaryCtxtSwitches and NonvoluntaryCtxtSwitches count context
	// switches; a task whose counts do not move between two reads is stuck.
	VoluntaryCtxtSwitches    uint64 `json:"voluntary_ctxt_switches"`
	NonvoluntaryCtxtSwitches uint64 `json:"nonvoluntary_ctxt_switches"`
	// Kthread is the value of the Kthread: line, which kernels from 2023
	// on write. KthreadKnown is false when the line is absent; use
	// Stat.IsKernelThread then.
	Kthread      bool `json:"kthread"`
	KthreadKnown bool `json:"kthread_known"`
}

// ParseStatus parses /proc/<pid>/status. Unknown lines are ignored, since
// each kernel release adds some. A Pid: line is required.
//
// On an error the returned Status still holds every field that parsed: the
// lines are independent, and a partial record of a task on a sick node is
// better evidence than none.
func ParseStatus(data []byte) (Status, error) {
	var s Status
	if isBlank(data) {
		return s, fmt.Errorf("%w: status", ErrEmpty)
	}
	var firstErr error
	fail := func(key []byte) {
		if firstErr == nil {
			firstErr = fmt.Errorf("%w: status: bad %s: line", ErrMalformed, key)
		}
	}
	havePid := false
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		key, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		val = trimSpace(val)
		ok2 := true
		switch string(key) {
		case "Name":
			// Take the raw value, not val: the kernel escapes only
			// newline and backslash here, so a name may begin or end
			// with spaces or tabs of its own.
			s.Name = unescapeTaskName(string(bytes.TrimPrefix(line[len(key)+1:], []byte("\t"))))
		case "State":
			// "D (disk sleep)": the letter is what is stable.
			st, _ := nextField(val)
			ok2 = len(st) == 1
			if ok2 {
				s.State = string(st)
			}
		case "Tgid":
			s.TGID, ok2 = parseDec(val)
		case "Pid":
			s.PID, ok2 = parseDec(val)
			havePid = ok2
		case "PPid":
			s.PPID, ok2 = parseDec(val)
		case "TracerPid":
			s.TracerPID, ok2 = parseDec(val)
		case "Uid":
			s.UID, ok2 = parseIDSet(val)
		case "Gid":
			s.GID, ok2 = parseIDSet(val)
		case "NStgid":
			s.NStgid, ok2 = parseIntList(val)
		case "NSpid":
			s.NSpid, ok2 = parseIntList(val)
		case "NSpgid":
			s.NSpgid, ok2 = parseIntList(val)
		case "NSsid":
			s.NSsid, ok2 = parseIntList(val)
		case "VmRSS":
			s.VmRSS, ok2 = parseKB(val)
		case "Threads":
			s.Threads, ok2 = parseDec(val)
		case "voluntary_ctxt_switches":
			s.VoluntaryCtxtSwitches, ok2 = parseUint(val, 10, math.MaxUint64)
		case "nonvoluntary_ctxt_switches":
			s.NonvoluntaryCtxtSwitches, ok2 = parseUint(val, 10, math.MaxUint64)
		case "Kthread":
			ok2 = len(val) == 1 && (val[0] == '0' || val[0] == '1')
			s.Kthread, s.KthreadKnown = ok2 && val[0] == '1', ok2
		}
		if !ok2 {
			fail(key)
		}
	}
	if firstErr != nil {
		return s, firstErr
	}
	if !havePid {
		return s, missing("status: no Pid: line")
	}
	return s, nil
}

// parseIDSet parses the four tab-separated IDs of a Uid: or Gid: line.
func parseIDSet(val []byte) (IDSet, bool) {
	var ids [4]uint32
	for i := range ids {
		var f []byte
		f, val = nextField(val)
		n, ok := parseUint(f, 10, math.MaxUint32)
		if !ok {
			return IDSet{}, false
		}
		ids[i] = uint32(n)
	}
	return IDSet{Real: ids[0], Effective: ids[1], Saved: ids[2], FS: ids[3]}, true
}

// parseIntList parses a list of decimal IDs separated by tabs or spaces.
// The fields are counted first so the slice is allocated once, at its size.
func parseIntList(val []byte) ([]int, bool) {
	n := 0
	for rest := val; ; n++ {
		var f []byte
		if f, rest = nextField(rest); len(f) == 0 {
			break
		}
	}
	if n == 0 {
		return nil, false
	}
	out := make([]int, n)
	for i := range out {
		var f []byte
		f, val = nextField(val)
		v, ok := parseDec(f)
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// parseKB parses "1234 kB" (the unit is optional) into the number of kB.
func parseKB(val []byte) (uint64, bool) {
	num, unit := nextField(val)
	unit = trimSpace(unit)
	if len(unit) != 0 && string(unit) != "kB" {
		return 0, false
	}
	return parseUint(num, 10, math.MaxUint64)
}
