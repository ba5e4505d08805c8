package journalfile

import (
	"bytes"
	"strconv"
	"time"
)

// validRealtime is systemd's VALID_REALTIME: a time after the epoch and
// before the year 3111.
func validRealtime(us uint64) bool { return us > 0 && us < 1<<55 }

// AppendShortISOPrecise formats an entry as `journalctl --utc --all
// --output=short-iso-precise` prints it (systemd 252): the time (the
// sender's own _SOURCE_REALTIME_TIMESTAMP when valid, else the entry's),
// the host, the identifier (SYSLOG_IDENTIFIER, else _COMM, else
// "unknown"), the pid in brackets (_PID, else SYSLOG_PID), ": " and the
// message; the message's further lines are indented to the message's
// column, and a final newline ends the message rather than adding an empty
// line. Entries without MESSAGE are not printed (ok is false).
func AppendShortISOPrecise(dst []byte, realtime uint64, s *Short) ([]byte, bool) {
	if s.Message == nil {
		return dst, false
	}
	if s.SourceRealtime != nil {
		if v, err := strconv.ParseUint(string(s.SourceRealtime), 10, 64); err == nil && validRealtime(v) {
			realtime = v
		}
	}
	start := len(dst)
	t := time.UnixMicro(int64(min(realtime, 1<<62))).UTC()
	dst = t.AppendFormat(dst, "2006-01-02T15:04:05.000000-0700")
	if s.Hostname != nil {
		dst = append(dst, ' ')
		dst = append(dst, s.Hostname...)
	}
	switch {
	case s.Identifier != nil:
		dst = append(dst, ' ')
		dst = append(dst, s.Identifier...)
	case s.Comm != nil:
		dst = append(dst, ' ')
		dst = append(dst, s.Comm...)
	default:
		dst = append(dst, " unknown"...)
	}
	switch {
	case s.PID != nil:
		dst = append(dst, '[')
		dst = append(dst, s.PID...)
		dst = append(dst, ']')
	case s.SyslogPID != nil:
		dst = append(dst, '[')
		dst = append(dst, s.SyslogPID...)
		dst = append(dst, ']')
	}
	dst = append(dst, ": "...)
	indent := len(dst) - start
	msg := s.Message
	if len(msg) == 0 {
		return append(dst, '\n'), true
	}
	for line := 0; len(msg) > 0; line++ {
		end := bytes.IndexByte(msg, '\n')
		if end < 0 {
			end = len(msg)
		}
		if line > 0 {
			for range indent {
				dst = append(dst, ' ')
			}
		}
		dst = append(dst, msg[:end]...)
		dst = append(dst, '\n')
		if end == len(msg) {
			break
		}
		msg = msg[end+1:]
	}
	return dst, true
}
