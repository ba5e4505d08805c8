package dirshape

import (
	"fmt"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"golang.org/x/sys/unix"
)

// Huge directories: known from the inode as soon as one fills a getdents
// buffer, read with a large buffer, and left at a per-directory budget.

// dsBigBufSize is the getdents buffer of a directory found big: one
// system call returns some 25,000 entries instead of 700.
const dsBigBufSize = 1 << 20

// bigDir marks the directory at the top of the stack big: its inode is
// read (one fstat of the open directory), and its next reads use the large
// buffer.
func (s *scanner) bigDir(lv *dsLevel) {
	lv.big = true
	s.bigOpen++
	lv.bigSince = time.Now()
	lv.stOK = unix.Fstat(lv.fd, &lv.st) == nil
}

// leaveBig is called before each read of a directory: for a big one it
// swaps in the large buffer and, past the per-directory budget, leaves
// the directory (its counts become lower bounds). It reports whether the
// directory was left.
func (s *scanner) leaveBig(lv *dsLevel) bool {
	if !lv.big {
		return false
	}
	if s.req.MaxDirTime > 0 && time.Since(lv.bigSince) > s.req.MaxDirTime {
		lv.cut, lv.eof = true, true
		return true
	}
	size := s.req.LargeBuffer
	if size <= 0 {
		size = dsBigBufSize
	}
	if len(lv.buf) < size {
		depth := len(s.stack) - 1
		for len(s.bigBufs) <= depth {
			s.bigBufs = append(s.bigBufs, nil)
		}
		if s.bigBufs[depth] == nil {
			s.bigBufs[depth] = make([]byte, size)
		}
		lv.buf = s.bigBufs[depth]
	}
	return false
}

// mayEnter reports whether a subdirectory of the directory at the top of
// the stack may be entered. Below a big directory past half its budget
// it may not: the rest of that budget goes to listing the big directory
// itself (its own count is what names it), not to opening each of its
// children, which on a cold cache costs a disk read or two apiece.
func (s *scanner) mayEnter() bool {
	if s.bigOpen == 0 || s.req.MaxDirTime <= 0 {
		return true
	}
	now := time.Now()
	for i := range s.stack {
		if lv := &s.stack[i]; lv.big && now.Sub(lv.bigSince) > s.req.MaxDirTime/2 {
			return false
		}
	}
	return true
}

// record reports the directory at the top of the stack: among the
// largest, as an nlink anomaly, and (when it was left at its budget) as
// the reason the root's counts are lower bounds.
func (s *scanner) record(lv *dsLevel, partial bool) {
	d := layout.DirShapeDir{Path: s.curPath(), Entries: lv.entries, Subdirs: lv.subdirs, Partial: partial, Count: layout.DirCountExact}
	if partial {
		d.Count = layout.DirCountLowerBound
	}
	st, ok := lv.st, lv.stOK
	if !ok {
		ok = unix.Fstat(lv.fd, &st) == nil
	}
	if ok {
		d.InodeSize, d.Nlink = st.Size, uint64(st.Nlink)
		if lv.big {
			avg := 0.0
			if lv.entries > 0 {
				avg = float64(lv.nameBytes) / float64(lv.entries)
			}
			e := EstimateEntries(s.fsMagic, st.Size, d.Nlink, avg)
			d.EstimatedEntries, d.EstimateBasis = e.Entries, e.Basis
		}
		// On ext4 a directory's st_nlink is 1 only once its
		// subdirectories passed the link limit (dir_nlink), so a
		// directory left early is known from its inode alone.
		overflow := lv.subdirs > nlinkLimit || (partial && lv.big && s.fsMagic == unix.EXT4_SUPER_MAGIC)
		if overflow && st.Nlink == 1 {
			d.NlinkAnomaly = true
			if len(s.out.NlinkAnomalies) < anomalyMax {
				s.out.NlinkAnomalies = append(s.out.NlinkAnomalies, d)
			}
		}
	}
	if lv.cut {
		took := time.Since(lv.bigSince)
		d.ReadSeconds = float64(took.Milliseconds()) / 1000
		s.cuts++
		// The reason names the largest directory left.
		if s.firstCut == "" || d.Size() > s.cutSize {
			s.cutSize = d.Size()
			est := ""
			if d.EstimatedEntries > 0 {
				est = fmt.Sprintf(" (about %d by its inode: %s)", d.EstimatedEntries, d.EstimateBasis)
			}
			s.firstCut = fmt.Sprintf("%s holds at least %d entries%s, still reading after %s: left there, so every count is a lower bound",
				d.Path, d.Entries, est, dsRound(took))
		}
	}
	if s.wantTop(d.Size()) {
		s.pushTop(d)
	}
}

// dsRound rounds a duration for a reader: milliseconds, or microseconds
// below one.
func dsRound(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
