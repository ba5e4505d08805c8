package redact

// Byte classes used by the hand-written rules. A table lookup per byte is
// what lets the rules scan at memory speed without regular expressions.
const (
	cSpace  = 1 << iota // space, tab, CR, VT, FF
	cAlnum              // [A-Za-z0-9]
	cKey                // bytes of a key name: [A-Za-z0-9_.-]
	cB64                // standard base64 alphabet without padding: [A-Za-z0-9+/]
	cB64URL             // base64url alphabet: [A-Za-z0-9_-]
	cStop               // ends an unquoted value: space, NUL and ,;&"'()[]{}<>\
	cHex                // [0-9A-Fa-f]
)

var ctype [256]uint8

func init() {
	for b := 0; b < 256; b++ {
		c := byte(b)
		var t uint8
		switch c {
		case ' ', '\t', '\r', '\v', '\f':
			t |= cSpace | cStop
		}
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if alnum {
			t |= cAlnum | cKey | cB64 | cB64URL
		}
		switch c {
		case '_':
			t |= cKey | cB64URL
		case '-':
			t |= cKey | cB64URL
		case '.':
			t |= cKey
		case '+', '/':
			t |= cB64
		case 0, ',', ';', '&', '"', '\'', '(', ')', '[', ']', '{', '}', '<', '>', '\\':
			t |= cStop
		}
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' {
			t |= cHex
		}
		ctype[b] = t
	}
}

func isSpace(b byte) bool   { return ctype[b]&cSpace != 0 }
func isAlnum(b byte) bool   { return ctype[b]&cAlnum != 0 }
func isKeyByte(b byte) bool { return ctype[b]&cKey != 0 }
func isB64(b byte) bool     { return ctype[b]&cB64 != 0 }
func isB64URL(b byte) bool  { return ctype[b]&cB64URL != 0 }
func isStop(b byte) bool    { return ctype[b]&cStop != 0 }
func isHex(b byte) bool     { return ctype[b]&cHex != 0 }
func isDigit(b byte) bool   { return '0' <= b && b <= '9' }

// skipSpace returns the first index at or after i that is not a space.
func skipSpace(line []byte, i int) int {
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	return i
}

// trimRight returns the end of line[:e] without trailing spaces.
func trimRight(line []byte, e int) int {
	for e > 0 && isSpace(line[e-1]) {
		e--
	}
	return e
}

// skipBlanks returns the first index at or after i that is not a space or
// tab (YAML indentation; unlike skipSpace it stops at CR).
func skipBlanks(line []byte, i int) int {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
		i++
	}
	return i
}

// indentOf is the number of leading spaces and tabs.
func indentOf(line []byte) int { return skipBlanks(line, 0) }

// blank reports whether line holds only spaces.
func blank(line []byte) bool { return skipSpace(line, 0) == len(line) }

// foldEq reports whether a equals the lower-case ASCII word w, ignoring case.
func foldEq(a []byte, w string) bool {
	if len(a) != len(w) {
		return false
	}
	for i := range a {
		if fold(a[i]) != w[i] {
			return false
		}
	}
	return true
}

// hasFoldPrefix reports whether line[i:] starts with the lower-case word w,
// ignoring case.
func hasFoldPrefix(line []byte, i int, w string) bool {
	return i >= 0 && len(line)-i >= len(w) && foldEq(line[i:i+len(w)], w)
}

// keyStart returns where the YAML-style key of line begins: after the
// indentation and any "- " list markers.
func keyStart(line []byte) int {
	i := indentOf(line)
	for i+1 < len(line) && line[i] == '-' && (line[i+1] == ' ' || line[i+1] == '\t') {
		i = skipBlanks(line, i+1)
	}
	return i
}

// base64Shaped reports whether v could be standard base64: a multiple of
// four long, alphabet bytes, at most two '=' at the end.
func base64Shaped(v []byte) bool {
	if len(v) == 0 || len(v)%4 != 0 {
		return false
	}
	n := len(v)
	if v[n-1] == '=' {
		n--
		if v[n-1] == '=' {
			n--
		}
	}
	for _, b := range v[:n] {
		if !isB64(b) {
			return false
		}
	}
	return true
}
