package storageclients

import (
	"strconv"
	"strings"
)

// Block layer sysfs files (Documentation/ABI/stable/sysfs-block and
// Documentation/admin-guide/iostats.rst): /sys/block/<dev>/inflight holds
// "reads writes" in flight; /sys/block/<dev>/stat holds 11, 15 or 17
// counters (I/Os, merges, sectors and ms for reads, writes, discards and
// flushes, with in-flight, io_ticks and time_in_queue after the writes).

// Indexes into the stat fields.
const (
	statReadIOs    = 0
	statWriteIOs   = 4
	statInFlight   = 8
	statIOTicks    = 9
	statDiscardIOs = 11
	statFlushIOs   = 15
)

// ParseInflight reads the inflight file.
func ParseInflight(b []byte) ([2]int64, bool) {
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return [2]int64{}, false
	}
	r, err1 := strconv.ParseInt(f[0], 10, 64)
	w, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || r < 0 || w < 0 {
		return [2]int64{}, false
	}
	return [2]int64{r, w}, true
}

// ParseBlockStat reads the stat file.
func ParseBlockStat(b []byte) ([]uint64, bool) {
	f := strings.Fields(string(b))
	if len(f) < 11 || len(f) > 32 {
		return nil, false
	}
	out := make([]uint64, len(f))
	for i, v := range f {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// completions is how many I/Os a stat sample says have completed.
func completions(st []uint64) uint64 {
	var n uint64
	for _, i := range []int{statReadIOs, statWriteIOs, statDiscardIOs, statFlushIOs} {
		if i < len(st) {
			n += st[i]
		}
	}
	return n
}

// ParseDev reads a sysfs "dev" file ("major:minor").
func ParseDev(b []byte) (string, bool) {
	s := strings.TrimSpace(string(b))
	maj, min, ok := strings.Cut(s, ":")
	if !ok || !digits(maj) || !digits(min) {
		return "", false
	}
	return s, true
}

// ParseInt reads a sysfs file holding one integer.
func ParseInt(b []byte) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
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
