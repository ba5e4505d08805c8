package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/nodesnap/nodesnap/features/fleet"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// clients are the e2e cluster's: fleet's own (what the binary uses) and
// client-go's clientset, for what the test sets up itself.
func (c *cluster) clients(t *testing.T) (fleet.PodIO, fleet.Client, kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := fleet.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fleet.NewPodIO(cfg, fc), fc, cs
}

// ghostNode registers a Node object with no kubelet behind it, as a node
// whose kubelet died looks to the API server once its lease expired
// (Ready=Unknown), and removes it at the end.
func ghostNode(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// Controllers (ttl, taints) update a new Node too: read, change, retry.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// removeNewHostBundles removes, at the end of the test, the bundles the
// run's pods left on the node (the manifests keep them in /var/tmp/nodesnap).
func removeNewHostBundles(t *testing.T) {
	const hostDir = "/var/tmp/nodesnap"
	before := hostBundles(t, hostDir)
	t.Cleanup(func() {
		for p := range hostBundles(t, hostDir) {
			if !before[p] {
				_ = os.Remove(p)
				_ = os.Remove(p + ".sha256")
			}
		}
	})
}

// checkNothingLeft asserts that no object of any fleet run is in the
// cluster, and that the namespace deploy/kubernetes/rbac.yaml made is.
func checkNothingLeft(t *testing.T, c *cluster) {
	t.Helper()
	sel := fleet.ManagedByLabel + "=" + fleet.ManagedBy
	if out := c.k(t, "", "get", "pods,serviceaccounts,secrets,clusterroles,clusterrolebindings,namespaces", "-A", "-l", sel, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("the fleet run left in the cluster:\n%s", out)
	}
	if out := c.k(t, "", "get", "namespace", "nodesnap", "-o", "name"); strings.TrimSpace(out) != "namespace/nodesnap" {
		t.Errorf("the namespace the run did not create is gone")
	}
}

func readFleetReport(t *testing.T, dir string) *fleet.Report {
	t.Helper()
	rep, err := fleet.ReadReport(filepath.Join(dir, fleet.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func rowOf(t *testing.T, rep *fleet.Report, node string) fleet.NodeResult {
	t.Helper()
	for _, n := range rep.Nodes {
		if n.Node == node {
			return n
		}
	}
	t.Fatalf("fleet.json has no row for %s: %+v", node, rep.Nodes)
	return fleet.NodeResult{}
}

// TestFleetCollect runs `nodesnap fleet collect` as a user would, on the
// real node and on a Node object with no kubelet: the real node's bundle
// comes back verified, its kubelet collector authenticated with the run's
// own service account's token, with the evidence of a run on the node;
// the ghost node gets node-not-ready and why; the run exits 3 and leaves
// nothing in the cluster. It also reports the fleet's overhead over the
// collection itself (pod start, copy-back) on this node.
func TestFleetCollect(t *testing.T) {
	c := requireCluster(t)
	_, _, cs := c.clients(t)
	removeNewHostBundles(t)
	ghost := "nodesnap-e2e-ghost"
	ghostNode(t, cs, ghost)
	dir := filepath.Join(t.TempDir(), "fleet")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testkit.Binary(t), "fleet", "collect", c.node, ghost,
		"--kubeconfig", c.kubeconfig, "--image", c.image(t), "--output-dir", dir, "--node-timeout", "4m")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("fleet collect: %v, want exit status 3\nstdout:\n%s\nstderr:\n%s", err, so.String(), se.String())
	}
	t.Logf("fleet collect's output:\n%s%s", se.String(), so.String())
	rep := readFleetReport(t, dir)
	real := rowOf(t, rep, c.node)
	if !real.Status.HasBundle() {
		t.Fatalf("%s: %s %s", c.node, real.Status, real.Reason)
	}
	g := rowOf(t, rep, ghost)
	if g.Status != fleet.StatusNotReady || !strings.Contains(g.Reason, "NotReady") {
		t.Errorf("%s: %s %q; want node-not-ready", ghost, g.Status, g.Reason)
	}
	if rep.ServiceAccount != rep.RunID {
		t.Errorf("the pods ran as %q, not the run's own service account %s", rep.ServiceAccount, rep.RunID)
	}
	p := filepath.Join(dir, real.Bundle)
	if out, err := exec.Command(testkit.Binary(t), "validate", p).CombinedOutput(); err != nil {
		t.Fatalf("validate %s: %v\n%s", p, err, out)
	}
	inFleet := &run{path: p, b: readBundle(t, p)}
	// The kubelet refuses anonymous requests: ok means the run's token
	// (bound, through the run's ClusterRoleBinding, to the run's nodes'
	// read subresources alone, no nodes/proxy) was accepted, pprof left
	// out.
	if st := inFleet.status(t, "kubelet"); st.Status != "ok" {
		t.Errorf("kubelet collector in the fleet's pod: %s %s %v", st.Status, st.Error, st.Notes)
	}
	var req struct {
		TokenSource string `json:"token_source"`
	}
	if err := json.Unmarshal(inFleet.file(t, "kubelet/requests.json"), &req); err != nil || !strings.HasPrefix(req.TokenSource, "service-account ") {
		t.Errorf("kubelet/requests.json token_source %q (%v); want the pod's service-account token", req.TokenSource, err)
	}
	checkNodeEvidence(t, inFleet)
	if _, ok := inFleet.b.Files["kubelet/goroutine-debug2.txt"]; ok {
		t.Error("a goroutine dump without --kubelet-pprof: the node's role must not have nodes/proxy")
	}
	onHost := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + c.token(t)}, "--kubelet-pprof=false")
	compareRuns(t, onHost, inFleet)
	checkNothingLeft(t, c)
	if real.Durations.Collect > 0 {
		t.Logf("fleet overhead on %s: %.1fs from pod creation to verified bundle, of which the collection %.1fs (pod start %.1fs, copy %.2fs for %d bytes): ratio %.2f",
			c.node, real.Durations.Total, real.Durations.Collect, real.Durations.PodStart, real.Durations.Copy, real.Size, real.Durations.Total/real.Durations.Collect)
	}
}

