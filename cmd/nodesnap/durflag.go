package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// sinceValue is --since: a Go duration (90m, 36h) or days (7d, 1d12h), as
// journalctl users write them; never negative.
type sinceValue struct{ d *time.Duration }

func (s sinceValue) String() string {
	if s.d == nil {
		return ""
	}
	return formatDays(*s.d)
}

func (s sinceValue) Type() string { return "duration" }

func (s sinceValue) Set(v string) error {
	d, err := parseDays(v)
	if err != nil {
		return err
	}
	*s.d = d
	return nil
}

// parseDays parses a duration with an optional leading count of days:
// "7d", "1d12h", "36h", "90m". It refuses negative values.
func parseDays(v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%q is negative: give how far back, such as 2h or 7d", v)
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: a number of days (7d) and/or a Go duration (12h, 90m)", v)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration: a number of days (7d) and/or a Go duration (12h, 90m)", v)
	}
	return days + d, nil
}

// formatDays writes whole days as "Nd" and the rest as Go does.
func formatDays(d time.Duration) string {
	day := 24 * time.Hour
	switch {
	case d > 0 && d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d > day:
		return fmt.Sprintf("%dd%s", d/day, d%day)
	}
	return d.String()
}
