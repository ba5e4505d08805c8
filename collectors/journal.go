package collectors

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/isolate"
)

// The journal collector gathers the logs incidents 003 and 004 were solved
// from: the kubelet's (sync loop stalls, TearDown failures, rbd byte-array
// output), the container runtime's and the kernel's (hung tasks, NFS/ceph
// session loss). It asks journalctl, in an isolated child under a deadline,
// reading newest-first so that the per-source byte cap keeps the newest
// entries and a slow journal still yields the most recent ones. Where
// journald is absent or unusable it falls back to tails of /var/log files
// and the kernel ring buffer.

func init() {
	Register(Spec{
		Name:           "journal",
		Description:    "journald logs of the kubelet, container runtimes and kernel (newest kept under a byte cap); /var/log tails and dmesg where journald is absent",
		DefaultEnabled: true,
		DefaultTimeout: 60 * time.Second,
		Options:        &journalOpts,
		Flags:          journalFlags,
		Run:            collectJournal,
	})
	isolate.RegisterOp(opJournalProbe, isolate.Typed(journalProbeOp))
	isolate.RegisterOp(opJournalReadAt, isolate.Typed(journalReadAtOp))
	isolate.RegisterOp(opJournalKmsg, isolate.Typed(journalKmsgOp))
}

// JournalOptions are the journal collector's flags.
type JournalOptions struct {
	// Units are systemd units (".service" implied) whose logs are kept.
	Units []string `json:"units"`
	// Matches are extra journalctl matches (FIELD=VALUE), one file each.
	Matches []string `json:"matches,omitempty"`
	// Kernel adds the kernel log (_TRANSPORT=kernel, every boot in range).
	Kernel bool `json:"kernel"`
	// Dir reads a journal directory (journalctl -D) instead of the host's.
	Dir string `json:"dir,omitempty"`
	// JSON also exports each source as journal JSON (journalctl -o json).
	JSON bool `json:"json,omitempty"`
	// MaxBytes caps each source; the newest entries are kept.
	MaxBytes int64 `json:"max_bytes"`
	// CommandTimeout bounds one journalctl (or dmesg) run, or the reading
	// of one source by the native reader.
	CommandTimeout time.Duration `json:"command_timeout"`
	// Reader is how the journal is read: native (nodesnap reads the
	// journal files itself), journalctl, or auto (native, unless the JSON
	// export is asked for, which needs journalctl).
	Reader string `json:"reader,omitempty"`
}

// Defaults of the journal collector.
var (
	DefaultJournalUnits = []string{"kubelet", "containerd", "crio", "docker"}
)

const (
	DefaultJournalMaxBytes = 32 << 20
	DefaultJournalTimeout  = 20 * time.Second
)

var journalOpts = JournalOptions{Units: DefaultJournalUnits, Kernel: true,
	MaxBytes: DefaultJournalMaxBytes, CommandTimeout: DefaultJournalTimeout}

func journalFlags(fs *pflag.FlagSet) {
	o := &journalOpts
	fs.StringSliceVar(&o.Units, "journal-unit", DefaultJournalUnits, "journal: systemd units whose logs are collected (repeatable; replaces the default list)")
	fs.StringArrayVar(&o.Matches, "journal-match", nil, "journal: also collect entries matching FIELD=VALUE, e.g. SYSLOG_IDENTIFIER=kubelet (repeatable, one file each)")
	fs.BoolVar(&o.Kernel, "journal-kernel", true, "journal: collect the kernel log (every boot within --since)")
	fs.StringVar(&o.Dir, "journal-dir", "", "journal: read this journal directory (journalctl -D) instead of the host's journal")
	fs.BoolVar(&o.JSON, "journal-json", false, "journal: also export each source as journal JSON (one object per line)")
	o.MaxBytes = DefaultJournalMaxBytes
	fs.Var((*journalSize)(&o.MaxBytes), "journal-max-bytes", "journal: cap per source (unit, kernel log, file); the newest entries are kept")
	fs.DurationVar(&o.CommandTimeout, "journal-timeout", DefaultJournalTimeout, "journal: deadline of one journalctl or dmesg run, or of reading one source from the journal files")
	fs.StringVar(&o.Reader, "journal-reader", ReaderAuto, "journal: how the journal is read: native (nodesnap reads the journal files itself; no journalctl needed), journalctl, or auto (native; journalctl for --journal-json)")
}

// journalSize is a byte-size flag value: 1048576, 512KiB, 32MiB, 1GiB.
type journalSize int64

func (s *journalSize) String() string {
	n := int64(*s)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n > 0 && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.suf
		}
	}
	return strconv.FormatInt(n, 10)
}
func (s *journalSize) Type() string { return "size" }

func (s *journalSize) Set(v string) error {
	n, err := parseJournalSize(v)
	if err != nil {
		return err
	}
	*s = journalSize(n)
	return nil
}

func parseJournalSize(v string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1000}, {"MB", 1e6}, {"GB", 1e9},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (examples: 1048576, 512KiB, 32MiB)", v)
	}
	return n * mult, nil
}

// JournalSources is journal/sources.json: where the collector looked, what
// it used, and what it kept of each source.
type JournalSources struct {
	// Backend is "journald" when the logs came from the journal, "files"
	// when journald was absent or unusable and /var/log files and the
	// kernel ring buffer were read instead.
	Backend        string          `json:"backend"`
	FallbackReason string          `json:"fallback_reason,omitempty"`
	Journald       JournaldStatus  `json:"journald"`
	Since          time.Time       `json:"since"`
	MaxBytes       int64           `json:"max_bytes_per_source"`
	Sources        []JournalSource `json:"sources"`
}

// JournaldStatus is what the collector found out about journald.
type JournaldStatus struct {
	// Reader is what read the journal: "native" (nodesnap's own reader of
	// the journal files) or "journalctl".
	Reader string `json:"reader,omitempty"`
	// Journalctl is the program run, Version the first line of its
	// --version.
	Journalctl string `json:"journalctl,omitempty"`
	Version    string `json:"version,omitempty"`
	// Directory is --journal-dir; Root the --root passed to journalctl.
	Directory string `json:"directory,omitempty"`
	Root      string `json:"root,omitempty"`
	// JournalFiles counts *.journal files found; Socket says whether
	// journald's socket exists.
	JournalFiles int  `json:"journal_files"`
	Socket       bool `json:"socket"`
	Usable       bool `json:"usable"`
	// Problem says why journald could not be used, or what went wrong.
	Problem string `json:"problem,omitempty"`
}

