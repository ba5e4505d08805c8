package roundtrip_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/mounts"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// In incident 002's fixture, namespace 4026532601 (node_exporter) holds
// rbd3 (250:0) and a tmpfs (0:52), and copies of the host's disks.
const (
	inc002     = "incident002-rbd-held-in-namespace"
	inc002NS   = 4026532601
	inc002Dev  = "250:0"
	inc002Host = 4026531840
)

func analyzeFiles(t *testing.T, files map[string][]byte) *analyze.Report {
	t.Helper()
	p := makeBundle(t, files, bundle.Gzip)
	r, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// withSelf returns the fixture with manifest.self saying nodesnap ran in
// mount namespace ns, and, when marked, mounts.json marking it as the
// collector does.
func withSelf(t *testing.T, ns uint64, marked bool) map[string][]byte {
	t.Helper()
	files := fixture(t, inc002)
	extra, _ := json.Marshal(map[string]any{"self": bundle.Self{PID: 4242, MountNamespace: ns,
		Pod: &bundle.SelfPod{UID: "1b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90", Namespace: "nodesnap", Name: "nodesnap-node1", Source: "env"}}})
	files["_manifest.json"] = extra
	if !marked {
		return files
	}
	var rep layout.MountsReport
	if err := json.Unmarshal(files["mounts/mounts.json"], &rep); err != nil {
		t.Fatal(err)
	}
	rep.Nodesnap = &layout.MountsSelf{MountNamespace: ns, Namespaces: []uint64{ns}, SupervisorPID: 21839, PIDs: []int{21839}}
	mounts.MarkNodesnapNamespaces(&rep)
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	files["mounts/mounts.json"] = b
	return files
}

// The holder of incident 002 as nodesnap's own namespace: nothing is
// flagged, and the report says what it left out and why. Both from what
// the mounts collector marked and, for a bundle whose collector did not,
// from the manifest alone.
func TestOwnNamespaceIsNotEvidence(t *testing.T) {
	for _, marked := range []bool{true, false} {
		r := analyzeFiles(t, withSelf(t, inc002NS, marked))
		if fs := findings(r, "mount-held-in-foreign-namespace"); len(fs) != 0 {
			t.Errorf("marked %v: nodesnap's own namespace flagged as a holder: %s", marked, dump(r))
		}
		f := only(t, r, "nodesnap-own-namespace-excluded")
		if f.Severity != analyze.Info {
			t.Errorf("severity %s, want info", f.Severity)
		}
		wantIn(t, "summary", f.Summary, "own mount namespace 4026532601", "pod 1b4e0c2a-7f3d-4a51-9c0e-2d5e8f6a7b90, nodesnap/nodesnap-node1")
		wantIn(t, "evidence", evidenceText(f), inc002Dev, `"mount_namespace":4026532601`)
		if marked {
			wantIn(t, "evidence", evidenceText(f), `"supervisor_pid":21839`)
		}
	}
}

// nodesnap ran on the host (its namespace is the host's): nothing is left
// out, the real holder is flagged, and no exclusion is reported.
func TestSelfOnHostExcludesNothing(t *testing.T) {
	r := analyzeFiles(t, withSelf(t, inc002Host, false))
	f := bySubject(t, r, "mount-held-in-foreign-namespace", inc002Dev)
	wantIn(t, "summary", f.Summary, "4026532601", "node_exporter[21839]")
	if fs := findings(r, "nodesnap-own-namespace-excluded"); len(fs) != 0 {
		t.Errorf("an exclusion reported for a run in the host's namespace: %+v", fs)
	}
}

// A device held both by nodesnap's namespace and by another one is still
// flagged, naming only the other.
func TestSelfAndRealHolder(t *testing.T) {
	files := fixture(t, inc002)
	var rep layout.MountsReport
	if err := json.Unmarshal(files["mounts/mounts.json"], &rep); err != nil {
		t.Fatal(err)
	}
	const selfNS = 4026532999
	for i := range rep.Devices {
		d := &rep.Devices[i]
		if d.Dev == inc002Dev {
			own := d.Namespaces[0]
			own.Namespace, own.Processes = selfNS, []layout.NamespaceProcess{{PID: 777, Comm: "nodesnap", Threads: 1}}
			d.Namespaces = append(d.Namespaces, own)
		}
	}
	rep.Nodesnap = &layout.MountsSelf{MountNamespace: selfNS, Namespaces: []uint64{selfNS}, SupervisorPID: 777, PIDs: []int{777}}
	mounts.MarkNodesnapNamespaces(&rep)
	b, _ := json.Marshal(&rep)
	files["mounts/mounts.json"] = b
	r := analyzeFiles(t, files)
	f := bySubject(t, r, "mount-held-in-foreign-namespace", inc002Dev)
	wantIn(t, "summary", f.Summary, "4026532601", "node_exporter[21839]")
	if strings.Contains(f.Summary+f.Explanation+strings.Join(f.Remediation, "\n"), "4026532999") || strings.Contains(f.Summary+f.Explanation, "nodesnap[777]") {
		t.Errorf("nodesnap's own namespace named as a holder:\n%s\n%s\n%v", f.Summary, f.Explanation, f.Remediation)
	}
	only(t, r, "nodesnap-own-namespace-excluded")
}

// A process the mounts collector found to be nodesnap's (a dirshape
// worker walking the huge directory) is not named as who fills it.
func TestSelfIsNotTheWriter(t *testing.T) {
	files := fixture(t, "incident001-huge-volume")
	var rep map[string]json.RawMessage
	if err := json.Unmarshal(files["mounts/mounts.json"], &rep); err != nil {
		t.Fatal(err)
	}
	rep["nodesnap"], _ = json.Marshal(layout.MountsSelf{Namespaces: []uint64{}, SupervisorPID: 31336, PIDs: []int{31336, 31337}})
	files["mounts/mounts.json"], _ = json.Marshal(rep)
	r := analyzeFiles(t, files)
	only(t, r, "ext4-nlink-overflow")
	for _, f := range r.Findings {
		if strings.Contains(f.Explanation, "app[31337]") {
			t.Errorf("%s names nodesnap's own process as the writer: %s", f.ID, f.Explanation)
		}
	}
	if len(findings(r, "nodesnap-own-namespace-excluded")) != 0 {
		t.Errorf("nodesnap ran in the host's namespace: nothing to report as excluded")
	}
}
