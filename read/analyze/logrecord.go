package analyze

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/nodesnap/nodesnap/read/events"
)

// A log record is what one write of a logger is. Mostly one line, but a
// message with newlines in it (an rbd command's output, a klog error that
// quotes another program) goes on over lines without a header of their own
// in a log file, journalctl prints such continuations indented, and a CRI
// log file splits a long line into partial ("P") pieces. recordReader joins
// them back; recordText turns a structured record (klog's
// --logging-format=json, a docker json-file line, zap or logrus JSON) into
// the text the signatures are written for.

const (
	// maxJoinedLines and maxRecordBytes bound one record: a file of
	// header-less lines does not become one record.
	maxJoinedLines = 12
	maxRecordBytes = 64 << 10
)

// recordReader yields the records of a log, each with the number of its
// first line.
type recordReader struct {
	lr *lineReader
	// cur is the record being assembled; out the one last returned.
	cur, out   []byte
	n          int
	cut, has   bool
	lines      int
	headed     bool
	criPartial bool
	// lastLen is the length of the last physical line joined.
	lastLen int
}

func newRecordReader(r io.Reader) *recordReader {
	return &recordReader{lr: newLineReader(r)}
}

// next returns the next record (valid until the next call), the number
// of its first line, whether a line of it was cut, and io.EOF at the end.
func (rr *recordReader) next() ([]byte, int, bool, error) {
	for {
		line, n, cut, err := rr.lr.next()
		if errors.Is(err, io.EOF) {
			if rr.has {
				return rr.emit(nil, 0, false), rr.outN(), rr.outCut(), nil
			}
			return nil, 0, false, io.EOF
		}
		if err != nil {
			return nil, 0, false, err
		}
		if !rr.has {
			rr.start(line, n, cut)
			continue
		}
		if rr.join(line, cut) {
			continue
		}
		n0, cut0 := rr.n, rr.cut
		rec := rr.emit(line, n, cut)
		return rec, n0, cut0, nil
	}
}

// emitted record's number and cut flag, kept for the EOF path.
func (rr *recordReader) outN() int    { return rr.n }
func (rr *recordReader) outCut() bool { return rr.cut }

// emit returns the assembled record and starts the next one with line
// (none when line is nil).
func (rr *recordReader) emit(line []byte, n int, cut bool) []byte {
	rr.out, rr.cur = rr.cur, rr.out[:0]
	if line != nil {
		rr.start(line, n, cut)
	} else {
		rr.has = false
	}
	return rr.out
}

func (rr *recordReader) start(line []byte, n int, cut bool) {
	rr.cur = append(rr.cur[:0], line...)
	rr.n, rr.cut, rr.has, rr.lines = n, cut, true, 1
	rr.headed = isRecordStart(line)
	rr.criPartial = criTag(line) == 'P'
	rr.lastLen = len(line)
}

// join appends line to the record being assembled if it continues it.
func (rr *recordReader) join(line []byte, cut bool) bool {
	if rr.lines >= maxJoinedLines || len(rr.cur)+len(line) > maxRecordBytes {
		return false
	}
	if rr.criPartial {
		// A CRI partial line goes on in the next line of the file.
		tag := criTag(line)
		if tag == 0 {
			return false
		}
		rr.cur = append(rr.cur, criContent(line)...)
		rr.criPartial = tag == 'P'
		rr.lines++
		rr.cut = rr.cut || cut
		return true
	}
	if !rr.headed || len(bytes.TrimSpace(line)) == 0 || isRecordStart(line) || looksLikeStack(line) {
		return false
	}
	trimmed := bytes.TrimLeft(line, " \t")
	switch {
	case len(trimmed) < len(line):
		// journalctl indents a message's continuation lines.
		rr.cur = append(rr.cur, ' ')
	case rr.lastLen >= 100 && len(rr.cur) > 0 && wordByte(rr.cur[len(rr.cur)-1]) && wordByte(trimmed[0]):
		// A long line broken inside a word: wrapped at a fixed
		// width where it was copied, one line in the log.
	default:
		rr.cur = append(rr.cur, ' ')
	}
	rr.cur = append(rr.cur, trimmed...)
	rr.lines++
	rr.lastLen = len(line)
	rr.cut = rr.cut || cut
	return true
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/' || c == '.' || c == '~'
}

