package fleet

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRun100Nodes collects 100 simulated nodes (client-go's fake
// clientset, each bundle 8 MiB streamed through the fake exec) with
// --max-parallel 20 and reports the fleet process's peak heap: it must
// stay a few MiB, whatever the bundles' total (800 MiB), because no bundle
// is ever held in memory.
//
//	go test -run '^$' -bench Run100Nodes -benchtime 1x ./features/fleet/
func BenchmarkRun100Nodes(b *testing.B) {
	const nodes, size = 100, 8 << 20
	behaviours := map[string]behaviour{}
	for i := range nodes {
		behaviours[fmt.Sprintf("node-%03d", i)] = healthy
	}
	s := newSim(b, behaviours, size)
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		var peak atomic.Uint64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			var m runtime.MemStats
			for {
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		o := s.options(b.TempDir())
		o.MaxParallel = 20
		o.NodeTimeout = time.Minute
		rep, err := Run(context.Background(), o)
		close(stop)
		<-sampled
		if err != nil || rep.ExitStatus != ExitAllOK || rep.Counts[StatusOK] != nodes {
			b.Fatalf("%v: %v", err, rep.Counts)
		}
		b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		b.ReportMetric(float64(before.HeapInuse)/(1<<20), "heap-before-MiB")
		b.ReportMetric(float64(nodes*size)/(1<<20), "MiB-copied")
	}
}