// fleetRun runs the fleet in-process on the real cluster, for the cases
// that need a test hook.
func fleetRun(t *testing.T, c *cluster, o fleet.Options) (*fleet.Report, string) {
	t.Helper()
	removeNewHostBundles(t)
	o.PodIO, o.Client, _ = c.clients(t)
	if o.Image == "" {
		o.Image = c.image(t)
	}
	if len(o.Names) == 0 && o.Selector == "" {
		o.Names = []string{c.node}
	}
	o.OutputDir = filepath.Join(t.TempDir(), "fleet")
	o.Version = "e2e"
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rep, err := fleet.Run(ctx, o)
	if err != nil {
		t.Fatalf("fleet run: %v", err)
	}
	checkNothingLeft(t, c)
	return rep, o.OutputDir
}

// TestFleetPartialResults gives each way a node fails its own row and
// reason on the real node: an image that is not there, a pod whose node
// selector matches nothing, a per-node deadline shorter than the
// collection, and a bundle corrupted in transit (caught by the node's
// checksum, not saved); and a -l selector that matches no node.
func TestFleetPartialResults(t *testing.T) {
	c := requireCluster(t)
	t.Run("image not present", func(t *testing.T) {
		rep, _ := fleetRun(t, c, fleet.Options{Image: "nodesnap.test/absent:v0", NodeTimeout: 2 * time.Minute})
		r := rowOf(t, rep, c.node)
		if r.Status != fleet.StatusImagePull || !strings.Contains(r.Reason, "nodesnap.test/absent:v0") || rep.ExitStatus != fleet.ExitNone {
			t.Errorf("%s %q exit %d; want image-pull-failure naming the image, exit 1", r.Status, r.Reason, rep.ExitStatus)
		}
	})
	t.Run("node selector matching nothing", func(t *testing.T) {
		rep, _ := fleetRun(t, c, fleet.Options{NodeTimeout: 2 * time.Minute, PodHook: func(_ string, p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"nodesnap.test/no-such-label": "x"}
		}})
		r := rowOf(t, rep, c.node)
		if r.Status != fleet.StatusUnschedulable || !strings.Contains(r.Reason, "NodeAffinity") {
			t.Errorf("%s %q; want unschedulable (the kubelet's NodeAffinity admission)", r.Status, r.Reason)
		}
	})
	t.Run("per-node deadline shorter than the collection", func(t *testing.T) {
		// A collection that surely outlasts the deadline, whatever the
		// machine's speed: the kubelet collector is pointed at a port on
		// the node's loopback (the pod has the host's network) that
		// accepts and never answers, and waits 30 s for each request.
		ln := testkit.SilentListener(t, "tcp", "127.0.0.1:0")
		slow := func(_ string, p *corev1.Pod) {
			p.Spec.InitContainers[0].Args = append(p.Spec.InitContainers[0].Args,
				"--kubelet-url=https://"+ln.Addr().String(), "--kubelet-request-timeout=30s")
		}
		rep, _ := fleetRun(t, c, fleet.Options{NodeTimeout: 6 * time.Second, CollectTimeout: 2 * time.Minute, PodHook: slow})
		r := rowOf(t, rep, c.node)
		if r.Status != fleet.StatusTimeout || !strings.Contains(r.Reason, "--node-timeout 6s") {
			t.Errorf("%s %q; want timeout", r.Status, r.Reason)
		}
	})
	t.Run("corrupted in transit", func(t *testing.T) {
		rep, dir := fleetRun(t, c, fleet.Options{NodeTimeout: 4 * time.Minute, TransitHook: func(_ string, w io.Writer) io.Writer {
			return &flipOne{w: w, at: 1000}
		}})
		r := rowOf(t, rep, c.node)
		if r.Status != fleet.StatusFailed || !strings.Contains(r.Reason, "checksum mismatch") || r.Bundle != "" {
			t.Errorf("%s %q bundle %q; want failed on the checksum, nothing saved", r.Status, r.Reason, r.Bundle)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != fleet.ReportFile {
			t.Errorf("the output directory holds %v; want fleet.json alone", ents)
		}
	})
	t.Run("pprof opted in", func(t *testing.T) {
		// The node's role gets nodes/proxy on this node alone, for the
		// run: the goroutine dumps come, and nothing is left afterwards.
		rep, dir := fleetRun(t, c, fleet.Options{NodeTimeout: 4 * time.Minute, Pprof: true})
		r := rowOf(t, rep, c.node)
		if !r.Status.HasBundle() {
			t.Fatalf("%s %q", r.Status, r.Reason)
		}
		b := &run{path: filepath.Join(dir, r.Bundle), b: readBundle(t, filepath.Join(dir, r.Bundle))}
		if st := b.status(t, "kubelet"); st.Status != "ok" {
			t.Errorf("kubelet in the fleet's pod with --kubelet-pprof: %s %s %v", st.Status, st.Error, st.Notes)
		}
		b.file(t, "kubelet/goroutine-debug2.txt")
	})
	t.Run("label selector matching no node", func(t *testing.T) {
		out, err := exec.Command(testkit.Binary(t), "fleet", "collect", "-l", "nodesnap.test/no-such-label=x",
			"--kubeconfig", c.kubeconfig, "--image", c.image(t), "--output-dir", filepath.Join(t.TempDir(), "f")).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "no node is labelled nodesnap.test/no-such-label=x") {
			t.Errorf("%v\n%s; want exit 1 saying no node matches", err, out)
		}
		checkNothingLeft(t, c)
	})
}

