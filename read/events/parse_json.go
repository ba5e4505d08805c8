package events

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"time"
)

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
