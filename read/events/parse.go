package events

import (
	"bytes"
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
	// recents are the newest records that may name a volume or a device
	// path (a command the driver ran, a device it waited for), newest at
	// nextRecent-1; seq counts records: a driver's failed call that names
	// no object is about the object its records just before named. A
	// record is read for its objects only when such a call needs it
	// (most are never needed, and reading one costs a dozen regular
	// expressions).
	recents    [maxLookback + 1]recentRecord
	nextRecent int
	seq        int
}

// recentRecord is a record kept for its objects, read when first needed.
type recentRecord struct {
	raw []byte
	seq int
	// read says keys and names are set: names that keys hold a volume,
	// a device, a path, an IQN or a server.
	read, names bool
	keys        Keys
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
	// fn is the function its writer logged it from, when the header
	// names one (Python logging's location).
	fn string
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
	// reMethod is a CSI gRPC method.
	reMethod = lazy(`/csi\.v\d+\.(?:Node|Controller|Identity)/(\w+)`)
)

// Parse reads one record (a log line, or lines joined into one record).
// ok is false when the record reports no operation's outcome on a storage
// object; the event is then incomplete (Incomplete tells a failure that
// names no object).
func (p *Parser) Parse(rec []byte) (ev Event, ok bool) {
	if recs := jsonRecords(rec); recs != nil {
		// Several JSON records on one line: each in turn, the first
		// failure (else the last event) for the line.
		for _, one := range recs {
			e, isOK := p.Parse(one)
			if isOK && (!ok || ev.Outcome != OutcomeFailed) {
				ev, ok = e, true
			} else if !ok && e.Incomplete() {
				ev = e
			}
		}
		return ev, ok
	}
	p.seq++
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

// noteRecent keeps a record that may name a volume or a device by path
// (most records name neither and cost three searches), to be read by
// recentKeys if a failure after it needs its objects.
func (p *Parser) noteRecent(rec []byte) {
	if !bytes.Contains(rec, []byte("pvc-")) && !bytes.Contains(rec, []byte("/dev/disk/")) && !bytes.Contains(rec, []byte("ounting arguments:")) &&
		!bytes.Contains(rec, []byte("ttempting to mount")) {
		return
	}
	s := &p.recents[p.nextRecent]
	p.nextRecent = (p.nextRecent + 1) % len(p.recents)
	s.raw = append(s.raw[:0], rec...)
	s.seq, s.read, s.names, s.keys = p.seq, false, false, Keys{}
}

// recentKeys returns the objects of the newest record at most maxLookback
// records before this one that names a volume, a device, a path, an IQN
// or a server (nothing when none does).
func (p *Parser) recentKeys() Keys {
	for n := 1; n <= len(p.recents); n++ {
		s := &p.recents[(p.nextRecent-n+len(p.recents))%len(p.recents)]
		if s.seq == 0 || p.seq-s.seq > maxLookback {
			break
		}
		if !s.read {
			r := record{text: string(s.raw)}
			r.lower = strings.ToLower(r.text)
			k := keysOf(&r)
			s.read, s.names, s.keys = true, k.PV != "" || k.Device != "" || k.IQN != "" || k.Path != "" || k.Server != "", k
		}
		if s.names {
			return s.keys
		}
	}
	return Keys{}
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

// split takes a record's prefixes, header and fields apart.
func (p *Parser) split(rec []byte) record {
	var r record
	b := bytes.TrimSpace(rec)
	b = p.prefixes(&r, b)
	b = p.body(&r, b, 0)
	if r.msg == "" {
		r.msg = string(b)
	}
	pyLocation(&r)
	requestPrefix(&r)
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

// body reads the writer's own record: JSON, a klog header (then klog's
// structured or text message), a stamp and level word (Rust tracing,
// logrus text), logfmt, a bare level word. Each format's reader is in
// the file named for it (parse_json.go, parse_klog.go, ...).
func (p *Parser) body(r *record, b []byte, depth int) []byte {
	b = bytes.TrimSpace(b)
	if len(b) > 1 && b[0] == '{' && b[len(b)-1] == '}' && depth < 2 {
		if p.jsonBody(r, b, depth) {
			return nil
		}
	}
	if rest, ok := p.klogBody(r, b); ok {
		return rest
	}
	if rest, ok := p.stampLevelBody(r, b, depth); ok {
		return rest
	}
	if rest, ok := goStampBody(r, b); ok {
		return rest
	}
	if rest, ok := p.logfmtBody(r, b, depth); ok {
		return rest
	}
	if rest, ok := levelWordBody(r, b); ok {
		return rest
	}
	return b
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