// flipOne inverts the byte at offset at of a stream.
type flipOne struct {
	w   io.Writer
	at  int64
	off int64
}

func (f *flipOne) Write(p []byte) (int, error) {
	if i := f.at - f.off; i >= 0 && i < int64(len(p)) {
		q := append([]byte(nil), p...)
		q[i] ^= 0xff
		p = q
	}
	f.off += int64(len(p))
	return f.w.Write(p)
}

// The attack of issue 38 (round two): the fleet's label and a past expiry
// on objects no fleet run made, the API server's own
// system:kube-controller-manager binding and a cluster-admin-like role,
// made the next `fleet collect` delete them. They survive it now.
func TestFleetSweepSparesWhatItDidNotMake(t *testing.T) {
	c := requireCluster(t)
	_, _, cs := c.clients(t)
	removeNewHostBundles(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	mark := func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Labels[fleet.ManagedByLabel] = fleet.ManagedBy
		m.Labels[fleet.RunLabel] = "nodesnap-fleet-deadbeef"
		m.Annotations[fleet.ExpiresAnnotation] = past
		m.Annotations[fleet.NodeAnnotation] = c.node
	}
	const decoy = "nodesnap-e2e-cluster-admin-decoy"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: decoy},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}, {NonResourceURLs: []string{"*"}, Verbs: []string{"*"}}}}
	mark(&role.ObjectMeta)
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.RbacV1().ClusterRoles().Delete(context.Background(), decoy, metav1.DeleteOptions{}) })
	const builtin = "system:kube-controller-manager"
	orig, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, builtin, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the cluster has no %s binding: %v", builtin, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, builtin, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mark(&b.ObjectMeta)
		_, err = cs.RbacV1().ClusterRoleBindings().Update(ctx, b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The binding as it was: recreated if the run deleted it, its
		// labels and annotations restored if not.
		ctx := context.Background()
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, builtin, metav1.GetOptions{})
			if err != nil {
				fresh := orig.DeepCopy()
				fresh.ResourceVersion, fresh.UID = "", ""
				_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, fresh, metav1.CreateOptions{})
				return err
			}
			b.Labels, b.Annotations = orig.Labels, orig.Annotations
			_, err = cs.RbacV1().ClusterRoleBindings().Update(ctx, b, metav1.UpdateOptions{})
			return err
		})
	})
	dir := filepath.Join(t.TempDir(), "fleet")
	rctx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, testkit.Binary(t), "fleet", "collect", c.node,
		"--kubeconfig", c.kubeconfig, "--image", c.image(t), "--output-dir", dir, "--node-timeout", "4m")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Logf("fleet collect: %v\nstdout:\n%s\nstderr:\n%s", err, so.String(), se.String())
	}
	rep := readFleetReport(t, dir)
	t.Logf("swept: %q", rep.Swept)
	if _, err := cs.RbacV1().ClusterRoles().Get(ctx, decoy, metav1.GetOptions{}); err != nil {
		t.Errorf("the cluster-admin-like role %s was deleted: %v", decoy, err)
	}
	if b, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, builtin, metav1.GetOptions{}); err != nil {
		t.Errorf("the binding %s was deleted: %v", builtin, err)
	} else if b.UID != orig.UID {
		t.Errorf("the binding %s was deleted and made again by the API server (uid %s, was %s)", builtin, b.UID, orig.UID)
	}
	for _, s := range rep.Swept {
		if strings.Contains(s, decoy) || strings.Contains(s, builtin) {
			t.Errorf("fleet.json says it swept %s", s)
		}
	}
}
