package redact

import (
	"bytes"
)

// The Writer's blocks of key material: PEM private keys and wrapped base64
// keys whose body lines are dropped.

// inBlock handles a line (or piece) inside a PEM private key block or a
// wrapped base64 key. It reports true when the whole piece was dropped.
func (w *Writer) inBlock(line []byte, start bool) bool {
	st := &w.st
	p := &w.p
	if st.block == blockPEM {
		// A key logged line by line keeps each line's log prefix (a CRI
		// or journal record); only the text after it is key material.
		pre := 0
		if start && st.blockPrefixed {
			pre = logPrefixLen(line)
		}
		whole := line
		line = line[pre:]
		if e := bytes.Index(line, []byte("-----END ")); e >= 0 {
			st.block = blockNone
			from := 0
			if start {
				from = indentOf(line)
			}
			from += pre
			e += pre
			line = whole
			if from < e && pemBodyContent(line[from:e]) {
				if !st.blockCounted {
					w.count(rulePEM)
					st.blockCounted = true
				}
				repl := ""
				if !st.blockMarked {
					repl = Marker
				}
				p.add(from, e, -1, prioFirst, contNone, repl)
			}
			return false
		}
		if blank(line) {
			return false
		}
		if start && !st.blockBody && pemHeader(line) {
			return false
		}
		if isMarkerLine(line) {
			st.blockMarked, st.blockBody = true, true
			return false
		}
		if pemBodyLike(line) {
			st.blockBody = true
			if !st.blockCounted {
				w.count(rulePEM)
				st.blockCounted = true
			}
			if start && !st.blockMarked {
				w.out = append(w.out, whole[:pre]...)
				w.markerLine(line)
				st.blockMarked = true
			}
			return true
		}
		// Not key material after all (a truncated block, or a log line
		// that only mentioned the armour): back to normal lines.
		st.block = blockNone
		return false
	}
	// blockB64: the lines after a base64 PEM key that was wrapped, each as
	// wide as the first; a shorter one (or one with padding) is the last.
	t := bytes.TrimSpace(line)
	if start && len(t) > 0 && len(t) <= st.b64Width && len(t)%4 == 0 && allB64(t) {
		if len(t) < st.b64Width || t[len(t)-1] == '=' {
			st.block = blockNone
		}
		return true
	}
	st.block = blockNone
	return false
}

func allB64(b []byte) bool {
	for _, c := range b {
		if !isB64(c) && c != '=' {
			return false
		}
	}
	return true
}

// isMarkerLine reports whether line is just the Marker (a line this package
// wrote; seeing it again means the input was redacted before).
func isMarkerLine(line []byte) bool {
	return bytes.Equal(bytes.TrimSpace(line), []byte(Marker))
}

// pemHeader reports an RFC 1421 / OpenPGP armour header ("Proc-Type: ...",
// "DEK-Info: ...", "Version: ..."), which may precede the body.
func pemHeader(line []byte) bool {
	t := bytes.TrimSpace(line)
	c := bytes.Index(t, []byte(": "))
	if c <= 0 {
		return false
	}
	for _, b := range t[:c] {
		if !isAlnum(b) && b != '-' {
			return false
		}
	}
	return true
}

// pemBodyLike reports whether line looks like part of a PEM body: base64,
// possibly with the artefacts of a key kept in a JSON string (literal \n,
// quotes, a trailing comma), or a dump that prefixes every line, whose last
// field is then a long base64 run.
func pemBodyLike(line []byte) bool {
	n := 0
	ok := true
	for i := 0; i < len(line); {
		b := line[i]
		switch {
		case isB64(b) || b == '=':
			n++
			i++
		case isSpace(b) || b == '"' || b == ',':
			i++
		case b == '\\' && (i+1 == len(line) || line[i+1] == 'n' || line[i+1] == 'r'):
			i += 2 // a literal \n, or a piece of a long line cut after the '\\'

		default:
			ok = false
			i = len(line)
		}
	}
	if ok && n > 0 {
		return true
	}
	t := bytes.TrimRight(line, " \t\r")
	f := bytes.LastIndexAny(t, " \t")
	last := t[f+1:]
	return len(last) >= 40 && allB64(last)
}

// pemBodyContent reports whether b holds key material: base64 bytes other
// than those of literal "\n" escapes and of an earlier Marker.
func pemBodyContent(b []byte) bool {
	for i := 0; i < len(b); {
		switch {
		case b[i] == '\\' && i+1 < len(b):
			i += 2
		case bytes.HasPrefix(b[i:], []byte(Marker)):
			i += len(Marker)
		case isB64(b[i]):
			return true
		default:
			i++
		}
	}
	return false
}
