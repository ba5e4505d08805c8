package goroutinedump

import (
	"bytes"
	"testing"
)

// FuzzCount: any bytes are counted without error or panic, within the
// bound on distinct frames.
func FuzzCount(f *testing.F) {
	f.Add([]byte("goroutine 1 [running]:\nfoo.io/x.F(0x1)\n\t/x:1\n\n"))
	f.Add([]byte("goroutine 1 [running]:\ngoroutine 2 [x]:\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]int{}
		n, err := Count(bytes.NewReader(b), got)
		if err != nil {
			t.Fatalf("Count on a byte slice: %v", err)
		}
		sum := 0
		for _, v := range got {
			sum += v
		}
		if sum != n || len(got) > MaxFrames+1 {
			t.Fatalf("counted %d, by frame %d over %d frames", n, sum, len(got))
		}
	})
}
