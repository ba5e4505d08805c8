// Package redact removes secrets from text before it reaches disk.
//
// Every byte a collector writes passes through a Writer, which works a line
// at a time (so memory is bounded by the longest line it keeps, itself
// capped) and understands multi-line secrets such as PEM private key blocks.
// The Redactor counts what each named rule removed; the counts, never the
// values, go into the bundle's manifest.
package redact

import (
	"bytes"
	"io"
	"regexp"
	"sort"
	"sync"
)

// Marker replaces every redacted value. Diagnosis keeps the key, the shape of
// the line and the rule's name in the manifest; the value is gone.
const Marker = "[REDACTED]"

// MaxLine is the longest line the Writer buffers. A longer line is processed
// in MaxLine pieces: memory stays bounded even for binary input with no
// newlines.
const MaxLine = 1 << 20

// Rule is one named, single-line redaction.
type Rule struct {
	Name string
	// Re matches the secret. If it has a capture group named "secret", only
	// that group is replaced; otherwise the whole match is.
	Re *regexp.Regexp
	// Quick, when set, is a byte string that must occur in the line (case
	// sensitive) for Re to be tried at all; it keeps the common case fast.
	Quick []byte
}

// Redactor holds the rule set. It is safe for concurrent use.
type Redactor struct {
	rules []Rule
}

// New returns a Redactor with the given rules, after the built-in ones.
func New(extra ...Rule) *Redactor {
	r := &Redactor{rules: append(builtinRules(), extra...)}
	return r
}

// Default returns the built-in rule set.
func Default() *Redactor { return New() }

// RuleNames lists the names of the rules in order, PEM included.
func (r *Redactor) RuleNames() []string {
	names := []string{rulePEM}
	for _, rl := range r.rules {
		names = append(names, rl.Name)
	}
	return names
}

const rulePEM = "pem-private-key"

func builtinRules() []Rule {
	return []Rule{
		{
			Name:  "authorization-header",
			Re:    regexp.MustCompile(`(?i)(authorization\s*[:=]\s*"?(?:bearer|basic|token)?\s*)(?P<secret>[^\s",;]+)`),
			Quick: nil,
		},
		{
			Name: "bearer-token",
			Re:   regexp.MustCompile(`(?i)(bearer\s+)(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)`),
		},
	}
}

var (
	pemBegin = regexp.MustCompile(`-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----`)
	pemEnd   = regexp.MustCompile(`-----END ([A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----`)
)

// Line redacts one line (without its newline) and adds what it removed to
// counts. It does not handle multi-line blocks; use a Writer for streams.
func (r *Redactor) Line(line []byte, counts map[string]int) []byte {
	for i := range r.rules {
		rl := &r.rules[i]
		if rl.Quick != nil && !bytes.Contains(line, rl.Quick) {
			continue
		}
		line = replaceAll(rl, line, counts)
	}
	return line
}

func replaceAll(rl *Rule, line []byte, counts map[string]int) []byte {
	idx := rl.Re.FindAllSubmatchIndex(line, -1)
	if idx == nil {
		return line
	}
	g := rl.Re.SubexpIndex("secret")
	var out []byte
	last := 0
	for _, m := range idx {
		s, e := m[0], m[1]
		if g > 0 && m[2*g] >= 0 {
			s, e = m[2*g], m[2*g+1]
		}
		if s < last || e <= s {
			continue
		}
		out = append(out, line[last:s]...)
		out = append(out, Marker...)
		last = e
		counts[rl.Name]++
	}
	if out == nil {
		return line
	}
	return append(out, line[last:]...)
}

// String redacts a short string (an error message, a command line) and
// returns the counts.
func (r *Redactor) String(s string) (string, map[string]int) {
	var b bytes.Buffer
	w := r.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.String(), w.Counts()
}

// Writer redacts a stream line by line on its way to an underlying writer.
// Close must be called to flush the last partial line.
type Writer struct {
	r      *Redactor
	dst    io.Writer
	buf    []byte
	inPEM  bool
	mu     sync.Mutex
	counts map[string]int
	err    error
}

// NewWriter returns a Writer that writes redacted bytes to dst.
func (r *Redactor) NewWriter(dst io.Writer) *Writer {
	return &Writer{r: r, dst: dst, counts: map[string]int{}}
}

// Write buffers p and writes every complete line, redacted.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := MaxLine - len(w.buf)
			if len(p) < room {
				w.buf = append(w.buf, p...)
				break
			}
			w.buf = append(w.buf, p[:room]...)
			p = p[room:]
			if err := w.emit(false); err != nil {
				return n - len(p), err
			}
			continue
		}
		w.buf = append(w.buf, p[:i]...)
		p = p[i+1:]
		if err := w.emit(true); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

// emit redacts and writes the buffered line; nl says whether it ended in a
// newline (a line cut at MaxLine does not).
func (w *Writer) emit(nl bool) error {
	line := w.buf
	var out []byte
	switch {
	case w.inPEM:
		if loc := pemEnd.FindIndex(line); loc != nil {
			w.inPEM = false
			out = append(out, Marker...)
			out = append(out, line[loc[0]:]...)
		} else if !nl {
			// a very long line inside a PEM block: drop it.
		}
	default:
		if loc := pemBegin.FindIndex(line); loc != nil {
			w.counts[rulePEM]++
			head := w.r.Line(append([]byte(nil), line[:loc[1]]...), w.counts)
			rest := line[loc[1]:]
			if end := pemEnd.FindIndex(rest); end != nil {
				// single-line block ("\n" written as literal \n in JSON)
				out = append(head, Marker...)
				out = append(out, rest[end[0]:]...)
			} else {
				w.inPEM = true
				out = head
			}
		} else {
			out = w.r.Line(line, w.counts)
		}
	}
	if nl && !(w.inPEM && out == nil) {
		out = append(out, '\n')
	}
	w.buf = w.buf[:0]
	if len(out) == 0 {
		return nil
	}
	if _, err := w.dst.Write(out); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Close writes the last partial line, if any.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if len(w.buf) > 0 {
		return w.emit(false)
	}
	if w.inPEM {
		// An unterminated key block: the key lines were dropped; say so.
		if _, err := w.dst.Write([]byte(Marker + "\n")); err != nil {
			return err
		}
		w.inPEM = false
	}
	return nil
}

// Counts returns a copy of the per-rule counts so far.
func (w *Writer) Counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := make(map[string]int, len(w.counts))
	for k, v := range w.counts {
		c[k] = v
	}
	return c
}

// SortedNames returns the keys of a count map in order, for stable output.
func SortedNames(m map[string]int) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}
