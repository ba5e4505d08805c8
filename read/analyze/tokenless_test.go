package analyze_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Incident 003 collected without the kubelet's goroutine dump (no token,
// or a least-privilege one without the pprof opt-in): the incident003
// fixture without its kubelet/ files, and the pod lists a token-less run
// may still hold. Whether a kubelet thread blocked in the hung mount is
// the housekeeping that stops every new pod follows from the pod UID of
// the mount's path: no pod list knows it (a deleted pod's directory), a
// pod list knows it (a live pod's own volume work), or the bundle has no
// pod list (unknown).
func TestIncident003WithoutGoroutineDump(t *testing.T) {
	const orphan = "8a4b6c2d-1e3f-4a5b-9c7d-0e1f2a3b4c5d" // the fixture's hung volume
	const other = "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f"
	kubeletPods := func(uids ...string) []byte {
		var items []string
		for i, u := range uids {
			items = append(items, fmt.Sprintf(`{"metadata":{"name":"web-%d","namespace":"default","uid":%q},"spec":{"nodeName":"node7"},"status":{"phase":"Running"}}`, i, u))
		}
		return []byte(`{"kind":"PodList","apiVersion":"v1","items":[` + strings.Join(items, ",") + `]}`)
	}
	criPods := []byte(`{"items":[{"id":"4f1e","metadata":{"name":"web-7d9f8-abcde","uid":"` + other + `","namespace":"default","attempt":0},"state":"SANDBOX_READY","createdAt":"1775319000000000000"}]}`)
	cluster := func(t *testing.T, missingPods bool) []byte {
		v := fixture(t, "cluster")["003-v1.24.json"]
		if !missingPods {
			return v
		}
		var o map[string]any
		if err := json.Unmarshal(v, &o); err != nil {
			t.Fatal(err)
		}
		o["pods"] = []any{}
		o["missing"] = []string{"the pods bound to node7: pods is forbidden: User \"system:serviceaccount:kube-system:nodesnap\" cannot list resource \"pods\" (403)"}
		b, _ := json.Marshal(o)
		return b
	}
	// A kubelet 1.16 orphan cleanup line (kubelet_volumes.go), as the
	// kubelet writes it while it still gets that far.
	orphanLog := `Apr 04 16:26:40 node7 kubelet[4130850]: E0404 16:26:40.512301 4130850 kubelet_volumes.go:154] orphaned pod "` + orphan + `" found, but volume paths are still present on disk : There were a total of 1 errors similar to this. Turn up verbosity to see them.` + "\n"

	type want int
	const (
		housekeeping want = iota // the sync loop, every Pending pod chained
		livePod                  // the pod's own volume work
		unknown                  // no pod list: said unknown
	)
	cases := []struct {
		name  string
		add   func(t *testing.T, files map[string][]byte)
		want  want
		words []string
		// group: the subject of one finding that groups other mounts.
		group string
	}{
		{"no pod list", func(*testing.T, map[string][]byte) {}, unknown,
			[]string{"Whether that pod still exists is unknown", "no kubelet /pods, no container runtime sandboxes, no API view"}, ""},
		{"the kubelet's pod list lacks the pod", func(_ *testing.T, f map[string][]byte) { f[layout.KubeletPodsPath] = kubeletPods(other) }, housekeeping,
			[]string{"which no pod list of this bundle knows (the kubelet's pod list)"}, ""},
		{"the kubelet's pod list has the pod", func(_ *testing.T, f map[string][]byte) { f[layout.KubeletPodsPath] = kubeletPods(other, orphan) }, livePod,
			[]string{"default/web-1 (" + orphan + "), which the kubelet's pod list still lists"}, ""},
		{"the runtime's sandboxes lack the pod", func(_ *testing.T, f map[string][]byte) { f["runtime/containerd/"+layout.CRIPodsFile] = criPods }, housekeeping,
			[]string{"(the container runtime's pod sandboxes)"}, ""},
		{"the kubelet's log calls it orphaned", func(_ *testing.T, f map[string][]byte) {
			f["journal/kubelet.log"] = append([]byte(orphanLog), f["journal/kubelet.log"]...)
		}, housekeeping, []string{"the kubelet's own log, which calls it an orphaned pod"}, ""},
		{"the API's pods of the node lack it", func(t *testing.T, f map[string][]byte) { f[layout.ClusterObjectsPath] = cluster(t, false) }, housekeeping,
			[]string{"(the API's pods of this node)"}, ""},
		{"the API refused the pods", func(t *testing.T, f map[string][]byte) { f[layout.ClusterObjectsPath] = cluster(t, true) }, unknown,
			[]string{"Whether that pod still exists is unknown"}, ""},
		{"200 other hung ceph mounts in an agent's namespace", func(t *testing.T, f map[string][]byte) {
			f[layout.KubeletPodsPath] = kubeletPods(other)
			f["mountprobe/probes.json"] = withAgentMounts(t, f["mountprobe/probes.json"], 200)
		}, housekeeping, []string{"which no pod list of this bundle knows"}, "200 ceph mounts in the mount namespace 4026532999"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := fixture(t, "incident003-cephfs-hung")
			for name := range files {
				if strings.HasPrefix(name, "kubelet/") {
					delete(files, name)
				}
			}
			tc.add(t, files)
			r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var f *analyze.Finding
			for i := range r.Findings {
				if r.Findings[i].ID == "hung-mount" && strings.Contains(r.Findings[i].Summary, orphan) {
					f = &r.Findings[i]
				}
			}
			if f == nil {
				t.Fatalf("no hung-mount finding names the pod %s\n%s", orphan, dump(r))
			}
			if r.Findings[0].Summary != f.Summary {
				t.Errorf("first finding %s %q, want the hung mount the kubelet waits in\n%s", r.Findings[0].ID, r.Findings[0].Summary, dump(r))
			}
			if tc.group != "" {
				grouped := false
				for _, g := range r.Findings {
					grouped = grouped || strings.HasPrefix(g.Subject, tc.group)
				}
				if !grouped {
					t.Errorf("no finding groups %q\n%s", tc.group, dump(r))
				}
			}
			text := f.Summary + "\n" + f.Explanation
			wantIn(t, "hung-mount finding", text, append([]string{"kubelet thread 4130911 (state D, wchan ceph_mdsc_do_request, in a stat)", "goroutine dump would confirm"}, tc.words...)...)
			switch tc.want {
			case housekeeping:
				wantIn(t, "hung-mount finding", text, "the kubelet's housekeeping is stuck on it (inferred from a kubelet thread's kernel stack and the orphaned pod "+orphan+")",
					"HandlePodCleanups → cleanupOrphanedPodDirs", "This is inferred from the kernel stack and the pod UID")
				if f.Impact != analyze.ImpactSyncLoop {
					t.Errorf("impact %q, want %q", f.Impact, analyze.ImpactSyncLoop)
				}
			default:
				if f.Impact == analyze.ImpactSyncLoop || strings.Contains(text, "cleanupOrphanedPodDirs") || strings.Contains(text, "housekeeping is stuck") {
					t.Errorf("named as the housekeeping that stops the sync loop (impact %q) without a pod list that lacks the pod:\n%s", f.Impact, text)
				}
			}
			// The API's Pending pod: chained to the housekeeping when it
			// is established, and only then.
			if !r.ClusterView {
				return
			}
			p, ok := r.PodByName("shop", "db-0")
			if !ok {
				if tc.want == housekeeping {
					t.Errorf("the API's Pending pod db-0 is not in the report")
				}
				return
			}
			chained := false
			for _, l := range p.Chain {
				if l.Finding == "hung-mount" && strings.Contains(l.Summary, orphan) {
					chained = true
					if !strings.Contains(l.How, "the kubelet's sync loop that starts pods is blocked") {
						t.Errorf("db-0's link says %q", l.How)
					}
				}
			}
			if chained != (tc.want == housekeeping) {
				t.Errorf("Pending pod db-0 chained to the hung mount: %v, want %v; chain %+v", chained, tc.want == housekeeping, p.Chain)
			}
		})
	}
}

// withAgentMounts adds n hung ceph mounts of one other filesystem to a
// probes.json, present only in an agent's own mount namespace (a
// monitoring agent that mounted the host's volumes with private
// propagation): hung like the kubelet's, but not in the kubelet's
// namespace, so no kubelet thread can be waiting in them.
func withAgentMounts(t *testing.T, probes []byte, n int) []byte {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal(probes, &o); err != nil {
		t.Fatal(err)
	}
	list := o["probes"].([]any)
	for i := 0; i < n; i++ {
		mp := fmt.Sprintf("/host/var/lib/ceph-agent/vol-%03d", i)
		list = append(list, map[string]any{
			"mountpoint": mp, "probe_path": "/proc/7001/root" + mp, "namespaces": []uint64{4026532999}, "probe_namespace": 4026532999,
			"mount_id": 2000 + i, "fstype": "ceph", "source": fmt.Sprintf("10.0.9.1:6789:/volumes/agent/%03d", i), "dev": fmt.Sprintf("0:%d", 300+i),
			"root": "/", "class": "network", "result": "hung", "probed": true, "latency_ms": 3000, "diagnosis": "stat/statfs did not answer within 3s",
		})
	}
	o["probes"] = list
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
