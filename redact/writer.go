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
		last := 0
		for _, e := range p.acc {
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

// lineStart handles the multi-line structures that are decided at the
// start of a line: YAML block scalars being dropped, a Kubernetes env
// entry's value, Secret data maps and document kinds. It reports true when
// the line was dropped whole.
func (w *Writer) lineStart(line []byte) bool {
	st := &w.st
	if st.scalarIndent >= 0 {
		if blank(line) {
			return true
		}
		if indentOf(line) > st.scalarIndent {
			if isMarkerLine(line) && !st.scalarMarked {
				st.scalarMarked = true // redacted before: keep it as it is
				return false
			}
			if !st.scalarMarked {
				w.markerLine(line)
				w.count(st.scalarRule)
				st.scalarMarked = true
			}
			return true
		}
		st.scalarIndent = -1
	}
	if st.nestCol >= 0 {
		w.nestedLine(line)
	}
	if st.nextLine != nextNone {
		w.nextLineValue(line)
	}
	if st.envIndent >= 0 {
		col := st.envIndent
		st.envIndent = -1
		if ks := keyStart(line); ks == col && hasFoldPrefix(line, ks, "value:") {
			w.p.yamlValue(ks, ks+len("value:"), ruleEnvSecret)
		}
	}
	if st.data != dataNone {
		w.dataLine(line)
	}
	w.structure(line)
	return false
}

// nextLineValue redacts the value a JSON line left for this one (see
// nextKind).
func (w *Writer) nextLineValue(line []byte) {
	st := &w.st
	k := st.nextLine
	st.nextLine = nextNone
	i := indentOf(line)
	if k == nextEnvValue {
		if !hasFoldPrefix(line, i, `"value"`) {
			return
		}
		if i = skipSpace(line, i+len(`"value"`)); i < len(line) && line[i] == ':' {
			w.p.value(skipSpace(line, i+1), ruleEnvSecret, false, 0)
		}
		return
	}
	if i < len(line) && line[i] == '"' && (i+1 >= len(line) || line[i+1] != '-') {
		e := closeQuote(line, i+1, '"')
		if e < 0 {
			e = len(line)
		}
		w.p.valueSpan(i+1, e, st.nextRule, contDQuote)
	}
}

// nestedLine redacts a line below a secret key that had no value of its
// own: a deeper "key: value" loses its value (unless the key names a
// reference: secretName, key, path), a bare continuation line its text. A
// line not deeper than the key ends the nesting.
func (w *Writer) nestedLine(line []byte) {
	st := &w.st
	ts := 0
	if st.nestPrefixed {
		if ts = logPrefixLen(line); ts == 0 {
			st.nestCol = -1
			return
		}
	}
	body := line[ts:]
	if blank(body) {
		return
	}
	ind := indentOf(body)
	if ind <= st.nestCol || body[ind] == '#' {
		if ind <= st.nestCol {
			st.nestCol = -1
		}
		return
	}
	p := &w.p
	ks := keyStart(body)
	ke := ks
	for ke < len(body) && isKeyByte(body[ke]) {
		ke++
	}
	j := skipBlanks(body, ke)
	e := trimRight(body, len(body))
	if ke > ks && j < len(body) && (body[j] == ':' || body[j] == '=') && (j+1 == len(body) || isSpace(body[j+1]) || body[j] == '=') {
		if nestedReference(body[ks:ke]) {
			return
		}
		vs := skipSpace(body, j+1)
		if vs >= e || bytes.Contains(body[vs:e], []byte(Marker)) {
			return // a deeper map (its own lines follow), or redacted before
		}
		if body[vs] == '"' || body[vs] == '\'' {
			if c := bytes.IndexByte(body[vs+1:], body[vs]); c >= 0 {
				p.add(ts+vs+1, ts+vs+1+c, st.nestRule, prioOf(st.nestRule), contNone, Marker)
				return
			}
		}
		p.add(ts+vs, ts+e, st.nestRule, prioOf(st.nestRule), contEOL, Marker)
		return
	}
	if bytes.Contains(body[ind:e], []byte(Marker)) {
		return
	}
	p.add(ts+ind, ts+e, st.nestRule, prioOf(st.nestRule), contEOL, Marker)
}

// nestedReference: keys under a secret key that name where the secret is,
// not what it is (a Kubernetes secret volume's secretName, items' key and
// path).
func nestedReference(key []byte) bool {
	var buf [96]byte
	n := normKey(key, &buf)
	switch string(n) {
	case "key", "items", "optional", "defaultmode", "mode", "name", "namespace":
		return true
	}
	for _, s := range metaSuffixes {
		if hasSuffixStr(n, s) {
			return true
		}
	}
	return false
}

// structure tracks the kind of the current YAML/JSON document and notices
// the start of a Secret's data map.
func (w *Writer) structure(line []byte) {
	st := &w.st
	ks := keyStart(line)
	if ks >= len(line) {
		return
	}
	switch line[ks] {
	case '-':
		if bytes.Equal(line[ks:trimRight(line, len(line))], []byte("---")) {
			st.kind = 0
			st.objIndent = -1
			st.data = dataNone
		}
		return
	case 'a', '"':
		if hasFoldPrefix(line, ks, "apiversion:") || hasFoldPrefix(line, ks, `"apiversion"`) {
			st.kind = 0
			st.objIndent = ks
		}
	}
	// Only the object's own kind counts, not an ownerReference's.
	objKey := ks == st.objIndent || st.objIndent < 0 && ks == 0
	if objKey && (hasFoldPrefix(line, ks, "kind:") || hasFoldPrefix(line, ks, `"kind"`)) {
		i := bytes.IndexByte(line[ks:], ':')
		v := bytes.Trim(line[ks+i+1:trimRight(line, len(line))], " \t\"',")
		if string(v) == "Secret" {
			st.kind = 1
		} else {
			st.kind = 2
		}
		return
	}
	e := trimRight(line, len(line))
	if e == 0 {
		return
	}
	switch line[e-1] {
	case ':':
		key := line[ks:e]
		if string(key) == "data:" || string(key) == "stringData:" {
			st.data = dataYAML
			st.dataString = key[0] == 's'
			st.dataIndent = ks
			st.childIndent = -1
		}
	case '{':
		rest := line[ks:e]
		for _, k := range []string{`"data"`, `"stringData"`} {
			if bytes.HasPrefix(rest, []byte(k)) {
				after := bytes.TrimLeft(rest[len(k):], " \t")
				if len(after) > 0 && after[0] == ':' && len(bytes.TrimSpace(after[1:])) == 1 {
					st.data = dataJSON
					st.dataString = k[1] == 's'
				}
			}
		}
	}
}

// dataLine redacts the value of one entry of a Secret's data map. Secret
// data is always base64; when the document's kind is not known yet
// (kubectl prints "data" before "kind"), any base64-shaped value is taken
// for secret data, so a ConfigMap printed that way may lose values that
// happen to look like base64.
func (w *Writer) dataLine(line []byte) {
	st := &w.st
	p := &w.p
	if blank(line) {
		return
	}
	ind := indentOf(line)
	if st.data == dataJSON {
		if line[ind] == '}' {
			st.data = dataNone
			return
		}
		ke := p.jsonString(ind)
		if ke < 0 {
			return
		}
		i := skipSpace(line, ke)
		if i >= len(line) || line[i] != ':' {
			return
		}
		vs := skipSpace(line, i+1)
		if vs < len(line) && line[vs] == '"' {
			if ve := p.jsonString(vs); ve > 0 {
				w.secretData(vs+1, ve-1, contDQuote)
			}
		}
		return
	}
	if line[ind] == '#' {
		return
	}
	if ind <= st.dataIndent {
		st.data = dataNone
		return
	}
	if st.childIndent < 0 {
		st.childIndent = ind
	}
	if ind != st.childIndent {
		// A continuation line of a multi-line value.
		w.secretData(ind, trimRight(line, len(line)), contEOL)
		return
	}
	// key: value, with the key maybe quoted.
	i := ind
	if line[i] == '"' || line[i] == '\'' {
		q := bytes.IndexByte(line[i+1:], line[i])
		if q < 0 {
			return
		}
		i += q + 2
	}
	c := bytes.Index(line[i:], []byte(": "))
	if c < 0 {
		return // "key:" opening a nested map: not Secret data
	}
	vs := skipSpace(line, i+c+2)
	if vs >= len(line) {
		return
	}
	switch line[vs] {
	case '|', '>':
		if st.dataString || st.kind == 1 {
			st.scalarIndent = ind
			st.scalarRule = ruleSecretData
			st.scalarMarked = false
		}
		return
	case '"', '\'':
		q := line[vs]
		ve := bytes.IndexByte(line[vs+1:], q)
		open := contDQuote
		if q == '\'' {
			open = contSQuote
		}
		if ve < 0 {
			w.secretData(vs+1, len(line), open)
			return
		}
		w.secretData(vs+1, vs+1+ve, open)
		return
	}
	ve := trimRight(line, len(line))
	if h := bytes.Index(line[vs:ve], []byte(" #")); h >= 0 {
		ve = trimRight(line, vs+h)
	}
	w.secretData(vs, ve, contEOL)
}

// secretData redacts a Secret data value per the rule in dataLine.
func (w *Writer) secretData(vs, ve int, open contKind) {
	p := &w.p
	v := p.line[vs:ve]
	if len(v) == 0 || bytes.Contains(v, []byte(Marker)) {
		return
	}
	if w.st.dataString || w.st.kind == 1 || (w.st.kind == 0 && base64Shaped(v)) {
		p.add(vs, ve, ruleSecretData, prioData, open, Marker)
	}
}

// inBlock handles a line (or piece) inside a PEM private key block or a
// wrapped base64 key. It reports true when the whole piece was dropped.
func (w *Writer) inBlock(line []byte, start bool) bool {
	st := &w.st
	p := &w.p
	if st.block == blockPEM {
		// A key logged line by line keeps each line's log prefix (a CRI
		// or journal record); only the text after it is key material.
		pre := 0
		if start && st.blockPrefixed {
			pre = logPrefixLen(line)
		}
		whole := line
		line = line[pre:]
		if e := bytes.Index(line, []byte("-----END ")); e >= 0 {
			st.block = blockNone
			from := 0
			if start {
				from = indentOf(line)
			}
			from += pre
			e += pre
			line = whole
			if from < e && pemBodyContent(line[from:e]) {
				if !st.blockCounted {
					w.count(rulePEM)
					st.blockCounted = true
				}
				repl := ""
				if !st.blockMarked {
					repl = Marker
				}
				p.add(from, e, -1, prioFirst, contNone, repl)
			}
			return false
		}
		if blank(line) {
			return false
		}
		if start && !st.blockBody && pemHeader(line) {
			return false
		}
		if isMarkerLine(line) {
			st.blockMarked, st.blockBody = true, true
			return false
		}
		if pemBodyLike(line) {
			st.blockBody = true
			if !st.blockCounted {
				w.count(rulePEM)
				st.blockCounted = true
			}
			if start && !st.blockMarked {
				w.out = append(w.out, whole[:pre]...)
				w.markerLine(line)
				st.blockMarked = true
			}
			return true
		}
		// Not key material after all (a truncated block, or a log line
		// that only mentioned the armour): back to normal lines.
		st.block = blockNone
		return false
	}
	// blockB64: the lines after a base64 PEM key that was wrapped, each as
	// wide as the first; a shorter one (or one with padding) is the last.
	t := bytes.TrimSpace(line)
	if start && len(t) > 0 && len(t) <= st.b64Width && len(t)%4 == 0 && allB64(t) {
		if len(t) < st.b64Width || t[len(t)-1] == '=' {
			st.block = blockNone
		}
		return true
	}
	st.block = blockNone
	return false
}

func allB64(b []byte) bool {
	for _, c := range b {
		if !isB64(c) && c != '=' {
			return false
		}
	}
	return true
}

// isMarkerLine reports whether line is just the Marker (a line this package
// wrote; seeing it again means the input was redacted before).
func isMarkerLine(line []byte) bool {
	return bytes.Equal(bytes.TrimSpace(line), []byte(Marker))
}

// pemHeader reports an RFC 1421 / OpenPGP armour header ("Proc-Type: ...",
// "DEK-Info: ...", "Version: ..."), which may precede the body.
func pemHeader(line []byte) bool {
	t := bytes.TrimSpace(line)
	c := bytes.Index(t, []byte(": "))
	if c <= 0 {
		return false
	}
	for _, b := range t[:c] {
		if !isAlnum(b) && b != '-' {
			return false
		}
	}
	return true
}

// pemBodyLike reports whether line looks like part of a PEM body: base64,
// possibly with the artefacts of a key kept in a JSON string (literal \n,
// quotes, a trailing comma), or a dump that prefixes every line, whose last
// field is then a long base64 run.
func pemBodyLike(line []byte) bool {
	n := 0
	ok := true
	for i := 0; i < len(line); {
		b := line[i]
		switch {
		case isB64(b) || b == '=':
			n++
			i++
		case isSpace(b) || b == '"' || b == ',':
			i++
		case b == '\\' && (i+1 == len(line) || line[i+1] == 'n' || line[i+1] == 'r'):
			i += 2 // a literal \n, or a piece of a long line cut after the '\\'

		default:
			ok = false
			i = len(line)
		}
	}
	if ok && n > 0 {
		return true
	}
	t := bytes.TrimRight(line, " \t\r")
	f := bytes.LastIndexAny(t, " \t")
	last := t[f+1:]
	return len(last) >= 40 && allB64(last)
}

// pemBodyContent reports whether b holds key material: base64 bytes other
// than those of literal "\n" escapes and of an earlier Marker.
func pemBodyContent(b []byte) bool {
	for i := 0; i < len(b); {
		switch {
		case b[i] == '\\' && i+1 < len(b):
			i += 2
		case bytes.HasPrefix(b[i:], []byte(Marker)):
			i += len(Marker)
		case isB64(b[i]):
			return true
		default:
			i++
		}
	}
	return false
}
