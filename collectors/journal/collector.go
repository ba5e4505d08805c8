package journal

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/cliflag"
	"github.com/nodesnap/nodesnap/internal/human"
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
	collectors.Register(collectors.Spec{
		Name:           layout.DirJournal,
		Description:    "journald logs of the kubelet, container runtimes, storage daemons (multipathd, iscsid, the NFS daemons) and kernel (newest kept under a byte cap); /var/log tails and dmesg where journald is absent",
		Requires:       "root (or the systemd-journal group) for the journal files in /var/log/journal or /run/log/journal; journalctl only with --journal-reader=journalctl",
		DefaultEnabled: true,
		DefaultTimeout: 60 * time.Second,
		After:          []string{collectors.MountprobeName},
		Options:        &opts,
		Flags:          flags,
		Completions:    map[string][]string{"journal-reader": {ReaderNative, ReaderJournalctl, ReaderAuto}},
		Files:          files,
		Run:            collect,
	})
	isolate.RegisterOp(opJournalProbe, isolate.Typed(journalProbeOp))
	isolate.RegisterOp(opJournalReadAt, isolate.Typed(journalReadAtOp))
	isolate.RegisterOp(opJournalKmsg, isolate.Typed(journalKmsgOp))
}

// journalRun is one run of the collector.
type journalRun struct {
	env     *collectors.Env
	o       Options
	since   time.Time
	idx     layout.JournalSources
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

func collect(ctx context.Context, env *collectors.Env) error {
	o := defaults
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaults.MaxBytes
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = defaults.CommandTimeout
	}
	if o.MemoryCap <= 0 {
		o.MemoryCap = defaults.MemoryCap
	}
	// The memory cap bounds the lines held; the collection's GC setting
	// would let the heap grow to several times that (to its 256 MiB soft
	// limit) before collecting, so the process's soft limit follows the
	// cap: the lines, a chunk being read and the writer's buffers. Never
	// above the collection's own limit (a raised cap must not lift it).
	isolate.LimitMemory(min(o.MemoryCap+o.MemoryCap/4+32<<20, 256<<20))
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
	j.idx = layout.JournalSources{Since: j.since.UTC(), MaxBytes: o.MaxBytes, Sources: []layout.JournalSource{}}
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
	if err := env.WriteJSON(layout.JournalSourcesFile, j.idx); err != nil {
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
			j.env.Partialf("no logs could be collected: %s could not be read (%s), and none of /var/log/{messages,syslog,daemon.log,kern.log,kubelet.log}, RKE2's kubelet log, dmesg or /dev/kmsg gave anything", what, j.idx.FallbackReason)
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
		if strings.HasPrefix(s.Kind, "journal") && s.Status == layout.JournalError {
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

// doAt runs a worker op on a journal directory named as nodesnap sees it
// (--journal-dir is one): through the host-access policy when it lies
// under the roots, directly otherwise.
func (j *journalRun) doAt(ctx context.Context, op, seen string, req, resp any) error {
	if hp, ok := j.env.Host().Host(seen); ok {
		return j.env.Host().Do(ctx, 0, op, hp, req, resp)
	}
	return j.env.Do(ctx, op, seen, req, resp)
}

// probe finds out whether journald can be used: journal files or its
// socket, and a journalctl that answers.
func (j *journalRun) probe(ctx context.Context) bool {
	js := &j.idx.Journald
	dirs := []string{j.env.Host().Seen("/run/log/journal"), j.env.Host().Seen("/var/log/journal")}
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
		var r journalProbeResult
		if err := j.doAt(ctx, opJournalProbe, d, journalProbeRequest{Path: d}, &r); err != nil {
			if errors.Is(err, hostfs.ErrHung) {
				problems = append(problems, d+" is on a hung mount")
			} else if !errors.Is(err, syscall.ENOENT) {
				problems = append(problems, fmt.Sprintf("%s: %v", d, err))
			}
			continue
		}
		js.JournalFiles += r.JournalFiles
	}
	if j.o.Dir == "" {
		if st, err := j.env.Host().Lstat(ctx, "/run/systemd/journal/socket"); err == nil {
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
		js.Problem = fmt.Sprintf("journalctl --version exited with status %d: %s", res.ExitCode, human.FirstLine(stderr))
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

func (j *journalRun) fromJournal(ctx context.Context, qs []journalQuery) {
	var ok []journalQuery
	for _, q := range qs {
		var s layout.JournalSource
		if j.native {
			s = j.nativeSource(ctx, q)
		} else {
			s = j.journalSource(ctx, q, "journal", j.format, ".log")
		}
		if s.Status == layout.JournalOK {
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
func (j *journalRun) journalSource(ctx context.Context, q journalQuery, kind, format, ext string) layout.JournalSource {
	file := q.name + ext
	args := append([]string{"--no-pager", "--quiet", "--all", "--utc", "--reverse",
		"--output=" + format, "--since=@" + strconv.FormatInt(j.since.Unix(), 10)}, j.loc...)
	args = append(args, q.matches...)
	s := layout.JournalSource{Name: q.name, Kind: kind, Command: append([]string{"journalctl"}, args...)}
	budget, timeout, ok := j.admit(ctx, &s, "journalctl hung on an earlier source; not run again")
	if !ok {
		return s
	}
	start := time.Now()
	w := j.sourceWindow(budget, format != "json")
	res, stderr, err := j.run(ctx, timeout, "journalctl", args, w)
	w.seal()
	s.DurationSeconds = time.Since(start).Seconds()
	s.Stderr = human.Cut(strings.TrimSpace(stderr), 4<<10)
	w.finish(err == nil && !res.TimedOut)
	switch {
	case w.full:
		s.Status = layout.JournalOK
	case res.TimedOut:
		s.Status = layout.JournalTimeout
		s.Error = fmt.Sprintf("did not finish within %s (%s)", timeout, res.Evidence.String())
		j.hung = &timeoutError{msg: fmt.Sprintf("journalctl (%s) did not finish within %s (%s)", q.name, timeout, res.Evidence.String()), cause: err}
	case err != nil:
		s.Status, s.Error = layout.JournalError, err.Error()
		j.failed++
	case res.ExitCode != 0:
		s.Status = layout.JournalError
		s.Error = fmt.Sprintf("journalctl exited with status %d: %s", res.ExitCode, human.FirstLine(stderr))
		j.failed++
	default:
		s.Status = layout.JournalOK
		j.stderrNote(q.name, stderr)
	}
	return j.closeSource(s, file, w, budget, "journalctl stopped early", "it gave")
}

// closeSource writes a source's window to its file, oldest first, and
// says in the manifest what a cap or an early stop left out; stopped and
// gave word the early stop for the reader that filled the window.
func (j *journalRun) closeSource(s layout.JournalSource, file string, w *entryWindow, budget int64, stopped, gave string) layout.JournalSource {
	truncated := w.full || w.cut > 0 || (s.Status != layout.JournalOK && w.entries() > 0)
	if err := j.writeWindow(&s, file, w, truncated); err != nil {
		s.Status, s.Error = layout.JournalError, err.Error()
		return s
	}
	if s.Status == layout.JournalOK && s.Entries == 0 {
		s.Status = layout.JournalEmpty
	}
	from := ""
	if s.Oldest != "" {
		from = ", from " + s.Oldest
	}
	if w.cut > 0 {
		j.env.Partialf("journal: %d lines past the %s memory cap were left out of %s (%s older than %s); raise --journal-memory-cap",
			w.cut, cliflag.FormatBytes(j.o.MemoryCap), file, human.Bytes(w.cutBytes), orUnknown(s.Oldest))
	}
	if w.full {
		j.env.Notef("%s: kept the newest %s (%d entries%s); older entries since %s were left out by the %s cap",
			file, human.Bytes(s.Bytes), s.Entries, from, j.since.UTC().Format(time.RFC3339), human.Bytes(budget))
	} else if truncated {
		j.env.Notef("%s: %s (%s); kept the newest entries %s (%d)%s", file, stopped, s.Status, gave, s.Entries, from)
	}
	return s
}

// sourceWindow is the window one journal source is read into, newest
// first: the byte budget decides what the bundle may hold, the memory cap
// what the collector holds at once.
func (j *journalRun) sourceWindow(budget int64, contIndent bool) *entryWindow {
	w := newEntryWindow(budget, true, contIndent)
	w.capMemory(j.o.MemoryCap)
	return w
}

func orUnknown(s string) string {
	if s == "" {
		return "the oldest kept entry"
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
	s := layout.JournalSource{Name: "boots", Kind: "boots", Command: append([]string{"journalctl"}, args...)}
	start := time.Now()
	w := newEntryWindow(1<<20, false, false)
	res, stderr, err := j.run(ctx, timeout, "journalctl", args, w)
	w.seal()
	w.finish(err == nil && !res.TimedOut)
	s.DurationSeconds = time.Since(start).Seconds()
	s.Stderr = human.Cut(strings.TrimSpace(stderr), 4<<10)
	switch {
	case res.TimedOut:
		s.Status, s.Error = layout.JournalTimeout, fmt.Sprintf("did not finish within %s (%s)", timeout, res.Evidence.String())
		j.hung = &timeoutError{msg: fmt.Sprintf("journalctl --list-boots did not finish within %s (%s)", timeout, res.Evidence.String()), cause: err}
	case err != nil:
		s.Status, s.Error = layout.JournalError, err.Error()
	case res.ExitCode != 0:
		// Old journalctl versions cannot list boots of a directory; not a
		// failure of the collection.
		s.Status, s.Error = layout.JournalError, fmt.Sprintf("exited with status %d: %s", res.ExitCode, human.FirstLine(stderr))
	default:
		s.Status = layout.JournalOK
	}
	if err := j.writeWindow(&s, layout.JournalBootsFile, w, w.dropped > 0); err != nil {
		s.Status, s.Error = layout.JournalError, err.Error()
	}
	if s.Status == layout.JournalOK && s.Entries == 0 {
		s.Status = layout.JournalEmpty
	}
	j.idx.Sources = append(j.idx.Sources, s)
}

// writeWindow writes a window's entries oldest-first to a bundle file
// (through the redactor). An empty window writes no file.
func (j *journalRun) writeWindow(s *layout.JournalSource, file string, w *entryWindow, truncated bool) error {
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
		f.MarkTruncated()
	}
	cerr := f.Close()
	j.written = true
	if werr != nil {
		return fmt.Errorf("writing %s: %w", file, werr)
	}
	return cerr
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

// admit decides whether one more source is read, and with what byte budget
// and deadline: not after a hang (afterHang says why), nor past the byte
// cap or the collector's deadline. When it is not, s says why.
func (j *journalRun) admit(ctx context.Context, s *layout.JournalSource, afterHang string) (int64, time.Duration, bool) {
	if j.hung != nil {
		s.Status, s.Error = layout.JournalSkipped, afterHang
		return 0, 0, false
	}
	budget := j.budget()
	if budget <= 0 {
		s.Status, s.Error = layout.JournalSkipped, "the collector's byte cap was reached"
		return 0, 0, false
	}
	timeout, ok := j.cmdTimeout(ctx, j.o.CommandTimeout)
	if !ok {
		s.Status, s.Error = layout.JournalSkipped, "the collector's deadline was reached"
		return 0, 0, false
	}
	j.queried++
	return budget, timeout, true
}

// run runs a program in the isolation layer with stdout into w. A program
// that misses its deadline is recorded in the manifest with where it hung.
func (j *journalRun) run(ctx context.Context, timeout time.Duration, prog string, args []string, w io.Writer) (isolate.Result, string, error) {
	return j.env.Exec(ctx, timeout, prog, args, w, 16<<10, "LC_ALL=C", "SYSTEMD_PAGER=", "PAGER=cat", "SYSTEMD_COLORS=0", "NO_COLOR=1", "SYSTEMD_LESS=", "SYSTEMD_URLIFY=0")
}
