package diff

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodesnap/nodesnap/read/goroutinedump"
)

// FuzzReaders feeds arbitrary bytes to every decoder of a bundle file a
// snapshot reads: none may panic, and what they keep stays bounded.
func FuzzReaders(f *testing.F) {
	for _, p := range []string{"healthy/mounts/mounts.json", "healthy/processes/tasks.json", "healthy/dirshape/shape.json",
		"healthy/kubelet/pods.json", "incident003-cephfs-hung/kubelet/goroutine-debug2.txt", "incident003-cephfs-hung/mountprobe/probes.json"} {
		b, err := os.ReadFile(filepath.Join("..", "analyze", "testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"items":[{"metadata":{"uid":"u"},"state":"SANDBOX_READY"}],"containers":[{"metadata":{"name":"c","attempt":4}}]}`))
	f.Add([]byte("kubernetes_build_info{git_version=\"v1.34.0\"} 1\n"))
	// mounts.json of format 2: the host's namespace names its table.
	f.Add([]byte(`{"format":2,"host_namespace":1,"tables":[{"hash":"a","mounts":[{"mount_id":26,"parent_id":1,"mount_point":"/","fs_type":"ext4"}]}],"namespaces":[{"inode":1,"host":true,"table":"a","mount_ids":[[26,1]],"root_parents":[1]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &Snapshot{HostMounts: map[string]string{}, ForeignDevices: map[string]string{}, Hung: map[string]bool{},
			DState: map[string]string{}, Pods: map[string]Pod{}, Containers: map[string]uint32{},
			Dirs: map[string]uint64{}, Deleting: map[string]uint64{}, Runtimes: map[string]string{}, Seen: map[string]bool{},
			Goroutines: map[string]int{}}
		_ = s.readMounts(bytes.NewReader(b))
		_ = s.readTasks(bytes.NewReader(b))
		_ = s.readProbes(bytes.NewReader(b))
		_ = s.readShape(bytes.NewReader(b))
		_ = s.readKubeletPods(bytes.NewReader(b))
		_ = readCRIPods(bytes.NewReader(b), s.Pods)
		_ = s.readCRIContainers(bytes.NewReader(b))
		_ = s.readRuntimeSummary(bytes.NewReader(b))
		_ = s.readKubeletMetrics(bytes.NewReader(b))
		if _, err := goroutinedump.Count(bytes.NewReader(b), s.Goroutines); err != nil {
			t.Fatalf("goroutinedump.Count on a byte slice: %v", err)
		}
		if len(s.Goroutines) > goroutinedump.MaxFrames+1 {
			t.Fatalf("kept %d frames", len(s.Goroutines))
		}
		for _, n := range []int{len(s.HostMounts), len(s.DState), len(s.Pods), len(s.Containers), len(s.Dirs), len(s.Hung)} {
			if n > maxKept {
				t.Fatalf("kept %d items, over %d", n, maxKept)
			}
		}
	})
}
