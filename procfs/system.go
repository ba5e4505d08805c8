package procfs

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// Uptime is /proc/uptime.
type Uptime struct {
	// Seconds is the time since boot.
	Seconds float64 `json:"seconds"`
	// IdleSeconds is the idle time summed over all CPUs, so it can exceed
	// Seconds. 0 if the file had only one number.
	IdleSeconds float64 `json:"idle_seconds"`
}

// ParseUptime parses /proc/uptime ("350735.47 234388.90").
func ParseUptime(data []byte) (Uptime, error) {
	var u Uptime
	up, rest := nextField(data)
	if len(up) == 0 {
		return u, fmt.Errorf("%w: uptime", ErrEmpty)
	}
	var ok bool
	if u.Seconds, ok = parseSeconds(up); !ok {
		return u, malformed("uptime: uptime is not a number of seconds")
	}
	if idle, _ := nextField(rest); len(idle) > 0 {
		if u.IdleSeconds, ok = parseSeconds(idle); !ok {
			return u, malformed("uptime: idle time is not a number of seconds")
		}
	}
	return u, nil
}

// parseSeconds accepts only finite, non-negative decimals: strconv would
// also take "NaN" and "Inf", which encoding/json then refuses to write.
func parseSeconds(b []byte) (float64, bool) {
	for _, c := range b {
		if !('0' <= c && c <= '9' || c == '.') {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

// Loadavg is /proc/loadavg.
type Loadavg struct {
	// Load1, Load5 and Load15 are the 1, 5 and 15 minute load averages.
	// On Linux they count tasks in D state too, so a node with tasks stuck
	// on a dead mount shows a high load with idle CPUs.
	Load1  float64 `json:"load1"`
	Load5  float64 `json:"load5"`
	Load15 float64 `json:"load15"`
	// Runnable and Total are the runnable and total scheduling entities
	// (tasks); -1 if absent.
	Runnable int `json:"runnable"`
	Total    int `json:"total"`
	// LastPID is the most recently assigned PID; -1 if absent.
	LastPID int `json:"last_pid"`
}

// ParseLoadavg parses /proc/loadavg ("0.16 0.21 0.09 1/85 5837"). The three
// averages are required; the rest is read when present.
func ParseLoadavg(data []byte) (Loadavg, error) {
	l := Loadavg{Runnable: -1, Total: -1, LastPID: -1}
	if isBlank(data) {
		return l, fmt.Errorf("%w: loadavg", ErrEmpty)
	}
	rest := data
	for _, dst := range []*float64{&l.Load1, &l.Load5, &l.Load15} {
		var f []byte
		f, rest = nextField(rest)
		if len(f) == 0 {
			return l, missing("loadavg: fewer than three load averages")
		}
		v, ok := parseSeconds(f)
		if !ok {
			return l, malformed("loadavg: load average is not a number")
		}
		*dst = v
	}
	tasks, rest := nextField(rest)
	if r, t, ok := bytes.Cut(tasks, []byte("/")); ok {
		rn, ok1 := parseDec(r)
		tn, ok2 := parseDec(t)
		if ok1 && ok2 {
			l.Runnable, l.Total = rn, tn
		}
	}
	last, _ := nextField(rest)
	if n, ok := parseDec(last); ok {
		l.LastPID = n
	}
	return l, nil
}

// ParseMeminfo parses /proc/meminfo into a map from key ("MemTotal",
// "HugePages_Total", ...) to value. Values with a "kB" unit are in kB; the
// few without a unit (the HugePages_ counts) are counts. Lines that do not
// parse are skipped: the file is informational, and a missing key reads as
// absent. It fails only when nothing parses.
func ParseMeminfo(data []byte) (map[string]uint64, error) {
	if isBlank(data) {
		return nil, fmt.Errorf("%w: meminfo", ErrEmpty)
	}
	m := make(map[string]uint64, 64)
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		key, val, ok := bytes.Cut(line, []byte(":"))
		key = trimSpace(key)
		if !ok || len(key) == 0 {
			continue
		}
		if n, ok := parseKB(val); ok {
			m[string(key)] = n
		}
	}
	if len(m) == 0 {
		return nil, malformed("meminfo: no \"Key: value\" lines")
	}
	return m, nil
}
