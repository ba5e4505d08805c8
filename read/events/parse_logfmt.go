package events

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// logfmtBody reads a logfmt record ("time=... level=error msg=...").
func (p *Parser) logfmtBody(r *record, b []byte, depth int) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte("time=")) && !bytes.HasPrefix(b, []byte("level=")) && !bytes.HasPrefix(b, []byte("ts=")) && !bytes.HasPrefix(b, []byte("lvl=")) {
		return nil, false
	}
	r.fields = append(r.fields, logfmt(b)...)
	r.msg = r.get("msg", "message")
	r.ev.Level = levelWord(r.get("level", "lvl"))
	if t, ok := parseStamp(r.get("time", "ts")); ok && r.ev.Time.IsZero() {
		r.ev.Time, r.ev.Zoned = t, true
	}
	return p.nested(r, depth), true
}

// logfmt reads key=value pairs (values quoted Go-style or bare) from b;
// what is not a pair is skipped.
func logfmt(b []byte) []field {
	var out []field
	for len(out) < 64 {
		b = bytes.TrimLeft(b, " \t")
		if len(b) == 0 {
			return out
		}
		eq := bytes.IndexByte(b, '=')
		sp := bytes.IndexAny(b, " \t")
		if eq <= 0 || (sp >= 0 && sp < eq) {
			if sp < 0 {
				return out
			}
			b = b[sp:]
			continue
		}
		key := string(b[:eq])
		rest := b[eq+1:]
		if v, after, ok := klogMultiline(rest); ok {
			out = append(out, field{key, v})
			b = after
			continue
		}
		if len(rest) > 0 && rest[0] == '"' {
			v, after, ok := unquote(rest)
			if !ok {
				out = append(out, field{key, string(rest)})
				return out
			}
			out = append(out, field{key, v})
			b = after
			continue
		}
		end := bytes.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		out = append(out, field{key, string(rest[:end])})
		b = rest[end:]
	}
	return out
}

// unquote reads a Go-quoted string at the start of b; after is what
// follows it. A quoted string whose escapes Go does not read is returned
// with its backslashes as they are.
func unquote(b []byte) (s string, after []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	i := 1
	for i < len(b) {
		switch b[i] {
		case '\\':
			i += 2
			continue
		case '"':
			q := string(b[:i+1])
			if u, err := strconv.Unquote(q); err == nil && (utf8.ValidString(u) || !utf8.ValidString(q)) {
				// A \x80 escape in valid text would make the value
				// invalid UTF-8: such a value keeps its escapes.
				return u, b[i+1:], true
			}
			return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`), b[i+1:], true
		}
		i++
	}
	return "", b, false
}
