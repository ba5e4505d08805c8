package procfs

import "math"

// text lets the number parsers work on a substring or a byte slice without
// converting (and so allocating) one into the other.
type text interface{ ~string | ~[]byte }

// parseUint parses digits in the given base (8, 10 or 16) with no sign,
// prefix or surrounding space, and fails on overflow past max. The kernel
// prints these fields with %u, %x or %o, so anything else means the line is
// not what it appears to be. strconv would accept "+1", "0x1" and "1_0".
func parseUint[T text](s T, base, max uint64) (uint64, bool) {
	if len(s) == 0 {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		d := digitVal(s[i])
		if d >= base {
			return 0, false
		}
		if n > (max-d)/base {
			return 0, false
		}
		n = n*base + d
	}
	return n, true
}

// parseInt64 parses an optionally negative decimal that fits in an int64.
// The kernel prints some fields (tty_nr, tpgid, nice, fdinfo pos) signed.
func parseInt64[T text](s T) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	lim := uint64(math.MaxInt64)
	if neg {
		lim++ // math.MinInt64 has no positive counterpart
	}
	u, ok := parseUint(s, 10, lim)
	if !ok {
		return 0, false
	}
	if neg {
		return -int64(u), true // wraps to MinInt64 exactly at the limit
	}
	return int64(u), true
}

// parseInt is parseInt64 limited to the range of int.
func parseInt[T text](s T) (int, bool) {
	n, ok := parseInt64(s)
	if !ok || n < math.MinInt || n > math.MaxInt {
		return 0, false
	}
	return int(n), true
}

// parseDec parses an unsigned decimal that fits in a non-negative int.
func parseDec[T text](s T) (int, bool) {
	u, ok := parseUint(s, 10, math.MaxInt)
	return int(u), ok
}

func digitVal(c byte) uint64 {
	switch {
	case '0' <= c && c <= '9':
		return uint64(c - '0')
	case 'a' <= c && c <= 'f':
		return uint64(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return uint64(c-'A') + 10
	}
	return 255
}

// isBlank reports whether s holds only whitespace. Blank lines are skipped
// rather than reported (a trailing newline is not an error), and a blank
// file is empty.
func isBlank[T text](s T) bool {
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			return false
		}
	}
	return true
}

// isSpace matches the separators tolerated between fields of files whose
// columns the kernel pads (stat, status values, uptime).
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// nextField returns the first run of non-space bytes in s and what follows
// it, without allocating a slice of fields.
func nextField[T text](s T) (field, rest T) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	j := i
	for j < len(s) && !isSpace(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

// trimSpace trims the separators isSpace matches from both ends.
func trimSpace[T text](s T) T {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}
