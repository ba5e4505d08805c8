// Package textfit fits text output to a terminal's width: the width to
// use (the terminal's, else 80 columns) and a writer that elides, or with
// full text asked for wraps, every line longer than that. Widths count
// runes, as a terminal counts cells for the text nodesnap prints.
package textfit

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// Default is the width when the output is not a terminal (a pipe, a file,
// a ticket) or the terminal does not say: the width every tool keeps to
// there.
const Default = 80

// Min is the narrowest width honoured: below it, tables cannot say
// anything readable.
const Min = 40

// Width returns the width to fit output written to w to: the terminal's
// when w is one that says, else $COLUMNS when it is a number, else
// Default. It never returns less than Min.
func Width(w io.Writer) int {
	width := 0
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		if c, _, err := term.GetSize(int(f.Fd())); err == nil {
			width = c
		}
	}
	if width <= 0 {
		if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 0 {
			width = c
		}
	}
	if width <= 0 {
		width = Default
	}
	return max(width, Min)
}

// IsTerminal reports whether w is a terminal. Off a terminal (a pipe, a
// file, a ticket) nothing is cut: tables wrap their long cells at the
// width instead of eliding them, so the reasons a reader needs survive.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// Len is the width of s: its runes.
func Len(s string) int { return utf8.RuneCountInString(s) }

// Elide shortens s to width runes, ending it with "…" when something was
// cut.
func Elide(s string, width int) string {
	if Len(s) <= width {
		return s
	}
	if width <= 1 {
		return "…"
	}
	n := 0
	for i := range s {
		if n == width-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// Writer passes text through line by line, fitting each line to a width:
// a longer line is elided ("…" at its end) or, when Wrap is set, broken
// into lines of that width as Hang does (a table's last column wraps
// under itself). Call Flush at the end for a last line
// without a newline.
type Writer struct {
	w     io.Writer
	width int
	wrap  bool
	buf   []byte
	err   error
}

// NewWriter returns a Writer fitting lines to width; wrap keeps the full
// text (for -v) instead of eliding it.
func NewWriter(w io.Writer, width int, wrap bool) *Writer {
	return &Writer{w: w, width: max(width, 8), wrap: wrap}
}

// Write implements io.Writer; it fails with the first error of the
// underlying writer.
func (f *Writer) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			break
		}
		f.line(string(f.buf[:i]))
		f.buf = f.buf[i+1:]
		if f.err != nil {
			return 0, f.err
		}
	}
	return len(p), nil
}

// Flush writes a last line not ended by a newline.
func (f *Writer) Flush() error {
	if len(f.buf) > 0 && f.err == nil {
		rest := string(f.buf)
		f.buf = nil
		f.emit(f.fit(rest), false)
	}
	return f.err
}

func (f *Writer) line(s string) { f.emit(f.fit(s), true) }

func (f *Writer) emit(lines []string, nl bool) {
	if f.err != nil {
		return
	}
	out := strings.Join(lines, "\n")
	if nl {
		out += "\n"
	}
	_, f.err = io.WriteString(f.w, out)
}

// fit returns s as lines that fit the width.
func (f *Writer) fit(s string) []string {
	s = strings.TrimRight(s, " ")
	if Len(s) <= f.width {
		return []string{s}
	}
	if !f.wrap {
		return []string{Elide(s, f.width)}
	}
	return Hang(s, f.width)
}

// Hang fits one line to width runes a line, its text wrapped under the
// column it hangs from: the last cell of a table row (cells are set apart
// by two spaces or more) when that leaves minHang columns, else the line's
// indentation and two more spaces. A trailing shell comment ("cmd   #
// why") goes on as a comment under itself, or, when it cannot, on a line
// of its own before the command: a command is never continued inside a
// comment, nor a comment outside one.
func Hang(line string, width int) []string {
	line = strings.TrimRight(line, " ")
	if Len(line) <= width {
		return []string{line}
	}
	width = max(width, 8)
	cells := cellStarts(line)
	if n := len(cells); n > 0 {
		c := cells[n-1]
		col := Len(line[:c])
		if col+minHang <= width {
			lead, text, rest := line[:c], line[c:], strings.Repeat(" ", col)
			if t, ok := strings.CutPrefix(text, "# "); ok {
				lead, text, rest = lead+"# ", t, rest+"# "
			}
			return strings.Split(Fill(text, width, lead, rest), "\n")
		}
		if t, ok := strings.CutPrefix(line[c:], "# "); ok {
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			comment := strings.Split(Fill(t, width, indent+"# ", indent+"# "), "\n")
			return append(comment, Hang(strings.TrimRight(line[:c], " "), width)...)
		}
	}
	indent := line[:len(line)-len(strings.TrimLeft(line, " "))] + "  "
	if Len(indent) > width/2 {
		indent = "  "
	}
	var out []string
	rest, prefix := line, ""
	for Len(prefix+rest) > width {
		room := width - Len(prefix)
		cut := breakAt(rest, room)
		out = append(out, prefix+strings.TrimRight(rest[:cut], " "))
		rest = strings.TrimLeft(rest[cut:], " ")
		prefix = indent
	}
	return append(out, prefix+rest)
}

// minHang is the narrowest column text is wrapped in under its cell: a
// table's last column keeps its place while it has this many columns.
const minHang = 20

// cellStarts returns the byte offsets of the cells of a line after its
// first: text that follows two spaces or more.
func cellStarts(line string) []int {
	var out []int
	spaces, started := 0, false
	for i, r := range line {
		switch {
		case r == ' ':
			spaces++
		default:
			if started && spaces >= 2 {
				out = append(out, i)
			}
			started, spaces = true, 0
		}
	}
	return out
}

// Fill fills the words of text to width runes a line: the first line
// starts with first, every other with rest (an indentation, or "# " for a
// comment). A word longer than a whole line (a path, a URL) is broken at
// the width.
func Fill(text string, width int, first, rest string) string {
	var b strings.Builder
	b.WriteString(first)
	col, empty := Len(first), true
	newline := func() {
		b.WriteString("\n" + rest)
		col, empty = Len(rest), true
	}
	for _, w := range strings.Fields(text) {
		if !empty && col+1+Len(w) > width {
			newline()
		}
		for Len(w) > width-col && width-col > 20 {
			if !empty {
				newline()
				continue
			}
			cut := runeOffset(w, width-col)
			b.WriteString(w[:cut])
			w = w[cut:]
			newline()
		}
		if !empty {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += Len(w)
		empty = false
	}
	return b.String()
}

// runeOffset is the byte offset of s's n-th rune (len(s) past its end).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// breakAt returns the byte index to break s at so that s[:i] holds at
// most room runes: after the last space that fits, else at room runes.
func breakAt(s string, room int) int {
	n, lastSpace, hard := 0, -1, len(s)
	for i, r := range s {
		if n == room {
			hard = i
			break
		}
		if r == ' ' && n > 0 {
			lastSpace = i
		}
		n++
	}
	if lastSpace > 0 && Len(s[:lastSpace]) > room/3 {
		return lastSpace
	}
	return hard
}
