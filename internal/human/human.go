// Package human formats values for people reading a manifest note, a
// summary or an error: the one place such small formatting lives, so that
// every package words a size or a stderr excerpt the same way.
package human

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Bytes is a size in binary units with one decimal: "1.4 MiB", "512 bytes".
func Bytes(n int64) string {
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// FirstLine is the first line of s, trimmed, at most 300 bytes (cut at a
// rune boundary, with "…"): the part of a program's stderr worth a note.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return Cut(s, 300)
}

// Cut shortens s to at most n bytes at a rune boundary, adding "…" when
// it cut anything.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
