package bundle

import (
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/klauspost/pgzip"
)

// A bundle is a tar archive compressed with gzip or zstd: archive/tar over
// klauspost/compress (and pgzip for large gzip bundles). Nothing more
// general is linked, so a reader of bundles (analyze) links no other
// archive or compression format, nor what those bring (net/http).

// Compression formats.
const (
	Gzip = "tar.gz"
	Zstd = "tar.zst"
)

// Format checks a compression name ("" is Gzip) and returns it as one of
// Gzip or Zstd.
func Format(name string) (string, error) {
	switch name {
	case Gzip, "":
		return Gzip, nil
	case Zstd:
		return Zstd, nil
	}
	return "", fmt.Errorf("unknown bundle format %q (want %s or %s)", name, Gzip, Zstd)
}

// newCompressor compresses to w in format (as returned by Format);
// parallel compresses gzip in blocks on several goroutines.
func newCompressor(w io.Writer, format string, parallel bool) (io.WriteCloser, error) {
	switch {
	case format == Zstd:
		return zstd.NewWriter(w)
	case parallel:
		return pgzip.NewWriterLevel(w, pgzip.DefaultCompression)
	}
	return gzip.NewWriterLevel(w, gzip.DefaultCompression)
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// newDecompressor recognises the compression by its magic number. Gzip is
// read on one goroutine: the parallel reader reads ahead into large
// buffers per stream, which untrusted input should not get to size.
func newDecompressor(magic []byte, r io.Reader) (io.ReadCloser, error) {
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		return gzip.NewReader(r)
	case len(magic) >= 4 && bytes.Equal(magic[:4], zstdMagic):
		d, err := zstd.NewReader(r)
		if err != nil {
			return nil, err
		}
		return zstdCloser{d}, nil
	}
	return nil, fmt.Errorf("%w: not a gzip or zstd compressed tar archive", ErrUnsafe)
}

type zstdCloser struct{ *zstd.Decoder }

func (z zstdCloser) Close() error {
	z.Decoder.Close()
	return nil
}
