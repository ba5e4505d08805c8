package journalfile

import (
	"bytes"
	"encoding/binary"

	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz"
)

// decompressLZ4 decodes journald's LZ4 payload: the uncompressed size as a
// little-endian u64, then one LZ4 block.
func decompressLZ4(p []byte, limit int) ([]byte, error) {
	if len(p) < 8 {
		return nil, corruptf("LZ4 payload of %d bytes has no size", len(p))
	}
	n := binary.LittleEndian.Uint64(p)
	if n > uint64(limit) {
		return nil, corruptf("LZ4 payload claims %d bytes, over the %d limit", n, limit)
	}
	out := make([]byte, n)
	m, err := lz4.UncompressBlock(p[8:], out)
	if err != nil {
		return nil, fmt.Errorf("%w: LZ4 payload: %w", ErrCorrupt, err)
	}
	if uint64(m) != n {
		return nil, corruptf("LZ4 payload gave %d bytes, claims %d", m, n)
	}
	return out, nil
}

var (
	zstdOnce sync.Once
	zstdDec  *zstd.Decoder
	zstdErr  error
)

// decompressZSTD decodes one zstd frame, bounded by limit.
func decompressZSTD(p []byte, limit int) ([]byte, error) {
	zstdOnce.Do(func() {
		zstdDec, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderMaxWindow(uint64(limit)))
	})
	if zstdErr != nil {
		return nil, fmt.Errorf("starting the zstd decoder: %w", zstdErr)
	}
	out, err := zstdDec.DecodeAll(p, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: zstd payload: %w", ErrCorrupt, err)
	}
	if len(out) > limit {
		return nil, corruptf("zstd payload of %d bytes is over the %d limit", len(out), limit)
	}
	return out, nil
}

// decompressXZ decodes an xz stream, bounded by limit.
func decompressXZ(p []byte, limit int) ([]byte, error) {
	// The decoder allocates the dictionary the stream asks for (up to
	// 4 GiB): refuse a stream whose first block asks for more than a
	// journald would use.
	if d, ok := xzDictSize(p); !ok || d > maxXZDict {
		return nil, corruptf("XZ payload without a usable LZMA2 block header (dictionary %d bytes)", d)
	}
	r, err := xz.ReaderConfig{SingleStream: true}.NewReader(bytes.NewReader(p))
	if err != nil {
		return nil, fmt.Errorf("%w: XZ payload: %w", ErrCorrupt, err)
	}
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: XZ payload: %w", ErrCorrupt, err)
	}
	if n > int64(limit) {
		return nil, corruptf("XZ payload is over the %d limit", limit)
	}
	return out.Bytes(), nil
}

// maxXZDict bounds the dictionary of an XZ payload: journald compresses
// with liblzma's default preset (8 MiB).
const maxXZDict = 64 << 20

// xzDictSize reads the LZMA2 dictionary size from the first block header
// of an xz stream: stream header (12 bytes), then the block header's size
// and flags, optional sizes, and the filter flags.
func xzDictSize(p []byte) (uint64, bool) {
	if len(p) < 12+2 || string(p[:6]) != "\xfd7zXZ\x00" {
		return 0, false
	}
	h := p[12:]
	hsize := (int(h[0]) + 1) * 4
	if h[0] == 0 || hsize > len(h) {
		return 0, false
	}
	h = h[:hsize]
	flags := h[1]
	pos := 2
	vli := func() (uint64, bool) {
		var v uint64
		for i := 0; i < 9 && pos < len(h); i++ {
			b := h[pos]
			pos++
			v |= uint64(b&0x7f) << (7 * i)
			if b&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	for _, bit := range []byte{0x40, 0x80} {
		if flags&bit != 0 {
			if _, ok := vli(); !ok {
				return 0, false
			}
		}
	}
	for i := 0; i <= int(flags&3); i++ {
		id, ok1 := vli()
		n, ok2 := vli()
		if !ok1 || !ok2 || n > uint64(len(h)-pos) {
			return 0, false
		}
		props := h[pos : pos+int(n)]
		pos += int(n)
		if id == 0x21 {
			if len(props) != 1 || props[0] > 40 {
				return 0, false
			}
			d := props[0]
			if d == 40 {
				return 1<<32 - 1, true
			}
			return uint64(2|d&1) << (d/2 + 11), true
		}
	}
	return 0, false
}
