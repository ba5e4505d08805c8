package redact

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// Writer redacts a stream line by line on its way to an underlying writer.
// Close must be called to flush the last partial line.
//
// Memory: the Writer holds at most maxLine bytes of input (a line, or a
// piece of a longer one) plus its output staging, flushed every outFlush
// bytes; neither grows with the size of the stream.
type Writer struct {
	r       *Redactor
	dst     io.Writer
	mu      sync.Mutex
	maxLine int

	buf    []byte // the pending partial line, never longer than maxLine
	out    []byte // redacted bytes not yet written to dst
	err    error
	closed bool

	midLine  bool     // the next piece continues the current line
	dropLine bool     // the rest of the current line is part of a dropped secret
	cont     contKind // a redacted value ran to the end of the previous piece

	st     state
	p      pass
	counts []int // rule id → count
	obfN   [numCats]int
	tokens [numCats]map[string]tokenEntry // normalised value → token
	maps   map[string]string              // token → original, this Writer's

	capture *[]edit // Argv: the edits applied, in line order
}

// outFlush is how much redacted output is staged before it is written.
const outFlush = 64 << 10

// errClosed is returned by Write after Close.
var errClosed = errors.New("redact: write after close")

// contKind says how a redacted value that ran to the end of one piece of a
// long line ends in the next piece.
type contKind uint8

const (
	contNone     contKind = iota
	contStop              // at the first byte that ends an unquoted value
	contEOL               // at the end of the line
	contDQuote            // at the next "
	contSQuote            // at the next '
	contEscQuote          // at the next \" (a string inside a JSON string)
)

// blockKind is the multi-line secret being dropped line by line.
type blockKind uint8

const (
	blockNone blockKind = iota
	blockPEM            // between -----BEGIN ... PRIVATE KEY----- and its END
	blockB64            // the following lines of a wrapped, base64-encoded PEM key
)

type dataKind uint8

const (
	dataNone dataKind = iota
	dataYAML          // the lines of a YAML Secret's data: or stringData: map
	dataJSON          // the lines of a pretty-printed JSON Secret's "data": {...}
)

// state is what the Writer remembers from one line to the next.
type state struct {
	block         blockKind
	blockMarked   bool // the marker standing for the block's body is out
	blockCounted  bool
	blockBody     bool // a body line has been seen (headers come before)
	blockPrefixed bool // the BEGIN line had a log prefix: so do the body's lines
	b64Width      int  // blockB64: the wrapping width; a shorter line is the last

	scalarIndent int // >= 0: dropping a YAML block scalar more indented than this
	scalarRule   int32
	scalarMarked bool

	data        dataKind
	dataString  bool // stringData: every value is secret, even plain text
	dataIndent  int
	childIndent int

	kind      int8 // YAML/JSON document kind: 0 unknown, 1 Secret, 2 something else
	objIndent int  // column of the object's apiVersion, -1 before one is seen
	envIndent int  // >= 0: the previous line was "name: X_PASSWORD" at this column

	// nestCol >= 0: a secret key with nothing after it ("password:",
	// "secret =") was at this column of the text (after any log prefix,
	// when nestPrefixed); the more indented lines below hold its value.
	nestCol      int
	nestRule     int32
	nestPrefixed bool

	// nextLine: the previous line ended where JSON printed one element a
	// line puts a secret on the next: a flag's value, an env entry's
	// "value".
	nextLine nextKind
	nextRule int32
}

type nextKind uint8

const (
	nextNone      nextKind = iota
	nextFlagValue          // ["--client-secret",\n "x"]
	nextEnvValue           // "name": "DB_PASSWORD",\n "value": "x"
)

// NewWriter returns a Writer that writes redacted bytes to dst.
func (r *Redactor) NewWriter(dst io.Writer) *Writer {
	w := &Writer{
		r:       r,
		dst:     dst,
		maxLine: MaxLine,
		counts:  make([]int, len(r.names)),
	}
	w.st.scalarIndent = -1
	w.st.envIndent = -1
	w.st.objIndent = -1
	w.st.nestCol = -1
	w.p.w = w
	return w
}

