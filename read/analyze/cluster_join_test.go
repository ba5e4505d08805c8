package analyze_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// withCluster is an incident fixture with the API's view of its node
// (testdata/cluster/<view>.json) as cluster/objects.json.
func withCluster(t *testing.T, incident, view string) *analyze.Report {
	t.Helper()
	files := fixture(t, incident)
	b, err := os.ReadFile(filepath.Join("testdata", "cluster", view+".json"))
	if err != nil {
		t.Fatal(err)
	}
	files[layout.ClusterObjectsPath] = b
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.ClusterView {
		t.Fatal("the report does not say it had the cluster view")
	}
	return r
}

func pod(t *testing.T, r *analyze.Report, ns, name string) *analyze.PodReport {
	t.Helper()
	p, ok := r.PodByName(ns, name)
	if !ok {
		t.Fatalf("no pod %s/%s in the report:\n%s", ns, name, dump(r))
	}
	return p
}

func chainIDs(p *analyze.PodReport) []string {
	var out []string
	for _, l := range p.Chain {
		out = append(out, l.Finding)
	}
	return out
}

// Each incident's stuck pod, in the API shapes of three minor versions,
// is explained by the node finding that causes it, and that finding
// names the pod and how it hurts it.
func TestClusterJoinExplainsStuckPods(t *testing.T) {
	tests := []struct {
		incident, view, ns, name string
		symptom                  string
		cause                    string // the finding first in the pod's chain
		how                      string
	}{
		{"incident003-cephfs-hung", "003-v1.24", "shop", "db-0", "Pending for 40m", "hung-mount", "cannot start: the kubelet's sync loop"},
		{"incident002-rbd-held-in-namespace", "002-v1.29", "billing", "mysql-0", "stuck Terminating for 2h", "mount-held-in-foreign-namespace", "cannot finish terminating"},
		{"incident004-csi-published-lost", "004-v1.34", "default", "hello-xxxxxx", "stuck Terminating for 3h", "csi-published-state-lost", "cannot finish terminating"},
	}
	for _, tt := range tests {
		t.Run(tt.view, func(t *testing.T) {
			r := withCluster(t, tt.incident, tt.view)
			p := pod(t, r, tt.ns, tt.name)
			if !strings.HasPrefix(p.Symptom, tt.symptom) {
				t.Errorf("symptom %q, want %q…", p.Symptom, tt.symptom)
			}
			if !p.Explained || len(p.Chain) == 0 || p.Chain[0].Finding != tt.cause {
				t.Fatalf("chain %v (explained %v), want %s first\n%s", chainIDs(p), p.Explained, tt.cause, dump(r))
			}
			if !strings.Contains(p.Chain[0].How, tt.how) || len(p.Chain[0].Evidence) == 0 || len(p.Chain[0].Fix) == 0 {
				t.Errorf("link %+v: want how %q, evidence and a fix", p.Chain[0], tt.how)
			}
			// The finding names the pod too.
			f := r.Findings[p.Chain[0].Index-1]
			named := false
			for _, pi := range f.Pods {
				named = named || pi.Name == tt.name && pi.Namespace == tt.ns
			}
			if !named {
				t.Errorf("finding %s does not name pod %s/%s: %+v", f.ID, tt.ns, tt.name, f.Pods)
			}
			for _, id := range ids(r) {
				if id == "pods-in-trouble-unexplained" {
					t.Errorf("the stuck pod is explained, yet: %s", dump(r))
				}
			}
		})
	}
}

// The kubelet's stuck mount (incident 003) hurts every pod the kubelet
// should start: it is ranked first.
func TestClusterJoinRanksSyncLoopFirst(t *testing.T) {
	r := withCluster(t, "incident003-cephfs-hung", "003-v1.24")
	if len(r.Findings) == 0 || r.Findings[0].Impact != analyze.ImpactSyncLoop {
		t.Fatalf("first finding %v, want the kubelet's sync loop\n%s", ids(r), dump(r))
	}
	web := pod(t, r, "shop", "web-7d9f8-abcde")
	if web.Symptom != "" || web.Explained || len(web.Chain) != 0 || len(web.Checked) == 0 {
		t.Errorf("a running pod: %+v", web)
	}
}

// Incident 004's API view also has an attachment of a volume the node has
// no trace of, and no pod here uses.
func TestClusterJoinAttachmentMismatch(t *testing.T) {
	r := withCluster(t, "incident004-csi-published-lost", "004-v1.34")
	fs := findings(r, "volume-attached-not-on-node")
	if len(fs) != 1 || fs[0].Subject != "pvc-0d1e2f3a-4b5c-4d6e-8f7a-9b0c1d2e3f4a" {
		t.Fatalf("attached-not-on-node: %+v\n%s", fs, dump(r))
	}
	// The attached volume the pod uses is mounted: no finding for it.
	for _, f := range findings(r, "volume-on-node-not-attached") {
		t.Errorf("unexpected: %s", f.Summary)
	}
}