// isRecordStart tells a line that begins a record of its own: one with a
// time stamp or a logger's header (journal/syslog, RFC 3339, klog, dmesg,
// logrus, JSON), with or without a file-name prefix from grep.
func isRecordStart(b []byte) bool {
	if len(b) > 0 && b[0] != ' ' && b[0] != '\t' {
		// "messages:Jun 17 20:18:09 host kernel: ..." (grep -r), or
		// kubectl logs --prefix "csi-rbdplugin I0601 07:53:22...".
		if i := bytes.IndexAny(b[:min(len(b), 64)], ": "); i > 0 && i+1 < len(b) && headerAt(b[i+1:]) {
			return true
		}
	}
	return headerAt(b)
}

func headerAt(b []byte) bool {
	if len(b) < 6 {
		return false
	}
	switch c := b[0]; {
	case c == '{' || c == '[' || c == '|' || c == 0xe2:
		// JSON, dmesg "[ 12.3]" / "[Thu May 14 ...]", a pasted table.
		return true
	case c >= '0' && c <= '9':
		// 2023-04-18T13:01:48..., 2021/09/06 ..., 13:01:48 ...
		return len(b) >= 8 && (events.IsDigits(b[:4]) && (b[4] == '-' || b[4] == '/') ||
			events.IsDigits(b[:2]) && b[2] == ':' && events.IsDigits(b[3:5]) && b[5] == ':')
	case c == 'I' || c == 'W' || c == 'E' || c == 'F':
		// klog: I0517 11:57:29.743900
		if len(b) >= 11 && events.IsDigits(b[1:5]) && b[5] == ' ' && events.IsDigits(b[6:8]) && b[8] == ':' {
			return true
		}
	}
	if len(b) >= 16 && b[3] == ' ' && b[6] == ' ' && b[9] == ':' && months[string(b[:3])] != 0 {
		return true
	}
	return bytes.HasPrefix(b, []byte("time=")) || bytes.HasPrefix(b, []byte("level=")) || bytes.HasPrefix(b, []byte("goroutine ")) ||
		klogLocation(b)
}

// klogLocation tells a klog line whose stamp was left off where it was
// copied: "kubelet_volumes.go:154] Orphaned pod ...".
func klogLocation(b []byte) bool {
	i := 0
	for i < len(b) && i < 48 && (b[i] >= 'a' && b[i] <= 'z' || b[i] >= '0' && b[i] <= '9' || b[i] == '_') {
		i++
	}
	if i == 0 || !bytes.HasPrefix(b[i:], []byte(".go:")) {
		return false
	}
	j := i + 4
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	return j > i+4 && j+1 < len(b) && b[j] == ']' && b[j+1] == ' '
}

// looksLikeStack tells a line of a goroutine dump or panic (a frame, its
// file line, "created by"): never a continuation of a message.
func looksLikeStack(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	if b[0] == '\t' || bytes.HasPrefix(b, []byte("created by ")) || bytes.HasPrefix(b, []byte("goroutine ")) {
		return true
	}
	// "k8s.io/kubernetes/pkg/kubelet.(*Kubelet).syncLoop(0xc0..., ...)"
	open := bytes.IndexByte(b, '(')
	return open > 0 && b[len(b)-1] == ')' && bytes.IndexByte(b[:open], ' ') < 0 && bytes.IndexByte(b[:open], '.') > 0
}

// criTag is the tag of a CRI log line ("<RFC 3339> stdout P ..."): 'P' for
// a partial line, 'F' for a full one, 0 when the line is not one.
func criTag(b []byte) byte {
	sp := bytes.IndexByte(b, ' ')
	if sp < 20 || sp > 40 || !events.IsDigits(b[:4]) || b[4] != '-' || b[10] != 'T' {
		return 0
	}
	rest := b[sp+1:]
	for _, s := range [][]byte{[]byte("stdout "), []byte("stderr ")} {
		if bytes.HasPrefix(rest, s) && len(rest) > len(s)+1 && rest[len(s)+1] == ' ' {
			if t := rest[len(s)]; t == 'P' || t == 'F' {
				return t
			}
		}
	}
	return 0
}

