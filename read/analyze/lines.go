package analyze

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf8"
)

// maxLineKept bounds one line as kept in evidence; longer lines are cut
// (and say so). Lines are read whole whatever their length, so a long one
// never desynchronises the line numbers.
const maxLineKept = 4 << 10

// lineReader yields the lines of a text file with their numbers, without
// holding more than one buffer of the file.
type lineReader struct {
	br   *bufio.Reader
	n    int
	long []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line (without its newline; valid until the next
// call), its 1-based number, whether it was cut to maxScan bytes, and
// io.EOF at the end.
func (l *lineReader) next() ([]byte, int, bool, error) {
	const maxScan = 256 << 10
	line, err := l.br.ReadSlice('\n')
	cut := false
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the buffer: keep its start (up to maxScan),
		// skip the rest.
		l.long = append(l.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = l.br.ReadSlice('\n')
			if len(l.long) < maxScan {
				l.long = append(l.long, line[:min(len(line), maxScan-len(l.long))]...)
			} else {
				cut = true
			}
		}
		line = l.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, l.n, false, err
	}
	if len(line) == 0 && errors.Is(err, io.EOF) {
		return nil, l.n, false, io.EOF
	}
	l.n++
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, l.n, cut, nil
}

// eachLine calls fn with each line of r, its 1-based number and whether
// it was cut, until the end (nil) or the first error of reading or of fn.
func eachLine(r io.Reader, fn func(b []byte, n int, cut bool) error) error {
	lr := newLineReader(r)
	for {
		b, n, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(b, n, cut); err != nil {
			return err
		}
	}
}

// keepLine makes a Line to keep as evidence: valid UTF-8, at most
// maxLineKept bytes.
func keepLine(n int, b []byte, cut bool) Line {
	l := Line{N: n, Truncated: cut}
	if len(b) > maxLineKept {
		// A rune cut in two becomes U+FFFD below.
		b = b[:maxLineKept]
		l.Truncated = true
	}
	l.Text = toValidUTF8(b)
	return l
}

func toValidUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}
