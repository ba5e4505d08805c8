package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

const (
	textWidth       = 100
	maxRecordText   = 700
	maxSummaryTable = 90
)

// WriteText writes the report for a person: a table of findings, then
// each finding in detail.
func WriteText(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	// ew keeps the first write error; it is returned at the end.
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(ew, format, a...) }
	p("bundle:    %s\n", r.Bundle)
	p("host:      %s", orUnknown(r.Hostname))
	if r.Kernel != "" {
		p(" (kernel %s)", r.Kernel)
	}
	p("\ncollected: %s by nodesnap %s; bundle %s\n", r.CollectedAt.UTC().Format("2006-01-02 15:04:05Z"), r.ToolVersion, r.BundleStatus)
	if len(r.Findings) == 0 {
		p("\nNo findings: the bundle shows none of the storage incidents nodesnap knows.\n")
		return ew.err
	}
	p("findings:  %d critical, %d warning, %d info\n\n", r.Counts["critical"], r.Counts["warning"], r.Counts["info"])
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "#\tSEVERITY\tID\tTITLE\tSUMMARY")
	for i, f := range r.Findings {
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, f.Severity, f.ID, f.Title, cut(oneLine(f.Summary), maxSummaryTable))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, f := range r.Findings {
		p("\n%s\n", strings.Repeat("─", textWidth))
		p("[%d] %s  %s — %s\n", i+1, strings.ToUpper(f.Severity.String()), f.ID, f.Title)
		if f.Subject != "" {
			p("subject: %s\n", f.Subject)
		}
		p("\n%s\n", wrap(f.Summary, textWidth, "", ""))
		if f.Explanation != "" {
			p("\nWhy:\n%s\n", wrap(f.Explanation, textWidth, "  ", "  "))
		}
		if len(f.Evidence) > 0 {
			p("\nEvidence:\n")
			for _, e := range f.Evidence {
				p("  %s", e.Path)
				if e.What != "" {
					p(" — %s", oneLine(e.What))
				}
				p("\n")
				for _, l := range e.Lines {
					text := l.Text
					if l.Truncated {
						text += " …"
					}
					p("    %6d  %s\n", l.N, text)
					if l.Decoded != "" {
						for j, d := range strings.Split(l.Decoded, "\n") {
							label := "decoded:"
							if j > 0 {
								label = "        "
							}
							p("            %s %s\n", label, d)
						}
					}
				}
				if e.Record != nil {
					b, err := compactJSON(e.Record)
					if err == nil {
						s := string(b)
						if len(s) > maxRecordText {
							s = cut(s, maxRecordText) + " (full record with --json)"
						}
						p("    %s\n", s)
					}
				}
				if e.More > 0 {
					p("    … and %d more\n", e.More)
				}
			}
		}
		if len(f.Remediation) > 0 {
			p("\nFix:\n")
			for j, rem := range f.Remediation {
				p("%s\n", wrap(fmt.Sprintf("%d. %s", j+1, rem), textWidth, "  ", "     "))
			}
		}
	}
	return ew.err
}

// compactJSON is json.Marshal without HTML escaping (stacks print "<0>").
func compactJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cut shortens s to n bytes at a rune boundary, adding "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// wrap fills text to width: the first line starts with first, the others
// with rest; words longer than a line (paths, commands) stay whole.
func wrap(text string, width int, first, rest string) string {
	var b strings.Builder
	for pi, para := range strings.Split(text, "\n") {
		if pi > 0 {
			b.WriteByte('\n')
		}
		prefix := first
		if pi > 0 {
			prefix = rest
		}
		b.WriteString(prefix)
		col := utf8.RuneCountInString(prefix)
		start := true
		for _, word := range strings.Fields(para) {
			wl := utf8.RuneCountInString(word)
			if !start && col+1+wl > width {
				b.WriteString("\n" + rest)
				col, start = utf8.RuneCountInString(rest), true
			}
			if !start {
				b.WriteByte(' ')
				col++
			}
			b.WriteString(word)
			col += wl
			start = false
		}
	}
	return b.String()
}