// criContent is a CRI log line's content, after its time, stream and tag.
func criContent(b []byte) []byte {
	sp := bytes.IndexByte(b, ' ')
	return b[sp+1+len("stdout ")+2:]
}

// recordText is the text of a record the signatures are matched against
// and its origin is read from: the record itself, or for a structured one
// its time and message with its fields as klog's text format writes them
// (`"msg" key="value"`).
func logRecordText(rec []byte) []byte {
	body, stamp := rec, []byte(nil)
	if criTag(rec) != 0 {
		stamp, body = rec[:bytes.IndexByte(rec, ' ')], criContent(rec)
	}
	t := bytes.TrimSpace(body)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return rec
	}
	text, ts, ok := jsonRecordText(t, 0)
	if !ok {
		return rec
	}
	if ts != nil {
		stamp = ts
	}
	if stamp == nil {
		return text
	}
	out := make([]byte, 0, len(stamp)+1+len(text))
	out = append(append(append(out, stamp...), ' '), text...)
	return out
}

// jsonRecordText reads one JSON log record: a docker json-file line
// ({"log": "...", "time": ...}) whose log is read again, or a structured
// logger's record ({"msg": ..., "ts": ...} of klog/zap, "message"/"time"
// of logrus and others).
func jsonRecordText(b []byte, depth int) (text, stamp []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, false
	}
	var msg, inner []byte
	var fields []byte
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, false
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, false
		}
		switch key {
		case "log":
			var s string
			if json.Unmarshal(raw, &s) == nil {
				inner = bytes.TrimRight([]byte(s), "\r\n")
			}
		case "msg", "message", "MESSAGE":
			var s string
			if json.Unmarshal(raw, &s) == nil {
				msg = []byte(s)
			}
		case "ts", "time", "timestamp", "@timestamp", "__REALTIME_TIMESTAMP":
			stamp = jsonStamp(raw)
		case "level", "stream", "caller", "v", "logger":
		default:
			fields = append(fields, ' ')
			fields = append(fields, key...)
			fields = append(fields, '=')
			fields = append(fields, jsonFieldText(raw)...)
		}
	}
	switch {
	case inner != nil && depth == 0:
		t := bytes.TrimSpace(inner)
		if len(t) > 1 && t[0] == '{' && t[len(t)-1] == '}' {
			if text, s, ok := jsonRecordText(t, depth+1); ok {
				if s != nil {
					stamp = s
				}
				return text, stamp, true
			}
		}
		return inner, stamp, true
	case msg != nil:
		out := strconv.AppendQuote(nil, string(msg))
		return append(out, fields...), stamp, true
	}
	return nil, nil, false
}

// jsonFieldText writes a field's value as klog's text format does: a
// string quoted, an object with name and namespace as "namespace/name",
// anything else as its JSON.
func jsonFieldText(raw json.RawMessage) []byte {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.AppendQuote(nil, s)
	}
	var ref struct{ Name, Namespace string }
	if len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &ref) == nil && ref.Name != "" {
		if ref.Namespace != "" {
			return strconv.AppendQuote(nil, ref.Namespace+"/"+ref.Name)
		}
		return strconv.AppendQuote(nil, ref.Name)
	}
	return raw
}

// jsonStamp turns a record's time (seconds since the epoch as a number,
// or an RFC 3339 string) into an RFC 3339 stamp, or nil.
func jsonStamp(raw json.RawMessage) []byte {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return []byte(t.UTC().Format(time.RFC3339Nano))
		}
		return nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f <= 0 || f > 1e17 || math.IsNaN(f) {
		return nil
	}
	switch {
	case f > 1e15:
		// The journal's microseconds.
		f /= 1e6
	case f > 1e12:
		// Milliseconds (klog's JSON logger in some releases).
		f /= 1e3
	}
	sec, frac := math.Modf(f)
	return []byte(time.Unix(int64(sec), int64(frac*1e9)).UTC().Format(time.RFC3339Nano))
}
