// Package goroutinedump counts the goroutines of a Go goroutine dump
// (debug=2, the format of a Go panic) by the frame that says what each is
// doing: `nodesnap diff` compares these counts between two bundles and
// `nodesnap report` charts them, and analyze counts them in its own pass
// over the dump. It imports the standard library only.
package goroutinedump

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// A debug=2 dump: "goroutine N [state]:", then pairs of lines, the
// function with its arguments and its file:line indented by a tab, then a
// blank line.

const (
	// MaxFrames bounds the distinct frames counted per dump.
	MaxFrames = 5000
	// MaxLine bounds one line; longer ones are skipped.
	MaxLine = 64 << 10
	// OtherFrames collects goroutines whose frame was not kept.
	OtherFrames = "(other frames)"
	// NoFrames counts goroutines whose stack lists no function.
	NoFrames = "(no frames)"
)

// Counter counts the goroutines of one dump fed to it line by line, by
// their first frame outside Go's standard library (the top frame when
// there is none): "syscall.Syscall6" says nothing, the kubelet function
// that called it does.
type Counter struct {
	// ByFrame is goroutines per frame, at most MaxFrames keys plus
	// OtherFrames.
	ByFrame map[string]int
	// Total counts every goroutine.
	Total int

	in         bool
	top, first string
}

// NewCounter returns a Counter adding to into (a new map when nil).
func NewCounter(into map[string]int) *Counter {
	if into == nil {
		into = map[string]int{}
	}
	return &Counter{ByFrame: into}
}

// Line feeds one line, without its newline.
func (c *Counter) Line(line string) {
	if len(line) > MaxLine {
		return
	}
	switch {
	case strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":"):
		c.flush()
		c.in, c.top, c.first = true, "", ""
	case !c.in || line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by "):
		if line == "" {
			c.flush()
		}
	default:
		fn := FuncName(line)
		if c.top == "" {
			c.top = fn
		}
		if c.first == "" && !Stdlib(fn) {
			c.first = fn
		}
	}
}

// End counts the last goroutine of the dump.
func (c *Counter) End() { c.flush() }

func (c *Counter) flush() {
	if !c.in {
		return
	}
	c.in = false
	f := c.first
	if f == "" {
		f = c.top
	}
	if f == "" {
		f = NoFrames
	}
	if _, ok := c.ByFrame[f]; !ok && len(c.ByFrame) >= MaxFrames {
		f = OtherFrames
	}
	c.ByFrame[f]++
	c.Total++
}

// Count reads a whole dump, adds its goroutines by frame to into (see
// Counter) and returns how many it read.
func Count(r io.Reader, into map[string]int) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	c := NewCounter(into)
	for {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			c.End()
			return c.Total, nil
		}
		if err != nil {
			return c.Total, err
		}
		c.Line(line)
	}
}

// readLine returns one line without its newline; a line longer than
// MaxLine is returned empty of content (as "\t", a file line, which the
// counter skips).
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	long := false
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (len(b) > 0 || long) {
				break
			}
			return "", err
		}
		if len(b)+len(chunk) > MaxLine {
			long = true
		} else if !long {
			b = append(b, chunk...)
		}
		if !isPrefix {
			break
		}
	}
	if long {
		return "\t", nil
	}
	return string(b), nil
}

// FuncName strips a frame's arguments: "pkg.(*T).m(0xc0, {0x1, 0x2})"
// → "pkg.(*T).m".
func FuncName(line string) string {
	line = strings.TrimSpace(line)
	if strings.HasSuffix(line, ")") {
		if i := strings.LastIndex(line, "("); i > 0 {
			return line[:i]
		}
	}
	return line
}

// Stdlib reports whether a function is in Go's standard library (or
// main): their import paths have no dot in the first element.
func Stdlib(fn string) bool {
	first, _, _ := strings.Cut(fn, "/")
	if !strings.Contains(fn, "/") {
		// "syscall.Syscall6", "os.Stat", "main.main": one element, the
		// dot separates the function.
		return true
	}
	return !strings.Contains(first, ".")
}
