package redact

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Spread is the last pass of a run: the hashes of every value any
// collector masked, and the key they were made with. It holds no value.
type Spread struct {
	Key    SpreadKey   `json:"key"`
	Values []ValueHash `json:"values"`
}

// spreadIndex finds candidate starts by the rolling hash of SpreadMin
// bytes: a bitset first (one load per byte), then the map.
type spreadIndex struct {
	key    SpreadKey
	mac    *summer
	pow    uint64 // Base^(SpreadMin-1), to drop the byte leaving the window
	bits   []uint64
	byRoll map[uint32][]ValueHash // shortest first
	maxLen int
}

const spreadBits = 1 << 21

func bitOf(a uint32) uint64 { return (uint64(a) * 0x9E3779B97F4A7C15) >> (64 - 21) }

func (s *Spread) index() *spreadIndex {
	ix := &spreadIndex{key: s.Key, mac: s.Key.summer(), bits: make([]uint64, spreadBits/64), byRoll: map[uint32][]ValueHash{}}
	ix.pow = 1
	for i := 0; i < SpreadMin-1; i++ {
		ix.pow *= s.Key.Base
	}
	for _, v := range s.Values {
		if v.Len < SpreadMin || v.Len > SpreadMax {
			continue
		}
		b := bitOf(v.Anchor)
		ix.bits[b/64] |= 1 << (b % 64)
		ix.byRoll[v.Anchor] = append(ix.byRoll[v.Anchor], v)
		ix.maxLen = max(ix.maxLen, v.Len)
	}
	for _, l := range ix.byRoll {
		slices.SortFunc(l, func(a, b ValueHash) int { return a.Len - b.Len })
	}
	return ix
}

// span is one occurrence found: file offset and length.
type span struct {
	off int64
	n   int
}

// spreadChunk is how much of a file is read at a time: memory is this plus
// the longest value, whatever the file's size.
const spreadChunk = 1 << 20

// find streams r and returns where the values occur.
func (ix *spreadIndex) find(r io.Reader) ([]span, error) {
	var out []span
	buf := make([]byte, 0, spreadChunk+ix.maxLen)
	var base int64
	eof := false
	for !eof || len(buf) >= SpreadMin {
		for !eof && len(buf) < cap(buf) {
			n, err := r.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return nil, err
			}
		}
		// Positions whose longest candidate is wholly in buf.
		end := len(buf) - SpreadMin + 1
		if !eof {
			end = len(buf) - ix.maxLen + 1
		}
		next := ix.scan(buf, max(end, 0), base, &out)
		if eof {
			break
		}
		next = min(next, len(buf))
		base += int64(next)
		buf = buf[:copy(buf, buf[next:])]
	}
	return out, nil
}

// scan looks for values starting in buf[:end] and returns where the next
// scan must start.
func (ix *spreadIndex) scan(buf []byte, end int, base int64, out *[]span) int {
	k := ix.key.Base
	i := 0
	fresh := true
	var h uint64
	for i < end {
		if fresh {
			h = 0
			for _, c := range buf[i : i+SpreadMin] {
				h = h*k + uint64(c)
			}
			fresh = false
		}
		if b := bitOf(top(h)); ix.bits[b/64]&(1<<(b%64)) != 0 {
			if n := ix.match(buf[i:], h); n > 0 {
				*out = append(*out, span{off: base + int64(i), n: n})
				i += n
				fresh = true
				continue
			}
		}
		if i+SpreadMin < len(buf) {
			h = (h-uint64(buf[i])*ix.pow)*k + uint64(buf[i+SpreadMin])
		}
		i++
	}
	return i
}

// match returns the length of the longest value starting at b whose
// rolling hash is h, or 0.
func (ix *spreadIndex) match(b []byte, h uint64) int {
	best, n, k := 0, SpreadMin, ix.key.Base
	for _, v := range ix.byRoll[top(h)] {
		if v.Len > len(b) {
			break
		}
		// The hash of b[:v.Len], extended from the anchor's as the
		// candidates grow longer.
		for ; n < v.Len; n++ {
			h = h*k + uint64(b[n])
		}
		if top(h) == v.Full && ix.mac.sum(b[:v.Len]) == v.Sum {
			best = v.Len
		}
	}
	return best
}

// MaskFile masks every occurrence of the run's values in the staged file
// at path and returns how many it masked. A file with none is not
// touched. One with some is first overwritten in place where the values
// are (so the bytes do not outlive this call in the file's blocks), then
// rewritten with the Marker in their place, through a temporary file in
// the same directory renamed over it. Memory: one chunk and the longest
// value, whatever the file's size.
func (s *Spread) MaskFile(path string) (int, error) {
	if len(s.Values) == 0 {
		return 0, nil
	}
	return s.index().maskFile(path)
}

// MaskFiles is MaskFile for many files with one index: path → count for
// the files that had any.
func (s *Spread) MaskFiles(paths []string) (map[string]int, error) {
	out := map[string]int{}
	if len(s.Values) == 0 {
		return out, nil
	}
	ix := s.index()
	for _, p := range paths {
		n, err := ix.maskFile(p)
		if err != nil {
			return out, err
		}
		if n > 0 {
			out[p] = n
		}
	}
	return out, nil
}

func (ix *spreadIndex) maskFile(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("masking values found elsewhere in %s: %w", path, err)
	}
	defer f.Close()
	spans, err := ix.find(f)
	if err != nil || len(spans) == 0 {
		if err != nil {
			err = fmt.Errorf("masking values found elsewhere in %s: %w", path, err)
		}
		return 0, err
	}
	for _, sp := range spans {
		if _, err := f.WriteAt(make([]byte, sp.n), sp.off); err != nil {
			return 0, fmt.Errorf("masking values found elsewhere in %s: %w", path, err)
		}
	}
	if err := rewriteMasked(f, path, spans); err != nil {
		return 0, fmt.Errorf("masking values found elsewhere in %s: %w", path, err)
	}
	return len(spans), nil
}

// rewriteMasked copies f to a temporary file with the Marker in place of
// each span, then renames it over path.
func rewriteMasked(f *os.File, path string, spans []span) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".masking-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var pos int64
	for _, sp := range spans {
		if _, err := io.CopyN(tmp, f, sp.off-pos); err != nil {
			return err
		}
		if _, err := f.Seek(int64(sp.n), io.SeekCurrent); err != nil {
			return err
		}
		if _, err := io.WriteString(tmp, Marker); err != nil {
			return err
		}
		pos = sp.off + int64(sp.n)
	}
	if _, err := io.Copy(tmp, f); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	ok = true
	return nil
}
