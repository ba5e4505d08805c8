package journal

import (
	"fmt"
	"regexp"
	"strings"
)

// Which entries a journal file or journalctl is asked for: units, identifiers, matches, the kernel.

// journalQuery is one journalctl source.
type journalQuery struct {
	name    string
	matches []string
	// except leaves out entries of matches (the native reader only).
	except  []string
	subject string // kubelet, kernel, ... (which fallback covers it)
}

// unitSuffixes are systemd unit types: a name ending in one is a full unit
// name; anything else gets ".service".
var unitSuffixes = []string{".service", ".scope", ".socket", ".mount", ".timer", ".slice", ".target", ".path", ".swap", ".device", ".automount"}

// unitIdentifiers are syslog identifiers a unit's daemon logs under when
// its messages do not carry the unit (not started by systemd, or relayed
// through syslog).
var unitIdentifiers = map[string][]string{
	"docker": {"dockerd"},
	// The NFS daemons log as their programs (rpc.statd …), not their units.
	"rpc-statd": {"rpc.statd", "sm-notify"}, "nfs-idmapd": {"rpc.idmapd"}, "nfs-mountd": {"rpc.mountd"},
	"nfs-server": {"rpc.nfsd", "exportfs"}, "iscsi": {"iscsiadm"},
	// MicroK8s's snap unit logs under the snap's app name.
	"snap.microk8s.daemon-kubelite": {"microk8s.daemon-kubelite"},
}

// coredumpMessageID is systemd-coredump's MESSAGE_ID: a crash of the unit's
// process is worth having next to its log.
const coredumpMessageID = "fc2e22bc6ee647b6b90729ab34a250b1"

// unitQuery builds the journalctl matches for a unit: its own output, what
// systemd said about it (started, failed, restarted), its core dumps, and
// its syslog identifier. Only fields journald records itself, which no
// sender sets, select an entry (issue 38: `logger -t kubelet` made
// findings of the kubelet): the unit (_SYSTEMD_UNIT, from the sender's
// cgroup), systemd itself (_PID=1), systemd-coredump (_EXE), and the
// identifier only from root (_UID=0: a kubelet not started by systemd).
// What claims the identifier without them is its own source
// (unverifiedQuery).
func unitQuery(unit string) (journalQuery, error) {
	unit = strings.TrimSpace(unit)
	if unit == "" || strings.ContainsAny(unit, "/ \t\n=") || strings.HasPrefix(unit, "-") {
		return journalQuery{}, fmt.Errorf("%q is not a unit name", unit)
	}
	full := unit
	hasType := false
	for _, s := range unitSuffixes {
		if strings.HasSuffix(unit, s) {
			hasType = true
			break
		}
	}
	if !hasType {
		full += ".service"
	}
	base := strings.TrimSuffix(unit, ".service")
	q := journalQuery{name: base, subject: base, matches: []string{
		"_SYSTEMD_UNIT=" + full,
		"+", "_PID=1", "UNIT=" + full,
		"+", "MESSAGE_ID=" + coredumpMessageID, "COREDUMP_UNIT=" + full, "_EXE=/usr/lib/systemd/systemd-coredump", "_EXE=/lib/systemd/systemd-coredump",
	}}
	if !hasType || strings.HasSuffix(unit, ".service") {
		for _, id := range append([]string{base}, unitIdentifiers[base]...) {
			q.matches = append(q.matches, "+", "SYSLOG_IDENTIFIER="+id, "_UID=0")
		}
	}
	return q, nil
}

// unverifiedSuffix ends the name of a unit's unverified source: the
// entries that carry its syslog identifier but none of the fields that
// prove them its. read/analyze reads no finding from it.
const unverifiedSuffix = ".unverified"

// unverifiedQuery is what claims to be the unit q reads (its syslog
// identifiers) less what q reads; none when the unit has no identifier.
// Kept, as the native reader can leave out q's entries; journalctl
// cannot, and does not read it.
func unverifiedQuery(q journalQuery) (journalQuery, bool) {
	var ids []string
	for i, m := range q.matches {
		if strings.HasPrefix(m, "SYSLOG_IDENTIFIER=") && i > 0 && q.matches[i-1] == "+" {
			if len(ids) > 0 {
				ids = append(ids, "+")
			}
			ids = append(ids, m)
		}
	}
	if len(ids) == 0 {
		return journalQuery{}, false
	}
	return journalQuery{name: q.name + unverifiedSuffix, matches: ids, except: q.matches}, true
}

var journalFieldRe = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// matchQuery builds a source from --journal-match FIELD=VALUE.
func matchQuery(m string) (journalQuery, error) {
	field, value, ok := strings.Cut(m, "=")
	if !ok || !journalFieldRe.MatchString(field) || len(field) > 64 {
		return journalQuery{}, fmt.Errorf("--journal-match %q: want FIELD=VALUE with FIELD in upper case (e.g. SYSLOG_IDENTIFIER=kubelet)", m)
	}
	if strings.ContainsAny(value, "\n\x00") {
		return journalQuery{}, fmt.Errorf("--journal-match %q: the value holds a newline or NUL", m)
	}
	return journalQuery{name: "match-" + field + "-" + value, matches: []string{m}}, nil
}

// safeName turns a source name into a bundle file name.
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '@'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	out := strings.TrimLeft(string(b), ".")
	if out == "" {
		out = "_"
	}
	return out
}

// queries lists the journal sources to read, in order of importance.
func (j *journalRun) queries() []journalQuery {
	var qs, unverified []journalQuery
	for i, u := range j.o.Units {
		q, err := unitQuery(u)
		if err != nil {
			j.env.Partialf("ignored --journal-unit: %v", err)
			continue
		}
		qs = append(qs, q)
		if i == 0 && j.o.Kernel {
			qs = append(qs, kernelQuery())
		}
		if u, ok := unverifiedQuery(q); ok && j.reader() == ReaderNative {
			unverified = append(unverified, u)
		}
	}
	if len(qs) == 0 && j.o.Kernel {
		qs = append(qs, kernelQuery())
	}
	for _, m := range j.o.Matches {
		q, err := matchQuery(m)
		if err != nil {
			j.env.Partialf("ignored %v", err)
			continue
		}
		qs = append(qs, q)
	}
	// Last: what only claims to be a unit's never takes the budget of
	// what proves to be.
	qs = append(qs, unverified...)
	seen := map[string]bool{"sources": true, "boots": true}
	for i := range qs {
		n := safeName(qs[i].name)
		for k := 2; seen[n]; k++ {
			n = fmt.Sprintf("%s-%d", safeName(qs[i].name), k)
		}
		seen[n] = true
		qs[i].name = n
	}
	return qs
}

// kernelQuery selects kernel messages of every boot in range (journalctl
// -k would limit them to the current boot, and the messages before a crash
// and reboot are the ones wanted).
func kernelQuery() journalQuery {
	return journalQuery{name: "kernel", subject: "kernel", matches: []string{"_TRANSPORT=kernel"}}
}
