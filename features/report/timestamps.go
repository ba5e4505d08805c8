package report

import (
	"strings"
	"time"
)

// lineTime reads the time a log line was written from the line's text, as
// the bundle's log files carry it: an RFC 3339 prefix (journalctl
// short-iso-precise, CRI container logs), a syslog prefix ("Apr 04
// 16:25:40", no year: the year is ref's, or the one before when that
// would put the line after ref), or, failing those, a klog header
// anywhere in the first 200 bytes ("I0404 16:27:02.104221", same year
// rule). ok is false when the line carries none of them. Lines are
// untrusted: nothing here may panic or take more than linear time.
func lineTime(line string, ref time.Time) (time.Time, bool) {
	if len(line) > 200 {
		line = line[:200]
	}
	if t, ok := rfc3339Prefix(line); ok {
		return t, true
	}
	if t, ok := syslogPrefix(line, ref); ok {
		return t, true
	}
	return klogHeader(line, ref)
}

// rfc3339Prefix parses the first field of line as an RFC 3339 time, with
// or without fractional seconds, with a zone as "Z", "+00:00" or "+0000".
func rfc3339Prefix(line string) (time.Time, bool) {
	field, _, _ := strings.Cut(line, " ")
	if len(field) < len("2006-01-02T15:04:05") || field[4] != '-' || field[10] != 'T' {
		return time.Time{}, false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700"} {
		if t, err := time.Parse(layout, field); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// syslogPrefix parses "Jan _2 15:04:05" (or with microseconds) at the
// start of line.
func syslogPrefix(line string, ref time.Time) (time.Time, bool) {
	if len(line) < len("Jan 02 15:04:05") {
		return time.Time{}, false
	}
	end := len("Jan 02 15:04:05")
	if end < len(line) && line[end] == '.' {
		j := end + 1
		for j < len(line) && j-end-1 < 9 && isDigit(line[j]) {
			j++
		}
		if j > end+1 {
			end = j
		}
	}
	t, err := time.Parse(time.StampMicro, padFraction(line[:end]))
	if err != nil {
		return time.Time{}, false
	}
	return withYear(t, ref), true
}

// padFraction gives time.StampMicro the seconds' fraction it wants.
func padFraction(s string) string {
	base, frac, ok := strings.Cut(s, ".")
	if !ok {
		return s + ".000000"
	}
	if len(frac) > 6 {
		frac = frac[:6]
	}
	return base + "." + frac + strings.Repeat("0", 6-len(frac))
}

// klogHeader finds "Lmmdd hh:mm:ss.uuuuuu" (L one of IWEF) in line.
func klogHeader(line string, ref time.Time) (time.Time, bool) {
	const n = len("I0404 16:27:02.104221")
	for i := 0; i+n <= len(line); i++ {
		switch line[i] {
		case 'I', 'W', 'E', 'F':
		default:
			continue
		}
		if i > 0 && line[i-1] != ' ' && line[i-1] != '"' {
			continue
		}
		s := line[i+1 : i+n]
		if s[4] != ' ' || s[7] != ':' || s[10] != ':' || s[13] != '.' {
			continue
		}
		t, err := time.Parse("0102 15:04:05.000000", s)
		if err != nil {
			continue
		}
		return withYear(t, ref), true
	}
	return time.Time{}, false
}

// withYear puts a year-less time in ref's year, or the year before when
// that would put it more than a day after ref (a log read in January
// holding December's lines).
func withYear(t, ref time.Time) time.Time {
	if ref.IsZero() {
		ref = time.Now()
	}
	ref = ref.UTC()
	y := time.Date(ref.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
	if y.After(ref.Add(24 * time.Hour)) {
		y = y.AddDate(-1, 0, 0)
	}
	return y
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
