package bundle_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/nodesnap/nodesnap/bundle"
)

// BenchmarkWalkEmptyEntries walks an archive of 1,000,000 empty entries
// (issue 43) with bundle.WalkReader and, in the same run, with a bare
// gzip + archive/tar loop, the floor: WalkReader's own cost per entry is
// the difference of the two lines (ns/op, B/op).
//
//	go test -run '^$' -bench WalkEmptyEntries -benchtime 3x -benchmem ./bundle
func BenchmarkWalkEmptyEntries(b *testing.B) {
	const n = 1_000_000
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	manifest := []byte("{}")
	if err := tw.WriteHeader(&tar.Header{Name: "b/manifest.json", Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(manifest))}); err != nil {
		b.Fatal(err)
	}
	if _, err := tw.Write(manifest); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("b/junk/%07d", i), Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.Run("floor=tar", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			tr := tar.NewReader(zr)
			got := 0
			for {
				_, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, tr); err != nil {
					b.Fatal(err)
				}
				got++
			}
			if got != n+1 {
				b.Fatalf("%d entries", got)
			}
		}
	})
	b.Run("WalkReader", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			got := 0
			err := bundle.WalkReader(context.Background(), bytes.NewReader(data), bundle.DefaultLimits, func(e bundle.Entry) error {
				got++
				return nil
			})
			if err != nil || got != n+1 {
				b.Fatalf("%d entries: %v", got, err)
			}
		}
	})
}
