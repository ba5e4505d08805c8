package redact

// Log prefixes. Node logs never start a line with the logged text: a CRI
// container log line starts "<RFC 3339 time> stdout F ", journalctl's
// short formats "<time> <host> <ident>[<pid>]: ", klog's
// "I1123 09:20:11.000000    2231 file.go:50] ". A config dump or an
// echoed header in such a log ("  password: x", "apikey: y") is at the
// start of its line for every purpose that matters here, so the rules that
// read "key: value" differently at a line start look past these prefixes.
//
// logPrefixLen returns where the text of line begins after any chain of
// such prefixes (CRI or journal, then klog), or 0 when it has none. It
// only reads line and never allocates.
func logPrefixLen(line []byte) int {
	i := 0
	switch {
	case criPrefix(line) > 0:
		i = criPrefix(line)
	case journalPrefix(line) > 0:
		i = journalPrefix(line)
	}
	if k := klogPrefix(line[i:]); k > 0 {
		i += k
	}
	return i
}

// rfc3339End returns the end of an RFC 3339 time at the start of b
// ("2026-11-23T09:23:13.000013000Z", "2026-11-23T19:34:46.570985+0000",
// "2026-11-23T19:34:46+00:00"), or 0.
func rfc3339End(b []byte) int {
	if len(b) < 20 || !digits(b[0:4]) || b[4] != '-' || !digits(b[5:7]) || b[7] != '-' || !digits(b[8:10]) ||
		b[10] != 'T' && b[10] != ' ' || !digits(b[11:13]) || b[13] != ':' || !digits(b[14:16]) || b[16] != ':' || !digits(b[17:19]) {
		return 0
	}
	i := 19
	if i < len(b) && (b[i] == '.' || b[i] == ',') {
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	switch {
	case i < len(b) && b[i] == 'Z':
		i++
	case i < len(b) && (b[i] == '+' || b[i] == '-'):
		i++
		for n := 0; n < 5 && i < len(b) && (isDigit(b[i]) || b[i] == ':'); n++ {
			i++
		}
	}
	return i
}

func digits(b []byte) bool {
	for _, c := range b {
		if !isDigit(c) {
			return false
		}
	}
	return len(b) > 0
}

// criPrefix: "<time> stdout F " or "<time> stderr P ".
func criPrefix(line []byte) int {
	i := rfc3339End(line)
	if i == 0 || i >= len(line) || line[i] != ' ' {
		return 0
	}
	i++
	if !hasFoldPrefix(line, i, "stdout ") && !hasFoldPrefix(line, i, "stderr ") {
		return 0
	}
	i += len("stdout ")
	if i+1 >= len(line) || line[i] != 'F' && line[i] != 'P' || line[i+1] != ' ' {
		return 0
	}
	return i + 2
}

// journalPrefix: "<time> <host> <ident>[<pid>]: " or "<time> <host>
// <ident>: ", with the time as short ("Nov 23 09:20:11") or short-iso
// (RFC 3339) prints it.
func journalPrefix(line []byte) int {
	i := rfc3339End(line)
	if i == 0 {
		// "Nov 23 09:20:11"
		if len(line) < 16 || !isAlpha(line[0]) || !isAlpha(line[1]) || !isAlpha(line[2]) || line[3] != ' ' ||
			!(isDigit(line[4]) || line[4] == ' ') || !isDigit(line[5]) || line[6] != ' ' ||
			!digits(line[7:9]) || line[9] != ':' || !digits(line[10:12]) || line[12] != ':' || !digits(line[13:15]) {
			return 0
		}
		i = 15
	}
	if i >= len(line) || line[i] != ' ' {
		return 0
	}
	// The host: one word.
	j := i + 1
	for j < len(line) && line[j] != ' ' {
		j++
	}
	if j == i+1 || j >= len(line) {
		return 0
	}
	// The identifier: up to ": ", with an optional [pid]; no spaces.
	for k := j + 1; k < len(line) && k < j+1+128; k++ {
		switch line[k] {
		case ' ':
			return 0
		case ':':
			if k+1 < len(line) && line[k+1] == ' ' && k > j+1 {
				return k + 2
			}
			if k+1 == len(line) {
				return k + 1
			}
		}
	}
	return 0
}

// klogPrefix: "I1123 09:20:11.000000    2231 file.go:50] ".
func klogPrefix(b []byte) int {
	if len(b) < 22 {
		return 0
	}
	switch b[0] {
	case 'I', 'W', 'E', 'F':
	default:
		return 0
	}
	if !digits(b[1:5]) || b[5] != ' ' || !digits(b[6:8]) || b[8] != ':' || !digits(b[9:11]) || b[11] != ':' || !digits(b[12:14]) {
		return 0
	}
	i := 14
	if b[i] == '.' {
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	i = skipBlanks(b, i)
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	if i >= len(b) || b[i] != ' ' {
		return 0
	}
	// file.go:50]
	for k := i + 1; k < len(b) && k < i+1+256; k++ {
		switch b[k] {
		case ' ':
			return 0
		case ']':
			if k+1 < len(b) && b[k+1] == ' ' {
				return k + 2
			}
			return k + 1
		}
	}
	return 0
}

func isAlpha(b byte) bool { return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }
