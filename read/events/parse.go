package events

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Parser reads the records of one log, in order. It keeps a little state
// between records: the CSI method a driver's request is for ("GRPC call:
// /csi.v1.Node/NodeStageVolume" before its "GRPC error: ..."), by request
// ID and for the log as a whole, bounded.
type Parser struct {
	// Ref is the collection time: the year of stamps without one (a
	// stamp is put at most a day after Ref).
	Ref time.Time
	// methods are the methods of open requests by ceph-csi's "ID: n";
	// last the newest method logged without an ID.
	methods map[string]string
	order   []string
	last    string
	// keys are what the newest request (by ID, and without one) named:
	// a driver logs the request ("GRPC request: {...volume_id...}") and
	// then its error without the volume.
	keys     map[string]Keys
	lastKeys Keys
	// recent is what the newest record that named a volume or a device
	// path named (a command the driver ran, a device it waited for),
	// recentAge how many records ago: a driver's failed call that names
	// no object is about the object its records just before named.
	recent    Keys
	recentAge int
}

// maxLookback is how many records before a driver's failed call may
// name its object.
const maxLookback = 6

const maxRequests = 256

// NewParser returns a parser for one log.
func NewParser(ref time.Time) *Parser {
	return &Parser{Ref: ref, methods: map[string]string{}, keys: map[string]Keys{}}
}

// record is a record taken apart: header values and the body's message
// and fields.
type record struct {
	ev     Event
	msg    string
	fields []field
	// text is everything the record says, unescaped: message and fields;
	// lower is text in lower case.
	text, lower string
	// reqID is ceph-csi's "ID: n"; reqVol its "Req-ID: x".
	reqID, reqVol string
}

type field struct{ k, v string }

func (r *record) get(keys ...string) string {
	for _, f := range r.fields {
		for _, k := range keys {
			if strings.EqualFold(f.k, k) {
				return f.v
			}
		}
	}
	return ""
}

var (
	months = map[string]time.Month{"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}
	// reKlog is a klog header: level, MMDD, time, pid, file:line.
	reKlog = regexp.MustCompile(`^([IWEF])(\d\d)(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)\s+(\d+) ([^\s:\]]+):\d+\] ?`)
	// reStampLevel is an RFC 3339 stamp and a level word: Rust tracing
	// ("2024-01-01T00:00:00.000Z ERROR target: msg"), and other loggers.
	reStampLevel = regexp.MustCompile(`^(\d{4}-\d\d-\d\d[T ][0-9:.,]+(?:Z|[+-]\d\d:?\d\d)?)\s+\[?(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|error|warn|warning|info|debug)\]?\s+(?:([A-Za-z_][\w:.-]*(?:::[\w.-]+)*):\s)?`)
	// reLevelWord is a level word opening a body: "[ERROR] msg",
	// "ERROR: msg", "E msg".
	reLevelWord = regexp.MustCompile(`^\[?(ERROR|ERRO|WARN|WARNING|INFO|DEBUG|FATAL|error|warn|warning)\]?[: ]`)
	// reCephID is ceph-csi's request prefix.
	reCephID = regexp.MustCompile(`^ID: (\d+)(?: Req-ID: (\S+))? `)
	// reMethod is a CSI gRPC method.
	reMethod = regexp.MustCompile(`/csi\.v\d+\.(?:Node|Controller|Identity)/(\w+)`)
)

// Parse reads one record (a log line, or lines joined into one record).
// ok is false when the record reports no operation's outcome on a storage
// object; the event is then incomplete (Incomplete tells a failure that
// names no object).
func (p *Parser) Parse(rec []byte) (ev Event, ok bool) {
	p.recentAge++
	if !mayMatter(rec) {
		p.noteRecent(rec)
		return Event{}, false
	}
	r := p.split(rec)
	p.classify(&r)
	if !r.ev.Storage() {
		p.noteRecent(rec)
	}
	return r.ev, r.ev.Storage()
}

// noteRecent keeps the objects of a record that names a volume or a
// device by path (most records name neither and cost two searches).
func (p *Parser) noteRecent(rec []byte) {
	if !bytes.Contains(rec, []byte("pvc-")) && !bytes.Contains(rec, []byte("/dev/disk/")) && !bytes.Contains(rec, []byte("ounting arguments:")) {
		return
	}
	r := record{text: string(rec)}
	r.lower = strings.ToLower(r.text)
	if k := keysOf(&r); k.PV != "" || k.Device != "" || k.IQN != "" || k.Path != "" || k.Server != "" {
		p.recent, p.recentAge = k, 0
	}
}

// Incomplete says whether an event is an operation's failure that names
// no object: the lines that follow it without a header of their own (a
// mount's arguments and output) may name it (see Continuation).
func (e *Event) Incomplete() bool {
	return e.Op != OpNone && e.Outcome == OutcomeFailed && !e.Storage()
}

// Continuation reads a record that has no header of its own (no time,
// level or logger prefix: the rest of a message its writer split over
// lines, "Mounting arguments: ..."), for the objects it names; cont is
// false when the record has a header of its own.
func (p *Parser) Continuation(rec []byte) (keys Keys, cont bool) {
	var r record
	b := p.prefixes(&r, bytes.TrimSpace(rec))
	if reKlog.Match(b) || reStampLevel.Match(b) || reLevelWord.Match(b) || len(b) == 0 || b[0] == '{' ||
		bytes.HasPrefix(b, []byte("time=")) || bytes.HasPrefix(b, []byte("level=")) {
		return Keys{}, false
	}
	r.msg = string(b)
	r.text = r.msg
	r.lower = strings.ToLower(r.text)
	return keysOf(&r), true
}

// mayMatter is a cheap test for a record that may report an operation's
// outcome: most records of a log (syncs, probes, starts) do not, and are
// not taken apart.
func mayMatter(b []byte) bool {
	if klogWarnOrError(b) {
		return true
	}
	switch scan(&primary, b) {
	case wordCheap:
		return true
	case wordSuccess:
		// A success matters only for a storage operation.
		return scan(&ops, b) == wordOp
	}
	return false
}

// wordTable finds words in a record in one pass: each word is filed
// under its first two bytes, chosen rare, so that most bytes cost one
// array load.
type wordTable struct {
	index [1 << 16]uint8
	words [][]gramWord
}

// gramWord is a word of a table and its kind.
type gramWord struct {
	w    []byte
	kind uint8
}

const (
	wordNone = iota
	wordCheap
	wordSuccess
	wordOp
)

var primary, ops wordTable

// scan returns the kind of the first word in b that is not a success
// word, else wordSuccess when b holds one, else wordNone.
func scan(t *wordTable, b []byte) uint8 {
	found := uint8(wordNone)
	for i := 0; i+1 < len(b); i++ {
		g := t.index[uint16(b[i])<<8|uint16(b[i+1])]
		if g == 0 {
			continue
		}
		for _, w := range t.words[g] {
			if bytes.HasPrefix(b[i:], w.w) {
				if w.kind != wordSuccess {
					return w.kind
				}
				found = wordSuccess
			}
		}
	}
	return found
}

// add files words of a kind (at most 254 distinct first pairs).
func (t *wordTable) add(ws [][]byte, kind uint8) {
	if t.words == nil {
		t.words = [][]gramWord{nil}
	}
	for _, w := range ws {
		k := uint16(w[0])<<8 | uint16(w[1])
		if t.index[k] == 0 && len(t.words) < 255 {
			t.index[k] = uint8(len(t.words))
			t.words = append(t.words, nil)
		}
		if t.index[k] != 0 {
			t.words[t.index[k]] = append(t.words[t.index[k]], gramWord{w, kind})
		}
	}
}

func init() {
	primary.add(cheapWords, wordCheap)
	primary.add(successWords, wordSuccess)
	ops.add(opWords, wordOp)
}

var (
	// cheapWords are words of a failure or a request; each begins with
	// a rare pair of bytes.
	cheapWords = [][]byte{[]byte("ail"), []byte("rror"), []byte("RROR"), []byte("rpc"), []byte("/O "), []byte("efused"), []byte("busy"),
		[]byte("imed out"), []byte("xit status"), []byte("\"Error\":"), []byte("GRPC "), []byte("ERR"), []byte("enied"), []byte("csi.v"),
		[]byte("quests {"), []byte("ublishVolume"), []byte("tageVolume"), []byte("xpandVolume"), []byte("questID"), []byte("quest_id"),
		// mount(8)'s and umount(8)'s own failures, as a caller's log
		// quotes their output on lines of their own.
		[]byte("rong fs type"), []byte("ad superblock"), []byte("an't unmount"), []byte("an't mount"), []byte("nvalid argument")}
	successWords = [][]byte{[]byte("ucce"), []byte("kipp"), []byte("lready"), []byte("g to do"), []byte("ompleted"), []byte("has been")}
	// opWords are the words of a storage operation (a success of
	// anything else is not read).
	opWords = [][]byte{[]byte("ount"), []byte("tage"), []byte("ublish"), []byte("ttach"), []byte("etach"), []byte("olume"), []byte("SetUp"), []byte("TearDown"),
		[]byte("/dev/"), []byte("map"), []byte("Map"), []byte("ormat"), []byte("esize"), []byte("xpand"), []byte("ogin"), []byte("perational")}
)

// klogWarnOrError tells a record with a klog header of level E or W near
// its start ("E1121 09:10:01.000000 ...").
func klogWarnOrError(b []byte) bool {
	head := b[:min(len(b), 160)]
	for i := 0; i+6 <= len(head); i++ {
		c := head[i]
		if (c == 'E' || c == 'W') && (i == 0 || head[i-1] == ' ' || head[i-1] == '"') && isDigits(head[i+1:i+5]) && head[i+5] == ' ' {
			return true
		}
	}
	return false
}

// split takes a record's prefixes, header and fields apart.
func (p *Parser) split(rec []byte) record {
	var r record
	b := bytes.TrimSpace(rec)
	b = p.prefixes(&r, b)
	b = p.body(&r, b, 0)
	if r.msg == "" {
		r.msg = string(b)
	}
	if m := reCephID.FindStringSubmatch(r.msg); m != nil {
		r.reqID, r.reqVol = m[1], m[2]
		r.msg = r.msg[len(m[0]):]
	} else if id := r.get("requestID", "request_id", "reqID", "req_id", "RequestID"); id != "" {
		r.reqID = id
	}
	var t strings.Builder
	t.WriteString(r.msg)
	for _, f := range r.fields {
		t.WriteByte(' ')
		t.WriteString(f.k)
		t.WriteByte('=')
		t.WriteString(f.v)
	}
	r.text = t.String()
	return r
}

// prefixes takes off what a collection or a transport adds before the
// writer's own record: a CRI log line's time, stream and tag; a journal
// or syslog prefix (time, host, ident[pid]); dmesg's "[  12.345678]".
func (p *Parser) prefixes(r *record, b []byte) []byte {
	for range 3 {
		switch {
		case len(b) >= 20 && isDigits(b[:4]) && b[4] == '-' && b[10] == 'T':
			sp := bytes.IndexByte(b, ' ')
			if sp < 0 {
				return b
			}
			rest := b[sp+1:]
			cri := false
			for _, s := range []string{"stdout ", "stderr "} {
				if r2, ok := bytes.CutPrefix(rest, []byte(s)); ok && len(r2) >= 2 && (r2[0] == 'F' || r2[0] == 'P') && r2[1] == ' ' {
					rest, cri = r2[2:], true
				}
			}
			host, ident, pid, after, ok := syslogTail(rest)
			if !cri && !ok {
				// Not a transport's prefix: the writer's own stamp
				// (Rust tracing, logrus text): the body reads it.
				return b
			}
			if t, ok := parseStamp(string(b[:sp])); ok {
				r.ev.Time, r.ev.Zoned = t, true
			}
			if ok {
				_ = host
				r.ev.Source, r.ev.PID, rest = ident, pid, after
			}
			b = rest
		case len(b) >= 16 && b[3] == ' ' && b[6] == ' ' && b[9] == ':' && months[string(b[:3])] != 0:
			day, err1 := strconv.Atoi(string(bytes.TrimSpace(b[4:6])))
			clock, err2 := time.Parse("15:04:05", string(b[7:15]))
			if err1 == nil && err2 == nil {
				r.ev.Time = withYear(months[string(b[:3])], day, clock, p.Ref)
			}
			rest := b[15:]
			// "Jun 17 20:18:09.123456" (a precise syslog stamp)
			if len(rest) > 0 && rest[0] == '.' {
				i := 1
				for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
					i++
				}
				rest = rest[i:]
			}
			rest = bytes.TrimLeft(rest, " ")
			if _, ident, pid, after, ok := syslogTail(rest); ok {
				r.ev.Source, r.ev.PID, rest = ident, pid, after
			}
			b = rest
		case len(b) > 3 && b[0] == '[':
			// dmesg: "[  123.456789] message" or "[Thu May 14 ...] message".
			end := bytes.IndexByte(b, ']')
			if end < 0 || end > 40 {
				return b
			}
			if r.ev.Source == "" {
				r.ev.Source = "kernel"
			}
			b = bytes.TrimLeft(b[end+1:], " ")
		default:
			return b
		}
	}
	return b
}

// syslogTail reads "host ident[pid]: rest" (or "ident[pid]: rest" with the
// host left out, "ident: rest").
func syslogTail(b []byte) (host, ident string, pid int, rest []byte, ok bool) {
	tryIdent := func(tok []byte) (string, int, bool) {
		if len(tok) < 2 || tok[len(tok)-1] != ':' {
			return "", 0, false
		}
		id := tok[:len(tok)-1]
		n := 0
		if i := bytes.IndexByte(id, '['); i > 0 && id[len(id)-1] == ']' {
			n, _ = strconv.Atoi(string(id[i+1 : len(id)-1]))
			id = id[:i]
		}
		for _, c := range id {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/' || c == '@') {
				return "", 0, false
			}
		}
		return string(id), n, len(id) > 0
	}
	f1, after1, ok1 := bytes.Cut(b, []byte(" "))
	if !ok1 {
		return "", "", 0, nil, false
	}
	// "host ident[pid]: ..."
	if f2, after2, ok2 := bytes.Cut(after1, []byte(" ")); ok2 && (len(f1) == 0 || f1[len(f1)-1] != ':') {
		if id, n, ok := tryIdent(f2); ok {
			return string(f1), id, n, after2, true
		}
	}
	// "ident[pid]: ..." (a pasted line without its host)
	if id, n, ok := tryIdent(f1); ok && bytes.IndexByte(f1, '[') > 0 {
		return "", id, n, after1, true
	}
	return "", "", 0, nil, false
}

// body reads the writer's own record: JSON, a klog header (then klog's
// structured or text message), a stamp and level word (Rust tracing,
// logrus text), logfmt.
func (p *Parser) body(r *record, b []byte, depth int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > 1 && b[0] == '{' && b[len(b)-1] == '}' && depth < 2 {
		if p.jsonBody(r, b, depth) {
			return nil
		}
	}
	if m := reKlog.FindSubmatch(b); m != nil {
		r.ev.Level = klogLevel(m[1][0])
		r.ev.Component = string(m[6])
		if r.ev.Time.IsZero() {
			mon, _ := strconv.Atoi(string(m[2]))
			day, _ := strconv.Atoi(string(m[3]))
			if clock, err := time.Parse("15:04:05.999999999", string(m[4])); err == nil && mon >= 1 && mon <= 12 {
				r.ev.Time = withYear(time.Month(mon), day, clock, p.Ref)
			}
		}
		rest := b[len(m[0]):]
		if len(rest) > 0 && rest[0] == '"' {
			// Structured: "msg" key="value" ...
			msg, after, ok := unquote(rest)
			if ok {
				r.msg = msg
				r.fields = append(r.fields, logfmt(after)...)
				return nil
			}
		}
		r.msg = string(rest)
		r.fields = append(r.fields, logfmt(rest)...)
		return nil
	}
	if m := reStampLevel.FindSubmatch(b); m != nil {
		if t, ok := parseStamp(string(m[1])); ok && r.ev.Time.IsZero() {
			r.ev.Time, r.ev.Zoned = t, true
		}
		r.ev.Level = levelWord(string(m[2]))
		r.ev.Component = string(m[3])
		rest := b[len(m[0]):]
		r.fields = append(r.fields, logfmt(rest)...)
		if bytes.Contains(rest, []byte("msg=")) {
			r.msg = r.get("msg")
			return p.nested(r, depth)
		}
		r.msg = string(rest)
		return nil
	}
	if bytes.HasPrefix(b, []byte("time=")) || bytes.HasPrefix(b, []byte("level=")) || bytes.HasPrefix(b, []byte("ts=")) || bytes.HasPrefix(b, []byte("lvl=")) {
		r.fields = append(r.fields, logfmt(b)...)
		r.msg = r.get("msg", "message")
		r.ev.Level = levelWord(r.get("level", "lvl"))
		if t, ok := parseStamp(r.get("time", "ts")); ok && r.ev.Time.IsZero() {
			r.ev.Time, r.ev.Zoned = t, true
		}
		return p.nested(r, depth)
	}
	if m := reLevelWord.FindSubmatch(b); m != nil {
		r.ev.Level = levelWord(string(m[1]))
		r.msg = string(bytes.TrimSpace(b[len(m[0]):]))
		return nil
	}
	return b
}

// nested reads a record carried in another's message: a wrapper (k0s, a
// logging sidecar) logging the kubelet's klog lines as its own msg.
func (p *Parser) nested(r *record, depth int) []byte {
	if depth >= 2 || !reKlog.MatchString(r.msg) {
		return nil
	}
	msg := r.msg
	r.msg = ""
	if rest := p.body(r, []byte(msg), depth+1); r.msg == "" {
		r.msg = string(rest)
	}
	return nil
}

// jsonBody reads a JSON record: a docker json-file line whose "log" is
// read again, or a structured logger's record (klog, zap, logrus,
// vsphere's, a journal export).
func (p *Parser) jsonBody(r *record, b []byte, depth int) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	var inner []byte
	found := false
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return false
		}
		s := jsonString(raw)
		switch strings.ToLower(key) {
		case "log":
			inner = []byte(strings.TrimRight(s, "\r\n"))
			found = true
		case "msg", "message":
			r.msg, found = s, true
		case "ts", "time", "timestamp", "@timestamp", "__realtime_timestamp":
			if t, ok := jsonStamp(raw); ok && r.ev.Time.IsZero() {
				r.ev.Time, r.ev.Zoned = t, true
			}
		case "level", "lvl", "severity", "priority":
			if l := levelWord(s); l != LevelUnknown {
				r.ev.Level = l
			}
		case "caller", "logger", "target", "component", "syslog_identifier", "module":
			if r.ev.Component == "" {
				r.ev.Component = s
			}
		case "stream", "v":
		default:
			r.fields = append(r.fields, field{key, s})
		}
	}
	if inner == nil && found && depth < 2 && reKlog.MatchString(r.msg) {
		p.nested(r, depth)
	}
	if inner != nil && depth == 0 {
		rest := p.body(r, inner, depth+1)
		if r.msg == "" {
			r.msg = string(rest)
		}
	}
	return found
}

