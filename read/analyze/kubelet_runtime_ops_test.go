package analyze_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// RKE2's kubelet writes its own log file (collected as
// journal/files/rke2-kubelet.log): its records are the kubelet's, read for
// the objects its keys name, whatever wording they use.
func TestRKE2KubeletLogFileIsRead(t *testing.T) {
	const uid = "5b0e2c1a-7d3f-4e8a-9c6b-1f2e3d4c5b6a"
	lines := []string{
		`E1121 09:10:01.000000    2211 desired_state_of_world_populator.go:311] "Error processing volume" err="error processing PVC shop/data-db-0: PVC is not bound" pod="shop/db-0" podUID="` + uid + `" volumeName="data"`,
		`E1121 09:12:03.000000    2211 desired_state_of_world_populator.go:311] "Error processing volume" err="error processing PVC shop/data-db-0: PVC is not bound" pod="shop/db-0" podUID="` + uid + `" volumeName="data"`,
	}
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json":              []byte(`{"hostname":"node1"}`),
		"journal/files/rke2-kubelet.log": []byte(strings.Join(lines, "\n") + "\n"),
	})
	f := only(t, r, "volume-mount-failed")
	if f.Subject != "data of pod shop/db-0" || f.Severity != analyze.Warning {
		t.Errorf("subject %q severity %s:\n%s", f.Subject, f.Severity, dump(r))
	}
	wantIn(t, "summary", f.Summary, "mount of volume data of pod shop/db-0 fails (2 times", "still failing")
}

// A runtime that cannot clean up a dead shim's bundle: a container
// removal failing, named by the container; the same runtime's debug
// lines about a task already gone are no finding.
func TestRuntimeShimCleanupIsAContainerRemoval(t *testing.T) {
	const id = "7c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d"
	failing := `Nov 21 09:10:01 node1 containerd[700]: time="2026-11-21T09:10:01Z" level=warning msg="failed to clean up after shim disconnected" error="io.containerd.runc.v2: open /run/containerd/io.containerd.runtime.v2.task/k8s.io/` + id + `/runtime: no such file or directory: exit status 1" id=` + id + ` namespace=k8s.io`
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json":      []byte(`{"hostname":"node1"}`),
		"journal/containerd.log": []byte(failing + "\n"),
	})
	f := only(t, r, "container-remove-failed")
	if f.Subject != id {
		t.Errorf("subject %q:\n%s", f.Subject, dump(r))
	}
	wantIn(t, "explanation", f.Explanation, "exit status 1", "errno ENOENT")

	expected := `Nov 21 09:10:01 node1 containerd[700]: time="2026-11-21T09:10:01Z" level=debug msg="failed to delete task" error="rpc error: code = NotFound desc = container not created: not found" id=` + id
	r = analyzeFiles(t, map[string][]byte{
		"host/summary.json":      []byte(`{"hostname":"node1"}`),
		"journal/containerd.log": []byte(expected + "\n"),
	})
	for _, f := range r.Findings {
		if f.Severity >= analyze.Warning || strings.Contains(f.Summary, id) {
			t.Errorf("a task already gone, logged at debug level, made a finding: %s %s: %s", f.ID, f.Severity, f.Summary)
		}
	}
}

// The kubelet failing to reach a plugin's socket is surfaced with the
// socket, at info: its gRPC channel reconnects by itself.
func TestKubeletPluginSocketConnectionIsInfo(t *testing.T) {
	const sock = "/var/lib/kubelet/plugins/disk.example.com/csi.sock"
	line := `Nov 21 09:10:01 node1 kubelet[812]: W1121 09:10:01.683705     812 logging.go:59] [core] [Channel #12 SubChannel #13] grpc: addrConn.createTransport failed to connect to {Addr: "` + sock + `", ServerName: "localhost", }. Err: connection error: desc = "transport: Error while dialing: dial unix ` + sock + `: connect: connection refused"`
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json":   []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(line + "\n"),
	})
	f := only(t, r, "csi-node-operation-failed")
	if f.Subject != sock || f.Severity != analyze.Info {
		t.Errorf("subject %q severity %s:\n%s", f.Subject, f.Severity, dump(r))
	}
	wantIn(t, "summary", f.Summary, "reconnects by itself")
}