// Write redacts p and writes every complete line to the underlying writer
// before it returns; a trailing partial line waits for more input or Close.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errClosed
	}
	n := len(p)
	for len(p) > 0 {
		if len(w.buf) == 0 {
			// Whole lines straight from p, without copying them first.
			if i := bytes.IndexByte(p, '\n'); i >= 0 && i <= w.maxLine {
				w.piece(p[:i], true)
				p = p[i+1:]
				if err := w.flush(false); err != nil {
					return n - len(p), err
				}
				continue
			}
		}
		room := w.maxLine - len(w.buf)
		look := p
		if len(look) > room+1 {
			look = look[:room+1]
		}
		if i := bytes.IndexByte(look, '\n'); i >= 0 {
			w.appendBuf(p[:i])
			p = p[i+1:]
			w.piece(w.buf, true)
			w.buf = w.buf[:0]
		} else if len(p) <= room {
			w.appendBuf(p)
			p = nil
		} else {
			// The line is longer than maxLine: redact a piece of it now,
			// cut where no secret is likely to straddle the cut.
			w.appendBuf(p[:room])
			p = p[room:]
			c := cutPoint(w.buf)
			w.piece(w.buf[:c], false)
			w.buf = w.buf[:copy(w.buf, w.buf[c:])]
		}
		if err := w.flush(false); err != nil {
			return n - len(p), err
		}
	}
	if err := w.flush(true); err != nil {
		return n, err
	}
	return n, nil
}

// appendBuf adds b to the pending line. It grows the buffer itself so its
// capacity, not just its length, stays within maxLine (append's doubling
// would overshoot).
func (w *Writer) appendBuf(b []byte) {
	if n := len(w.buf) + len(b); n > cap(w.buf) {
		c := min(w.maxLine, max(2*cap(w.buf), n, 512))
		nb := make([]byte, len(w.buf), c)
		copy(nb, w.buf)
		w.buf = nb
	}
	w.buf = append(w.buf, b...)
}

// flush writes the staged output: all of it when all is set, otherwise
// only once enough has built up to be worth a write.
func (w *Writer) flush(all bool) error {
	if len(w.out) == 0 || (!all && len(w.out) < outFlush) {
		return nil
	}
	_, err := w.dst.Write(w.out)
	w.out = w.out[:0]
	if err != nil {
		w.err = err
	}
	return err
}

// cutWindow is how far back from the end of a full buffer cutPoint looks
// for a good place to cut a long line.
const cutWindow = 4096

// cutPoint chooses where to cut a full buffer: after the last '}' or ']'
// in the final cutWindow bytes (between JSON objects, so a "name"/"value"
// pair stays together), else after a ',', ';', '&' or NUL, else after a
// space; never inside a PEM armour line; else at the end.
func cutPoint(buf []byte) int {
	lo := len(buf) - cutWindow
	if lo < 0 {
		lo = 0
	}
	win := buf[lo:]
	c := -1
	for _, set := range []string{"}]", ",;&\x00", " \t"} {
		if i := bytes.LastIndexAny(win, set); i >= 0 {
			c = lo + i + 1
			break
		}
	}
	if c < 0 {
		c = len(buf)
	}
	// Keep "-----BEGIN RSA PRIVATE KEY-----" whole: it has spaces in it.
	// Cut before the armour, or, when it starts the buffer, after all of
	// the buffer (the armour is far shorter than any buffer).
	tail := max(0, c-80)
	for _, armour := range []string{"-----BEGIN", "-----END"} {
		i := bytes.LastIndex(buf[tail:c], []byte(armour))
		if i < 0 {
			continue
		}
		a := tail + i
		if bytes.Contains(buf[a+len(armour):c], []byte("-----")) {
			continue // the armour line ends before the cut
		}
		if a > 0 {
			c = a
		} else {
			c = len(buf)
		}
	}
	return c
}

