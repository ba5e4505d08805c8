package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/human"
)

// The kernel's own ring buffer (/dev/kmsg) as the kernel log's fallback.

// kernelRing reads the kernel ring buffer: the dmesg program when it is
// there, else /dev/kmsg directly.
func (j *journalRun) kernelRing(ctx context.Context) layout.JournalSource {
	budget := j.budget()
	s := layout.JournalSource{Name: "dmesg", Kind: "dmesg"}
	if budget <= 0 {
		s.Status, s.Error = layout.JournalSkipped, "the collector's byte cap was reached"
		return s
	}
	timeout, ok := j.cmdTimeout(ctx, j.o.CommandTimeout)
	if !ok {
		s.Status, s.Error = layout.JournalSkipped, "the collector's deadline was reached"
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
		s.Stderr = human.Cut(strings.TrimSpace(stderr), 4<<10)
		switch {
		case errors.Is(err, isolate.ErrNotFound):
			return j.kmsg(ctx, budget)
		case res.TimedOut:
			s.Status, s.Error = layout.JournalTimeout, fmt.Sprintf("did not finish within %s (%s)", timeout, res.Evidence.String())
		case err != nil:
			s.Status, s.Error = layout.JournalError, err.Error()
		case res.ExitCode != 0:
			s.Status, s.Error = layout.JournalError, fmt.Sprintf("dmesg exited with status %d: %s", res.ExitCode, human.FirstLine(stderr))
			if attempt == 0 {
				continue
			}
		default:
			s.Status = layout.JournalOK
		}
		if s.Status == layout.JournalError && w.entries() == 0 {
			// dmesg_restrict, or a container without CAP_SYSLOG:
			// /dev/kmsg may still be readable.
			if k := j.kmsg(ctx, budget); k.Status == layout.JournalOK {
				return k
			}
			return s
		}
		if err := j.writeWindow(&s, "dmesg.log", w, w.dropped > 0); err != nil {
			s.Status, s.Error = layout.JournalError, err.Error()
		}
		break
	}
	if s.Status == layout.JournalOK && s.Entries == 0 {
		s.Status = layout.JournalEmpty
	}
	return s
}

// kmsg reads /dev/kmsg without blocking, in a worker.
func (j *journalRun) kmsg(ctx context.Context, budget int64) layout.JournalSource {
	s := layout.JournalSource{Name: "kmsg", Kind: "kmsg", Path: "/dev/kmsg"}
	start := time.Now()
	defer func() { s.DurationSeconds = time.Since(start).Seconds() }()
	var r journalKmsgResult
	if err := j.env.Do(ctx, opJournalKmsg, "/dev/kmsg", journalKmsgRequest{Path: "/dev/kmsg", Max: min(budget, 16<<20)}, &r); err != nil {
		s.Status, s.Error = layout.JournalError, err.Error()
		if errors.Is(err, syscall.ENOENT) {
			s.Status = layout.JournalMissing
		} else if errors.Is(err, isolate.ErrTimeout) {
			s.Status = layout.JournalTimeout
		}
		return s
	}
	// /dev/kmsg is the running kernel's, whatever --root says: so is the
	// boot time its offsets count from, asked of the kernel itself (a
	// proc tree under --root may be another machine's, or absent).
	btime := kernelBootTime()
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
	s.Status = layout.JournalOK
	if err := j.writeWindow(&s, "kmsg.log", w, r.Dropped > 0 || w.dropped > 0); err != nil {
		s.Status, s.Error = layout.JournalError, err.Error()
	}
	if s.Status == layout.JournalOK && s.Entries == 0 {
		s.Status = layout.JournalEmpty
	}
	return s
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

// kernelBootTime is the running kernel's boot time as dmesg -T reckons it:
// now less CLOCK_BOOTTIME; zero when the clock cannot be read.
func kernelBootTime() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(ts.Nano()))
}
