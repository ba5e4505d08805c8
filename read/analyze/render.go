package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/internal/textfit"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

const (
	// maxRecordLines bounds a record's JSON in the text report; the
	// whole record is in -o json and with TextOptions.Full.
	maxRecordLines = 4
)

// TextOptions shape the text report.
type TextOptions struct {
	// Width is the longest line, in runes (0: textfit.Default, 80).
	Width int
	// Full keeps every text whole, wrapped to Width, where the default
	// elides long evidence lines and records ("…"; -v on the command
	// line).
	Full bool
}

// WriteTextOptions writes the report for a person: a table of findings,
// then each finding in detail, at o.Width (80 columns when 0), eliding or
// wrapping what does not fit: no line is wider than o.Width.
func WriteTextOptions(w io.Writer, r *Report, o TextOptions) error {
	width := o.Width
	if width <= 0 {
		width = textfit.Default
	}
	fw := textfit.NewWriter(w, width, o.Full)
	ew := &errWriter{w: fw}
	// ew keeps the first write error; it is returned at the end.
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(ew, format, a...) }
	p("bundle:    %s\n", r.Bundle)
	p("host:      %s", orUnknown(r.Hostname))
	if r.Kernel != "" {
		p(" (kernel %s)", r.Kernel)
	}
	p("\ncollected: %s by nodesnap %s; bundle %s\n", r.CollectedAt.UTC().Format("2006-01-02 15:04:05Z"), r.ToolVersion, r.BundleStatus)
	if len(r.Findings) == 0 {
		p("\n%s\n", wrap("No findings: the bundle shows none of the storage incidents nodesnap knows.", width, "", ""))
		return flushBoth(ew, fw)
	}
	p("findings:  %d critical, %d warning, %d info\n\n", r.Counts["critical"], r.Counts["warning"], r.Counts["info"])
	// The table: one line per finding, its summary elided to the width
	// (whole below, in the finding's detail).
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "#\tSEVERITY\tID\tSUMMARY")
	for i, f := range r.Findings {
		_, _ = fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", i+1, f.Severity, f.ID, oneLine(f.Summary))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The pods in trouble, each with its chain (the cluster's view).
	var troubled []PodReport
	for _, pr := range r.Pods {
		if pr.Symptom != "" {
			troubled = append(troubled, pr)
		}
	}
	if len(troubled) > 0 {
		p("\npods in trouble (the API's view joined to the node's findings):\n")
		for _, pr := range troubled {
			p("%s\n", wrap("- "+chainText(pr), width, "", "    "))
		}
	}
	for i, f := range r.Findings {
		p("\n%s\n", strings.Repeat("─", width))
		p("%s\n", wrap(fmt.Sprintf("[%d] %s  %s — %s", i+1, strings.ToUpper(f.Severity.String()), f.ID, f.Title), width, "", "    "))
		if f.Subject != "" {
			p("%s\n", wrap("subject: "+f.Subject, width, "", "  "))
		}
		p("\n%s\n", wrap(f.Summary, width, "", ""))
		if len(f.Pods) > 0 {
			var names []string
			for _, pi := range f.Pods {
				names = append(names, pi.Namespace+"/"+pi.Name+": "+pi.How)
			}
			p("\nPods it hurts:\n")
			for _, n := range names[:min(len(names), 20)] {
				p("%s\n", wrap("- "+n, width, "  ", "    "))
			}
			if len(names) > 20 {
				p("  … and %d more\n", len(names)-20)
			}
		}
		if f.Explanation != "" {
			p("\nWhy:\n%s\n", wrap(f.Explanation, width, "  ", "  "))
		}
		if len(f.Evidence) > 0 {
			p("\nEvidence:\n")
			for _, e := range f.Evidence {
				head := e.Path
				if e.What != "" {
					head += " — " + oneLine(e.What)
				}
				p("%s\n", wrap(head, width, "  ", "    "))
				for _, l := range e.Lines {
					text := l.Text
					if l.Truncated {
						text += " …"
					}
					// A log line is evidence as it is: elided at the
					// width, whole with Full (wrapped by fw).
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
					if b, err := compactJSON(e.Record); err == nil {
						p("%s\n", recordText(string(b), width, o.Full))
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
				p("%s\n", wrap(fmt.Sprintf("%d. %s", j+1, rem), width, "  ", "     "))
			}
		}
	}
	return flushBoth(ew, fw)
}

func flushBoth(ew *errWriter, fw *textfit.Writer) error {
	if ew.err != nil {
		return ew.err
	}
	return fw.Flush()
}

// recordText lays a record's JSON out in lines of the width, indented by
// four: at most maxRecordLines of them unless full.
func recordText(s string, width int, full bool) string {
	const indent = "    "
	room := width - len(indent)
	var lines []string
	for s != "" {
		if !full && len(lines) == maxRecordLines {
			lines[len(lines)-1] = textfit.Elide(lines[len(lines)-1], room-len(" (whole with -v or -o json)")) + " (whole with -v or -o json)"
			break
		}
		n := 0
		cut := len(s)
		for i := range s {
			if n == room {
				cut = i
				break
			}
			n++
		}
		lines = append(lines, s[:cut])
		s = s[cut:]
	}
	for i := range lines {
		lines[i] = indent + lines[i]
	}
	return strings.Join(lines, "\n")
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

// splitRunes splits s after n runes.
func splitRunes(s string, n int) (string, string) {
	i := 0
	for j := range s {
		if i == n {
			return s[:j], s[j:]
		}
		i++
	}
	return s, ""
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
			// A word longer than a whole line (a path, a command) is
			// broken where the line ends: a terminal would break it
			// anyway, and a line wider than the width is what to avoid.
			for room := width - utf8.RuneCountInString(rest); wl > room && room > 8; wl = utf8.RuneCountInString(word) {
				if !start {
					b.WriteString("\n" + rest)
				}
				head, tail := splitRunes(word, room)
				b.WriteString(head)
				b.WriteString("\n" + rest)
				word = tail
				col, start = utf8.RuneCountInString(rest), true
			}
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
