package watch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Pure parsers of what the signals read. Their input comes from the node
// (another process's /proc files, the kernel's log, the journal, the
// kubelet): any bytes at all, so none of them may panic or grow without
// bound. Each has a fuzz target.

var errMalformed = errors.New("malformed")

// TaskStat is the part of /proc/<pid>/task/<tid>/stat the watcher uses.
type TaskStat struct {
	Comm  string
	State byte
	PPID  int
}

// ParseTaskStat parses a stat line: "pid (comm) S ppid ...". The comm may
// hold spaces and parentheses: it ends at the last ")".
func ParseTaskStat(b []byte) (TaskStat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return TaskStat{}, fmt.Errorf("stat line without (comm): %w", errMalformed)
	}
	rest := bytes.Fields(b[end+1:])
	if len(rest) < 2 || len(rest[0]) != 1 {
		return TaskStat{}, fmt.Errorf("stat line without state and ppid: %w", errMalformed)
	}
	ppid, err := strconv.Atoi(string(rest[1]))
	if err != nil {
		return TaskStat{}, fmt.Errorf("stat line with ppid %q: %w", rest[1], errMalformed)
	}
	return TaskStat{Comm: string(b[open+1 : end]), State: rest[0][0], PPID: ppid}, nil
}

// KmsgRecord is one record of /dev/kmsg.
type KmsgRecord struct {
	Seq uint64
	// Message is the text, with the kernel's escapes (\x0a) kept.
	Message string
}

// ParseKmsgRecord parses "prio,seq,usec,flags[,...];message\n" followed by
// optional " KEY=value" continuation lines, which are dropped.
func ParseKmsgRecord(b []byte) (KmsgRecord, error) {
	semi := bytes.IndexByte(b, ';')
	if semi < 0 {
		return KmsgRecord{}, fmt.Errorf("kmsg record without ';': %w", errMalformed)
	}
	fields := bytes.SplitN(b[:semi], []byte{','}, 3)
	if len(fields) < 2 {
		return KmsgRecord{}, fmt.Errorf("kmsg record without a sequence number: %w", errMalformed)
	}
	seq, err := strconv.ParseUint(string(fields[1]), 10, 64)
	if err != nil {
		return KmsgRecord{}, fmt.Errorf("kmsg record with sequence %q: %w", fields[1], errMalformed)
	}
	msg := b[semi+1:]
	if i := bytes.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return KmsgRecord{Seq: seq, Message: string(msg)}, nil
}

// Mount is one line of a mountinfo file.
type Mount struct {
	Point  string
	FSType string
	Source string
}

// ParseMountinfo parses a mountinfo file; malformed lines are skipped.
func ParseMountinfo(b []byte) []Mount {
	var out []Mount
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		f := bytes.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if string(f[i]) == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		out = append(out, Mount{Point: unescapeOctal(string(f[4])), FSType: unescapeOctal(string(f[sep+1])), Source: unescapeOctal(string(f[sep+2]))})
	}
	return out
}

// unescapeOctal undoes the kernel's \NNN escapes of space, tab, newline
// and backslash in mountinfo.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			sb.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// FailedChecks returns the checks a verbose healthz answer reports failed:
// its "[-]syncloop failed: reason withheld" lines, at most max.
func FailedChecks(body []byte, max int) []string {
	var out []string
	for _, l := range bytes.Split(body, []byte{'\n'}) {
		l = bytes.TrimSpace(l)
		if bytes.HasPrefix(l, []byte("[-]")) && len(out) < max {
			out = append(out, clip(string(l), 200))
		}
	}
	return out
}

// JournalEntry is one line of `journalctl -o json`.
type JournalEntry struct {
	Cursor     string
	Identifier string
	Message    string
}

// ParseJournalJSON parses one line of `journalctl -o json`. MESSAGE is a
// string, or an array of bytes when it is not valid UTF-8; a MESSAGE of
// several lines is kept whole (signatures are tested per line).
func ParseJournalJSON(b []byte) (JournalEntry, error) {
	var raw struct {
		Cursor  string          `json:"__CURSOR"`
		Ident   json.RawMessage `json:"SYSLOG_IDENTIFIER"`
		Unit    json.RawMessage `json:"_SYSTEMD_UNIT"`
		Message json.RawMessage `json:"MESSAGE"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return JournalEntry{}, fmt.Errorf("journal entry: %w", err)
	}
	if raw.Cursor == "" {
		return JournalEntry{}, fmt.Errorf("journal entry without a cursor: %w", errMalformed)
	}
	e := JournalEntry{Cursor: raw.Cursor, Identifier: journalField(raw.Ident)}
	if e.Identifier == "" {
		e.Identifier = strings.TrimSuffix(journalField(raw.Unit), ".service")
	}
	e.Message = journalField(raw.Message)
	return e, nil
}

// journalField decodes a field journalctl printed as a string, an array of
// bytes, or (a field repeated in one entry) an array of those.
func journalField(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []byte
	var ints []int
	if json.Unmarshal(raw, &ints) == nil {
		bs = make([]byte, 0, len(ints))
		for _, v := range ints {
			bs = append(bs, byte(v))
		}
		return string(bs)
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return journalField(many[0])
	}
	return ""
}

// clip bounds a string kept as evidence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
