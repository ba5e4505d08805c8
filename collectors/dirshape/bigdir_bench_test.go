package dirshape_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodesnap/nodesnap/collectors/dirshape"
)

// BenchmarkScanHugeDir reads one directory of 100,000 empty files with the
// old 32 KiB getdents buffer and with the 1 MiB one a big directory now
// gets, side by side in one run (compare the two lines' ns/op).
//
//	go test -run '^$' -bench ScanHugeDir -benchtime 10x ./collectors/dirshape/
func BenchmarkScanHugeDir(b *testing.B) {
	const n = 100_000
	dir := filepath.Join(b.TempDir(), "big")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%07d", i)))
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	for _, size := range []int{32 << 10, 128 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("buffer=%dKiB", size>>10), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: dir, LargeBuffer: size})
				if r.Entries != n || !r.Complete {
					b.Fatalf("%d entries, complete %v", r.Entries, r.Complete)
				}
			}
		})
	}
}
