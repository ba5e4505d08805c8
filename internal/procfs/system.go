package procfs

import (
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