// JournalSource is one log source the collector read.
type JournalSource struct {
	// Name is the unit, "kernel", the match or the file.
	Name string `json:"name"`
	// Kind is journal, journal-json, boots, file, dmesg or kmsg.
	Kind string `json:"kind"`
	// File is the bundle file, relative to the collector's directory.
	File string `json:"file,omitempty"`
	// Command is the program run (journal, dmesg); Path the host file read.
	Command []string `json:"command,omitempty"`
	// Reader is "native" for a journal source read from the journal files
	// by nodesnap itself.
	Reader string `json:"reader,omitempty"`
	Path   string `json:"path,omitempty"`
	// Status: ok, empty, missing, skipped, timeout or error.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Problems are the journal files the native reader could not read,
	// or not to their end, and why.
	Problems []string `json:"problems,omitempty"`
	// Entries and Bytes are what was kept (Bytes before redaction).
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Truncated: older entries were left out to respect MaxBytes (or the
	// run's caps), or reading stopped early (timeout).
	Truncated bool `json:"truncated"`
	// SourceBytes is the size of a file source (compressed, for a
	// compressed rotated part).
	SourceBytes int64 `json:"source_bytes,omitempty"`
	// RotatedFrom is the current log (host path) a rotated part of a file
	// source belongs to; Rotation its place among the parts, 1 for the
	// newest rotated one.
	RotatedFrom string `json:"rotated_from,omitempty"`
	Rotation    int    `json:"rotation,omitempty"`
	// Compression is "gzip" for a part decompressed in the worker;
	// InflatedBytes how many decompressed bytes it went through, and
	// InflateCapped that it stopped at the decompression cap (a gzip bomb,
	// or a part larger than the cap) before the part's end.
	Compression   string `json:"compression,omitempty"`
	InflatedBytes int64  `json:"inflated_bytes,omitempty"`
	InflateCapped bool   `json:"inflate_capped,omitempty"`
	// Oldest and Newest are the timestamps of the first and last entry
	// kept, as printed.
	Oldest          string  `json:"oldest,omitempty"`
	Newest          string  `json:"newest,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// Source statuses in sources.json.
const (
	JournalOK      = "ok"
	JournalEmpty   = "empty"
	JournalMissing = "missing"
	JournalSkipped = "skipped"
	JournalTimeout = "timeout"
	JournalError   = "error"
)

// journalQuery is one journalctl source.
type journalQuery struct {
	name    string
	matches []string
	subject string // kubelet, kernel, ... (which fallback covers it)
}

// unitSuffixes are systemd unit types: a name ending in one is a full unit
// name; anything else gets ".service".
var unitSuffixes = []string{".service", ".scope", ".socket", ".mount", ".timer", ".slice", ".target", ".path", ".swap", ".device", ".automount"}

// unitIdentifiers are syslog identifiers a unit's daemon logs under when
// its messages do not carry the unit (not started by systemd, or relayed
// through syslog).
var unitIdentifiers = map[string][]string{"docker": {"dockerd"}}

// coredumpMessageID is systemd-coredump's MESSAGE_ID: a crash of the unit's
// process is worth having next to its log.
const coredumpMessageID = "fc2e22bc6ee647b6b90729ab34a250b1"

// unitQuery builds the journalctl matches for a unit: its own output, what
// systemd said about it (started, failed, restarted), its core dumps, and
// its syslog identifier.
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
		"+", "MESSAGE_ID=" + coredumpMessageID, "COREDUMP_UNIT=" + full,
	}}
	if !hasType || strings.HasSuffix(unit, ".service") {
		for _, id := range append([]string{base}, unitIdentifiers[base]...) {
			q.matches = append(q.matches, "+", "SYSLOG_IDENTIFIER="+id)
		}
	}
	return q, nil
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

// journalRun is one run of the collector.
type journalRun struct {
	env     *Env
	o       JournalOptions
	since   time.Time
	idx     JournalSources
	loc     []string // -D DIR or --root ROOT
	format  string
	hung    *timeoutError
	failed  int // journal sources that ended in error
	queried int // journal sources run
	subject map[string]bool
	written bool            // some log was written
	said    map[string]bool // journalctl stderr lines already noted
	// unreadable is the first journal file journalctl skipped (corrupted,
	// or from a newer systemd): if nothing at all was read, the journal
	// counts as failed.
	unreadable string
	// native: the journal is read by nodesnap's own reader.
	native bool
}

// timeoutError is the collector's verdict when journalctl hung: its status
// becomes "timeout" (it wraps context.DeadlineExceeded), with a message
// that says what hung and what was collected instead.
type timeoutError struct {
	msg   string
	cause error
}

func (e *timeoutError) Error() string { return e.msg }
func (e *timeoutError) Unwrap() []error {
	if e.cause == nil {
		return []error{context.DeadlineExceeded}
	}
	return []error{context.DeadlineExceeded, e.cause}
}

func collectJournal(ctx context.Context, env *Env) error {
	o := JournalOptions{Kernel: true, MaxBytes: DefaultJournalMaxBytes, CommandTimeout: DefaultJournalTimeout}
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultJournalMaxBytes
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = DefaultJournalTimeout
	}
	switch o.Reader {
	case "", ReaderAuto, ReaderNative, ReaderJournalctl:
	default:
		return fmt.Errorf("--journal-reader %q: want auto, native or journalctl", o.Reader)
	}
	since := env.Since
	if since <= 0 {
		since = 24 * time.Hour
	}
	j := &journalRun{env: env, o: o, since: time.Now().Add(-since).Truncate(time.Second), subject: map[string]bool{}}
	j.idx = JournalSources{Since: j.since.UTC(), MaxBytes: o.MaxBytes, Sources: []JournalSource{}}
	qs := j.queries()

	if j.probe(ctx) {
		j.idx.Backend = "journald"
		j.fromJournal(ctx, qs)
	}
	usable := j.idx.Journald.Usable && j.hung == nil && (j.queried == 0 || j.failed < j.queried) && !j.nothingReadable()
	if !usable {
		j.idx.Backend = "files"
		j.idx.FallbackReason = j.idx.Journald.Problem
		switch {
		case j.hung != nil:
			j.idx.FallbackReason = j.who() + " hung: " + j.hung.msg
		case j.queried > 0 && j.failed == j.queried:
			j.idx.FallbackReason = j.who() + " failed for every source"
		case j.nothingReadable():
			j.idx.FallbackReason = j.who() + " could not read the journal: " + j.unreadable
		}
	}
	j.fallbacks(ctx, usable)
	if err := env.WriteJSON("sources.json", j.idx); err != nil {
		return err
	}
	return j.verdict(usable)
}

// verdict turns what happened into the collector's status.
func (j *journalRun) verdict(usable bool) error {
	used := j.usedList()
	if j.hung != nil {
		msg := fmt.Sprintf("%s; the journal may be locked, corrupted or on a hung filesystem", j.hung.msg)
		if used != "" {
			msg += "; collected instead: " + used
		}
		return &timeoutError{msg: msg, cause: j.hung.cause}
	}
	if j.queried > 0 && j.failed == j.queried {
		msg := j.who() + " failed for every source (see journal/sources.json): " + j.firstJournalError()
		if used != "" {
			msg += "; collected instead: " + used
		}
		return errors.New(msg)
	}
	if j.nothingReadable() {
		msg := j.who() + " could not read the journal: " + j.unreadable
		if used != "" {
			msg += "; collected instead: " + used
		}
		return errors.New(msg)
	}
	if j.failed > 0 {
		j.env.Partialf("%s failed for %d of %d sources: %s", j.who(), j.failed, j.queried, j.firstJournalError())
	}
	if !usable {
		if !j.written {
			// Nothing at all: not "ok", and not "unsupported" either (a
			// node always has logs somewhere): partial, naming every
			// place looked at.
			what := "the journal"
			if n := j.idx.Journald.JournalFiles; n > 0 {
				what = fmt.Sprintf("the node's journal files (%d)", n)
			}
			j.env.Partialf("no logs could be collected: %s could not be read (%s), and none of /var/log/{messages,syslog,kern.log,kubelet.log}, dmesg or /dev/kmsg gave anything", what, j.idx.FallbackReason)
			return nil
		}
		if n := j.idx.Journald.JournalFiles; n > 0 {
			// The journal is there but was not read: the kubelet's and
			// the runtime's lines are missing from the bundle.
			j.env.Partialf("the node's journal files (%d) could not be read (%s); collected instead: %s", n, j.idx.FallbackReason, used)
			return nil
		}
		j.env.Notef("journald is not usable on this node (%s); collected instead: %s", j.idx.FallbackReason, used)
	} else if used != "" {
		j.env.Notef("also collected, for what the journal lacked: %s", used)
	}
	return nil
}

// who names what read the journal, for messages.
func (j *journalRun) who() string {
	if j.native {
		return "nodesnap's journal reader"
	}
	return "journalctl"
}

// nothingReadable is true when journalctl skipped journal files as
// unreadable and no journal source gave a single entry.
func (j *journalRun) nothingReadable() bool {
	if j.unreadable == "" {
		return false
	}
	for _, s := range j.idx.Sources {
		if s.Kind == "journal" && s.Entries > 0 {
			return false
		}
	}
	return true
}

func (j *journalRun) firstJournalError() string {
	for _, s := range j.idx.Sources {
		if strings.HasPrefix(s.Kind, "journal") && s.Status == JournalError {
			return s.Name + ": " + s.Error
		}
	}
	return ""
}

// usedList names the fallback sources that produced something.
func (j *journalRun) usedList() string {
	var used []string
	for _, s := range j.idx.Sources {
		if s.Entries == 0 && s.Bytes == 0 {
			continue
		}
		switch s.Kind {
		case "file":
			used = append(used, s.Path)
		case "dmesg":
			used = append(used, "dmesg")
		case "kmsg":
			used = append(used, "/dev/kmsg")
		}
	}
	return strings.Join(used, ", ")
}

// probe finds out whether journald can be used: journal files or its
// socket, and a journalctl that answers.
func (j *journalRun) probe(ctx context.Context) bool {
	js := &j.idx.Journald
	dirs := []string{j.env.HostPath("/run/log/journal"), j.env.HostPath("/var/log/journal")}
	if j.o.Dir != "" {
		js.Directory = j.o.Dir
		dirs = []string{j.o.Dir}
		j.loc = []string{"--directory=" + j.o.Dir}
	} else if j.env.Root != "" && j.env.Root != "/" {
		js.Root = j.env.Root
		j.loc = []string{"--root=" + j.env.Root}
	}
	var problems []string
	for _, d := range dirs {
		if j.env.IsHung(d) {
			problems = append(problems, d+" is on a hung mount")
			continue
		}
		var r journalProbeResult
		if err := j.env.Do(ctx, opJournalProbe, d, journalProbeRequest{Path: d}, &r); err != nil {
			if !errors.Is(err, syscall.ENOENT) {
				problems = append(problems, fmt.Sprintf("%s: %v", d, err))
			}
			continue
		}
		js.JournalFiles += r.JournalFiles
	}
	if j.o.Dir == "" {
		sock := j.env.HostPath("/run/systemd/journal/socket")
		var st isolate.StatResult
		if !j.env.IsHung(sock) && j.env.Do(ctx, isolate.OpStat, sock, isolate.StatRequest{Path: sock}, &st) == nil {
			js.Socket = st.Mode&unix.S_IFMT == unix.S_IFSOCK
		}
	}
	if js.JournalFiles == 0 && !js.Socket {
		where := "no journal files in " + strings.Join(dirs, " or ")
		if j.o.Dir == "" {
			where += " and no journald socket"
		}
		if len(problems) > 0 {
			where += " (" + strings.Join(problems, "; ") + ")"
		}
		js.Problem = where
		return false
	}
	if js.JournalFiles == 0 {
		// journald runs but keeps nothing we can read (Storage=none, or the
		// files are elsewhere): journalctl will say "no entries".
		js.Problem = "journald's socket exists but no journal files were found"
	}
	if j.reader() == ReaderNative {
		if js.JournalFiles == 0 {
			return false
		}
		js.Reader, js.Usable, j.native = ReaderNative, true, true
		return true
	}
	js.Reader = ReaderJournalctl

	js.Journalctl = "journalctl"
	timeout, ok := j.cmdTimeout(ctx, min(5*time.Second, j.o.CommandTimeout))
	if !ok {
		js.Problem = "no time left to run journalctl"
		return false
	}
	w := newEntryWindow(64<<10, false, false)
	res, stderr, err := j.run(ctx, timeout, "journalctl", []string{"--version"}, w)
	w.seal()
	w.finish(err == nil && !res.TimedOut)
	switch {
	case errors.Is(err, isolate.ErrNotFound):
		js.Problem = "journalctl is not installed (or not in $PATH)"
		return false
	case res.TimedOut:
		j.hung = &timeoutError{msg: fmt.Sprintf("journalctl --version did not answer within %s (%s)", timeout, res.Evidence.String()), cause: err}
		js.Problem = j.hung.msg
		return false
	case err != nil:
		js.Problem = "running journalctl: " + err.Error()
		return false
	case res.ExitCode != 0:
		js.Problem = fmt.Sprintf("journalctl --version exited with status %d: %s", res.ExitCode, firstLine(stderr))
		return false
	}
	var first []byte
	w.each(func(e []byte) bool { first = e; return false })
	js.Version = strings.TrimSpace(string(first))
	j.format = "short-iso-precise"
	if v := journalctlVersion(js.Version); v > 0 && v < 234 {
		// short-iso-precise came in systemd 234; short-precise is the
		// nearest older format (microseconds, no year).
		j.format = "short-precise"
	}
	js.Usable = true
	return true
}

// reader is the journal reader this run uses: native unless journalctl is
// asked for, or the JSON export (journalctl's own -o json) is.
func (j *journalRun) reader() string {
	switch j.o.Reader {
	case ReaderNative, ReaderJournalctl:
		return j.o.Reader
	}
	if j.o.JSON {
		return ReaderJournalctl
	}
	return ReaderNative
}

// journalctlVersion reads "systemd 252 (252.38-1~deb12u1)" as 252.
func journalctlVersion(s string) int {
	f := strings.Fields(s)
	if len(f) < 2 || f[0] != "systemd" {
		return 0
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return 0
	}
	return n
}

// queries lists the journal sources to read, in order of importance.
func (j *journalRun) queries() []journalQuery {
	var qs []journalQuery
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

func (j *journalRun) fromJournal(ctx context.Context, qs []journalQuery) {
	var ok []journalQuery
	for _, q := range qs {
		var s JournalSource
		if j.native {
			s = j.nativeSource(ctx, q)
		} else {
			s = j.journalSource(ctx, q, "journal", j.format, ".log")
		}
		if s.Status == JournalOK {
			j.subject[q.subject] = true
			ok = append(ok, q)
		}
		j.idx.Sources = append(j.idx.Sources, s)
	}
	if j.native {
		// Boots are listed by journalctl only.
		return
	}
	if j.o.JSON {
		for _, q := range ok {
			j.idx.Sources = append(j.idx.Sources, j.journalSource(ctx, q, "journal-json", "json", ".json"))
		}
	}
	j.boots(ctx)
}

// journalSource runs journalctl newest-first for one source into a window
// of at most the source's byte budget, then writes the window oldest-first
// through the redactor. Memory is bounded by the budget; a cap that is hit
// keeps the newest entries, and so does a journalctl that is stopped at
// its deadline.
func (j *journalRun) journalSource(ctx context.Context, q journalQuery, kind, format, ext string) JournalSource {
	file := q.name + ext
	args := append([]string{"--no-pager", "--quiet", "--all", "--utc", "--reverse",
		"--output=" + format, "--since=@" + strconv.FormatInt(j.since.Unix(), 10)}, j.loc...)
	args = append(args, q.matches...)
	s := JournalSource{Name: q.name, Kind: kind, Command: append([]string{"journalctl"}, args...)}
	if j.hung != nil {
		s.Status, s.Error = JournalSkipped, "journalctl hung on an earlier source; not run again"
		return s
	}
	budget := j.budget()
	if budget <= 0 {
		s.Status, s.Error = JournalSkipped, "the collector's byte cap was reached"
		return s
	}
	timeout, ok := j.cmdTimeout(ctx, j.o.CommandTimeout)
	if !ok {
		s.Status, s.Error = JournalSkipped, "the collector's deadline was reached"
		return s
	}
	j.queried++
	start := time.Now()
	w := newEntryWindow(budget, true, format != "json")
	res, stderr, err := j.run(ctx, timeout, "journalctl", args, w)
	w.seal()
	s.DurationSeconds = time.Since(start).Seconds()
	s.Stderr = firstLines(stderr, 4<<10)
	w.finish(err == nil && !res.TimedOut)
	switch {
	case w.full:
		s.Status = JournalOK
	case res.TimedOut:
		s.Status = JournalTimeout
		s.Error = fmt.Sprintf("did not finish within %s (%s)", timeout, res.Evidence.String())
		j.hung = &timeoutError{msg: fmt.Sprintf("journalctl (%s) did not finish within %s (%s)", q.name, timeout, res.Evidence.String()), cause: err}
	case err != nil:
		s.Status, s.Error = JournalError, err.Error()
		j.failed++
	case res.ExitCode != 0:
		s.Status = JournalError
		s.Error = fmt.Sprintf("journalctl exited with status %d: %s", res.ExitCode, firstLine(stderr))
		j.failed++
	default:
		s.Status = JournalOK
		j.stderrNote(q.name, stderr)
	}
	truncated := w.full || (s.Status != JournalOK && w.entries() > 0)
	if err := j.writeWindow(&s, file, w, truncated); err != nil {
		s.Status, s.Error = JournalError, err.Error()
		return s
	}
	if s.Status == JournalOK && s.Entries == 0 {
		s.Status = JournalEmpty
	}
	from := ""
	if s.Oldest != "" {
		from = ", from " + s.Oldest
	}
	if w.full {
		j.env.Notef("%s: kept the newest %s (%d entries%s); older entries since %s were left out by the %s cap",
			file, humanBytes(s.Bytes), s.Entries, from, j.since.UTC().Format(time.RFC3339), humanBytes(budget))
	} else if truncated {
		j.env.Notef("%s: journalctl stopped early (%s); kept the newest entries it gave (%d)%s", file, s.Status, s.Entries, from)
	}
	return s
}

// stderrNote reports what journalctl said on standard error while it
// succeeded: files it skipped as corrupted, or as written by a newer
// systemd than its own (a container image's journalctl reading the host's
// journal), mean part of the journal was not read.
func (j *journalRun) stderrNote(source, stderr string) {
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || j.said[l] || len(j.said) >= 8 {
			continue
		}
		if j.said == nil {
			j.said = map[string]bool{}
		}
		j.said[l] = true
		if strings.Contains(l, "corrupt") || strings.Contains(l, "unsupported") || strings.Contains(l, "ignoring file") {
			if j.unreadable == "" {
				j.unreadable = l
			}
			j.env.Partialf("journalctl could not read part of the journal (reading %s): %s", source, l)
		} else {
			j.env.Notef("journalctl, reading %s: %s", source, l)
		}
	}
}

// boots records journalctl --list-boots: when the node rebooted.
func (j *journalRun) boots(ctx context.Context) {
	if j.hung != nil {
		return
	}
	timeout, ok := j.cmdTimeout(ctx, min(10*time.Second, j.o.CommandTimeout))
	if !ok {
		return
	}
	args := append([]string{"--no-pager", "--quiet", "--list-boots"}, j.loc...)
	s := JournalSource{Name: "boots", Kind: "boots", Command: append([]string{"journalctl"}, args...)}
	start := time.Now()
	w := newEntryWindow(1<<20, false, false)
	res, stderr, err := j.run(ctx, timeout, "journalctl", args, w)
	w.seal()
	w.finish(err == nil && !res.TimedOut)
	s.DurationSeconds = time.Since(start).Seconds()
	s.Stderr = firstLines(stderr, 4<<10)
	switch {
	case res.TimedOut:
		s.Status, s.Error = JournalTimeout, fmt.Sprintf("did not finish within %s (%s)", timeout, res.Evidence.String())
		j.hung = &timeoutError{msg: fmt.Sprintf("journalctl --list-boots did not finish within %s (%s)", timeout, res.Evidence.String()), cause: err}
	case err != nil:
		s.Status, s.Error = JournalError, err.Error()
	case res.ExitCode != 0:
		// Old journalctl versions cannot list boots of a directory; not a
		// failure of the collection.
		s.Status, s.Error = JournalError, fmt.Sprintf("exited with status %d: %s", res.ExitCode, firstLine(stderr))
	default:
		s.Status = JournalOK
	}
	if err := j.writeWindow(&s, "boots.txt", w, w.dropped > 0); err != nil {
		s.Status, s.Error = JournalError, err.Error()
	}
	if s.Status == JournalOK && s.Entries == 0 {
		s.Status = JournalEmpty
	}
	j.idx.Sources = append(j.idx.Sources, s)
}

// fallbacks reads what the journal did not give: everything when journald
// is unusable, else only the subjects whose journal source came back empty
// or failed (a kubelet logging to /var/log/kubelet.log, a journald that
// does not read the kernel log).
func (j *journalRun) fallbacks(ctx context.Context, usable bool) {
	need := func(subject string) bool {
		if subject == "kernel" && !j.o.Kernel {
			// --journal-kernel=false holds whatever the source.
			return false
		}
		if !usable {
			return true
		}
		switch subject {
		case "kernel":
			return j.o.Kernel && !j.subject["kernel"]
		case "kubelet":
			return j.wantsUnit("kubelet") && !j.subject["kubelet"]
		}
		return false
	}
	files := []struct{ name, path, subject string }{
		{"messages", "/var/log/messages", "system"},
		{"syslog", "/var/log/syslog", "system"},
		{"kern.log", "/var/log/kern.log", "kernel"},
		{"kubelet.log", "/var/log/kubelet.log", "kubelet"},
	}
	for _, f := range files {
		if need(f.subject) {
			j.idx.Sources = append(j.idx.Sources, j.logWithRotations(ctx, f.name, f.path)...)
		}
	}
	if need("kernel") {
		j.idx.Sources = append(j.idx.Sources, j.kernelRing(ctx))
	}
}

func (j *journalRun) wantsUnit(base string) bool {
	for _, u := range j.o.Units {
		if strings.TrimSuffix(u, ".service") == base {
			return true
		}
	}
	return false
}

// fileReadChunk is how much of a log file one worker op reads: small
// enough to finish well within the probe deadline on a slow disk.
const fileReadChunk = 1 << 20

// fileTail copies the newest part of a log file, at most budget bytes,
// read from its end in bounded chunks by a worker (the file may sit on a
// mount that hangs), into the bundle file named file.
func (j *journalRun) fileTail(ctx context.Context, name, hostPath, file string, budget int64) JournalSource {
	p := j.env.HostPath(hostPath)
	s := JournalSource{Name: name, Kind: "file", Path: hostPath}
	if j.env.IsHung(p) {
		s.Status, s.Error = JournalSkipped, "on a mount found hung earlier in this run"
		return s
	}
	start := time.Now()
	defer func() { s.DurationSeconds = time.Since(start).Seconds() }()
	var st journalReadResult
	if err := j.env.Do(ctx, opJournalReadAt, p, journalReadRequest{Path: p, Off: -1}, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			s.Status = JournalMissing
			return s
		}
		s.Status, s.Error = JournalError, err.Error()
		if errors.Is(err, isolate.ErrTimeout) {
			s.Status = JournalTimeout
		}
		return s
	}
	s.SourceBytes = st.Size
	if st.Size == 0 {
		s.Status = JournalEmpty
		return s
	}
	if budget <= 0 {
		s.Status, s.Error = JournalSkipped, "the collector's byte cap was reached"
		return s
	}
	off := max(0, st.Size-budget)
	skipFirst := off > 0
	f, err := j.env.Create(file)
	if err != nil {
		s.Status, s.Error = JournalError, err.Error()
		return s
	}
	s.File = file
	s.Status = JournalOK
	var lastLine []byte
	for off < st.Size {
		if ctx.Err() != nil {
			s.Status, s.Error = JournalTimeout, "the collector's deadline was reached while copying"
			break
		}
		n := min(int64(fileReadChunk), st.Size-off)
		var r journalReadResult
		if err := j.env.Do(ctx, opJournalReadAt, p, journalReadRequest{Path: p, Off: off, Len: n}, &r); err != nil {
			s.Status, s.Error = JournalError, err.Error()
			if errors.Is(err, isolate.ErrTimeout) {
				s.Status = JournalTimeout
			}
			break
		}
		data := r.Data
		off += int64(len(data))
		if skipFirst {
			// The window starts mid-line: the partial first line goes.
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				continue
			}
			data = data[i+1:]
			skipFirst = false
		}
		if len(data) > 0 {
			if s.Oldest == "" {
				s.Oldest = firstField(data)
			}
			s.Entries += bytes.Count(data, []byte{'\n'})
			s.Bytes += int64(len(data))
			lastLine = lastLineOf(data, lastLine)
			if _, err := f.Write(data); err != nil {
				s.Status, s.Error = JournalError, err.Error()
				break
			}
		}
		if int64(len(r.Data)) < n {
			j.env.Notef("%s shrank while it was read (rotated?); kept what was read", hostPath)
			break
		}
	}
	s.Newest = firstField(lastLine)
	if st.Size > budget {
		s.Truncated = true
		markTruncated(f)
		j.env.Notef("%s: kept the newest %s of %s (%s cap)", file, humanBytes(s.Bytes), humanBytes(st.Size), humanBytes(budget))
	}
	if err := f.Close(); err != nil && s.Status == JournalOK {
		s.Status, s.Error = JournalError, err.Error()
	}
	if s.Bytes > 0 {
		j.written = true
	}
	return s
}

// lastLineOf returns the last complete line in data, or prev when data
// holds none (bounded: only the line's head is kept).
func lastLineOf(data, prev []byte) []byte {
	d := bytes.TrimRight(data, "\n")
	if len(d) == 0 {
		return prev
	}
	i := bytes.LastIndexByte(d, '\n')
	line := d[i+1:]
	return append([]byte(nil), line[:min(len(line), 64)]...)
}

// kernelRing reads the kernel ring buffer: the dmesg program when it is
// there, else /dev/kmsg directly.
func (j *journalRun) kernelRing(ctx context.Context) JournalSource {
	budget := j.budget()
	s := JournalSource{Name: "dmesg", Kind: "dmesg"}
	if budget <= 0 {
		s.Status, s.Error = JournalSkipped, "the collector's byte cap was reached"
		return s
	}
	timeout, ok := j.cmdTimeout(ctx, j.o.CommandTimeout)
	if !ok {
		s.Status, s.Error = JournalSkipped, "the collector's deadline was reached"
		return s
	}
	start := time.Now()
	defer func() { s.DurationSeconds = time.Since(start).Seconds() }()
	// util-linux dmesg prints wall-clock ISO times; busybox's knows no
	// options, so it is tried plain when that fails.
	for attempt, args := range [][]string{{"--time-format=iso"}, nil} {
		s.Command = append([]string{"dmesg"}, args...)
		w := newEntryWindow(budget, false, false)
		res, stderr, err := j.run(ctx, timeout, "dmesg", args, w)
		w.seal()
		w.finish(err == nil && !res.TimedOut)
		s.Stderr = firstLines(stderr, 4<<10)
		switch {
		case errors.Is(err, isolate.ErrNotFound):
			return j.kmsg(ctx, budget)
		case res.TimedOut:
			s.Status, s.Error = JournalTimeout, fmt.Sprintf("did not finish within %s (%s)", timeout, res.Evidence.String())
		case err != nil:
			s.Status, s.Error = JournalError, err.Error()
		case res.ExitCode != 0:
			s.Status, s.Error = JournalError, fmt.Sprintf("dmesg exited with status %d: %s", res.ExitCode, firstLine(stderr))
			if attempt == 0 {
				continue
			}
		default:
			s.Status = JournalOK
		}
		if s.Status == JournalError && w.entries() == 0 {
			// dmesg_restrict, or a container without CAP_SYSLOG:
			// /dev/kmsg may still be readable.
			if k := j.kmsg(ctx, budget); k.Status == JournalOK {
				return k
			}
			return s
		}
		if err := j.writeWindow(&s, "dmesg.log", w, w.dropped > 0); err != nil {
			s.Status, s.Error = JournalError, err.Error()
		}
		break
	}
	if s.Status == JournalOK && s.Entries == 0 {
		s.Status = JournalEmpty
	}
	return s
}

// kmsg reads /dev/kmsg without blocking, in a worker.
func (j *journalRun) kmsg(ctx context.Context, budget int64) JournalSource {
	s := JournalSource{Name: "kmsg", Kind: "kmsg", Path: "/dev/kmsg"}
	start := time.Now()
	defer func() { s.DurationSeconds = time.Since(start).Seconds() }()
	var r journalKmsgResult
	if err := j.env.Do(ctx, opJournalKmsg, "/dev/kmsg", journalKmsgRequest{Path: "/dev/kmsg", Max: min(budget, 16<<20)}, &r); err != nil {
		s.Status, s.Error = JournalError, err.Error()
		if errors.Is(err, syscall.ENOENT) {
			s.Status = JournalMissing
		} else if errors.Is(err, isolate.ErrTimeout) {
			s.Status = JournalTimeout
		}
		return s
	}
	// /dev/kmsg is the running kernel's, whatever --root says: so is the
	// boot time its offsets count from.
	btime := bootTime(&Env{Common: Common{Proc: "/proc"}})
	w := newEntryWindow(budget, false, false)
	recs := newEntryWindow(int64(len(r.Data))+1, false, true)
	_, _ = recs.Write(r.Data)
	recs.finish(true)
	var line []byte
	recs.each(func(rec []byte) bool {
		k, err := ParseKmsgRecord(rec)
		if err != nil {
			return true
		}
		line = k.AppendText(line[:0], btime)
		_, _ = w.Write(line)
		return true
	})
	w.finish(true)
	s.Status = JournalOK
	if err := j.writeWindow(&s, "kmsg.log", w, r.Dropped > 0 || w.dropped > 0); err != nil {
		s.Status, s.Error = JournalError, err.Error()
	}
	if s.Status == JournalOK && s.Entries == 0 {
		s.Status = JournalEmpty
	}
	return s
}

// writeWindow writes a window's entries oldest-first to a bundle file
// (through the redactor). An empty window writes no file.
func (j *journalRun) writeWindow(s *JournalSource, file string, w *entryWindow, truncated bool) error {
	s.Entries, s.Bytes = w.entries(), w.size
	if s.Entries == 0 {
		return nil
	}
	f, err := j.env.Create(file)
	if err != nil {
		return err
	}
	s.File = file
	first := true
	var last []byte
	bw := bufio.NewWriterSize(f, 256<<10)
	var werr error
	w.each(func(e []byte) bool {
		if first {
			s.Oldest, first = firstField(e), false
		}
		last = e
		if _, werr = bw.Write(e); werr != nil {
			return false
		}
		if e[len(e)-1] != '\n' {
			werr = bw.WriteByte('\n')
		}
		return werr == nil
	})
	s.Newest = firstField(last)
	if werr == nil {
		werr = bw.Flush()
	}
	if truncated {
		s.Truncated = true
		markTruncated(f)
	}
	cerr := f.Close()
	j.written = true
	if werr != nil {
		return fmt.Errorf("writing %s: %w", file, werr)
	}
	return cerr
}

// markTruncated sets the manifest's truncated flag of a file that holds
// only the newest part of its source: the cap was applied before the
// bytes reached the file, so its own cap writer never saw the excess.
func markTruncated(f *File) {
	f.capped.truncated = true
}

// firstField is an entry's timestamp: its first word, or the kernel's
// "[seconds.micro]" stamp (bounded).
func firstField(e []byte) string {
	e = e[:min(len(e), 64)]
	if len(e) > 0 && e[0] == '[' {
		if i := bytes.IndexByte(e, ']'); i > 0 {
			return string(e[:i+1])
		}
	}
	if i := bytes.IndexAny(e, " \n"); i >= 0 {
		e = e[:i]
	}
	if len(e) > 0 && e[0] == '{' {
		// JSON export: no timestamp in the first word.
		return ""
	}
	return string(e)
}

// budget is the byte budget of the next source: the per-source cap, kept
// under the run's per-file and per-collector caps with a little room for
// redaction markers, which can be longer than what they replace.
func (j *journalRun) budget() int64 {
	return j.env.Budget(j.o.MaxBytes, 64<<10) // room for sources.json
}

// cmdTimeout fits a command's deadline into what is left of the
// collector's, keeping a reserve for writing out what it returns.
func (j *journalRun) cmdTimeout(ctx context.Context, want time.Duration) (time.Duration, bool) {
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		left -= min(left/5, 5*time.Second)
		want = min(want, left)
	}
	return want, want >= 200*time.Millisecond
}

// run runs a program in the isolation layer with stdout into w. A program
// that misses its deadline is recorded in the manifest with where it hung.
func (j *journalRun) run(ctx context.Context, timeout time.Duration, prog string, args []string, w io.Writer) (isolate.Result, string, error) {
	stderr := &isolate.HeadBuffer{Max: 16 << 10}
	env := append(commandEnv(), "LC_ALL=C", "SYSTEMD_PAGER=", "PAGER=cat", "SYSTEMD_COLORS=0", "NO_COLOR=1", "SYSTEMD_LESS=", "SYSTEMD_URLIFY=0")
	res, err := isolate.Run(ctx, timeout, isolate.Spec{Path: prog, Args: args, Stdout: w, Stderr: stderr, Env: env})
	if res.TimedOut {
		j.env.events.send(Event{Type: EventHungItem, Item: &HungItem{Op: "exec", Target: prog + " " + strings.Join(args, " "), Evidence: res.Evidence}})
	}
	s, _ := j.env.red.String(stderr.String())
	return res, s, err
}

// firstLines keeps the head of a program's stderr for sources.json.
func firstLines(s string, max int) string {
	s = strings.TrimSpace(s)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// entryWindow keeps the newest entries of a log stream within a byte
// budget, with memory bounded by that budget. An entry is a line plus the
// lines after it that start with a blank (journalctl's short formats indent
// the continuation lines of a multi-line message), or a single line.
//
// In reverse mode the input arrives newest first (journalctl --reverse):
// entries are kept until one does not fit, and the writer then refuses
// more, which stops the producer. In forward mode the oldest entries are
// dropped to make room. Either way each() yields the kept entries oldest
// first.
type entryWindow struct {
	mu         sync.Mutex
	budget     int64
	reverse    bool
	contIndent bool

	chunks    [][]byte
	chunkSize int
	spans     []span
	head      int
	size      int64

	pend    []byte
	midLine bool
	skip    bool // forward: dropping an entry larger than the budget

	full    bool  // reverse: an entry did not fit; input refused since
	dropped int   // entries dropped (forward) or refused (reverse: 1)
	sealed  bool  // the producer is done, or abandoned
	total   int64 // bytes offered
}

type span struct{ c, off, n int32 }

var (
	errWindowFull   = errors.New("byte cap reached; newest entries kept")
	errWindowSealed = errors.New("reading stopped")
)

func newEntryWindow(budget int64, reverse, contIndent bool) *entryWindow {
	// A budget cannot exceed what a span can address; callers pass caps
	// far below it.
	budget = min(budget, 1<<31-1)
	cs := int(min(max(budget/8, 4<<10), 1<<20))
	return &entryWindow{budget: budget, reverse: reverse, contIndent: contIndent, chunkSize: cs}
}

// Write takes any slice of the stream.
func (w *entryWindow) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sealed {
		return 0, errWindowSealed
	}
	if w.full {
		return 0, errWindowFull
	}
	n := len(p)
	w.total += int64(n)
	for len(p) > 0 {
		if !w.midLine {
			cont := w.contIndent && (p[0] == ' ' || p[0] == '\t')
			if !cont {
				w.commit()
				if w.full {
					return n - len(p), errWindowFull
				}
			}
		}
		var line []byte
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line, p = p[:i+1], p[i+1:]
			w.midLine = false
		} else {
			line, p = p, nil
			w.midLine = true
		}
		if w.skip {
			continue
		}
		if int64(len(w.pend)+len(line)) > w.room() {
			if w.reverse {
				// This entry (the newest not yet kept) cannot fit: keep
				// what we have and stop the producer.
				w.full = true
				w.dropped++
				w.pend = w.pend[:0]
				return n - len(p), errWindowFull
			}
			// An entry larger than the whole budget is dropped whole.
			w.skip = true
			w.dropped++
			w.pend = w.pend[:0]
			continue
		}
		w.pend = append(w.pend, line...)
	}
	return n, nil
}

// room is how large the pending entry may grow.
func (w *entryWindow) room() int64 {
	if w.reverse {
		return w.budget - w.size
	}
	return w.budget
}

// commit stores the pending entry (the next line starts a new one).
func (w *entryWindow) commit() {
	w.skip = false
	e := w.pend
	if len(e) == 0 {
		return
	}
	w.pend = w.pend[:0]
	if w.reverse && w.size+int64(len(e)) > w.budget {
		w.full = true
		w.dropped++
		return
	}
	last := len(w.chunks) - 1
	if last < 0 || w.chunks[last] == nil || cap(w.chunks[last])-len(w.chunks[last]) < len(e) {
		w.chunks = append(w.chunks, make([]byte, 0, max(w.chunkSize, len(e))))
		last++
	}
	c := w.chunks[last]
	w.spans = append(w.spans, span{c: int32(last), off: int32(len(c)), n: int32(len(e))})
	w.chunks[last] = append(c, e...)
	w.size += int64(len(e))
	for !w.reverse && w.size > w.budget {
		s := w.spans[w.head]
		w.head++
		w.size -= int64(s.n)
		w.dropped++
		// Free chunks no live entry points into.
		if w.head < len(w.spans) {
			for c := s.c; c < w.spans[w.head].c; c++ {
				w.chunks[c] = nil
			}
		}
	}
	if w.head > 4096 && w.head > len(w.spans)/2 {
		w.spans = append(w.spans[:0], w.spans[w.head:]...)
		w.head = 0
	}
}

// finish commits the last entry. A stream cut short (complete false) may
// end mid-line: that partial line is dropped rather than kept half.
func (w *entryWindow) finish(complete bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.midLine && !complete {
		if i := bytes.LastIndexByte(w.pend, '\n'); i >= 0 {
			w.pend = w.pend[:i+1]
		} else {
			w.pend = w.pend[:0]
		}
	}
	if !w.full && !w.skip {
		w.commit()
	}
	w.pend = nil
}

// seal refuses further writes: a producer abandoned after a deadline may
// still hold the pipe.
func (w *entryWindow) seal() {
	w.mu.Lock()
	w.sealed = true
	w.mu.Unlock()
}

func (w *entryWindow) entries() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.spans) - w.head
}

// each yields the kept entries oldest first until fn returns false.
func (w *entryWindow) each(fn func([]byte) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	get := func(s span) []byte { return w.chunks[s.c][s.off : s.off+s.n] }
	if w.reverse {
		for i := len(w.spans) - 1; i >= w.head; i-- {
			if !fn(get(w.spans[i])) {
				return
			}
		}
		return
	}
	for i := w.head; i < len(w.spans); i++ {
		if !fn(get(w.spans[i])) {
			return
		}
	}
}

// KmsgRecord is one record of /dev/kmsg.
type KmsgRecord struct {
	Facility int
	Level    int
	Seq      uint64
	// Usec is the time since boot (CLOCK_MONOTONIC: suspend not counted).
	Usec    uint64
	Message []byte
}

// ParseKmsgRecord parses "pri,seq,usec,flags[,...];message\n" followed by
// optional " KEY=value" dictionary lines, which are ignored.
func ParseKmsgRecord(b []byte) (KmsgRecord, error) {
	var k KmsgRecord
	semi := bytes.IndexByte(b, ';')
	if semi < 0 {
		return k, errors.New("kmsg record without a header")
	}
	hdr := bytes.Split(b[:semi], []byte{','})
	if len(hdr) < 4 {
		return k, fmt.Errorf("kmsg record header %q has %d fields, want at least 4", b[:semi], len(hdr))
	}
	pri, err := strconv.ParseUint(string(hdr[0]), 10, 16)
	if err != nil {
		return k, fmt.Errorf("kmsg record priority: %w", err)
	}
	if k.Seq, err = strconv.ParseUint(string(hdr[1]), 10, 64); err != nil {
		return k, fmt.Errorf("kmsg record sequence: %w", err)
	}
	if k.Usec, err = strconv.ParseUint(string(hdr[2]), 10, 64); err != nil {
		return k, fmt.Errorf("kmsg record timestamp: %w", err)
	}
	k.Facility, k.Level = int(pri>>3), int(pri&7)
	msg := b[semi+1:]
	if i := bytes.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	k.Message = msg
	return k, nil
}

// AppendText renders the record as one log line: the wall-clock time
// (boot time plus the record's offset; approximate after a suspend) in the
// journal's short-iso-precise form when the boot time is known, then the
// kernel's own [seconds.micro] stamp and the message.
func (k KmsgRecord) AppendText(dst []byte, boot time.Time) []byte {
	if !boot.IsZero() && k.Usec < 1<<62 {
		t := boot.Add(time.Duration(k.Usec) * time.Microsecond).UTC()
		dst = t.AppendFormat(dst, "2006-01-02T15:04:05.000000-0700")
		dst = append(dst, " kernel: "...)
	}
	dst = fmt.Appendf(dst, "[%5d.%06d] ", k.Usec/1e6, k.Usec%1e6)
	dst = append(dst, k.Message...)
	return append(dst, '\n')
}

// Worker ops. Each touches one path.
const (
	opJournalProbe  = "journal.probe"
	opJournalReadAt = "journal.readat"
	opJournalKmsg   = "journal.kmsg"
)

type journalProbeRequest struct {
	Path string `json:"path"`
}

type journalProbeResult struct {
	JournalFiles int `json:"journal_files"`
}

// journalProbeOp counts journal files in a journal directory and its
// machine-id subdirectories (bounded: a count, not a listing).
func journalProbeOp(rq journalProbeRequest) (any, error) {
	var r journalProbeResult
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer func() { _ = d.Close() }() // read-only: nothing to lose
		ents, err := d.ReadDir(4096)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for _, e := range ents {
			n := e.Name()
			switch {
			case e.Type().IsRegular() && (strings.HasSuffix(n, ".journal") || strings.HasSuffix(n, ".journal~")):
				r.JournalFiles++
			case e.IsDir() && depth == 0:
				_ = walk(dir+"/"+n, 1)
			}
		}
		return nil
	}
	if err := walk(rq.Path, 0); err != nil {
		return nil, err
	}
	return r, nil
}

type journalReadRequest struct {
	Path string `json:"path"`
	// Off < 0 asks only for the size.
	Off int64 `json:"off"`
	Len int64 `json:"len,omitempty"`
}

type journalReadResult struct {
	Size int64  `json:"size"`
	Data []byte `json:"data,omitempty"`
}

// journalReadAtOp reads one chunk of a regular file (never a FIFO or a
// device, which could block or never end).
func journalReadAtOp(rq journalReadRequest) (any, error) {
	fd, err := unix.Open(rq.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rq.Path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: rq.Path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", rq.Path)
	}
	r := journalReadResult{Size: st.Size}
	if rq.Off < 0 || rq.Len <= 0 {
		return r, nil
	}
	buf := make([]byte, min(rq.Len, 16<<20))
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], rq.Off+int64(n))
		if m > 0 {
			n += m
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: rq.Path, Err: err}
		}
		if m == 0 {
			break
		}
	}
	r.Data = buf[:n]
	return r, nil
}

type journalKmsgRequest struct {
	Path string `json:"path"`
	Max  int64  `json:"max"`
}

type journalKmsgResult struct {
	// Data holds whole records, oldest first.
	Data []byte `json:"data"`
	// Dropped counts older records left out to respect Max.
	Dropped int `json:"dropped,omitempty"`
}

// journalKmsgOp reads every record in the kernel ring buffer without
// blocking (each read(2) returns one record; EAGAIN means the end).
func journalKmsgOp(rq journalKmsgRequest) (any, error) {
	fd, err := unix.Open(rq.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: rq.Path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	w := newEntryWindow(max(rq.Max, 4096), false, true)
	buf := make([]byte, 16<<10)
	for i := 0; i < 1<<22; i++ {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EPIPE {
			// Records were overwritten while we read: go on with the
			// next one.
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			if i == 0 {
				return nil, &os.PathError{Op: "read", Path: rq.Path, Err: err}
			}
			break
		}
		if n <= 0 {
			break
		}
		rec := buf[:n]
		if rec[n-1] != '\n' {
			rec = append(rec, '\n')
		}
		_, _ = w.Write(rec)
	}
	w.finish(true)
	out := make([]byte, 0, w.size)
	w.each(func(e []byte) bool { out = append(out, e...); return true })
	return journalKmsgResult{Data: out, Dropped: w.dropped}, nil
}
