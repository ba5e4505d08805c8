package journal

import (
	"bytes"
	"errors"
	"sync"
)

// The window of newest log bytes every journal source writes through: kept under a cap, oldest dropped first.

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

	// keep bounds the bytes held in memory (reverse mode; the memory
	// cap), at most budget. Past it, entries the budget would still
	// have kept are read and counted, not kept: cut, cutBytes.
	keep     int64
	cutting  bool
	cut      int   // lines left out by keep
	cutBytes int64 // their bytes

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
	return &entryWindow{budget: budget, keep: budget, reverse: reverse, contIndent: contIndent, chunkSize: cs}
}

// capMemory bounds what a reverse window holds in memory to keep bytes
// (when below its budget): the newest entries up to keep are kept, the
// older ones the budget would have kept are counted (cut) and dropped.
func (w *entryWindow) capMemory(keep int64) {
	if !w.reverse || keep <= 0 || keep >= w.budget {
		return
	}
	w.keep = keep
	w.chunkSize = int(min(max(keep/8, 4<<10), 1<<20))
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
		if w.cutting {
			// Past the memory cap: count what the byte cap would have
			// kept, until it would not have.
			if w.size+w.cutBytes+int64(len(line)) > w.budget {
				w.full = true
				w.dropped++
				return n - len(p), errWindowFull
			}
			w.cutBytes += int64(len(line))
			w.cut += bytes.Count(line, nl)
			continue
		}
		if int64(len(w.pend)+len(line)) > w.room() {
			if w.reverse && w.size+int64(len(w.pend)+len(line)) <= w.budget {
				// The memory cap, not the byte cap: this entry and the
				// older ones are counted from now on, not kept.
				w.cutting = true
				w.cutBytes = int64(len(w.pend) + len(line))
				w.cut = bytes.Count(w.pend, nl) + bytes.Count(line, nl)
				w.pend = w.pend[:0]
				continue
			}
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
		return w.keep - w.size
	}
	return w.budget
}

var nl = []byte{'\n'}

// commit stores the pending entry (the next line starts a new one).
func (w *entryWindow) commit() {
	w.skip = false
	e := w.pend
	if len(e) == 0 {
		return
	}
	w.pend = w.pend[:0]
	if w.reverse && w.size+int64(len(e)) > w.keep {
		if w.size+int64(len(e)) <= w.budget {
			w.cutting = true
			w.cutBytes += int64(len(e))
			w.cut += max(1, bytes.Count(e, nl))
			return
		}
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
