package signatures

import (
	"fmt"
	"testing"
)

// BenchmarkMatchIDs: lines per second through the matcher, on a log of
// ordinary kubelet lines with one in a hundred of the catalogue's.
func BenchmarkMatchIDs(b *testing.B) {
	var lines [][]byte
	for i := 0; i < 1000; i++ {
		l := fmt.Sprintf(`I0102 03:04:05.678901    1234 kubelet.go:2440] "SyncLoop (PLEG): event for pod" pod="ns/web-%d" event={"ID":"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d","Type":"ContainerStarted","Data":"3f9a8b7c6d5e4f3a"}`, i)
		if i%100 == 0 {
			l = Classes[i/100%len(Classes)].Example
			if l == "" {
				l = `E0102 03:04:05.678901    1234 nestedpendingoperations.go:348] UnmountVolume.TearDown failed for volume "pvc-1" : unlinkat /var/lib/kubelet/pods/x/volumes/y: device or resource busy`
			}
		}
		lines = append(lines, []byte(l))
	}
	var buf [4]*Class
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		n += len(MatchIDs(buf[:0], lines[i%len(lines)]))
	}
	b.ReportMetric(float64(n)/float64(b.N), "matches/line")
}
