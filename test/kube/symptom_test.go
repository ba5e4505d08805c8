package kube_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The cluster collector's view on a real cluster: it reads the node's view
// with exactly the RBAC of deploy/kubernetes/rbac.yaml (a request outside
// it is 403), and `nodesnap explain` names, for a pod the stuck kubelet
// never starts (incident 003), the chain from its symptom to the hung
// mount, while a running pod gets "nothing wrong found".

// saKubeconfig is a kubeconfig holding a short-lived token of the nodesnap
// ServiceAccount and the cluster's CA and address, as a pod of the
// manifests has them.
func (c *cluster) saKubeconfig(t *testing.T) (path, server, token string, pool *x509.CertPool) {
	t.Helper()
	token = c.token(t)
	server = strings.TrimSpace(c.k(t, "", "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"))
	caData := strings.TrimSpace(c.k(t, "", "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}"))
	if caData == "" {
		caFile := strings.TrimSpace(c.k(t, "", "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.certificate-authority}"))
		b, err := os.ReadFile(caFile)
		if err != nil {
			t.Fatalf("the cluster's CA: %v", err)
		}
		caData = base64.StdEncoding.EncodeToString(b)
	}
	ca, err := base64.StdEncoding.DecodeString(caData)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	path = filepath.Join(t.TempDir(), "nodesnap-sa.kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: sa\nclusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority-data: %s\nusers:\n- name: sa\n  user:\n    token: %s\ncontexts:\n- name: sa\n  context: {cluster: c, user: sa}\n",
		server, caData, token)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, server, token, pool
}

// The nodesnap ServiceAccount reads what the cluster collector reads, and
// nothing else: a Secret is 403.
func TestClusterCollectorRBAC(t *testing.T) {
	c := requireCluster(t)
	_, server, token, pool := c.saKubeconfig(t)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(path string) int {
		req, _ := http.NewRequest(http.MethodGet, server+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for path, want := range map[string]int{
		"/api/v1/nodes/" + c.node:                                 200,
		"/api/v1/pods?fieldSelector=spec.nodeName%3D" + c.node:    200,
		"/apis/storage.k8s.io/v1/volumeattachments?limit=5":       200,
		"/apis/storage.k8s.io/v1/csidrivers?limit=5":              200,
		"/api/v1/events?fieldSelector=involvedObject.kind%3DNode": 200,
		"/api/v1/namespaces/nodesnap/secrets":                     403,
		"/api/v1/namespaces/kube-system/configmaps":               403,
		"/apis/apps/v1/deployments":                               403,
	} {
		if got := get(path); got != want {
			t.Errorf("GET %s as the nodesnap ServiceAccount: %d, want %d", path, got, want)
		}
	}
}

// explainRun runs nodesnap explain and decodes its JSON.
func explainRun(t *testing.T, within time.Duration, args ...string) (*analyze.Explanation, int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cmd := exec.CommandContext(ctx, testkit.Binary(t), append([]string{"explain", "-o", "json"}, args...)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("explain: %v", err)
	}
	var e analyze.Explanation
	if err := json.Unmarshal(so.Bytes(), &e); err != nil {
		t.Fatalf("explain %v: exit %d, %v\nstdout:\n%s\nstderr:\n%s", args, code, err, so.String(), se.String())
	}
	return &e, code, se.String()
}

const explainPods = `apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: default}
spec:
  nodeName: NODE_NAME
  terminationGracePeriodSeconds: 1
  containers:
    - name: pause
      image: registry.k8s.io/pause:3.10
      imagePullPolicy: Never
`

// explainPod is the manifest of a pause pod named name on the cluster's node.
func (c *cluster) explainPod(name string) string {
	return strings.NewReplacer("NAME", name, "NODE_NAME", c.node).Replace(explainPods)
}

func TestIncident003ExplainStuckPod(t *testing.T) {
	c := requireCluster(t)
	kc, _, _, _ := c.saKubeconfig(t)
	pod := c.explainPod
	c.k(t, pod("explain-healthy"), "apply", "-f", "-")
	t.Cleanup(func() {
		exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "delete", "pod", "explain-healthy", "explain-stuck", "--force", "--grace-period=0", "--ignore-not-found").Run()
	})
	c.k(t, "", "wait", "--for=condition=Ready", "pod/explain-healthy", "--timeout=2m")

	// Incident 003: a hung ceph-fuse mount under an orphaned pod's
	// directory stops the kubelet's housekeeping and with it every new pod.
	uid := "3f0b6a2e-5c1d-4e8f-9a7b-0c3d2e1f0a13"
	podDir := filepath.Join("/var/lib/kubelet/pods", uid)
	mp := filepath.Join(podDir, "volumes/kubernetes.io~csi/pvc-0013/mount")
	t.Cleanup(func() { _ = os.RemoveAll(podDir) })
	f := testkit.HungFUSE(t, mp, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	c.waitKubeletBlocked(t, 60*time.Second)
	c.k(t, pod("explain-stuck"), "apply", "-f", "-")

	// Through the cluster: the collection pod cannot start either; explain
	// says so and prints the host command.
	e, code, stderr := explainRun(t, 3*time.Minute, "pod/explain-stuck", "-n", "default", "--kubeconfig", c.kubeconfig,
		"--image", c.image(t), "--node-timeout", "60s", "--output-dir", t.TempDir())
	if e.Verdict != analyze.VerdictNotCollected || !strings.Contains(e.HostCommand, "sudo nodesnap collect") || code != 1 {
		t.Errorf("explain through the cluster: exit %d, %+v\n%s", code, e, stderr)
	}

	// The pod is Pending long enough to be in trouble.
	time.Sleep(2*time.Minute + 10*time.Second)
	// With the pprof opt-in (rbac-pprof.yaml): the kubelet's goroutine dump
	// shows its housekeeping stuck in the orphaned pod's directory, the link
	// from the hung mount to every Pending pod. The least-privilege token
	// gets no dumps.
	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + c.pprofToken(t)}, "--timeout", "90s", "--kubeconfig", kc, "--node-name", c.node)
	if st := r.status(t, "cluster"); st.Status != "ok" {
		t.Errorf("cluster collector: %s %s %v", st.Status, st.Error, st.Notes)
	}
	e, code, _ = explainRun(t, time.Minute, "pod/explain-stuck", "-n", "default", "--bundle", r.path)
	if e.Verdict != analyze.VerdictExplained || e.Details == nil || len(e.Details.Chain) == 0 || code != 3 {
		t.Fatalf("explain pod/explain-stuck: exit %d, %+v", code, e)
	}
	first := e.Details.Chain[0]
	if (first.Finding != "hung-mount" && first.Finding != "mount-not-probed") || !strings.Contains(first.Summary, mp) || !strings.Contains(first.How, "sync loop") {
		t.Errorf("the stuck pod's chain starts with %s %q (%s), want the kubelet's hung mount %s", first.Finding, first.Summary, first.How, mp)
	}
	t.Logf("explain-stuck: %s ← [%d] %s", e.Details.Symptom, first.Index, first.Summary)
	e, code, _ = explainRun(t, time.Minute, "pod/explain-healthy", "-n", "default", "--bundle", r.path)
	if e.Verdict != analyze.VerdictNothingWrong || code != 0 || e.Details == nil || len(e.Details.Checked) == 0 {
		t.Errorf("explain pod/explain-healthy: exit %d, %+v", code, e)
	}
	if err := f.Close(); err != nil {
		t.Errorf("releasing the hung mount: %v", err)
	}
}

