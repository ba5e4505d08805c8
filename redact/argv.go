package redact

import (
	"io"
	"strings"
)

// Argv redacts a command line given as its arguments and returns them
// with what was masked replaced, and the counts. The arguments are read
// as the one line a process table shows (joined by spaces), so a flag and
// its value in two arguments ("-v", "x"; "--password", "x") are seen
// together, and the same command line is masked the same way whether it
// is written as that line or as a JSON list: a collector redacts the
// arguments once, with this, and writes the result to both.
func (r *Redactor) Argv(argv []string) ([]string, map[string]int) {
	if len(argv) == 0 {
		return argv, map[string]int{}
	}
	starts := make([]int, len(argv))
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		starts[i] = b.Len()
		b.WriteString(a)
	}
	// One line: a newline inside an argument must not start another.
	line := []byte(strings.Map(func(c rune) rune {
		if c == '\n' || c == '\r' {
			return ' '
		}
		return c
	}, b.String()))
	var edits []edit
	w := r.NewWriter(io.Discard)
	w.capture = &edits
	w.maxLine = max(w.maxLine, len(line)+1)
	_, _ = w.Write(line)
	_ = w.Close()
	counts := w.Counts()
	if len(edits) == 0 {
		return argv, counts
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		s, e := starts[i], starts[i]+len(a)
		var nb strings.Builder
		last := s
		for _, ed := range edits {
			if ed.e <= s || ed.s >= e {
				continue
			}
			from, to := max(ed.s, s), min(ed.e, e)
			nb.WriteString(a[last-s : from-s])
			nb.WriteString(ed.repl)
			last = to
		}
		if last == s {
			out[i] = a
			continue
		}
		nb.WriteString(a[last-s:])
		out[i] = nb.String()
	}
	return out, counts
}
