package procfs

import "strings"

// unescapeOctal undoes the kernel's mangle()/seq_escape(), which writes
// each byte of a path that would break the line's format (space, tab,
// newline, backslash) as a backslash and three octal digits: a mountpoint
// "/mnt/my dir" appears as "/mnt/my\040dir". A backslash not followed by
// three octal digits (at most \377) is kept as it is. When there is nothing
// to undo, the input is returned without allocating.
func unescapeOctal(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+4 <= len(s) && isOctalEscape(s[i+1:i+4]) {
			b = append(b, octalByte(s[i+1:i+4]))
			i += 3
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

// isOctalEscape reports whether d is three octal digits naming one byte.
func isOctalEscape(d string) bool {
	return len(d) == 3 &&
		'0' <= d[0] && d[0] <= '3' &&
		'0' <= d[1] && d[1] <= '7' &&
		'0' <= d[2] && d[2] <= '7'
}

// octalByte is the byte three octal digits name (isOctalEscape holds).
func octalByte(d string) byte {
	return (d[0]-'0')<<6 | (d[1]-'0')<<3 | (d[2] - '0')
}

// unescapeTaskName undoes the escaping of the Name: line of
// /proc/<pid>/status. A task can set its name to any bytes but NUL
// (prctl PR_SET_NAME), so the kernel writes newline and backslash as the C
// escapes "\n" and "\\" there; older kernels and other tools used octal,
// which is accepted too. Unknown escapes are kept as they are.
func unescapeTaskName(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b = append(b, c)
			continue
		}
		if i+4 <= len(s) && isOctalEscape(s[i+1:i+4]) {
			b = append(b, octalByte(s[i+1:i+4]))
			i += 3
			continue
		}
		var r byte
		switch s[i+1] {
		case 'n':
			r = '\n'
		case 't':
			r = '\t'
		case 'r':
			r = '\r'
		case 'f':
			r = '\f'
		case 'v':
			r = '\v'
		case 'a':
			r = '\a'
		case 'e':
			r = 0x1b
		case '\\':
			r = '\\'
		case '"':
			r = '"'
		default:
			b = append(b, c)
			continue
		}
		b = append(b, r)
		i++
	}
	return string(b)
}
