// Package termsafe makes text from a bundle, a node or a peer safe to
// print on a terminal: a terminal shows text, never obeys it.
//
// Every character a terminal may act on is shown escaped instead: the C0
// controls (ESC starts CSI and OSC sequences: screen clears, OSC 52
// clipboard writes, OSC 8 links, colours), DEL, the C1 controls U+0080 to
// U+009F (0x9B is CSI by itself on some terminals), and the bidirectional
// formatting characters that reorder what is shown (U+202A-U+202E,
// U+2066-U+2069, U+200E, U+200F, U+061C). A byte that is not UTF-8 is
// shown as \xNN, since a terminal in an 8-bit mode reads 0x9B as CSI.
//
// Field escapes one value (newline and tab included, so that a value
// cannot forge a line); Writer escapes a whole text stream written through
// it, keeping the newlines and tabs the printer itself lays out with. A
// printer wraps its output in a Writer at the boundary, and escapes with
// Field where one value must stay on its line.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// unsafe reports whether a terminal may act on r.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// escapeRune writes r's escape: \n, \r, \t by name, \xNN below U+0100,
// \uNNNN above.
func escapeRune(b *strings.Builder, r rune) {
	switch r {
	case '\n':
		b.WriteString(`\n`)
	case '\r':
		b.WriteString(`\r`)
	case '\t':
		b.WriteString(`\t`)
	default:
		if r < 0x100 {
			fmt.Fprintf(b, `\x%02x`, r)
		} else {
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
}

// Clean reports whether s holds nothing to escape (Field returns it as is).
func Clean(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return false
			}
		}
		if unsafe(r) {
			return false
		}
	}
	return true
}

// Field returns s with every control, newline and tab included, shown
// escaped: one value on one line.
func Field(s string) string { return escape(s, false) }

// Text returns s escaped as Field does but keeping newlines and tabs: a
// message of several lines.
func Text(s string) string { return escape(s, true) }

func escape(s string, keepLayout bool) string {
	if Clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unsafe(r):
			escapeRune(&b, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// Writer escapes everything written through it as Text does. A UTF-8
// sequence split across two writes is kept whole: the tail of a write that
// may be the start of one waits for the next write (or Flush).
type Writer struct {
	w       io.Writer
	pending []byte
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Fd is the descriptor of the file written to, so that terminal width
// and colour checks still see the terminal; ^uintptr(0) otherwise.
func (t *Writer) Fd() uintptr {
	if f, ok := t.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

// Write implements io.Writer. It reports len(p) written when the escaped
// text was written whole.
func (t *Writer) Write(p []byte) (int, error) {
	buf := append(t.pending, p...)
	t.pending = nil
	// Hold back an incomplete UTF-8 sequence at the end.
	cut := len(buf)
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	t.pending = append([]byte(nil), buf[cut:]...)
	if _, err := io.WriteString(t.w, Text(string(buf[:cut]))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a held-back incomplete sequence, escaped.
func (t *Writer) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	s := Text(string(t.pending))
	t.pending = nil
	_, err := io.WriteString(t.w, s)
	return err
}
