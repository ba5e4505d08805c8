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
		dst = appendField(dst, s.Hostname)
	}
	switch {
	case s.Identifier != nil:
		dst = append(dst, ' ')
		dst = appendField(dst, s.Identifier)
	case s.Comm != nil:
		dst = append(dst, ' ')
		dst = appendField(dst, s.Comm)
	default:
		dst = append(dst, " unknown"...)
	}
	switch {
	case s.PID != nil:
		dst = append(dst, '[')
		dst = appendField(dst, s.PID)
		dst = append(dst, ']')
	case s.SyslogPID != nil:
		dst = append(dst, '[')
		dst = appendField(dst, s.SyslogPID)
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

// appendField appends one field of the line's head (host, identifier,
// pid) with its control characters escaped (\n, \t, \r, \xNN): any
// program may log under any identifier, and a newline there would start a
// line of its own choosing, a forged kubelet line say. The message keeps
// its lines, each after the first indented, as journalctl prints them.
func appendField(dst, f []byte) []byte {
	for _, c := range f {
		switch {
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c < 0x20 || c == 0x7f:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'x', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
