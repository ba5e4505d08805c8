package kube_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/test/skip"
)

// requireUpstreamDriver returns the name of the upstream csi-driver-host-path
// cluster.sh runs (as a DaemonSet with node-driver-registrar, beside the
// stand-in driver), with a pod using one of its volumes.
func requireUpstreamDriver(t *testing.T, c *cluster) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(c.kubeconfig), "upstream-csi"))
	if err != nil {
		// cluster.sh said why when it came up: neither the module proxy
		// nor its cache had the driver's source.
		skip.Because(t, "the e2e cluster runs no upstream CSI driver (no source for it: see `test/kube/cluster.sh up`'s log)")
	}
	return strings.TrimSpace(string(b))
}

// TestUpstreamHostpathDriverHealthyNode runs first (go test runs a
// package's test files in name order, and this file's name sorts before
// every other's): the node is healthy only until the incident tests leave
// their stuck volumes and orphaned pods behind.
//
// A healthy node running the real
// csi-driver-host-path, registered through the real node-driver-registrar,
// with a pod using one of its volumes. The kubelet registered it; nodesnap
// finds its pod's logs by what the pod mounts (its names carry no "csi"),
// keeps them where analyze reads CSI logs, and analyze reads them —
// NodeStageVolume, NodePublishVolume and their JSON call records at -v=5 —
// without a warning.
func TestUpstreamHostpathDriverHealthyNode(t *testing.T) {
	c := requireCluster(t)
	driver := requireUpstreamDriver(t, c)
	if got := c.k(t, "", "get", "csinode", c.node, "-o", "jsonpath={.spec.drivers[*].name}"); !strings.Contains(" "+got+" ", " "+driver+" ") {
		t.Fatalf("CSINode %s lists drivers %q, want %s registered by node-driver-registrar", c.node, got, driver)
	}
	if phase := c.k(t, "", "-n", "e2e", "get", "pod", "upstream-volume-user", "-o", "jsonpath={.status.phase}"); phase != "Running" {
		t.Fatalf("the pod using the upstream driver's volume is %q, want Running", phase)
	}
	plugin := strings.TrimSpace(c.k(t, "", "-n", "e2e", "get", "pod", "-l", "app=node-storage-plugin", "-o", "jsonpath={.items[0].metadata.name}"))

	token := c.token(t)
	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + token}, "--kubelet-pprof=false")
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect exited %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var inv layout.CSIInventory
	if err := json.Unmarshal(r.file(t, layout.CSIInventoryPath), &inv); err != nil {
		t.Fatalf("%s: %v", layout.CSIInventoryPath, err)
	}
	var logs strings.Builder
	for _, container := range []string{"plugin", "registrar"} {
		var found bool
		for _, pl := range inv.PodLogs {
			if pl.Pod != plugin || pl.Container != container {
				continue
			}
			found = true
			if !strings.Contains(pl.Match, "plugin registration directory") {
				t.Errorf("%s/%s kept because %q; want it found by the registrar's /registration mount", plugin, container, pl.Match)
			}
			for _, f := range pl.Files {
				if f.File != "" {
					logs.Write(r.file(t, layout.DirCSI+"/"+f.File))
				}
			}
		}
		if !found {
			t.Errorf("csi/inventory.json keeps no logs of %s/%s: %+v", plugin, container, inv.PodLogs)
		}
	}
	for _, want := range []string{`gRPCCall: {"Method":"/csi.v1.Node/NodeStageVolume"`, `gRPCCall: {"Method":"/csi.v1.Node/NodePublishVolume"`, "Received NotifyRegistrationStatus call"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the upstream pod's logs in the bundle lack %q:\n%.3000s", want, logs.String())
		}
	}
	checkHealthy(t, r.path)
	for _, f := range analyzeReport(t, r.path).Findings {
		if strings.Contains(f.Subject, driver) || f.ID == "csi-node-operation-failed" {
			t.Errorf("a healthy upstream driver gets %s %s (%s): %s", f.Severity, f.ID, f.Subject, f.Summary)
		}
	}
}
