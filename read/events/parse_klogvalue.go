package events

import "bytes"

// klog writes a structured value that holds newlines (an error quoting a
// mount's output) as key=< then the value's lines, each indented by a
// tab, then a line " >" before the record's next keys. Joined into one
// record (a log file's continuation lines, journalctl's indented ones),
// that is `key=< line line > next="v"`.

// klogMultiline reads such a value at the start of b (what follows the
// '='): the lines between "<" and the closing " >", and what follows the
// close. ok is false when b does not open one, or when the record was
// cut before the close (the value then is the rest of the record).
func klogMultiline(b []byte) (v string, after []byte, ok bool) {
	if len(b) < 2 || b[0] != '<' || (b[1] != ' ' && b[1] != '\t' && b[1] != '\n') {
		return "", b, false
	}
	body := b[1:]
	for i := 0; i < len(body); {
		j := bytes.IndexByte(body[i:], '>')
		if j < 0 {
			break
		}
		j += i
		before := j > 0 && (body[j-1] == ' ' || body[j-1] == '\t' || body[j-1] == '\n')
		end := j+1 == len(body) || body[j+1] == ' ' || body[j+1] == '\t' || body[j+1] == '\n'
		if before && end {
			return string(bytes.TrimSpace(body[:j])), body[j+1:], true
		}
		i = j + 1
	}
	return string(bytes.TrimSpace(body)), nil, true
}
