// Package procfs parses the text the Linux kernel exposes under /proc.
//
// Every parser here is a pure function over bytes (or a readlink result):
// the package never opens, stats or reads a file. Reading another process's
// /proc files can block for as long as that process's mmap lock is held, so
// nodesnap reads them in isolated child processes and hands the bytes to
// these parsers. Keeping I/O out also makes every parser testable against
// fixtures and fuzzable.
//
// The parsers never panic, whatever the input: the bytes come from a sick
// node, may be truncated at a size cap, and may have changed while they were
// read. Line-oriented files (mountinfo, maps) return the lines they could
// parse together with a LineError for each line they could not, so one
// garbled line costs one line, not the file. Single-record files (stat,
// status, fdinfo) return an error wrapping ErrEmpty, ErrMalformed or
// ErrMissingField.
//
// Strings in returned values may share memory with one copy of the input
// taken at the start of the call (one allocation instead of one per field).
// The caller's byte slice is never retained, so it may be reused at once.
package procfs

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Test for them with errors.Is; the wrapping error says
// which file and what was wrong.
var (
	// ErrEmpty means the input held nothing to parse. For a task's files
	// that usually means the task exited while it was being read.
	ErrEmpty = errors.New("procfs: empty input")
	// ErrMalformed means the input does not have the kernel's format.
	ErrMalformed = errors.New("procfs: malformed input")
	// ErrMissingField means a field the parser requires is absent. It wraps
	// ErrMalformed, so errors.Is(err, ErrMalformed) holds for it too.
	ErrMissingField = fmt.Errorf("%w: missing field", ErrMalformed)
)

// maxLineErrorText caps LineError.Text: the raw file is kept in the bundle
// anyway, and a garbage "line" may be megabytes long.
const maxLineErrorText = 256

// LineError reports one line of a line-oriented file that could not be
// parsed. The lines around it are still returned. Past 100 bad lines in
// one file, the rest are summed up in a final LineError for the first of
// them, whose message gives their number.
type LineError struct {
	// Line is the 1-based line number in the input.
	Line int `json:"line"`
	// Text is the offending line, cut to 256 bytes.
	Text string `json:"text"`
	// Err says what was wrong; it wraps ErrMalformed.
	Err error `json:"-"`
}

// Error implements error.
func (e LineError) Error() string {
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// Unwrap lets errors.Is(e, ErrMalformed) see the sentinel.
func (e LineError) Unwrap() error { return e.Err }

// maxBadLines bounds how many malformed lines a parser lists one by one. A
// file that is mostly garbage is not what it claims to be, and listing a
// million bad lines would cost far more memory than the file itself; the
// lines past the limit are summed up in one last LineError.
const maxBadLines = 100

// moreBadLines is the error of that last LineError.
type moreBadLines struct{ n int }

func (e moreBadLines) Error() string {
	return fmt.Sprintf("%v: and %d more malformed lines, not listed", ErrMalformed, e.n)
}

func (e moreBadLines) Unwrap() error { return ErrMalformed }

// badLines collects LineErrors up to maxBadLines, then only counts.
type badLines struct {
	list      []LineError
	more      int
	firstMore LineError
}

func (b *badLines) add(n int, line string, err error) {
	if len(b.list) < maxBadLines {
		b.list = append(b.list, newLineError(n, line, err))
		return
	}
	if b.more == 0 {
		b.firstMore = newLineError(n, line, nil)
	}
	b.more++
}

// result returns the listed errors, with the summary last if any were not
// listed.
func (b *badLines) result() []LineError {
	if b.more > 0 {
		e := b.firstMore
		e.Err = moreBadLines{b.more}
		return append(b.list, e)
	}
	return b.list
}

// countLines counts the lines of s at least minLen bytes long: an exact
// capacity for well-formed input that a file of empty lines cannot inflate.
func countLines(s string, minLen int) int {
	n := 0
	for s != "" {
		line, rest, _ := strings.Cut(s, "\n")
		if len(line) >= minLen {
			n++
		}
		s = rest
	}
	return n
}

func newLineError(n int, line string, err error) LineError {
	if len(line) > maxLineErrorText {
		line = line[:maxLineErrorText]
	}
	// Clone so a caller keeping only the errors does not keep the whole
	// input alive through a substring.
	return LineError{Line: n, Text: strings.Clone(line), Err: err}
}

// malformed builds a package-level error value for a fixed reason, so a bad
// line costs no allocation for its error.
func malformed(reason string) error {
	return fmt.Errorf("%w: %s", ErrMalformed, reason)
}

func missing(reason string) error {
	return fmt.Errorf("%w: %s", ErrMissingField, reason)
}