// jsonString is a JSON value as text: a string unquoted, anything else
// as its JSON.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// logfmt reads key=value pairs (values quoted Go-style or bare) from b;
// what is not a pair is skipped.
func logfmt(b []byte) []field {
	var out []field
	for len(out) < 64 {
		b = bytes.TrimLeft(b, " \t")
		if len(b) == 0 {
			return out
		}
		eq := bytes.IndexByte(b, '=')
		sp := bytes.IndexAny(b, " \t")
		if eq <= 0 || (sp >= 0 && sp < eq) {
			if sp < 0 {
				return out
			}
			b = b[sp:]
			continue
		}
		key := string(b[:eq])
		rest := b[eq+1:]
		if len(rest) > 0 && rest[0] == '"' {
			v, after, ok := unquote(rest)
			if !ok {
				out = append(out, field{key, string(rest)})
				return out
			}
			out = append(out, field{key, v})
			b = after
			continue
		}
		end := bytes.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		out = append(out, field{key, string(rest[:end])})
		b = rest[end:]
	}
	return out
}

// unquote reads a Go-quoted string at the start of b; after is what
// follows it. A quoted string whose escapes Go does not read is returned
// with its backslashes as they are.
func unquote(b []byte) (s string, after []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return "", b, false
	}
	i := 1
	for i < len(b) {
		switch b[i] {
		case '\\':
			i += 2
			continue
		case '"':
			q := string(b[:i+1])
			if u, err := strconv.Unquote(q); err == nil {
				return u, b[i+1:], true
			}
			return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`), b[i+1:], true
		}
		i++
	}
	return "", b, false
}

func klogLevel(c byte) Level {
	switch c {
	case 'I':
		return LevelInfo
	case 'W':
		return LevelWarning
	case 'E':
		return LevelError
	case 'F':
		return LevelFatal
	}
	return LevelUnknown
}

func levelWord(s string) Level {
	switch strings.ToLower(strings.Trim(s, "\"[] ")) {
	case "trace", "debug", "7":
		return LevelDebug
	case "info", "notice", "6", "5":
		return LevelInfo
	case "warn", "warning", "4":
		return LevelWarning
	case "error", "erro", "err", "3", "dpanic":
		return LevelError
	case "fatal", "panic", "crit", "critical", "alert", "emerg", "2", "1", "0":
		return LevelFatal
	}
	return LevelUnknown
}

// parseStamp reads an RFC 3339 stamp (a comma or a space for the T
// accepted).
func parseStamp(s string) (time.Time, bool) {
	s = strings.Replace(s, ",", ".", 1)
	if len(s) > 10 && s[10] == ' ' {
		s = s[:10] + "T" + s[11:]
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// jsonStamp reads a JSON record's time: an RFC 3339 string, or seconds
// (milli-, microseconds) since the epoch.
func jsonStamp(raw json.RawMessage) (time.Time, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return parseStamp(s)
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f <= 0 || f > 1e17 || math.IsNaN(f) {
		return time.Time{}, false
	}
	switch {
	case f > 1e15:
		f /= 1e6
	case f > 1e12:
		f /= 1e3
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

// withYear dates a month, day and clock time in UTC, in the year that puts
// it no later than a day after ref.
func withYear(mon time.Month, day int, clock time.Time, ref time.Time) time.Time {
	if ref.IsZero() {
		ref = time.Now()
	}
	t := time.Date(ref.Year(), mon, day, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), time.UTC)
	if t.After(ref.Add(24 * time.Hour)) {
		t = t.AddDate(-1, 0, 0)
	}
	return t
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}