// The reverse: a CSI volume mounted on the node for a pod, its driver
// attaching, and no attachment of this node in the API.
func TestClusterJoinMountedNotAttached(t *testing.T) {
	files := fixture(t, "incident004-csi-published-lost")
	var o layout.ClusterObjects
	b, _ := os.ReadFile(filepath.Join("testdata", "cluster", "004-v1.34.json"))
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	o.VolumeAttachments = o.VolumeAttachments[1:] // the pod's volume's attachment is gone
	files[layout.ClusterObjectsPath], _ = json.Marshal(o)
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := findings(r, "volume-on-node-not-attached")
	if len(fs) != 1 || fs[0].Subject != "pvc-ea3178bf-fc12-432c-a01b-8389b04c508e" || !strings.Contains(fs[0].Summary, "default/hello-xxxxxx") {
		t.Fatalf("mounted-not-attached: %+v\n%s", fs, dump(r))
	}
}

// A pod stuck with nothing on the node about it is said unexplained, with
// what is missing; a healthy pod has nothing wrong and says what was
// checked.
func TestClusterJoinUnexplainedAndHealthy(t *testing.T) {
	r := withCluster(t, "healthy", "healthy-v1.31")
	batch := pod(t, r, "jobs", "batch-9")
	if batch.Explained || len(batch.Missing) == 0 || !strings.HasPrefix(batch.Symptom, "stuck Terminating for 1h18m") {
		t.Errorf("batch-9: %+v", batch)
	}
	f := only(t, r, "pods-in-trouble-unexplained")
	wantIn(t, "summary", f.Summary, "jobs/batch-9")
	web := pod(t, r, "shop", "web-1")
	if web.Symptom != "" || len(web.Chain) != 0 || len(web.Checked) == 0 {
		t.Errorf("web-1: %+v", web)
	}
}

// Many hung mounts of one FUSE source in one namespace that hurt no pod
// are one finding, after the one that stops the kubelet.
func TestClusterJoinGroupsOneCause(t *testing.T) {
	files := fixture(t, "incident003-cephfs-hung")
	var rep layout.MountProbeReport
	if err := json.Unmarshal(files[layout.ProbesPath], &rep); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		rep.Probes = append(rep.Probes, layout.MountProbe{Mountpoint: fmt.Sprintf("/var/lib/agent/mnt/v%03d", i), ProbePath: fmt.Sprintf("/proc/4242/root/var/lib/agent/mnt/v%03d", i),
			Namespaces: []uint64{4026532999}, ProbeNamespace: 4026532999, MountID: 3000 + i, FSType: "fuse.ceph-fuse", Source: "ceph-fuse",
			Dev: fmt.Sprintf("0:%d", 300+i), Root: "/", Class: "fuse", Result: layout.ProbeHung, Probed: true, LatencyMS: 3000})
	}
	files[layout.ProbesPath], _ = json.Marshal(rep)
	b, _ := os.ReadFile(filepath.Join("testdata", "cluster", "003-v1.24.json"))
	files[layout.ClusterObjectsPath] = b
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hung := findings(r, "hung-mount")
	if len(hung) != 2 {
		t.Fatalf("%d hung-mount findings, want the kubelet's and one group of 200:\n%s", len(hung), dump(r))
	}
	if r.Findings[0].ID != "hung-mount" || r.Findings[0].Impact != analyze.ImpactSyncLoop || !strings.Contains(r.Findings[0].Summary, "8a4b6c2d") {
		t.Errorf("first finding %s %q, want the kubelet's cephfs mount", r.Findings[0].ID, r.Findings[0].Summary)
	}
	g := hung[1]
	if len(g.Members) != 200 || !strings.HasPrefix(g.Summary, "200 hung fuse.ceph-fuse mounts") {
		t.Errorf("group: %d members, %q", len(g.Members), g.Summary)
	}
}

func TestExplainVerdicts(t *testing.T) {
	r := withCluster(t, "incident004-csi-published-lost", "004-v1.34")
	for _, tt := range []struct{ ns, name, verdict string }{
		{"default", "hello-xxxxxx", analyze.VerdictExplained},
		{"default", "not-here", analyze.VerdictNotOnNode},
	} {
		if e := analyze.Explain(r, tt.ns, tt.name); e.Verdict != tt.verdict {
			t.Errorf("%s/%s: %s (%s), want %s", tt.ns, tt.name, e.Verdict, e.Message, tt.verdict)
		}
	}
	var b strings.Builder
	if err := analyze.WriteExplainText(&b, analyze.Explain(r, "default", "hello-xxxxxx"), 80); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("line of %d runes: %q", n, line)
		}
	}
}