// Close writes the last partial line, if any.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	if len(w.buf) > 0 {
		w.piece(w.buf, false)
		w.buf = w.buf[:0]
	}
	return w.flush(true)
}

// Counts returns a copy of the per-rule counts so far. Rules that removed
// nothing are absent.
func (w *Writer) Counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := map[string]int{}
	for i, n := range w.counts {
		if n > 0 {
			c[w.r.names[i]] += n
		}
	}
	if o := w.r.obf; o != nil {
		for i, n := range w.obfN {
			if n > 0 {
				c[o.cats[i].counter] += n
			}
		}
	}
	return c
}

// Mappings returns a copy of the obfuscation tokens this Writer produced,
// mapped to the original values.
func (w *Writer) Mappings() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[string]string, len(w.maps))
	for k, v := range w.maps {
		m[k] = v
	}
	return m
}

// memory reports the capacity of the Writer's input and output buffers
// (for tests of the memory bound).
func (w *Writer) memory() (in, out int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return cap(w.buf), cap(w.out)
}

func (w *Writer) count(rule int32) {
	if rule >= 0 {
		w.counts[rule]++
	}
}

// markerLine writes a line standing for dropped secret lines, indented like
// the first of them so the file keeps its shape.
func (w *Writer) markerLine(line []byte) {
	w.out = append(w.out, line[:indentOf(line)]...)
	w.out = append(w.out, Marker...)
	w.out = append(w.out, '\n')
}

// piece redacts one line, or one piece of a line longer than maxLine (nl
// is false for all but the last piece), and stages the result.
func (w *Writer) piece(line []byte, nl bool) {
	start := !w.midLine
	w.midLine = !nl
	if start {
		w.dropLine = false
		w.cont = contNone
	}
	if w.dropLine {
		return
	}
	p := &w.p
	p.begin(line, start)

	if w.cont != contNone {
		e := contEnd(line, w.cont)
		if e == len(line) {
			// The whole piece is the rest of a value already replaced.
			if nl {
				w.out = append(w.out, '\n')
			}
			return
		}
		p.add(0, e, -1, prioFirst, contNone, "")
		w.cont = contNone
	}
	if start && w.lineStart(line) {
		w.dropLine = !nl
		return
	}
	if w.st.block != blockNone && w.inBlock(line, start) {
		if start {
			w.dropLine = !nl
		}
		return
	}
	p.run()
	w.emit(line, nl)
}

// contEnd is where the value cut at the previous piece's end ends in line.
func contEnd(line []byte, k contKind) int {
	switch k {
	case contEOL:
		return len(line)
	case contDQuote, contSQuote:
		q := byte('"')
		if k == contSQuote {
			q = '\''
		}
		if i := bytes.IndexByte(line, q); i >= 0 {
			return i
		}
		return len(line)
	case contEscQuote:
		if i := bytes.Index(line, []byte(`\"`)); i >= 0 {
			return i
		}
		return len(line)
	}
	for i, b := range line {
		if isStop(b) {
			return i
		}
	}
	return len(line)
}

// emit applies the accepted edits to line and stages it.
func (w *Writer) emit(line []byte, nl bool) {
	p := &w.p
	if len(p.cands) == 0 {
		w.out = append(w.out, line...)
	} else {
		p.resolve()
		if w.capture != nil {
			*w.capture = append(*w.capture, p.acc...)
		}
		last := 0
		for _, e := range p.acc {
			if w.r.spread != nil && !e.obf && e.rule >= 0 {
				w.r.spread.add(line[e.s:e.e])
			}
			w.out = append(w.out, line[last:e.s]...)
			w.out = append(w.out, e.repl...)
			last = e.e
		}
		w.out = append(w.out, line[last:]...)
		if !nl {
			for _, e := range p.acc {
				if e.e == len(line) && !e.obf && e.e > e.s {
					w.cont = e.open
				}
			}
		}
	}
	if nl {
		w.out = append(w.out, '\n')
	}
}
