package analyze_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
)

func analyzeFacts(t *testing.T, files map[string][]byte) *analyze.Report {
	t.Helper()
	rep, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{Facts: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Facts == nil {
		t.Fatal("Options.Facts set, Report.Facts nil")
	}
	return rep
}

// The device → namespace → process → pod graph of incident 002: the rbd
// device mounted only in node_exporter's namespace, its pod named as the
// findings name it.
func TestFactsHeldDevices(t *testing.T) {
	files := fixture(t, "incident002-rbd-held-in-namespace")
	files["processes/tasks.json"] = bytes.Replace(files["processes/tasks.json"],
		[]byte(`"comm":"node_exporter","state":"S","start_ticks":1000,`),
		[]byte(`"comm":"node_exporter","state":"S","start_ticks":1000,"pod_uid":"0f0e0d0c-1111-2222-3333-444455556666","container_id":"abcdef0123456789abcdef",`), 1)
	files["kubelet/pods.json"] = []byte(`{"kind":"PodList","items":[{"metadata":{"uid":"0f0e0d0c-1111-2222-3333-444455556666","name":"node-exporter-x7k2p","namespace":"monitoring"},
		"status":{"phase":"Running","containerStatuses":[{"name":"node-exporter","containerID":"containerd://abcdef0123456789abcdef"}]}}]}`)
	rep := analyzeFacts(t, files)
	hd := rep.Facts.HeldDevices
	if len(hd) != 1 {
		t.Fatalf("held devices: %+v, want /dev/rbd3 alone", hd)
	}
	d := hd[0]
	if d.Name != "/dev/rbd3" || !d.OnlyOutsideHostNamespace || d.Image == "" || len(d.KernelThreads) == 0 {
		t.Errorf("device: %+v", d)
	}
	if len(d.Namespaces) != 1 || d.Namespaces[0].Host || d.Namespaces[0].Inode != 4026532601 || len(d.Namespaces[0].MountPoints) != 1 {
		t.Fatalf("namespaces: %+v", d.Namespaces)
	}
	h := d.Namespaces[0].Holders
	const pod = "in pod monitoring/node-exporter-x7k2p, container node-exporter"
	if len(h) != 1 || h[0].PID != 21839 || h[0].Comm != "node_exporter" || h[0].Pod != pod {
		t.Errorf("holders: %+v, want node_exporter[21839] %s", h, pod)
	}
	// The findings name the same process the same way.
	found := false
	for _, f := range rep.Findings {
		for _, e := range f.Evidence {
			found = found || bytes.Contains([]byte(e.What+f.Summary+f.Explanation), []byte(pod))
		}
		found = found || bytes.Contains([]byte(f.Summary+f.Explanation), []byte(pod))
	}
	if !found {
		t.Errorf("no finding names %q: the graph and the findings disagree", pod)
	}
}

func TestFactsShapeAndGoroutines(t *testing.T) {
	rep := analyzeFacts(t, fixture(t, "incident003-cephfs-hung"))
	g := rep.Facts.KubeletGoroutines
	if g == nil || g.Total != 3 || g.ByFrame["k8s.io/kubernetes/pkg/kubelet.(*Kubelet).getPodVolumePathListFromDisk"] != 1 {
		t.Errorf("kubelet goroutines: %+v", g)
	}
	if len(rep.Facts.HeldDevices) != 0 {
		t.Errorf("held devices in a bundle without any: %+v", rep.Facts.HeldDevices)
	}
	rep = analyzeFacts(t, fixture(t, "incident001-huge-volume"))
	if s := rep.Facts.DirShape; s == nil || len(s.Roots) == 0 || len(s.Roots[0].Largest) == 0 || s.Roots[0].Largest[0].Subdirs != 5_000_000 {
		t.Errorf("dirshape: %+v", s)
	}
	// A disk the host mounts and uses is not a held device.
	if rep := analyzeFacts(t, fixture(t, "healthy")); len(rep.Facts.HeldDevices) != 0 {
		t.Errorf("healthy node: held devices %+v", rep.Facts.HeldDevices)
	}
}

// Without Options.Facts, the report (and analyze --json) is unchanged.
func TestNoFactsUnlessAsked(t *testing.T) {
	if rep := analyzeFixture(t, "incident002-rbd-held-in-namespace"); rep.Facts != nil {
		t.Errorf("Facts set without Options.Facts: %+v", rep.Facts)
	}
}
