package bundlediff

import (
	"bufio"
	"errors"
	"io"
	"strings"
)

// Goroutine dumps (debug=2, the format of a Go panic): "goroutine N
// [state]:", then pairs of lines, the function with its arguments and its
// file:line indented by a tab, then a blank line.

const (
	// maxFrames bounds the distinct frames counted per dump.
	maxFrames = 5000
	// maxDumpLine bounds one line; longer ones are skipped.
	maxDumpLine = 64 << 10
	// otherFrames collects goroutines whose frame was not kept.
	otherFrames = "(other frames)"
)

// countGoroutines counts the goroutines of a debug=2 dump by their first
// frame outside Go's standard library (the top frame when there is none):
// "syscall.Syscall6" says nothing, the kubelet function that called it
// does. It adds to into and returns how many goroutines it read.
func countGoroutines(r io.Reader, into map[string]int) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	total := 0
	var top, first string
	in := false
	flush := func() {
		if !in {
			return
		}
		in = false
		f := first
		if f == "" {
			f = top
		}
		if f == "" {
			f = "(no frames)"
		}
		if _, ok := into[f]; !ok && len(into) >= maxFrames {
			f = otherFrames
		}
		into[f]++
		total++
	}
	for {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			flush()
			return total, nil
		}
		if err != nil {
			return total, err
		}
		switch {
		case strings.HasPrefix(line, "goroutine ") && strings.HasSuffix(line, ":"):
			flush()
			in, top, first = true, "", ""
		case !in || line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by "):
			if line == "" {
				flush()
			}
		default:
			fn := funcName(line)
			if top == "" {
				top = fn
			}
			if first == "" && !stdlib(fn) {
				first = fn
			}
		}
	}
}

// readLine returns one line without its newline; a line longer than
// maxDumpLine is returned empty of content (as "\t", a file line, which
// the parser skips).
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
		if len(b)+len(chunk) > maxDumpLine {
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

// funcName strips a frame's arguments: "pkg.(*T).m(0xc0, {0x1, 0x2})"
// → "pkg.(*T).m".
func funcName(line string) string {
	line = strings.TrimSpace(line)
	if strings.HasSuffix(line, ")") {
		if i := strings.LastIndex(line, "("); i > 0 {
			return line[:i]
		}
	}
	return line
}

// stdlib reports whether a function is in Go's standard library (or
// main): their import paths have no dot in the first element.
func stdlib(fn string) bool {
	first, _, _ := strings.Cut(fn, "/")
	if !strings.Contains(fn, "/") {
		// "syscall.Syscall6", "os.Stat", "main.main": one element, the
		// dot separates the function.
		return true
	}
	return !strings.Contains(first, ".")
}
