package diff_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/procfs"
	"github.com/nodesnap/nodesnap/read/diff"
)

// largeBundle is a node with 200 mount namespaces of 1,000 mounts each
// and 100,000 tasks (200 in D state): the files a diff streams.
func largeBundle(b *testing.B) (string, int64) {
	b.Helper()
	files := fixture(b, "healthy")
	rep := layout.MountsReport{HostNamespace: 1000}
	for ns := range 200 {
		n := layout.MountNamespace{Inode: uint64(1000 + ns), Host: ns == 0}
		for i := range 1000 {
			n.Mounts = append(n.Mounts, layout.NamespaceMount{Mount: procfs.Mount{ID: i, MountPoint: fmt.Sprintf("/var/lib/kubelet/pods/%08d/volumes/v%d", ns, i), FSType: "ext4", Source: "/dev/vda1"}})
		}
		rep.Namespaces = append(rep.Namespaces, n)
	}
	mj, err := json.Marshal(rep)
	if err != nil {
		b.Fatal(err)
	}
	var tasks []layout.Task
	for i := range 100_000 {
		st := "S"
		if i%500 == 0 {
			st = "D"
		}
		tasks = append(tasks, layout.Task{PID: i + 1, TID: i + 1, Comm: "worker", State: st, Wchan: "futex_wait_queue", Cmdline: []string{"/usr/bin/worker", "--flag"}})
	}
	tj, err := json.Marshal(tasks)
	if err != nil {
		b.Fatal(err)
	}
	files["mounts/mounts.json"], files["processes/tasks.json"] = mj, tj
	return makeBundle(b, files, bundleOpts{}), int64(len(mj) + len(tj))
}

// go test -run '^$' -bench LoadLarge -benchtime 3x ./read/diff
func BenchmarkLoadLarge(b *testing.B) {
	p, size := largeBundle(b)
	runtime.GC()
	// The heap's peak while loading, sampled every millisecond.
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	b.ResetTimer()
	var s *diff.Snapshot
	for b.Loop() {
		var err error
		if s, err = diff.Load(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	close(stop)
	<-done
	if len(s.HostMounts) != 1000 || len(s.DState) != 200 {
		b.Fatalf("kept %d host mounts, %d D-state tasks", len(s.HostMounts), len(s.DState))
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(size)/(1<<20), "MiB-json")
	b.ReportMetric(float64(after.HeapInuse)/(1<<20), "MiB-heap-after")
	b.ReportMetric(float64(peak.Load())/(1<<20), "MiB-heap-peak")
}
