package analyze

import (
	"bytes"
	"regexp"
	"strconv"
	"time"

	"github.com/nodesnap/nodesnap/read/events"
)

// What a log line says about where and when it was written: its time, the
// host and the program (ident[pid]) of a journal or syslog prefix, the pid
// of a klog header, and a node the line names. Log findings are scoped with
// it: to the running kubelet instance, the collection window and this node.

// logMeta is a log line's origin, as far as its text tells.
type logMeta struct {
	// Time is zero when the line carries none that parses; Zoned says it
	// came with a UTC offset (a syslog or klog stamp is in the node's
	// zone, which the line does not say).
	Time  time.Time
	Zoned bool
	// Host and Ident come from a journal/syslog prefix ("host ident[pid]:").
	Host  string
	Ident string
	// PID is the prefix's pid (the journal's _PID: the host's numbering).
	PID int
	// KlogPID is the pid of a klog header ("I1123 22:01:48.123456   812
	// file.go:1]"): the process's own numbering, a container's inside one.
	KlogPID int
	// Node is a Kubernetes node the line names (node="x", nodeName:x,
	// "on node \"x\"").
	Node string
}

var (
	// reKlog is a klog header: severity, MMDD, time, pid.
	reKlog = regexp.MustCompile(`(?:^|\s)[IWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+)\s+(\d+) \S+:\d+\]`)
	// reNodeNamed finds the node a kubelet or CSI line names.
	reNodeNamed = regexp.MustCompile(`(?:\bon node |\bnode=|\bnodeName[:=]|"nodeName":|\bNodeId:\s*)\\*"?([A-Za-z0-9][-A-Za-z0-9._]*)`)
	months      = map[string]time.Month{"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "May": 5, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}
)

// parseLogMeta reads a line's origin. ref is the collection time: syslog
// and klog stamps carry no year, so the year is the one that puts the line
// at most a day after ref (a line from late December read in January is
// last year's).
func parseLogMeta(b []byte, ref time.Time) logMeta {
	var m logMeta
	rest := b
	switch {
	case len(b) >= 20 && events.IsDigits(b[:4]) && b[4] == '-' && b[10] == 'T':
		// journalctl -o short-iso-precise, dmesg --time-format iso, a
		// CRI container log: an RFC 3339 time, a space.
		sp := bytes.IndexByte(b, ' ')
		if sp < 0 {
			return m
		}
		stamp := bytes.ReplaceAll(b[:sp], []byte(","), []byte("."))
		if t, err := time.Parse(time.RFC3339Nano, string(stamp)); err == nil {
			m.Time, m.Zoned = t, true
		} else if t, err := time.Parse("2006-01-02T15:04:05.999999999-0700", string(stamp)); err == nil {
			m.Time, m.Zoned = t, true
		}
		rest = b[sp+1:]
		if r, ok := bytes.CutPrefix(rest, []byte("stdout ")); ok {
			rest = r
		} else if r, ok := bytes.CutPrefix(rest, []byte("stderr ")); ok {
			rest = r
		}
	case len(b) >= 16 && b[3] == ' ' && b[6] == ' ' && b[9] == ':' && months[string(b[:3])] != 0:
		// Classic syslog: "Nov 21 09:10:01 host ident[pid]: ...".
		day, err1 := strconv.Atoi(string(bytes.TrimSpace(b[4:6])))
		clock, err2 := time.Parse("15:04:05", string(b[7:15]))
		if err1 == nil && err2 == nil {
			m.Time = events.WithYear(months[string(b[:3])], day, clock, ref)
		}
		rest = b[16:]
	}
	// "host ident[pid]: message" after the stamp (not dmesg's "loop1:
	// message" nor a container log's "F message").
	if host, after, ok := bytes.Cut(rest, []byte(" ")); ok && len(host) > 0 && host[len(host)-1] != ':' {
		if ident, _, ok := bytes.Cut(after, []byte(" ")); ok && len(ident) > 1 && ident[len(ident)-1] == ':' {
			id := ident[:len(ident)-1]
			if i := bytes.IndexByte(id, '['); i > 0 && id[len(id)-1] == ']' {
				m.PID, _ = strconv.Atoi(string(id[i+1 : len(id)-1]))
				id = id[:i]
			}
			m.Host, m.Ident = string(host), string(id)
		}
	}
	if k := klogSubmatch(rest); k != nil {
		m.KlogPID, _ = strconv.Atoi(string(k[4]))
		if m.Time.IsZero() {
			mon, _ := strconv.Atoi(string(k[1]))
			day, _ := strconv.Atoi(string(k[2]))
			if clock, err := time.Parse("15:04:05.999999999", string(k[3])); err == nil && mon >= 1 && mon <= 12 {
				m.Time = events.WithYear(time.Month(mon), day, clock, ref)
			}
		}
	}
	if n := nodeNamedSubmatch(rest); n != nil {
		m.Node = string(n[1])
	}
	return m
}

// klogSubmatch is reKlog.FindSubmatch(b), run only from where a match can
// start: a match needs a level letter and four digits and a space, at the
// start or after a blank; the expression runs from the blank before the
// first such place (no match can start earlier, and the blank cannot start
// one itself), and not at all when there is none.
func klogSubmatch(b []byte) [][]byte {
	for i := 0; i+6 <= len(b); i++ {
		switch b[i] {
		case 'I', 'W', 'E', 'F':
		default:
			continue
		}
		if i > 0 && !isRESpace(b[i-1]) || !events.IsDigits(b[i+1:i+5]) || b[i+5] != ' ' {
			continue
		}
		return reKlog.FindSubmatch(b[max(i-1, 0):])
	}
	return nil
}

// isRESpace is a byte of the expressions' \s class.
func isRESpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

// nodeNamedWords are the literals one of which every match of reNodeNamed
// holds.
var nodeNamedWords = [][]byte{[]byte("on node "), []byte("node="), []byte("nodeName"), []byte("NodeId:")}

// reNodeNamedAt is reNodeNamed anchored at the start of its input.
var reNodeNamedAt = regexp.MustCompile(`^(?:` + reNodeNamed.String() + `)`)

// nodeNamedSubmatch is reNodeNamed.FindSubmatch(b), tried only where a
// match can start, from the first such place on: at each of its words
// (and at the quote before "nodeName" for "\"nodeName\":"), where the
// \b before a word holds, the anchored expression is run; the first place
// it matches is where the leftmost match starts, and the anchored
// expression takes the same alternative there. A kubelet's error says
// "podName: nodeName:}" early in a long record with no node after it,
// where the expression, without a literal to start from, was tried at
// every byte after it.
func nodeNamedSubmatch(b []byte) [][]byte {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case 'o', 'n', 'N':
			if i > 0 && isWordByte(b[i-1]) {
				// Each word starting with a letter follows a \b.
				continue
			}
			if !bytes.HasPrefix(b[i:], nodeNamedWords[0]) && !bytes.HasPrefix(b[i:], nodeNamedWords[1]) &&
				!bytes.HasPrefix(b[i:], nodeNamedWords[2]) && !bytes.HasPrefix(b[i:], nodeNamedWords[3]) {
				continue
			}
		case '"':
			if !bytes.HasPrefix(b[i+1:], nodeNamedWords[2]) {
				continue
			}
		default:
			continue
		}
		if m := reNodeNamedAt.FindSubmatch(b[i:]); m != nil {
			return m
		}
	}
	return nil
}

// isWordByte is a byte of \w, the bytes \b tells from others.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
