package objstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/test/s3server"
)

// BenchmarkPut uploads stand-in bundles of 40 and 120 MiB (random bytes,
// the default 16 MiB parts, four in flight) to a SeaweedFS store on
// loopback, with the credentials and endpoint in the SDK's environment as
// collect has them. A 6 GiB bundle takes the same multipart path (384
// parts of 16 MiB).
//
//	go test -run '^$' -bench BenchmarkPut -benchtime 3x ./features/objstore
func BenchmarkPut(b *testing.B) {
	s := s3server.Start(b, bucket)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		b.Setenv(k, v)
	}
	c, err := NewClient(context.Background(), ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, mib := range []int64{40, 120} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			path, _ := standIn(b, mib<<20)
			b.SetBytes(mib << 20)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				loc := Location{Bucket: bucket, Prefix: fmt.Sprintf("bench/%d/", i)}
				if _, err := c.Put(context.Background(), loc, filepath.Base(path), path, PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
