package bundle_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/pgzip"
)

// BenchmarkGzipSmall backs bundle.Write's choice of one goroutine below
// 4 MiB: 870 KiB of mount-table text (what --only mounts writes on 2,400
// tasks in 102 namespaces) compressed by pgzip's parallel blocks and by one
// goroutine. Run: go test -run '^$' -bench GzipSmall -benchtime 50x ./bundle
func BenchmarkGzipSmall(b *testing.B) {
	var data bytes.Buffer
	for i := 0; data.Len() < 870<<10; i++ {
		fmt.Fprintf(&data, "%d 25 0:%d / /var/lib/kubelet/pods/%08x-1b2c/volumes/kubernetes.io~secret/token-%d rw,relatime shared:%d - tmpfs tmpfs rw,size=%dk\n",
			1000+i, 40+i%300, i*7919, i, i%97, 4096+i%13)
	}
	for _, mt := range []bool{true, false} {
		b.Run(fmt.Sprintf("multithreaded=%v", mt), func(b *testing.B) {
			var size int
			b.SetBytes(int64(data.Len()))
			for b.Loop() {
				var out bytes.Buffer
				var w io.WriteCloser
				var err error
				if mt {
					w, err = pgzip.NewWriterLevel(&out, pgzip.DefaultCompression)
				} else {
					w, err = gzip.NewWriterLevel(&out, gzip.DefaultCompression)
				}
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(w, bytes.NewReader(data.Bytes())); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				size = out.Len()
			}
			b.ReportMetric(float64(size), "out-bytes")
		})
	}
}