// The join finds a stuck pod's volume in the node's evidence by whatever
// names it there, not only the PV's name: the in-tree rbd image, or the
// UUID a CSI volume handle embeds (ceph-csi's handle
// 0001-0009-<cluster>-<pool>-<uuid> is the rbd image csi-vol-<uuid>, and
// its PV is named after the claim, which the node never mentions).
func TestClusterJoinByVolumeIdentity(t *testing.T) {
	const (
		fixtureImage = "kubernetes-dynamic-pvc-c838258f-9c7a-11e9-a3b2-fa163ed7c802"
		imageUUID    = "c838258f-9c7a-11e9-a3b2-fa163ed7c802"
		otherUUID    = "0b5d6e7f-1a2b-4c3d-8e9f-a0b1c2d3e4f5"
		csiPVName    = "pvc-5b0c3e1a-7d2f-4e8a-9b1c-2d3e4f5a6b7c"
	)
	cephCSI := func(handle string) map[string]any {
		return map[string]any{"driver": "rbd.csi.ceph.com", "volumeHandle": handle, "fsType": "ext4"}
	}
	tests := []struct {
		name      string
		nodeImage string         // the rbd image's name on the node ("" keeps the fixture's)
		csi       map[string]any // the PV's CSI source (nil keeps the fixture's in-tree rbd)
		// creating: the claim's pod came back (its StatefulSet made it
		// again, a new UID) and waits in ContainerCreating, as the
		// driver will not stage an image still in use; else the old pod
		// is stuck Terminating.
		creating  bool
		explained bool
	}{
		{"in-tree rbd: the image name", "", nil, false, true},
		{"ceph-csi: the image's UUID in the handle", "csi-vol-" + imageUUID, cephCSI("0001-0009-rook-ceph-0000000000000002-" + imageUUID), false, true},
		{"ceph-csi: a handle of another image", "csi-vol-" + imageUUID, cephCSI("0001-0009-rook-ceph-0000000000000002-" + otherUUID), false, false},
		{"a handle that is a UUID itself", "csi-vol-" + imageUUID, cephCSI(imageUUID), false, true},
		{"in-tree rbd, the pod back in ContainerCreating", "", nil, true, true},
		{"ceph-csi, the pod back in ContainerCreating", "csi-vol-" + imageUUID, cephCSI("0001-0009-rook-ceph-0000000000000002-" + imageUUID), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := fixture(t, "incident002-rbd-held-in-namespace")
			if tt.nodeImage != "" {
				for name, b := range files {
					files[name] = []byte(strings.ReplaceAll(string(b), fixtureImage, tt.nodeImage))
				}
			}
			raw, err := os.ReadFile(filepath.Join("testdata", "cluster", "002-v1.29.json"))
			if err != nil {
				t.Fatal(err)
			}
			var view map[string]any
			if err := json.Unmarshal(raw, &view); err != nil {
				t.Fatal(err)
			}
			if tt.csi != nil {
				pv := view["pvs"].([]any)[0].(map[string]any)
				spec := pv["spec"].(map[string]any)
				delete(spec, "rbd")
				spec["csi"] = tt.csi
				pv["metadata"].(map[string]any)["name"] = csiPVName
				view["pvcs"].([]any)[0].(map[string]any)["spec"].(map[string]any)["volumeName"] = csiPVName
			}
			if tt.creating {
				p := view["pods"].([]any)[0].(map[string]any)
				meta := p["metadata"].(map[string]any)
				delete(meta, "deletionTimestamp")
				delete(meta, "deletionGracePeriodSeconds")
				meta["uid"] = "d0c1e2f3-a4b5-4c6d-8e7f-0a1b2c3d4e5f"
				meta["creationTimestamp"] = "2026-11-21T09:00:00Z"
				p["status"] = map[string]any{
					"phase": "Pending", "hostIP": "192.0.2.10",
					"conditions": []any{
						map[string]any{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-21T09:00:00Z"},
						map[string]any{"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-21T09:00:00Z", "reason": "ContainersNotReady"},
					},
					"containerStatuses": []any{map[string]any{"name": "mysql", "ready": false, "restartCount": 0, "state": map[string]any{"waiting": map[string]any{"reason": "ContainerCreating"}}}},
				}
			}
			raw, _ = json.Marshal(view)
			files[layout.ClusterObjectsPath] = raw
			r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := pod(t, r, "billing", "mysql-0")
			symptom, how := "stuck Terminating", "cannot finish terminating"
			if tt.creating {
				symptom, how = "ContainerCreating for 18m", "cannot start"
			}
			if !strings.HasPrefix(p.Symptom, symptom) {
				t.Fatalf("symptom %q, want %q…", p.Symptom, symptom)
			}
			if !tt.explained {
				if p.Explained || len(findings(r, "pods-in-trouble-unexplained")) != 1 {
					t.Errorf("a volume the node does not name is joined: chain %v\n%s", chainIDs(p), dump(r))
				}
				return
			}
			if !p.Explained || len(p.Chain) == 0 || p.Chain[0].Finding != "mount-held-in-foreign-namespace" || !strings.Contains(p.Chain[0].How, how) {
				t.Errorf("chain %v (explained %v), want the device held in another namespace first\n%s", chainIDs(p), p.Explained, dump(r))
			}
		})
	}
}
