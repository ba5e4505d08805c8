package events

import (
	"bytes"
)

var (
	// reStampLevel is an RFC 3339 stamp and a level word: Rust tracing
	// ("2024-01-01T00:00:00.000Z ERROR target: msg"), and other loggers,
	// some with the process's number between them and the level in
	// brackets ("2023-06-09 12:17:49.110490 3234490 [ERROR]: msg").
	reStampLevel = lazy(`^(\d{4}-\d\d-\d\d[T ][0-9:.,]+(?:Z|[+-]\d\d:?\d\d)?)\s+(?:\d+\s+)?\[?(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|error|warn|warning|info|debug)\]?:?\s+(?:([A-Za-z_][\w:.-]*(?:::[\w.-]+)*):\s)?`)
	// reLevelWord is a level word opening a body: "[ERROR] msg",
	// "ERROR: msg", "E msg".
	reLevelWord = lazy(`^\[?(ERROR|ERRO|WARN|WARNING|INFO|DEBUG|FATAL|error|warn|warning)\]?[: ]`)
	// rePyLogging is Python logging's "%(asctime)s:%(levelname)s:%(name)s:"
	// ("2023-11-23 22:56:20,694:ERROR:grpc._server: msg").
	// reOsloLogging is OpenStack oslo.log's "%(asctime)s %(process)d
	// %(levelname)s %(name)s [%(request_id)s ...] %(message)s" (ember-csi,
	// cinderlib), the process field any word.
	reOsloLogging = lazy(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) (?:\S+ )?(DEBUG|INFO|WARNING|ERROR|CRITICAL) ([\w.]+) (?:\[(req-[0-9a-f-]{36})[^\]]*\] )?`)
	rePyLogging   = lazy(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})[: ](DEBUG|INFO|WARNING|ERROR|CRITICAL)[: ]([\w.]+):\s?`)
)

// stampLevelBody reads a record that opens with its writer's stamp and
// a level word (Rust tracing, logrus text): then a message, or logfmt
// fields with a msg.
func (p *Parser) stampLevelBody(r *record, b []byte, depth int) ([]byte, bool) {
	if m := rePyLogging.FindSubmatch(b); m != nil {
		if t, ok := parseStamp(string(m[1]) + "." + string(m[2])); ok && r.ev.Time.IsZero() {
			r.ev.Time = t
		}
		r.ev.Level = levelWord(string(m[3]))
		r.ev.Component = string(m[4])
		r.msg = string(b[len(m[0]):])
		return nil, true
	}
	if m := reOsloLogging.FindSubmatch(b); m != nil {
		if t, ok := parseStamp(string(m[1])); ok && r.ev.Time.IsZero() {
			r.ev.Time = t
		}
		r.ev.Level = levelWord(string(m[2]))
		r.ev.Component = string(m[3])
		r.reqID = string(m[4])
		r.msg = string(b[len(m[0]):])
		return nil, true
	}
	m := reStampLevel.FindSubmatch(b)
	if m == nil {
		return nil, false
	}
	if t, ok := parseStamp(string(m[1])); ok && r.ev.Time.IsZero() {
		r.ev.Time, r.ev.Zoned = t, true
	}
	r.ev.Level = levelWord(string(m[2]))
	r.ev.Component = string(m[3])
	rest := b[len(m[0]):]
	r.fields = append(r.fields, logfmt(rest)...)
	if bytes.Contains(rest, []byte("msg=")) {
		r.msg = r.get("msg")
		return p.nested(r, depth), true
	}
	r.msg = string(rest)
	return nil, true
}

// levelWordBody reads a body that opens with a level word alone.
func levelWordBody(r *record, b []byte) ([]byte, bool) {
	m := reLevelWord.FindSubmatch(b)
	if m == nil {
		return nil, false
	}
	r.ev.Level = levelWord(string(m[1]))
	r.msg = string(bytes.TrimSpace(b[len(m[0]):]))
	return nil, true
}
