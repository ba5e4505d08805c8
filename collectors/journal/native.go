package journal

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/journalfile"
)

// The native journal reader: the node's journal files read by nodesnap
// itself (package journalfile), for images that hold no journalctl and for
// journals a container's older journalctl cannot read. The files are host
// files on a filesystem that may hang, so they are read only in workers:
// one op lists and opens them and returns the newest matching entries, a
// bounded chunk at a time, with a cursor to resume from; the collector
// feeds the chunks, newest first, into the same window journalctl's output
// goes to. A hung read costs one item and its evidence, as a hung
// journalctl does.

func init() {
	isolate.RegisterOp(opJournalNative, isolate.Typed(journalNativeOp))
}

const opJournalNative = "journal.native"

// Journal readers (--journal-reader).
const (
	ReaderAuto       = "auto"
	ReaderNative     = "native"
	ReaderJournalctl = "journalctl"
)

const (
	// nativeChunk bounds the bytes of text one op returns: small enough
	// that a chunk and its JSON encoding stay a small part of the
	// collector's memory, large enough that round trips cost little.
	nativeChunk = 1 << 20
	// maxJournalFiles bounds the files one source reads.
	maxJournalFiles = 1024
	// maxNativeProblems bounds the unreadable files reported.
	maxNativeProblems = 16
)

type journalNativeRequest struct {
	// Dirs are searched (with their machine-id subdirectories) when Files
	// is empty: the first call of a source.
	Dirs    []string           `json:"dirs,omitempty"`
	Files   []nativeFileCursor `json:"files,omitempty"`
	Matches []string           `json:"matches,omitempty"`
	// Except are matches whose entries are left out (journalfile's
	// Match.Except).
	Except  []string `json:"except,omitempty"`
	SinceUS uint64   `json:"since_us"`
	// Max is the text a call returns at most (whole entries; one entry
	// larger than Max is returned alone); TimeoutMS when it stops.
	Max       int   `json:"max"`
	TimeoutMS int64 `json:"timeout_ms"`
}

// nativeFileCursor is one file and where reading it stands.
type nativeFileCursor struct {
	Path   string `json:"path"`
	FileID string `json:"file_id"`
	// Next is the index of the next entry to read, newest first; -1 when
	// the file is done.
	Next int `json:"next"`
}

type journalNativeResult struct {
	// Data holds whole entries as text, newest first, compressed with S2
	// (see packText); Text is the same text, the op's own copy.
	Data    []byte             `json:"data,omitempty"`
	Text    []byte             `json:"-"`
	Entries int                `json:"entries"`
	Files   []nativeFileCursor `json:"files"`
	// Found counts the journal files found; Problems says which could not
	// be read, or not to their end, and why.
	Found    int      `json:"found"`
	Problems []string `json:"problems,omitempty"`
	Skipped  int      `json:"skipped,omitempty"`
	Done     bool     `json:"done"`
	TimedOut bool     `json:"timed_out,omitempty"`
}

