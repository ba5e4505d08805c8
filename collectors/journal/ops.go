package journal

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/inroot"
)

// The journal collector's worker operations: probing journald, reading a file's tail, reading /dev/kmsg.

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
		l, err := hostfs.ListDir(dir, 4096)
		if err != nil {
			return err
		}
		for _, e := range l.Entries {
			n := e.Name
			switch {
			case e.MaybeFile() && (strings.HasSuffix(n, ".journal") || strings.HasSuffix(n, ".journal~")):
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
	fd, err := inroot.Process().Open(rq.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
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
	fd, err := inroot.Process().Open(rq.Path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
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
