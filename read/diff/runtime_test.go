package diff_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/read/diff"
)

// runtimeFiles are what the runtime and kubelet collectors write, in
// their formats (CRI answers in the protobuf JSON mapping, the kubelet's
// Prometheus text): a pod without the kubelet's pod list, one container
// at restart attempt attempt, the versions given.
func runtimeFiles(attempt int, containerd, kubelet, sandbox string) map[string][]byte {
	files := map[string][]byte{
		"runtime/summary.json": fmt.Appendf(nil, `{"runtimes":[{"name":"containerd","present":true,"socket":"/run/containerd/containerd.sock",`+
			`"socket_found":true,"cri_runtime_name":"containerd","cri_runtime_version":%q,"cri_api_version":"v1"}]}`, containerd),
		"runtime/containerd/cri-pods.json": fmt.Appendf(nil, `{"items":[{"id":"sb1","metadata":{"name":"web-0","uid":"u-1","namespace":"shop","attempt":0},`+
			`"state":%q,"createdAt":"1763716694000000000"}]}`, sandbox),
		"runtime/containerd/cri-containers.json": fmt.Appendf(nil, `{"containers":[{"id":"c%d","podSandboxId":"sb1","metadata":{"name":"app","attempt":%d},`+
			`"state":"CONTAINER_RUNNING","labels":{"io.kubernetes.pod.name":"web-0","io.kubernetes.pod.namespace":"shop","io.kubernetes.pod.uid":"u-1"}}]}`, attempt, attempt),
		"kubelet/metrics.txt": fmt.Appendf(nil, "# HELP kubernetes_build_info [ALPHA] A metric with a constant '1' value\n"+
			`kubernetes_build_info{build_date="2026-10-01T00:00:00Z",compiler="gc",git_commit="abc",git_tree_state="clean",git_version=%q,go_version="go1.25",major="1",minor="34",platform="linux/amd64"} 1`+"\n", kubelet),
	}
	return files
}

func TestRuntimeContainersAndVersions(t *testing.T) {
	day := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	a := makeBundle(t, runtimeFiles(0, "v1.7.24", "v1.34.0", "SANDBOX_READY"), bundleOpts{at: day})
	b := makeBundle(t, runtimeFiles(3, "v2.1.4", "v1.34.1", "SANDBOX_NOTREADY"), bundleOpts{at: day.Add(time.Hour)})
	d := diff.Compare(load(t, a), load(t, b))
	wantHas(t, "restarts", d.ContainerRestart, diff.CountChange{Name: "shop/web-0/app", Old: 0, New: 3})
	wantHas(t, "versions", d.Versions, diff.ValueChange{Name: "kubelet", Old: "v1.34.0", New: "v1.34.1"})
	wantHas(t, "versions", d.Versions, diff.ValueChange{Name: "containerd", Old: "containerd v1.7.24", New: "containerd v2.1.4"})
	// Without the kubelet's list, the runtime's sandbox stands for the pod.
	wantHas(t, "pod phases", d.PodPhaseChanges, diff.ValueChange{Name: "shop/web-0", Old: "SANDBOX_READY", New: "SANDBOX_NOTREADY"})
	if d.Worse {
		t.Error("a restart is not a finding")
	}
}

// dirshape: .deleting~ leftovers appear (incident 000), a directory
// grows past ext4's link limit (incident 001).
func TestDirshapeGrowth(t *testing.T) {
	d := pair(t, "healthy", "incident000-deleting-leftovers")
	var grew []string
	for _, c := range d.DeletingChange {
		if c.New > c.Old {
			grew = append(grew, c.Name)
		}
	}
	if len(grew) != 1 || grew[0] != "/var/lib/kubelet/pods" {
		t.Errorf(".deleting~ changes %+v: want /var/lib/kubelet/pods to grow", d.DeletingChange)
	}
	wantHas(t, "new findings", refs(d.FindingsNew), "warning volume-dir-deleting-leftovers /var/lib/kubelet/pods/612f2e76-3ce1-11e8-b2c9-0cc47ae2b22c/volumes/transwarp.io~tosdisk")
	d = pair(t, "healthy", "incident001-huge-volume")
	var big bool
	for _, c := range d.DirGrowth {
		if c.New >= 65000 && c.Old < c.New {
			big = true
		}
	}
	if !big {
		t.Errorf("directory growth %+v: no directory past 65,000 entries", d.DirGrowth)
	}
	if !d.Worse || !strings.Contains(strings.Join(refs(d.FindingsNew), "\n"), "critical ext4-nlink-overflow") {
		t.Errorf("incident 001 is worse: %v", refs(d.FindingsNew))
	}
}

// A kubelet that piles goroutines on one frame says where; a dump that
// moves by a few does not count.
func TestKubeletGoroutines(t *testing.T) {
	dump := func(stuck, idle int) []byte {
		var b strings.Builder
		for i := range stuck {
			fmt.Fprintf(&b, "goroutine %d [syscall, 12 minutes]:\nsyscall.Syscall6(0x106)\n\t/x/asm.s:43 +0x5\n"+
				"k8s.io/kubernetes/pkg/kubelet.(*Kubelet).getPodVolumePathListFromDisk(0xc000a2c000, {0xc000c4e3f0, 0x24})\n\t/x/kubelet_getters.go:393 +0x2a5\n\n", 100+i)
		}
		for i := range idle {
			fmt.Fprintf(&b, "goroutine %d [select]:\nk8s.io/client-go/tools/cache.(*Reflector).watch(0xc0)\n\t/x/reflector.go:1 +0x1\n\n", 10000+i)
		}
		return []byte(b.String())
	}
	build := func(stuck, idle int) *diff.Snapshot {
		files := fixture(t, "healthy")
		files["kubelet/goroutine-debug2.txt"] = dump(stuck, idle)
		return load(t, makeBundle(t, files, bundleOpts{}))
	}
	quiet := diff.Compare(build(0, 40), build(0, 44))
	if len(quiet.Goroutines) != 0 {
		t.Errorf("a few more idle goroutines reported: %+v", quiet.Goroutines)
	}
	d := diff.Compare(build(0, 40), build(300, 41))
	wantHas(t, "goroutines", d.Goroutines, diff.CountChange{Name: "k8s.io/kubernetes/pkg/kubelet.(*Kubelet).getPodVolumePathListFromDisk", Old: 0, New: 300})
	wantHas(t, "goroutines", d.Goroutines, diff.CountChange{Name: "(all)", Old: 40, New: 341})
	if len(d.Goroutines) != 2 {
		t.Errorf("goroutines %+v: want the stuck frame and the total only", d.Goroutines)
	}
}
