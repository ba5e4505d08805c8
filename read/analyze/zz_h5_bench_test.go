package analyze

import (
	"bytes"
	"os"
	"testing"
)

func BenchmarkH5Journal(b *testing.B) {
	data, err := os.ReadFile(os.Getenv("H5_JOURNAL"))
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := newLogIndex()
		if err := x.scanLog("journal/kubelet.log", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
