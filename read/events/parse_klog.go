package events

import (
	"strconv"
	"time"
)

// reKlog is a klog header: level, MMDD, time, pid, file:line.
var reKlog = lazy(`^([IWEF])(\d\d)(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)\s+(\d+) ([^\s:\]]+):\d+\] ?`)

// klogBody reads a record with a klog header, then klog's structured
// ("msg" key="value" ...) or text message.
func (p *Parser) klogBody(r *record, b []byte) ([]byte, bool) {
	m := reKlog.FindSubmatch(b)
	if m == nil {
		return nil, false
	}
	r.ev.Level = klogLevel(m[1][0])
	r.ev.Component = string(m[6])
	if r.ev.Time.IsZero() {
		mon, _ := strconv.Atoi(string(m[2]))
		day, _ := strconv.Atoi(string(m[3]))
		if clock, err := time.Parse("15:04:05.999999999", string(m[4])); err == nil && mon >= 1 && mon <= 12 {
			r.ev.Time = WithYear(time.Month(mon), day, clock, p.Ref)
		}
	}
	rest := b[len(m[0]):]
	if len(rest) > 0 && rest[0] == '"' {
		// Structured: "msg" key="value" ...
		msg, after, ok := unquote(rest)
		if ok {
			r.msg = msg
			r.fields = append(r.fields, logfmt(after)...)
			return nil, true
		}
	}
	r.msg = string(rest)
	r.fields = append(r.fields, logfmt(rest)...)
	return nil, true
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
