package analyze

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/read/events"
)

// Goroutine dumps are read wherever they are, not only where the kubelet
// and runtime collectors put them: a kubelet that panicked or got SIGQUIT
// prints its goroutines to its log (each line of the dump a journal line
// of its own), dockerd and containerd log theirs on SIGUSR1 as one record
// with the newlines escaped ("=== BEGIN goroutine stack dump ===\ngoroutine
// 1 [running]:\n..."). The log index keeps the text of each dump it meets
// (bounded) and the analysis parses them like the collected dumps.

const (
	// maxLoggedDumpBytes bounds the text kept of the dumps found in
	// logs, over all logs.
	maxLoggedDumpBytes = 8 << 20
	maxLoggedDumps     = 64
)

// loggedDump is a goroutine dump found in a log.
type loggedDump struct {
	// Path is the log's bundle path; Origin who wrote the lines.
	Path   string
	Origin string
	Text   []byte
	// open: more lines of the same writer may follow.
	open bool
}

// noteDumpText feeds one record's message to the dump being assembled, or
// starts one. It returns whether the record belonged to a dump (so it is
// no signature line).
func (x *logIndex) noteDumpText(path string, meta *logMeta, rec []byte) bool {
	msg := logMessage(rec)
	origin := path + "\x00" + meta.Ident + "\x00" + strconv.Itoa(meta.PID)
	cur := x.openDump()
	if cur != nil && (cur.Origin != origin || !dumpContinues(msg)) {
		cur.open = false
		cur = nil
	}
	if cur == nil {
		if bytes.Contains(msg, []byte(`\ngoroutine `)) || bytes.Contains(msg, []byte("goroutine stack dump")) {
			// One record holding a whole dump, newlines escaped.
			if i := bytes.Index(msg, []byte("goroutine ")); i >= 0 {
				x.addDump(&loggedDump{Path: path, Origin: origin, Text: unescapeDump(msg[i:])})
			}
			return true
		}
		if !isGoroutineHeader(msg) {
			return false
		}
		cur = &loggedDump{Path: path, Origin: origin, open: true}
		if !x.addDump(cur) {
			return true
		}
	}
	if len(cur.Text)+len(msg) > maxLoggedDumpBytes-x.dumpBytes {
		cur.open = false
		return true
	}
	if isGoroutineHeader(msg) && len(cur.Text) > 0 {
		cur.Text = append(cur.Text, '\n')
	}
	if fileLine(msg) {
		// The file line of a frame, its tab lost on the way.
		cur.Text = append(cur.Text, '\t')
	}
	cur.Text = append(cur.Text, msg...)
	cur.Text = append(cur.Text, '\n')
	x.dumpBytes += len(msg) + 2
	return true
}

func (x *logIndex) openDump() *loggedDump {
	if n := len(x.dumps); n > 0 && x.dumps[n-1].open {
		return x.dumps[n-1]
	}
	return nil
}

func (x *logIndex) addDump(d *loggedDump) bool {
	if len(x.dumps) >= maxLoggedDumps || x.dumpBytes+len(d.Text) > maxLoggedDumpBytes {
		return false
	}
	x.dumps = append(x.dumps, d)
	x.dumpBytes += len(d.Text)
	return true
}

// logMessage is a record's message: what follows a journal/syslog prefix
// ("Aug 31 14:21:49 host ident[pid]: ", "01:38:02 ident[pid]: ") or a
// time stamp.
func logMessage(rec []byte) []byte {
	b := rec
	if criTag(b) != 0 {
		// A container's log line ("<RFC 3339> stderr F goroutine 1 [...]:").
		return criContent(b)
	}
	if i := bytes.Index(b[:min(len(b), 160)], []byte("]: ")); i > 0 {
		return b[i+3:]
	}
	if len(b) > 20 && events.IsDigits(b[:4]) && b[4] == '-' {
		if sp := bytes.IndexByte(b, ' '); sp > 0 {
			return b[sp+1:]
		}
	}
	return b
}

func isGoroutineHeader(b []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(b), []byte("goroutine "))
	return ok && len(rest) > 2 && rest[0] >= '0' && rest[0] <= '9' && bytes.Contains(rest, []byte(" ["))
}

// dumpContinues tells the lines of a goroutine dump: headers, frames,
// file lines, "created by", the blank line between goroutines.
func dumpContinues(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) == 0 || isGoroutineHeader(t) || looksLikeStack(b) || fileLine(t) ||
		bytes.HasPrefix(t, []byte("created by ")) || bytes.HasSuffix(t, []byte("...)")) || frameWithPosition(t)
}

// fileLine tells a frame's file line, "/usr/local/go/src/os/stat.go:13
// +0x4d", with its leading tab lost.
func fileLine(b []byte) bool {
	t := bytes.TrimSpace(b)
	return len(t) > 0 && t[0] == '/' && (bytes.Contains(t, []byte(".go:")) || bytes.Contains(t, []byte(".s:")))
}

// unescapeDump undoes the escaping of a dump logged as one record.
func unescapeDump(b []byte) []byte {
	r := strings.NewReplacer(`\\n`, "\n", `\\t`, "\t", `\n`, "\n", `\t`, "\t", `\"`, `"`)
	return []byte(r.Replace(string(b)))
}

// adoptLoggedDumps parses the dumps found in logs into the kubelet's or
// the runtime's dumps, by the code in their stacks.
func (st *state) adoptLoggedDumps() {
	for _, d := range st.logs.dumps {
		text := d.Text
		dump, err := parseGoroutines(d.Path, bytes.NewReader(text))
		if err != nil || dump == nil || dump.Total == 0 {
			continue
		}
		_, ident, _ := strings.Cut(d.Origin, "\x00")
		ident, _, _ = strings.Cut(ident, "\x00")
		switch {
		case bytes.Contains(text, []byte("k8s.io/kubernetes/pkg/kubelet")) || kubeletIdents[ident]:
			st.kubeDumps = append(st.kubeDumps, dump)
		case bytes.Contains(text, []byte("github.com/docker/")) || bytes.Contains(text, []byte("github.com/containerd/")) ||
			bytes.Contains(text, []byte("github.com/cri-o/")) || bytes.Contains(text, []byte("/moby/")):
			st.runtimeDump = append(st.runtimeDump, dump)
		case pluginLogPath(d.Path):
			st.pluginDumps = append(st.pluginDumps, dump)
		}
	}
}
