package journal

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/internal/inroot"
)

// Rotated parts of the /var/log files the journal fallback reads. Right
// after logrotate runs the current file is nearly empty and the evidence
// sits in kubelet.log.1, kubelet.log.2.gz or kubelet.log-20261120.gz: while
// the source's byte budget is not spent, those parts are read too, newest
// first, each into its own bundle file. Listing, reading and decompressing
// happen in workers, like every other touch of a host path.

func init() {
	isolate.RegisterOp(opJournalGzipTail, isolate.Typed(journalGzipTailOp))
}

const opJournalGzipTail = "journal.gziptail"

const (
	// maxRotatedParts bounds how many rotated parts of one log are
	// considered (logrotate's "rotate 52" of a weekly log, say).
	maxRotatedParts = 64
	// maxLogDirEntries bounds the listing of a log's directory.
	maxLogDirEntries = 16384
	// gzipTailMax bounds the decompressed bytes one op returns, as
	// journalReadAtOp bounds a chunk.
	gzipTailMax = 16 << 20
	// gzipInflateCap bounds the decompressed bytes one op goes through,
	// so that a gzip bomb costs bounded time (memory is bounded by
	// gzipTailMax whatever the input).
	gzipInflateCap = 256 << 20
)

// rotatedName is a rotated part of a log, as its file name tells.
type rotatedName struct {
	// Name is the file name in the log's directory.
	Name string
	// Seq is the numeric suffix (kubelet.log.1, kubelet.log.2.gz), -1 for
	// a dated part.
	Seq int
	// Date is a dated part's YYYYMMDD (kubelet.log-20261120), Extra what
	// follows it: the hour of "-2026112013", the seconds of
	// "-20261120-1763600000".
	Date  string
	Extra uint64
	Gzip  bool
}

// plain is the part's name without ".gz": the name of its bundle file.
func (r rotatedName) plain() string {
	if r.Gzip {
		return strings.TrimSuffix(r.Name, ".gz")
	}
	return r.Name
}

// newerThan orders parts newest first: numeric suffixes ascending (.1 is
// newer than .2), then dated ones, latest date first. A plain part comes
// before a compressed one of the same rank.
func (r rotatedName) newerThan(o rotatedName) bool {
	if (r.Seq >= 0) != (o.Seq >= 0) {
		return r.Seq >= 0
	}
	switch {
	case r.Seq != o.Seq:
		return r.Seq < o.Seq
	case r.Date != o.Date:
		return r.Date > o.Date
	case r.Extra != o.Extra:
		return r.Extra > o.Extra
	case r.Gzip != o.Gzip:
		return !r.Gzip
	}
	return r.Name < o.Name
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseRotatedName tells whether name is a rotated part of the log named
// base, in logrotate's styles: base.N, base.N.gz, base-YYYYMMDD,
// base-YYYYMMDD.gz, with an hour or time after the date
// (base-YYYYMMDDHH, base-YYYYMMDD-SECONDS). Anything else (other
// compressors, editor backups, base itself) is not.
func parseRotatedName(base, name string) (rotatedName, bool) {
	rest, ok := strings.CutPrefix(name, base)
	if !ok || base == "" {
		return rotatedName{}, false
	}
	r := rotatedName{Name: name, Seq: -1}
	if t, ok := strings.CutSuffix(rest, ".gz"); ok {
		rest, r.Gzip = t, true
	}
	if len(rest) < 2 {
		return rotatedName{}, false
	}
	digits := rest[1:]
	switch rest[0] {
	case '.':
		if len(digits) > 4 || !allDigits(digits) {
			return rotatedName{}, false
		}
		r.Seq, _ = strconv.Atoi(digits)
		return r, true
	case '-':
		date, extra, dash := strings.Cut(digits, "-")
		if len(date) < 8 || !allDigits(date) {
			return rotatedName{}, false
		}
		more := date[8:]
		date = date[:8]
		if dash {
			if more != "" || !allDigits(extra) {
				return rotatedName{}, false
			}
			more = extra
		}
		if month, day := date[4:6], date[6:8]; month < "01" || month > "12" || day < "01" || day > "31" {
			return rotatedName{}, false
		}
		if more != "" {
			n, err := strconv.ParseUint(more, 10, 64)
			if err != nil {
				return rotatedName{}, false
			}
			r.Extra = n
		}
		r.Date = date
		return r, true
	}
	return rotatedName{}, false
}

// rotatedParts lists the rotated parts of a log (host path), newest first,
// by listing its directory in a worker.
func (j *journalRun) rotatedParts(ctx context.Context, hostPath string) ([]rotatedName, error) {
	dir, base := path.Dir(hostPath), path.Base(hostPath)
	r, err := j.env.Host().List(ctx, hostfs.Path(dir), maxLogDirEntries)
	if errors.Is(err, hostfs.ErrHung) {
		return nil, fmt.Errorf("%s is on a mount found hung earlier in this run", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	if r.Truncated {
		j.env.Notef("%s has more than %d entries; rotated parts of %s among the rest were not looked for", dir, maxLogDirEntries, base)
	}
	var parts []rotatedName
	for _, e := range r.Entries {
		if rn, ok := parseRotatedName(base, e.Name); ok {
			parts = append(parts, rn)
		}
	}
	sort.Slice(parts, func(a, b int) bool { return parts[a].newerThan(parts[b]) })
	if len(parts) > maxRotatedParts {
		j.env.Notef("%s has %d rotated parts; only the newest %d were considered", hostPath, len(parts), maxRotatedParts)
		parts = parts[:maxRotatedParts]
	}
	return parts, nil
}

// logWithRotations reads a log's current file and, while the source's
// byte budget is not spent, its rotated parts, newest first: one bundle
// file and one sources.json entry each, all within one budget.
func (j *journalRun) logWithRotations(ctx context.Context, name, hostPath string) []layout.JournalSource {
	budget := j.budget()
	cur := j.fileTail(ctx, name, hostPath, "files/"+name, budget)
	out := []layout.JournalSource{cur}
	switch cur.Status {
	case layout.JournalOK, layout.JournalEmpty, layout.JournalMissing:
	default:
		// Hung, timed out, failed or over the cap: its rotated parts
		// are no better off, or not needed.
		return out
	}
	if cur.Truncated || cur.SourceBytes >= budget {
		return out
	}
	parts, err := j.rotatedParts(ctx, hostPath)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			j.env.Notef("rotated parts of %s were not looked for: %v", hostPath, err)
		}
		return out
	}
	used := cur.Bytes
	spent := false
	seen := map[string]bool{"files/" + name: true}
	var kept []string
	skipped := 0
	for i, r := range parts {
		file := "files/" + safeName(r.plain())
		for k := 2; seen[file]; k++ {
			file = fmt.Sprintf("files/%s-%d", safeName(r.plain()), k)
		}
		seen[file] = true
		host := path.Join(path.Dir(hostPath), r.Name)
		left := min(budget-used, j.budget())
		var s layout.JournalSource
		switch {
		case spent || left <= 0:
			s = layout.JournalSource{Name: r.Name, Kind: "file", Path: host, Status: layout.JournalSkipped,
				Error: "the byte cap was spent on newer parts"}
			skipped++
		case r.Gzip:
			s = j.gzipTail(ctx, r.Name, host, file, left)
		default:
			s = j.fileTail(ctx, r.Name, host, file, left)
		}
		s.RotatedFrom, s.Rotation = hostPath, i+1
		used += s.Bytes
		if s.Bytes > 0 {
			kept = append(kept, r.Name)
		}
		// A part cut by the budget spends it: an older part would leave
		// a gap in time. One that failed or hit a deadline does not.
		if s.Truncated && s.Status == layout.JournalOK && !s.InflateCapped {
			spent = true
		}
		out = append(out, s)
	}
	if len(kept) > 0 {
		j.env.Notef("%s: also kept rotated parts %s (newest first, %s in all, %s cap)", hostPath, strings.Join(kept, ", "), human.Bytes(used), human.Bytes(budget))
	}
	if skipped > 0 {
		j.env.Notef("%s: %d older rotated parts were left out by the %s cap", hostPath, skipped, human.Bytes(budget))
	}
	return out
}

// gzipTail keeps the newest whole lines of a gzip-compressed rotated part,
// at most budget bytes, decompressed in a worker under the probe deadline.
func (j *journalRun) gzipTail(ctx context.Context, name, hostPath, file string, budget int64) layout.JournalSource {
	hp := hostfs.Path(hostPath)
	p := j.env.Host().Seen(hp)
	s := layout.JournalSource{Name: name, Kind: "file", Path: hostPath, Compression: "gzip"}
	start := time.Now()
	defer func() { s.DurationSeconds = time.Since(start).Seconds() }()
	// The op stops itself a little before the worker's deadline, so that
	// a large part yields what was decompressed rather than a hang.
	soft := j.env.ProbeTimeout
	if soft <= 0 {
		soft = 3 * time.Second
	}
	soft -= soft / 4
	rq := journalGzipTailRequest{Path: p, Max: min(budget, gzipTailMax), MaxInflate: gzipInflateCap, TimeoutMS: soft.Milliseconds()}
	var r journalGzipTailResult
	if err := j.env.Host().Do(ctx, 0, opJournalGzipTail, hp, rq, &r); err != nil {
		switch {
		case errors.Is(err, hostfs.ErrHung):
			s.Status, s.Error = layout.JournalSkipped, "on a mount found hung earlier in this run"
		case errors.Is(err, syscall.ENOENT):
			s.Status = layout.JournalMissing
		case errors.Is(err, isolate.ErrTimeout):
			s.Status, s.Error = layout.JournalTimeout, fmt.Sprintf("decompressing %s did not answer within the probe deadline: %v", hostPath, err)
		default:
			s.Status, s.Error = layout.JournalError, err.Error()
		}
		return s
	}
	s.SourceBytes, s.InflatedBytes, s.InflateCapped = r.Size, r.Inflated, r.Capped
	// Whole lines only: the window may start mid-line, and a stream cut
	// short may end mid-line.
	data := r.Data
	cutHead := r.Inflated > int64(len(r.Data))
	if cutHead {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		} else {
			data = nil
		}
	}
	if !r.Complete {
		data = data[:bytes.LastIndexByte(data, '\n')+1]
	}
	s.Truncated = cutHead || !r.Complete
	switch {
	case r.Error != "":
		s.Status, s.Error = layout.JournalError, fmt.Sprintf("%s is damaged (%s after %s decompressed); nothing of it was kept, as bytes decoded from a damaged stream cannot be trusted", hostPath, r.Error, human.Bytes(r.Inflated))
	case r.TimedOut:
		s.Status, s.Error = layout.JournalTimeout, fmt.Sprintf("decompressing did not finish within %s; kept the newest whole lines of the first %s", soft, human.Bytes(r.Inflated))
	case r.Capped:
		s.Status, s.Error = layout.JournalOK, fmt.Sprintf("decompression stopped at the %s cap before the end of the file (a gzip bomb, or a log larger than the cap): its newest lines were not reached", human.Bytes(gzipInflateCap))
	default:
		s.Status = layout.JournalOK
	}
	if len(data) > 0 {
		f, err := j.env.Create(file)
		if err != nil {
			s.Status, s.Error = layout.JournalError, err.Error()
			return s
		}
		s.File = file
		s.Oldest = firstField(data)
		s.Newest = firstField(lastLineOf(data, nil))
		s.Entries = bytes.Count(data, []byte{'\n'})
		s.Bytes = int64(len(data))
		_, werr := f.Write(data)
		if s.Truncated {
			f.MarkTruncated()
		}
		cerr := f.Close()
		j.written = true
		if err := errors.Join(werr, cerr); err != nil {
			s.Status, s.Error = layout.JournalError, fmt.Sprintf("writing %s: %v", file, err)
		}
	}
	if s.Status == layout.JournalOK && s.Bytes == 0 {
		s.Status = layout.JournalEmpty
	}
	switch {
	case r.Capped:
		j.env.Notef("%s: %s", hostPath, s.Error)
	case cutHead && r.Complete:
		j.env.Notef("%s: kept the newest %s of %s decompressed (%s cap)", file, human.Bytes(s.Bytes), human.Bytes(r.Inflated), human.Bytes(budget))
	}
	return s
}

type journalGzipTailRequest struct {
	Path string `json:"path"`
	// Max is how many decompressed bytes are returned, from the end;
	// MaxInflate how many are decompressed at most; TimeoutMS when the op
	// stops and returns what it has.
	Max        int64 `json:"max"`
	MaxInflate int64 `json:"max_inflate"`
	TimeoutMS  int64 `json:"timeout_ms,omitempty"`
}

type journalGzipTailResult struct {
	// Size is the compressed file's size.
	Size int64 `json:"size"`
	// Data is the last (at most Max) bytes decompressed.
	Data []byte `json:"data,omitempty"`
	// Inflated counts the decompressed bytes gone through.
	Inflated int64 `json:"inflated"`
	// Complete: the end of the file was reached. Otherwise Capped
	// (MaxInflate reached), TimedOut, or Error (damaged after Inflated
	// bytes; Data is then empty) says why not.
	Complete bool   `json:"complete,omitempty"`
	Capped   bool   `json:"capped,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Error    string `json:"error,omitempty"`
}

// journalGzipTailOp decompresses a regular gzip file as a stream, keeping
// only the last Max bytes in a ring: memory is bounded by Max, time by
// MaxInflate and TimeoutMS, whatever the file holds.
func journalGzipTailOp(rq journalGzipTailRequest) (any, error) {
	fd, err := inroot.Process().Open(rq.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: rq.Path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%s is not a regular file", rq.Path)
	}
	_ = unix.SetNonblock(fd, false) // a regular file: reads never wait on a writer
	f := os.NewFile(uintptr(fd), rq.Path)
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	maxOut := min(max(rq.Max, 1), gzipTailMax)
	maxIn := rq.MaxInflate
	if maxIn <= 0 {
		maxIn = gzipInflateCap
	}
	var deadline time.Time
	if rq.TimeoutMS > 0 {
		deadline = time.Now().Add(time.Duration(rq.TimeoutMS) * time.Millisecond)
	}
	r := journalGzipTailResult{Size: st.Size}
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("%s is not a readable gzip file: %w", rq.Path, err)
	}
	ring := tailRing{max: int(maxOut)}
	buf := make([]byte, 64<<10)
	for {
		if r.Inflated >= maxIn {
			// At the cap: the end of the stream, or more?
			var one [1]byte
			n, err := io.ReadFull(zr, one[:])
			r.Complete = n == 0 && errors.Is(err, io.EOF)
			r.Capped = !r.Complete
			break
		}
		n, err := zr.Read(buf[:min(int64(len(buf)), maxIn-r.Inflated)])
		ring.write(buf[:n])
		r.Inflated += int64(n)
		if errors.Is(err, io.EOF) {
			r.Complete = true
			break
		}
		if err != nil {
			if r.Inflated == 0 {
				return nil, fmt.Errorf("%s is not a readable gzip file: %w", rq.Path, err)
			}
			// Bytes decoded from a damaged stream cannot be trusted:
			// back-references into garbage copy fragments of earlier
			// lines, which could part a secret from the keyword the
			// redactor knows it by. None are returned.
			r.Error = err.Error()
			ring = tailRing{}
			break
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			r.TimedOut = true
			break
		}
	}
	r.Data = ring.bytes()
	return r, nil
}

// tailRing keeps the last max bytes written to it.
type tailRing struct {
	buf  []byte
	max  int
	w    int // next write position once full
	full bool
}

func (t *tailRing) write(p []byte) {
	if t.max <= 0 || len(p) == 0 {
		return
	}
	if len(p) >= t.max {
		if len(t.buf) < t.max {
			t.buf = make([]byte, t.max)
		}
		copy(t.buf, p[len(p)-t.max:])
		t.w, t.full = 0, true
		return
	}
	if !t.full {
		room := t.max - len(t.buf)
		if len(p) < room {
			t.buf = append(t.buf, p...)
			return
		}
		t.buf = append(t.buf, p[:room]...)
		p = p[room:]
		t.w, t.full = 0, true
	}
	for len(p) > 0 {
		n := copy(t.buf[t.w:], p)
		p = p[n:]
		t.w = (t.w + n) % t.max
	}
}

// bytes returns the kept bytes, oldest first.
func (t *tailRing) bytes() []byte {
	if !t.full || t.w == 0 {
		return t.buf
	}
	out := make([]byte, 0, len(t.buf))
	out = append(out, t.buf[t.w:]...)
	return append(out, t.buf[:t.w]...)
}
