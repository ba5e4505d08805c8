package events

import (
	"bytes"
	"strconv"
	"time"
)

// months are syslog stamps' month names.
var months = map[string]time.Month{"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}

// prefixes takes off what a collection or a transport adds before the
// writer's own record: a CRI log line's time, stream and tag; a journal
// or syslog prefix (time, host, ident[pid]); dmesg's "[  12.345678]".
func (p *Parser) prefixes(r *record, b []byte) []byte {
	for range 3 {
		switch {
		case len(b) >= 20 && IsDigits(b[:4]) && b[4] == '-' && b[10] == 'T':
			sp := bytes.IndexByte(b, ' ')
			if sp < 0 {
				return b
			}
			rest := b[sp+1:]
			cri := false
			for _, s := range []string{"stdout ", "stderr "} {
				if r2, ok := bytes.CutPrefix(rest, []byte(s)); ok && len(r2) >= 2 && (r2[0] == 'F' || r2[0] == 'P') && r2[1] == ' ' {
					rest, cri = r2[2:], true
				}
			}
			host, ident, pid, after, ok := syslogTail(rest)
			if !cri && !ok && reKlog.Match(rest) {
				// A reader's stamp before the writer's own header
				// (kubectl logs --timestamps): a transport's prefix.
				cri = true
			}
			if !cri && !ok {
				// Not a transport's prefix: the writer's own stamp
				// (Rust tracing, logrus text): the body reads it.
				return b
			}
			if t, ok := parseStamp(string(b[:sp])); ok {
				r.ev.Time, r.ev.Zoned = t, true
			}
			if ok {
				_ = host
				r.ev.Source, r.ev.PID, rest = ident, pid, after
			}
			b = rest
		case len(b) >= 16 && b[3] == ' ' && b[6] == ' ' && b[9] == ':' && months[string(b[:3])] != 0:
			day, err1 := strconv.Atoi(string(bytes.TrimSpace(b[4:6])))
			clock, err2 := time.Parse("15:04:05", string(b[7:15]))
			if err1 == nil && err2 == nil {
				r.ev.Time = WithYear(months[string(b[:3])], day, clock, p.Ref)
			}
			rest := b[15:]
			// "Jun 17 20:18:09.123456" (a precise syslog stamp)
			if len(rest) > 0 && rest[0] == '.' {
				i := 1
				for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
					i++
				}
				rest = rest[i:]
			}
			rest = bytes.TrimLeft(rest, " ")
			if _, ident, pid, after, ok := syslogTail(rest); ok {
				r.ev.Source, r.ev.PID, rest = ident, pid, after
			}
			b = rest
		case len(b) > 3 && b[0] == '[' && reISOBracket.Match(b):
			// A writer's own date and time in brackets (Python
			// logging's "[%(asctime)s]"): not the kernel's ring.
			m := reISOBracket.FindSubmatch(b)
			stamp := string(m[1])
			if len(m[2]) > 0 {
				stamp += "." + string(m[2])
			}
			if t, ok := parseStamp(stamp + string(m[3])); ok && r.ev.Time.IsZero() {
				r.ev.Time, r.ev.Zoned = t, len(m[3]) > 0
			}
			b = bytes.TrimLeft(b[len(m[0]):], " ")
		case len(b) > 3 && b[0] == '[':
			// dmesg: "[  123.456789] message" or "[Thu May 14 ...] message".
			end := bytes.IndexByte(b, ']')
			if end < 0 || end > 40 {
				return b
			}
			if r.ev.Source == "" {
				r.ev.Source = "kernel"
			}
			b = bytes.TrimLeft(b[end+1:], " ")
		default:
			if rest, ok := talosKern(r, b); ok {
				return rest
			}
			return b
		}
	}
	return b
}

// syslogTail reads "host ident[pid]: rest" (or "ident[pid]: rest" with the
// host left out, "ident: rest").
func syslogTail(b []byte) (host, ident string, pid int, rest []byte, ok bool) {
	tryIdent := func(tok []byte) (string, int, bool) {
		if len(tok) < 2 || tok[len(tok)-1] != ':' {
			return "", 0, false
		}
		id := tok[:len(tok)-1]
		n := 0
		if i := bytes.IndexByte(id, '['); i > 0 && id[len(id)-1] == ']' {
			n, _ = strconv.Atoi(string(id[i+1 : len(id)-1]))
			id = id[:i]
		}
		for _, c := range id {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/' || c == '@') {
				return "", 0, false
			}
		}
		return string(id), n, len(id) > 0
	}
	f1, after1, ok1 := bytes.Cut(b, []byte(" "))
	if !ok1 {
		return "", "", 0, nil, false
	}
	// "host ident[pid]: ..."
	if f2, after2, ok2 := bytes.Cut(after1, []byte(" ")); ok2 && (len(f1) == 0 || f1[len(f1)-1] != ':') {
		if id, n, ok := tryIdent(f2); ok {
			return string(f1), id, n, after2, true
		}
	}
	// "ident[pid]: ..." (a pasted line without its host)
	if id, n, ok := tryIdent(f1); ok && bytes.IndexByte(f1, '[') > 0 {
		return "", id, n, after1, true
	}
	return "", "", 0, nil, false
}

// reCephID is ceph-csi's request prefix, "ID: n Req-ID: x" (the
// request's number and the volume it is about).
var reCephID = lazy(`^ID: (\d+)(?: Req-ID: (\S+))? `)

// requestPrefix takes a request's number (and volume) off a message:
// ceph-csi's "ID: n Req-ID: x" prefix, or a request ID field.
func requestPrefix(r *record) {
	if m := reCephID.FindStringSubmatch(r.msg); m != nil {
		r.reqID, r.reqVol = m[1], m[2]
		r.msg = r.msg[len(m[0]):]
	} else if m := reBracketRequest.FindStringSubmatch(r.msg); m != nil {
		r.reqID = m[1]
		r.msg = r.msg[len(m[0]):]
	} else if id := r.get("requestID", "request_id", "reqID", "req_id", "RequestID"); id != "" {
		r.reqID = id
	}
}