// journalNativeOp reads the newest matching entries of a set of journal
// files, merged by time, as journalctl -o short-iso-precise prints them,
// newest first, until Max bytes or the soft deadline; the cursors say
// where the next call resumes.
func journalNativeOp(rq journalNativeRequest) (any, error) {
	m, err := journalfile.ParseMatch(rq.Matches)
	if err != nil {
		return nil, err
	}
	if len(rq.Except) > 0 {
		x, err := journalfile.ParseMatch(rq.Except)
		if err != nil {
			return nil, err
		}
		m = m.Except(x)
	}
	deadline := time.Now().Add(time.Duration(max(rq.TimeoutMS, 100)) * time.Millisecond)
	r := journalNativeResult{Files: []nativeFileCursor{}}
	cursors := rq.Files
	if len(cursors) == 0 {
		paths, problems := hostfs.ListJournalFiles(rq.Dirs, maxJournalFiles)
		r.Problems = problems
		for _, p := range paths {
			cursors = append(cursors, nativeFileCursor{Path: p, Next: -2})
		}
		r.Found = len(paths)
	}
	type open struct {
		c      nativeFileCursor
		f      *os.File
		it     *journalfile.Iter
		online bool
	}
	var files []open
	defer func() {
		for _, o := range files {
			_ = o.f.Close() // read-only: nothing to lose
		}
	}()
	problem := func(format string, args ...any) {
		if len(r.Problems) < maxNativeProblems {
			r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
		}
	}
	for _, c := range cursors {
		if c.Next == -1 {
			r.Files = append(r.Files, c)
			continue
		}
		fh, size, err := hostfs.OpenRegular(c.Path)
		if err != nil {
			if !errors.Is(err, syscall.ENOENT) || c.FileID == "" {
				problem("%v", err)
			}
			// Rotated away or deleted by vacuuming since the last call.
			r.Files = append(r.Files, nativeFileCursor{Path: c.Path, FileID: c.FileID, Next: -1})
			continue
		}
		f, err := journalfile.Open(fh, size)
		if err != nil {
			_ = fh.Close()
			problem("%s: %v", c.Path, err)
			r.Files = append(r.Files, nativeFileCursor{Path: c.Path, Next: -1})
			continue
		}
		id := hex.EncodeToString(f.Header.FileID[:])
		if c.FileID != "" && c.FileID != id {
			_ = fh.Close()
			problem("%s was replaced while it was read (rotated); its older entries were not read", c.Path)
			r.Files = append(r.Files, nativeFileCursor{Path: c.Path, FileID: c.FileID, Next: -1})
			continue
		}
		if c.Next == -2 && f.ChainError != nil && f.Header.State != journalfile.StateOnline {
			// A file being written may list fewer entries than its
			// header counts for an instant; a closed one may not.
			problem("%s: %v", c.Path, f.ChainError)
		}
		c.FileID = id
		files = append(files, open{c: c, f: fh, it: journalfile.NewIter(f, &m, rq.SinceUS, c.Next), online: f.Header.State == journalfile.StateOnline})
	}
	its := make([]*journalfile.Iter, len(files))
	for i := range files {
		its[i] = files[i].it
	}
	var (
		s        journalfile.Short
		lastSeq  uint64
		lastID   [16]byte
		lastTime uint64
	)
	for {
		if len(r.Text) >= rq.Max {
			break
		}
		if time.Now().After(deadline) {
			r.TimedOut = true
			break
		}
		i := journalfile.Newest(its)
		if i < 0 {
			r.Done = true
			break
		}
		e, _ := its[i].Peek()
		// The same entry in two files (a copy beside the original, as
		// journald leaves after a crash) is shown once, as journalctl
		// does.
		seqID := its[i].SeqnumID()
		if r.Entries > 0 && e.Seqnum == lastSeq && e.Realtime == lastTime && seqID == lastID {
			its[i].Next()
			continue
		}
		its[i].Short(e, &s)
		var ok bool
		r.Text, ok = journalfile.AppendShortISOPrecise(r.Text, e.Realtime, &s)
		lastSeq, lastID, lastTime = e.Seqnum, seqID, e.Realtime
		its[i].Next()
		if ok {
			r.Entries++
		}
	}
	r.Data = packText(r.Text)
	for _, o := range files {
		c := o.it.Cursor()
		if o.it.Err != nil {
			problem("%s: reading stopped at a damaged entry: %v", o.c.Path, o.it.Err)
		}
		r.Skipped += o.it.Skipped
		if o.it.Skipped > 0 && !o.online {
			// Only a file being written has entries not yet whole; in a
			// closed one they are damage.
			problem("%s: its newest %d entries could not be read", o.c.Path, o.it.Skipped)
		}
		r.Files = append(r.Files, nativeFileCursor{Path: o.c.Path, FileID: o.c.FileID, Next: c.Next})
	}
	return r, nil
}

// packText compresses a chunk of text for its way from the worker to the
// collector. The pool speaks JSON: a []byte is base64 in a string that is
// scanned four times (encoded, copied into the answer, read, decoded), and
// uncompressed that cost more than reading the journal itself (a 20 MB
// read took 1.2 s natively against 0.7 s through journalctl's pipe).
// Log text shrinks several times under S2, which runs at GB/s.
func packText(text []byte) []byte {
	if len(text) == 0 {
		return nil
	}
	return s2.Encode(nil, text)
}