// waitPodEvent waits for an event of reason about a pod whose message
// holds text.
func (c *cluster) waitPodEvent(t *testing.T, ns, pod, reason, text string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out := c.k(t, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.kind=Pod,involvedObject.name="+pod+",reason="+reason,
			"-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, text) {
				t.Logf("%s/%s %s: %s", ns, pod, reason, l)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event saying %q about %s/%s within %s; events: %s\n%s", reason, text, ns, pod, within, out,
				c.k(t, "", "-n", ns, "get", "pod", pod, "-o", "wide"))
		}
		time.Sleep(2 * time.Second)
	}
}

// waitInTrouble waits until the API's view of a pod shows it in trouble
// by analyze's measure: Terminating past its deletion time (which counts
// the grace period) by more than 30 s, or Pending for 2 min since it was
// scheduled.
func (c *cluster) waitInTrouble(t *testing.T, ns, pod string) {
	t.Helper()
	ts := strings.TrimSpace(c.k(t, "", "-n", ns, "get", "pod", pod, "-o", "jsonpath={.metadata.deletionTimestamp}"))
	after := 30 * time.Second
	if ts == "" {
		ts = strings.TrimSpace(c.k(t, "", "-n", ns, "get", "pod", pod, "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].lastTransitionTime}`))
		after = 2 * time.Minute
	}
	since, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		t.Fatalf("pod %s/%s: no time to wait from (%q): %v", ns, pod, ts, err)
	}
	if d := time.Until(since.Add(after + 10*time.Second)); d > 0 {
		t.Logf("waiting %s for %s/%s to be in trouble", d.Round(time.Second), ns, pod)
		time.Sleep(d)
	}
}

// explainHostAndFleet: explain names the chain for the stuck pod from the
// host run r (collected with the ServiceAccount's kubeconfig) and through
// the cluster (explain with --kubeconfig and --image collects the node in a
// pod, which starts: this node's kubelet is not stuck); check judges the
// chain's first link. The healthy pod of the same bundle has nothing
// wrong, and says what was checked.
func (c *cluster) explainHostAndFleet(t *testing.T, r *run, ns, stuck, healthy string, check func(where string, first analyze.ChainLink)) {
	t.Helper()
	if st := r.status(t, "cluster"); st.Status != "ok" {
		t.Errorf("cluster collector: %s %s %v", st.Status, st.Error, st.Notes)
	}
	explained := func(where string, e *analyze.Explanation, code int, stderr string) {
		t.Helper()
		if e.Verdict != analyze.VerdictExplained || e.Details == nil || len(e.Details.Chain) == 0 || code != 3 {
			t.Errorf("explain pod/%s %s: exit %d, %+v\n%s", stuck, where, code, e, stderr)
			return
		}
		check(where, e.Details.Chain[0])
		t.Logf("%s, %s: %s ← [%d] %s: %s (%s)", stuck, where, e.Details.Symptom, e.Details.Chain[0].Index, e.Details.Chain[0].Finding, e.Details.Chain[0].Summary, e.Details.Chain[0].How)
	}
	e, code, stderr := explainRun(t, time.Minute, "pod/"+stuck, "-n", ns, "--bundle", r.path)
	explained("from the host run's bundle", e, code, stderr)
	e, code, _ = explainRun(t, time.Minute, "pod/"+healthy, "-n", ns, "--bundle", r.path)
	if e.Verdict != analyze.VerdictNothingWrong || code != 0 || e.Details == nil || len(e.Details.Checked) == 0 {
		t.Errorf("explain pod/%s (healthy): exit %d, %+v", healthy, code, e)
	}
	start := time.Now()
	e, code, stderr = explainRun(t, 7*time.Minute, "pod/"+stuck, "-n", ns, "--kubeconfig", c.kubeconfig,
		"--image", c.image(t), "--node-timeout", "4m", "--output-dir", t.TempDir())
	explained("through the cluster", e, code, stderr)
	t.Logf("explain through the cluster took %s", time.Since(start).Round(time.Second))
}
