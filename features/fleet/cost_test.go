package fleet

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// A run's cost in the API is bounded per node, whatever the number of
// nodes: one ServiceAccount, ClusterRole and binding for the run, one
// watch for all its pods (no request per pod to follow it), and per node
// its pod's creation and deletion (the exec path adds the log read).
func TestRunCostPerNode(t *testing.T) {
	const nodes = 60
	behaviours := map[string]behaviour{}
	for i := range nodes {
		behaviours[fmt.Sprintf("node-%03d", i)] = healthy
	}
	s := newSim(t, behaviours, 256)
	counts := map[string]int{}
	s.cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		counts[a.GetVerb()+" "+a.GetResource().Resource]++
		return false, nil, nil
	})
	s.cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		counts["watch "+a.GetResource().Resource]++
		return false, nil, nil
	})
	o := s.options(t.TempDir())
	o.MaxParallel = 8
	// A node is read only for a pod its kubelet has not taken on after
	// the grace: not in this run.
	o.NotReadyGrace = time.Minute
	rep, err := Run(context.Background(), o)
	if err != nil || rep.Counts[StatusOK] != nodes {
		t.Fatalf("%v: %v", err, rep.Counts)
	}
	rbac := counts["create serviceaccounts"] + counts["create clusterroles"] + counts["create clusterrolebindings"]
	if rbac != 3 {
		t.Errorf("%d RBAC objects created for %d nodes, want 3 (%v)", rbac, nodes, counts)
	}
	if counts["watch pods"] < 1 || counts["watch pods"] > 2 {
		t.Errorf("%d watches of the run's pods, want one (%v)", counts["watch pods"], counts)
	}
	if counts["get pods"] != 0 || counts["list pods"] > 6 {
		t.Errorf("pods followed one by one: %v", counts)
	}
	if counts["create pods"] != nodes || counts["delete pods"] != nodes {
		t.Errorf("want one pod created and deleted per node: %v", counts)
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	// Everything the run asked the API, and the log reads (one per node,
	// served by the simulation).
	if per := float64(total+nodes) / nodes; per > 5 {
		t.Errorf("%.1f API requests per node, want at most 5 (%v)", per, counts)
	}
}