// maxChunkText bounds what a chunk decompresses to: a chunk is nativeChunk
// bytes, or one entry larger than that (at most a journal payload).
const maxChunkText = nativeChunk + journalfile.MaxPayload + 64<<10

func unpackText(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	n, err := s2.DecodedLen(b)
	if err != nil || n > maxChunkText {
		return nil, fmt.Errorf("the journal reader sent a damaged chunk (%d bytes claimed): %v", n, err)
	}
	out, err := s2.Decode(nil, b)
	if err != nil {
		return nil, fmt.Errorf("the journal reader sent a damaged chunk: %w", err)
	}
	return out, nil
}

// nativeDirs are the directories the native reader searches.
func (j *journalRun) nativeDirs() []string {
	if j.o.Dir != "" {
		return []string{j.o.Dir}
	}
	return []string{j.env.Host().Seen("/run/log/journal"), j.env.Host().Seen("/var/log/journal")}
}

// nativeSource reads one source with the native reader: chunks of the
// newest entries, newest first, into a window of the source's budget, then
// written oldest first through the redactor, as journalSource does with
// journalctl's output.
func (j *journalRun) nativeSource(ctx context.Context, q journalQuery) layout.JournalSource {
	file := q.name + ".log"
	s := layout.JournalSource{Name: q.name, Kind: "journal", Reader: ReaderNative}
	budget, timeout, ok := j.admit(ctx, &s, "reading the journal hung on an earlier source; not tried again")
	if !ok {
		return s
	}
	start := time.Now()
	defer func() { s.DurationSeconds = time.Since(start).Seconds() }()
	end := start.Add(timeout)
	w := j.sourceWindow(budget, true)
	rq := journalNativeRequest{Dirs: j.nativeDirs(), Matches: q.matches, Except: q.except, SinceUS: uint64(j.since.UnixMicro()), Max: nativeChunk}
	// One call's deadline: the probe deadline, at least 5s (a chunk of a
	// large compressed journal on a slow disk), within the source's.
	call := max(j.env.ProbeTimeout, 5*time.Second)
	var problems []string
	for {
		left := time.Until(end)
		if left < 200*time.Millisecond {
			s.Status, s.Error = layout.JournalTimeout, fmt.Sprintf("reading the journal did not finish within %s", timeout)
			break
		}
		d := min(call, left)
		rq.TimeoutMS = (d - d/4).Milliseconds()
		var r journalNativeResult
		err := j.env.DoTimeout(ctx, d, opJournalNative, strings.Join(rq.Dirs, " "), rq, &r)
		if err != nil {
			if errors.Is(err, isolate.ErrTimeout) {
				s.Status, s.Error = layout.JournalTimeout, fmt.Sprintf("reading the journal files did not answer within %s: %v", d, err)
				j.hung = &timeoutError{msg: fmt.Sprintf("reading the journal files (%s) did not answer within %s", q.name, d), cause: err}
			} else {
				s.Status, s.Error = layout.JournalError, err.Error()
				j.failed++
			}
			break
		}
		problems = append(problems, r.Problems...)
		text, err := unpackText(r.Data)
		if err != nil {
			s.Status, s.Error = layout.JournalError, err.Error()
			j.failed++
			break
		}
		if _, werr := w.Write(text); werr != nil {
			s.Status = layout.JournalOK
			break
		}
		if r.Done {
			s.Status = layout.JournalOK
			break
		}
		rq.Dirs, rq.Files = nil, r.Files
	}
	w.seal()
	w.finish(true)
	for _, p := range problems {
		j.nativeProblem(q.name, p)
	}
	s.Problems = problems[:min(len(problems), maxNativeProblems)]
	return j.closeSource(s, file, w, budget, "reading the journal stopped early", "read")
}

// nativeProblem reports, once each, a journal file the native reader
// could not read, or not to its end: part of the journal is missing.
func (j *journalRun) nativeProblem(source, p string) {
	if j.said[p] || len(j.said) >= 16 {
		return
	}
	if j.said == nil {
		j.said = map[string]bool{}
	}
	j.said[p] = true
	if j.unreadable == "" {
		j.unreadable = p
	}
	j.env.Partialf("could not read part of the journal (reading %s): %s", source, p)
}
