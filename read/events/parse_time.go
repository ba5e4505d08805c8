package events

import (
	"strings"
	"time"
)

// parseStamp reads an RFC 3339 stamp (a comma or a space for the T
// accepted).
func parseStamp(s string) (time.Time, bool) {
	s = strings.Replace(s, ",", ".", 1)
	if len(s) > 10 && s[10] == ' ' {
		s = s[:10] + "T" + s[11:]
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// WithYear dates a month, day and clock time in UTC, in the year that puts
// it no later than a day after ref (now when ref is zero): a syslog
// stamp carries no year.
func WithYear(mon time.Month, day int, clock time.Time, ref time.Time) time.Time {
	if ref.IsZero() {
		ref = time.Now()
	}
	t := time.Date(ref.Year(), mon, day, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), time.UTC)
	if t.After(ref.Add(24 * time.Hour)) {
		t = t.AddDate(-1, 0, 0)
	}
	return t
}

// IsDigits tells a non-empty run of ASCII digits.
func IsDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}
