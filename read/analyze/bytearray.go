package analyze

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Go programs that log a command's []byte output with %v print it as a
// byte array: the kubelet's rbd plugin printed
// `rbd output: [114 98 100 58 32 115 ...]` (incident 002), which is
// "rbd: sysfs write failed\nrbd: unmap failed: (16) Device or resource busy".

// decodeByteArrays finds every `output: [n n n ...]` in line and returns
// the decoded texts (only arrays that decode to text).
func decodeByteArrays(line []byte) []string {
	var out []string
	rest := line
	for {
		i := bytes.Index(rest, []byte("utput: ["))
		if i < 0 {
			i = bytes.Index(rest, []byte("utput:["))
			if i < 0 {
				return out
			}
			rest = rest[i+len("utput:["):]
		} else {
			rest = rest[i+len("utput: ["):]
		}
		end := bytes.IndexByte(rest, ']')
		if end < 0 {
			return out
		}
		if s, ok := decodeByteList(rest[:end]); ok {
			out = append(out, s)
		}
		rest = rest[end+1:]
	}
}

// decodeByteList decodes "114 98 100" (decimal bytes separated by spaces
// or commas) when the result is text.
func decodeByteList(b []byte) (string, bool) {
	var buf []byte
	v, digits := 0, 0
	flush := func() bool {
		if digits == 0 {
			return true
		}
		if v > 255 {
			return false
		}
		buf = append(buf, byte(v))
		v, digits = 0, 0
		return true
	}
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if digits == 3 {
				return "", false
			}
			v = v*10 + int(c-'0')
			digits++
		case c == ' ' || c == ',':
			if !flush() {
				return "", false
			}
		default:
			return "", false
		}
	}
	if !flush() || len(buf) < 2 || !utf8.Valid(buf) {
		return "", false
	}
	printable := 0
	for _, r := range string(buf) {
		if r == '\n' || r == '\t' || r == '\r' || r >= ' ' && r != 0x7f {
			printable++
		}
	}
	if printable*10 < utf8.RuneCount(buf)*9 {
		return "", false
	}
	return strings.TrimRight(string(buf), "\n"), true
}
