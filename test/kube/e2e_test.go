// Package kube_test runs nodesnap against a real single-node Kubernetes
// (test/kube/cluster.sh: kubelet with webhook authentication, containerd,
// a CSI driver registered through the plugin watcher), as its users run
// it: by hand on the node with and without a token, and as the Job of
// deploy/kubernetes with the image `make image` builds.
//
// `make e2e-k8s` brings the cluster up, runs these tests and takes it down.
// Without that cluster (NODESNAP_E2E_KUBECONFIG unset) they skip and say so.
package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

type cluster struct {
	kubeconfig, kubectl, node string
}

func requireCluster(t *testing.T) *cluster {
	t.Helper()
	kc := os.Getenv("NODESNAP_E2E_KUBECONFIG")
	if kc == "" {
		skip.Because(t, "no e2e cluster: run `make e2e-k8s` (as root) to bring one up and run these tests")
	}
	testkit.RequireRoot(t)
	c := &cluster{kubeconfig: kc, kubectl: os.Getenv("NODESNAP_E2E_KUBECTL")}
	if c.kubectl == "" {
		c.kubectl = "kubectl"
	}
	// cluster.sh names the node after the host, or localhost where the host
	// name does not resolve to loopback.
	node, err := os.ReadFile(filepath.Join(filepath.Dir(kc), "node"))
	if err != nil {
		t.Fatalf("the e2e cluster's node name: %v", err)
	}
	c.node = strings.TrimSpace(string(node))
	return c
}

// k runs kubectl against the cluster and returns its standard output.
func (c *cluster) k(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// token is a short-lived token of the ServiceAccount deploy/kubernetes/rbac.yaml
// creates, as docs/kubernetes.md tells a user to make one: the
// least-privilege role, no nodes/proxy.
func (c *cluster) token(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(c.k(t, "", "-n", "nodesnap", "create", "token", "nodesnap", "--duration", "10m"))
}

// pprofToken applies the opt-in deploy/kubernetes/rbac-pprof.yaml (nodes/proxy,
// for the pprof dumps) and returns a short-lived token of its ServiceAccount;
// the opt-in is deleted when the test ends, as its comment tells a user to.
func (c *cluster) pprofToken(t *testing.T) string {
	t.Helper()
	f := filepath.Join("..", "..", "deploy", "kubernetes", "rbac-pprof.yaml")
	c.k(t, "", "apply", "-f", f)
	t.Cleanup(func() { c.k(t, "", "delete", "-f", f, "--ignore-not-found") })
	return strings.TrimSpace(c.k(t, "", "-n", "nodesnap", "create", "token", "nodesnap-pprof", "--duration", "10m"))
}

type run struct {
	code   int
	stdout string
	stderr string
	path   string
	b      *bundle.Contents
}

// collect runs the real binary's collect on this node into a fresh
// directory and reads the bundle back.
func collect(t *testing.T, env []string, args ...string) *run {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testkit.Binary(t), append([]string{"collect", "--output-dir", out}, args...)...)
	cmd.Env = append(withoutToken(), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := &run{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running collect: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(out, "nodesnap-*.tar.gz"))
	if len(matches) != 1 {
		t.Fatalf("collect (exit %d) left %d bundles in its output directory\nstdout:\n%s\nstderr:\n%s", r.code, len(matches), r.stdout, r.stderr)
	}
	r.path = matches[0]
	r.b = readBundle(t, r.path)
	return r
}

func readBundle(t *testing.T, p string) *bundle.Contents {
	t.Helper()
	b, err := bundle.ReadAll(context.Background(), p, 2<<30)
	if err != nil {
		t.Fatalf("reading %s: %v", p, err)
	}
	return b
}

func (r *run) status(t *testing.T, collector string) *bundle.CollectorResult {
	t.Helper()
	c := r.b.Manifest.Collector(collector)
	if c == nil {
		t.Fatalf("no %s collector in the manifest", collector)
	}
	return c
}

func (r *run) file(t *testing.T, name string) []byte {
	t.Helper()
	b, ok := r.b.Files[name]
	if !ok {
		var names []string
		for n := range r.b.Files {
			if strings.HasPrefix(n, strings.SplitN(name, "/", 2)[0]+"/") {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		t.Fatalf("bundle has no %s; it has %v", name, names)
	}
	return b
}

// podsJSON decodes the kubelet's /pods answer as the bundle holds it.
func podNames(t *testing.T, raw []byte) []string {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata struct{ Namespace, Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("kubelet/pods.json: %v", err)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	sort.Strings(names)
	return names
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestHostRunWithToken is a support engineer's run on the node with a token
// of deploy/kubernetes/rbac.yaml's ServiceAccount: every source answers.
// The least-privilege role (no nodes/proxy) gets everything but the pprof
// dumps from the real kubelet (v1.34: fine-grained authorization on), which
// is verified by the serving certificate its running command line names.
func TestHostRunWithToken(t *testing.T) {
	c := requireCluster(t)
	token := c.token(t)
	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + token}, "--kubelet-pprof=false")
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect exited %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if st := r.status(t, "kubelet"); st.Status != "ok" {
		t.Errorf("kubelet collector: %s %s %v", st.Status, st.Error, st.Notes)
	}
	var rq struct {
		TLS      string `json:"tls"`
		Requests []struct {
			Endpoint, Port string
			StatusCode     int  `json:"status_code"`
			TLSVerified    bool `json:"tls_verified"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(r.file(t, "kubelet/requests.json"), &rq); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rq.TLS, "verified: ") || !strings.Contains(rq.TLS, "kubelet-serving.crt") || !strings.Contains(rq.TLS, "kubelet pid") {
		t.Errorf("requests.json tls %q: want the peer verified against the tlsCertFile the running kubelet names", rq.TLS)
	}
	for _, q := range rq.Requests {
		if q.Port == "secure" && (q.Endpoint == "pods" || q.Endpoint == "configz" || q.Endpoint == "healthz") && (q.StatusCode == 401 || q.StatusCode == 403 || !q.TLSVerified) {
			t.Errorf("%s over the secure port: status %d, verified %v; want it allowed as nodes/%s (KubeletFineGrainedAuthz)", q.Endpoint, q.StatusCode, q.TLSVerified, q.Endpoint)
		}
	}
	pods := podNames(t, r.file(t, "kubelet/pods.json"))
	for _, want := range []string{"e2e/csi-hostpath-node", "e2e/volume-user"} {
		if !contains(pods, want) {
			t.Errorf("kubelet/pods.json lacks %s: %v", want, pods)
		}
	}
	checkNodeEvidence(t, r)
	checkNoSecret(t, r, token)
	// The configuration the running kubelet and containerd use, named on
	// their command lines (the e2e cluster keeps them outside the default
	// paths), not only the default paths.
	state := filepath.Dir(c.kubeconfig)
	for _, f := range []string{"kubelet.yaml", "kubelet-client.kubeconfig", "containerd.toml"} {
		r.file(t, "nodeconfig/files"+filepath.Join(state, f))
	}
	if files := string(r.file(t, "nodeconfig/files.json")); !strings.Contains(files, "kubelet --config (pid") {
		t.Errorf("nodeconfig/files.json does not say the running kubelet named its config:\n%.800s", files)
	}
	// A healthy real node: analyze finds nothing at warning or above
	// (exit 3 would say it did).
	out, err := exec.Command(testkit.Binary(t), "analyze", r.path).CombinedOutput()
	if err != nil {
		t.Errorf("analyze of a healthy real node: %v\n%s", err, out)
	}
	checkHealthy(t, r.path)
}

// TestHostRunPprofOptIn: the pprof dumps come only with the opt-in. The
// least-privilege token is refused them by the real kubelet (they are
// nodes/proxy), the run says what is missing and names the opt-in with its
// risk; rbac-pprof.yaml's token gets them.
func TestHostRunPprofOptIn(t *testing.T) {
	c := requireCluster(t)
	token := c.token(t)
	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + token})
	st := r.status(t, "kubelet")
	if st.Status != "partial" || len(st.Remedies) != 1 {
		t.Fatalf("least privilege with pprof asked: kubelet %s, remedies %+v; want partial with one remedy", st.Status, st.Remedies)
	}
	fix := strings.Join(st.Remedies[0].Fix, "\n")
	if !strings.Contains(fix, "nodesnap manifests rbac rbac-pprof") || !strings.Contains(st.Remedies[0].Reason, "exec into every pod") {
		t.Errorf("the remedy does not name the opt-in and its risk: %+v", st.Remedies[0])
	}
	notes := strings.Join(st.Notes, "\n")
	if !strings.Contains(notes, "subresource(s)=[proxy]") {
		t.Errorf("the notes do not carry the kubelet's own refusal of /debug/pprof as nodes/proxy:\n%s", notes)
	}
	if _, ok := r.b.Files["kubelet/goroutine-debug2.txt"]; ok {
		t.Error("goroutine dump present with the least-privilege token")
	}
	checkNoSecret(t, r, token)

	ptoken := c.pprofToken(t)
	r = collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + ptoken})
	if st := r.status(t, "kubelet"); st.Status != "ok" {
		t.Errorf("with the opt-in: kubelet %s %s %v", st.Status, st.Error, st.Notes)
	}
	if d := string(r.file(t, "kubelet/goroutine-debug2.txt")); !strings.Contains(d, "goroutine ") {
		t.Errorf("with the opt-in, goroutine-debug2.txt holds no goroutine: %.200s", d)
	}
	checkNoSecret(t, r, ptoken)
}

// checkHealthy fails on any finding of severity warning or above, and
// checks that analyze read the running kubelet's version (v1.34) from the
// bundle, which the version-dependent findings rely on.
func checkHealthy(t *testing.T, bundlePath string) {
	t.Helper()
	rep := analyzeReport(t, bundlePath)
	if !strings.HasPrefix(rep.KubeletVersion, "v1.34.") {
		t.Errorf("analyze read the kubelet's version as %q (from %q), want the cluster's v1.34", rep.KubeletVersion, rep.KubeletVersionFrom)
	}
	for _, f := range rep.Findings {
		if f.Severity < analyze.Warning {
			continue
		}
		if kernelHistory(f, suiteStart) {
			// The machine's kernel said it before this suite began (an
			// earlier run's loop device, a task blocked then): history
			// of the machine, not of the node the suite set up. Shown,
			// not counted.
			t.Logf("kernel records from before the suite began (not counted): %s %s (%s): %s", f.Severity, f.ID, f.Subject, f.Summary)
			continue
		}
		t.Errorf("a healthy real node gets %s %s (%s): %s", f.Severity, f.ID, f.Subject, f.Summary)
	}
}

// suiteStart is when this test binary began: kernel records older than it
// are the machine's history.
var suiteStart = time.Now()

// kernelHistory says whether every line a finding shows is a kernel log
// record stamped before since. A line without a stamp that reads, or of
// another file, makes it false.
func kernelHistory(f analyze.Finding, since time.Time) bool {
	n := 0
	for _, e := range f.Evidence {
		if e.Path != "journal/kernel.log" && e.Path != "journal/dmesg.log" && e.Path != "journal/kern.log" {
			return false
		}
		for _, l := range e.Lines {
			stamp, _, _ := strings.Cut(l.Text, " ")
			stamp = strings.Replace(stamp, ",", ".", 1)
			var at time.Time
			var err error
			for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999-0700"} {
				if at, err = time.Parse(layout, stamp); err == nil {
					break
				}
			}
			if err != nil || !at.Before(since) {
				return false
			}
			n++
		}
	}
	return n > 0
}

// checkNoSecret fails when any file of the bundle holds the token given to
// the run, or its signature (the part of a JWT that is the secret).
func checkNoSecret(t *testing.T, r *run, token string) {
	t.Helper()
	sig := token
	if i := strings.LastIndexByte(token, '.'); i > 0 {
		sig = token[i+1:]
	}
	for name, data := range r.b.Files {
		if bytes.Contains(data, []byte(sig)) {
			t.Errorf("%s holds the run's kubelet token", name)
		}
	}
}

// checkNodeEvidence asserts what any run on this node must carry, whoever
// runs it: the kubelet's and containerd's journal lines, the runtime's
// listing of the e2e pods, and the CSI volume the kubelet published.
func checkNodeEvidence(t *testing.T, r *run) {
	t.Helper()
	journal := ""
	for name, data := range r.b.Files {
		if strings.HasPrefix(name, "journal/") && strings.Contains(name, "kubelet") {
			journal += string(data)
		}
	}
	if !strings.Contains(journal, "kubelet") || strings.Count(journal, "\n") < 10 {
		t.Errorf("the bundle has %d kubelet journal lines; want the kubelet's log (journal collector: %s %v)",
			strings.Count(journal, "\n"), r.status(t, "journal").Status, r.status(t, "journal").Notes)
	}
	runtimeText := ""
	for name, data := range r.b.Files {
		if strings.HasPrefix(name, "runtime/") {
			runtimeText += string(data)
		}
	}
	if !strings.Contains(runtimeText, "csi-hostpath-node") || !strings.Contains(runtimeText, "volume-user") {
		t.Errorf("the runtime collector's files do not list the e2e pods (runtime: %s %v)",
			r.status(t, "runtime").Status, r.status(t, "runtime").Notes)
	}
	csiText := ""
	for name, data := range r.b.Files {
		if strings.HasPrefix(name, "csi/") {
			csiText += string(data)
		}
	}
	if !strings.Contains(csiText, "vol-1") || !strings.Contains(csiText, "hostpath.csi.k8s.io") {
		t.Errorf("the csi collector did not find the published volume vol-1 of hostpath.csi.k8s.io (csi: %s %v)",
			r.status(t, "csi").Status, r.status(t, "csi").Notes)
	}
}

// hostBundles lists the bundles in a node directory.
func hostBundles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	m := map[string]bool{}
	matches, _ := filepath.Glob(filepath.Join(dir, "nodesnap-*.tar.gz"))
	for _, p := range matches {
		m[p] = true
	}
	return m
}

// newBundle waits for one bundle that was not in before to appear in dir.
func newBundle(t *testing.T, dir string, before map[string]bool, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for p := range hostBundles(t, dir) {
			if !before[p] {
				return p
			}
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("no new bundle in %s within %s", dir, within)
	return ""
}

func (c *cluster) image(t *testing.T) string {
	t.Helper()
	img := os.Getenv("NODESNAP_E2E_IMAGE")
	if img == "" {
		t.Fatal("NODESNAP_E2E_IMAGE is unset: make e2e-k8s imports the `make image` archive into the node's containerd and names it here")
	}
	return img
}

// manifest reads a deploy/kubernetes manifest with the node and image filled
// in, as docs/kubernetes.md tells a user to.
// csiVolumeUser is the manifest of a PersistentVolume pv of the CSI driver
// with volume handle handle, its claim in the e2e namespace, and a pause
// pod on the node that mounts the claim at /data.
func (c *cluster) csiVolumeUser(driver, handle, pv, claim, pod string) string {
	return strings.NewReplacer("NODE_NAME", c.node, "DRIVER", driver, "HANDLE", handle,
		"PV_NAME", pv, "CLAIM", claim, "POD_NAME", pod).Replace(`apiVersion: v1
kind: PersistentVolume
metadata: {name: PV_NAME}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef: {namespace: e2e, name: CLAIM}
  csi: {driver: DRIVER, volumeHandle: HANDLE}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: CLAIM, namespace: e2e}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: PV_NAME
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: POD_NAME, namespace: e2e}
spec:
  nodeName: NODE_NAME
  tolerations: [{operator: Exists}]
  terminationGracePeriodSeconds: 1
  containers:
    - name: pause
      image: registry.k8s.io/pause:3.10
      imagePullPolicy: Never
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: CLAIM}
`)
}

func (c *cluster) manifest(t *testing.T, name string) string {
	t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("NODE_NAME", c.node, "NODESNAP_IMAGE", c.image(t)).Replace(string(raw))
}

func analyzeIDs(t *testing.T, bundlePath string) []string {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), "analyze", "--output", "json", bundlePath)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("analyze: %v", err)
	}
	var rep struct {
		Findings []struct {
			ID      string `json:"id"`
			Summary string `json:"summary"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("analyze --output json: %v\n%s", err, out)
	}
	var ids []string
	for _, f := range rep.Findings {
		ids = append(ids, f.ID+": "+f.Summary)
	}
	return ids
}

// TestJobInPod runs deploy/kubernetes/job.yaml as a user would, with the
// image `make image` builds, on a node whose / is a private mount: the pod
// starts, the collection ends with the bundle on the node's host path (and
// says so), the kubelet collector authenticates with the pod's own
// ServiceAccount token, the bundle comes out through the API byte for
// byte, and it carries the same evidence as a run on the node by hand.
func TestJobInPod(t *testing.T) {
	c := requireCluster(t)
	const hostDir = "/var/tmp/nodesnap"
	before := hostBundles(t, hostDir)
	// A node file reached through an absolute symlink, as the node's own
	// are (kubelet-client-current.pem, resolv.conf, CNI and CSI paths):
	// in the pod, --root /host must lead to the node's file under /host,
	// not to the container's (which has none).
	absLink, absTarget := "/etc/nfsmount.conf", "/var/tmp/nodesnap-e2e-abslink-target.conf"
	const absContent = "# nodesnap e2e: reached through an absolute symlink\n"
	madeLink := false
	if _, err := os.Lstat(absLink); os.IsNotExist(err) {
		if err := os.WriteFile(absTarget, []byte(absContent), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(absTarget, absLink); err != nil {
			t.Fatal(err)
		}
		madeLink = true
		t.Cleanup(func() { os.Remove(absLink); os.Remove(absTarget) })
	} else {
		t.Logf("%s exists on this machine: the absolute-link check is left out", absLink)
	}
	job := "nodesnap-" + c.node
	c.k(t, c.manifest(t, "job.yaml"), "apply", "-f", "-")
	t.Cleanup(func() {
		c.k(t, "", "-n", "nodesnap", "delete", "job", job, "--wait=true", "--timeout=2m", "--cascade=foreground")
		for p := range hostBundles(t, hostDir) {
			if !before[p] {
				_ = os.Remove(p)
				_ = os.Remove(p + ".sha256")
			}
		}
	})
	pod := c.podOf(t, "nodesnap", "job-name="+job, time.Minute)
	c.k(t, "", "-n", "nodesnap", "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=4m")
	if code := c.k(t, "", "-n", "nodesnap", "get", "pod", pod, "-o", "jsonpath={.status.initContainerStatuses[0].state.terminated.exitCode}"); code != "0" {
		t.Fatalf("the collect container ended with %q\n%s", code, c.k(t, "", "-n", "nodesnap", "logs", pod, "-c", "collect"))
	}
	onNode := newBundle(t, hostDir, before, 30*time.Second)
	logs := c.k(t, "", "-n", "nodesnap", "logs", pod, "-c", "collect")
	if !strings.Contains(logs, onNode) {
		t.Errorf("the collect container's output does not name the bundle's path on the node %s:\n%s", onNode, logs)
	}

	// Out through the API, as docs/kubernetes.md says, byte for byte.
	copied := filepath.Join(t.TempDir(), filepath.Base(onNode))
	data := c.k(t, "", "-n", "nodesnap", "exec", pod, "-c", "hold", "--", "nodesnap", "bundle-cat", filepath.Base(onNode))
	if err := os.WriteFile(copied, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(onNode)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, []byte(data)) {
		t.Fatalf("bundle-cat through kubectl exec gave %d bytes, the node holds %d", len(data), len(want))
	}
	if out, err := exec.Command(testkit.Binary(t), "validate", copied).CombinedOutput(); err != nil {
		t.Fatalf("validate of the copied bundle: %v\n%s", err, out)
	}

	inPod := &run{path: copied, b: readBundle(t, copied)}
	if st := inPod.status(t, "kubelet"); st.Status != "ok" {
		t.Errorf("in the pod, kubelet collector: %s %s %v", st.Status, st.Error, st.Notes)
	}
	// The pod's own service account, CA and node name: the API's view.
	if st := inPod.status(t, "cluster"); st.Status != "ok" {
		t.Errorf("in the pod, cluster collector: %s %s %v", st.Status, st.Error, st.Notes)
	}
	checkNodeEvidence(t, inPod)
	if madeLink {
		if got := string(inPod.b.Files["nodeconfig/files"+absLink]); got != absContent {
			t.Errorf("in the pod, %s (→ %s on the node) was read as %q, want the node's file", absLink, absTarget, got)
		}
	}
	for _, f := range analyzeIDs(t, copied) {
		if strings.HasPrefix(f, "mount-held-in-foreign-namespace") {
			t.Errorf("the in-pod bundle holds evidence against the node from nodesnap's own pod: %s", f)
		}
	}
	// The node is healthy: nothing at warning or above, from the pod
	// either (the kubelet's start lines, its PLEG line among them, are in
	// the journal the pod reads).
	checkHealthy(t, copied)

	// Side by side with a run on the node by hand, made now, while the
	// Job's pod is still there for both to see.
	onHost := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + c.token(t)}, "--kubelet-pprof=false")
	compareRuns(t, onHost, inPod)
	t.Logf("collection wall time: %.2fs in the Job's pod, %.2fs on the node; bundle %d and %d bytes",
		inPod.b.Manifest.DurationSeconds, onHost.b.Manifest.DurationSeconds, len(want), fileSize(t, onHost.path))
}

// compareRuns checks that a --root /host run in a pod carries the evidence
// of a run on the node: the same collectors with the same outcome, the
// same kubelet, runtime, CSI and journal files.
func compareRuns(t *testing.T, host, pod *run) {
	t.Helper()
	// Nothing to compare is a failure, not a pass.
	if len(host.b.Manifest.Collectors) == 0 || len(host.b.Files) == 0 {
		t.Fatalf("the host run's bundle has %d collectors and %d files: nothing to compare the pod's with", len(host.b.Manifest.Collectors), len(host.b.Files))
	}
	for _, hc := range host.b.Manifest.Collectors {
		pc := pod.b.Manifest.Collector(hc.Name)
		switch {
		case pc == nil:
			t.Errorf("collector %s ran on the host but not in the pod", hc.Name)
		case hc.Status == "ok" && pc.Status != "ok":
			t.Errorf("collector %s: ok on the host, %s in the pod: %s %v", hc.Name, pc.Status, pc.Error, pc.Notes)
		}
	}
	// What a client program on the node printed (ctr, crictl, docker) has
	// no counterpart in the image, which has none: the CRI API's answers
	// must be there instead.
	fromClient := regexp.MustCompile(`/(ctr|crictl)-[a-z-]+\.(txt|json)(\.stderr)?$|/docker-(ps|info)\.txt$`)
	for _, prefix := range []string{"kubelet/", "runtime/", "csi/", "journal/", "nodeconfig/"} {
		for name := range host.b.Files {
			if strings.HasPrefix(name, prefix) && !fromClient.MatchString(name) {
				if _, ok := pod.b.Files[name]; !ok {
					t.Errorf("the host run has %s, the pod run does not", name)
				}
			}
		}
	}
	lines := func(r *run) int {
		n := 0
		for name, data := range r.b.Files {
			if strings.HasPrefix(name, "journal/") && strings.Contains(name, "kubelet") {
				n += bytes.Count(data, []byte("\n"))
			}
		}
		return n
	}
	// The host run comes later, so it may hold a few more lines; the pod's
	// must not be missing a large part of the log.
	if h, p := lines(host), lines(pod); p < h*9/10 {
		t.Errorf("the pod run kept %d kubelet journal lines, the host run %d", p, h)
	}
}

// TestDaemonSet runs deploy/kubernetes/daemonset.yaml: its pod starts on a
// node whose / is private, collects once and holds the bundle.
func TestDaemonSet(t *testing.T) {
	c := requireCluster(t)
	const hostDir = "/var/tmp/nodesnap"
	before := hostBundles(t, hostDir)
	c.k(t, c.manifest(t, "daemonset.yaml"), "apply", "-f", "-")
	t.Cleanup(func() {
		c.k(t, "", "-n", "nodesnap", "delete", "daemonset", "nodesnap", "--wait=true", "--timeout=2m", "--cascade=foreground")
		for p := range hostBundles(t, hostDir) {
			if !before[p] {
				_ = os.Remove(p)
				_ = os.Remove(p + ".sha256")
			}
		}
	})
	c.k(t, "", "-n", "nodesnap", "rollout", "status", "daemonset/nodesnap", "--timeout=4m")
	onNode := newBundle(t, hostDir, before, 30*time.Second)
	r := &run{path: onNode, b: readBundle(t, onNode)}
	if st := r.status(t, "kubelet"); st.Status != "ok" {
		t.Errorf("in the DaemonSet's pod, kubelet collector: %s %s %v", st.Status, st.Error, st.Notes)
	}
	checkNodeEvidence(t, r)
}

// TestKubectlDebugNode follows docs/kubernetes.md's kubectl debug recipe:
// a debug pod that holds, a collection and a copy through kubectl exec.
func TestKubectlDebugNode(t *testing.T) {
	c := requireCluster(t)
	out := c.k(t, "", "debug", "node/"+c.node, "--profile=sysadmin", "--image="+c.image(t), "-n", "nodesnap",
		"--", "nodesnap", "hold", "--dir", "/host/var/tmp", "--for", "1h")
	pod := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "node-debugger-") {
			pod = strings.TrimSuffix(f, ".")
		}
	}
	if pod == "" {
		t.Fatalf("kubectl debug did not name its pod:\n%s", out)
	}
	t.Cleanup(func() { c.k(t, "", "-n", "nodesnap", "delete", "pod", pod, "--wait=true", "--timeout=2m") })
	c.k(t, "", "-n", "nodesnap", "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=3m")

	before := hostBundles(t, "/var/tmp")
	t.Cleanup(func() {
		for p := range hostBundles(t, "/var/tmp") {
			if !before[p] {
				_ = os.Remove(p)
				_ = os.Remove(p + ".sha256")
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectl, "--kubeconfig", c.kubeconfig, "-n", "nodesnap", "exec", pod, "--",
		"nodesnap", "collect", "--root", "/host", "--output-dir", "/host/var/tmp")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 3) {
		t.Fatalf("collect in the debug pod: %v\n%s\n%s", err, so.String(), se.String())
	}
	onNode := newBundle(t, "/var/tmp", before, 10*time.Second)
	data := c.k(t, "", "-n", "nodesnap", "exec", pod, "--", "nodesnap", "bundle-cat", "--dir", "/host/var/tmp", "latest")
	want, err := os.ReadFile(onNode)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, []byte(data)) {
		t.Fatalf("bundle-cat latest gave %d bytes; the newest bundle on the node, %s, has %d", len(data), onNode, len(want))
	}
	r := &run{path: onNode, b: readBundle(t, onNode)}
	checkNodeEvidence(t, r)
	for _, f := range analyzeIDs(t, onNode) {
		if strings.HasPrefix(f, "mount-held-in-foreign-namespace") {
			t.Errorf("the debug pod's own namespace is evidence against the node: %s", f)
		}
	}
}

// TestHostRunNoToken is a run by hand on the node with no credential: the
// kubelet refuses (anonymous authentication is off), the run collects what
// needs none, ends by naming what is missing and the command that fixes
// it — and that command, run as printed, does fix it.
func TestHostRunNoToken(t *testing.T) {
	c := requireCluster(t)
	r := collect(t, nil)
	if r.code != 3 {
		t.Fatalf("collect with no credential exited %d, want 3 (partial)\n%s", r.code, r.stderr)
	}
	if st := r.status(t, "kubelet"); st.Status != "partial" {
		t.Errorf("kubelet collector: %s, want partial", st.Status)
	}
	const fix = "kubectl -n nodesnap create token nodesnap --duration=10m | sudo nodesnap collect --kubelet-token-file /dev/stdin"
	if !strings.Contains(r.stderr, fix) || !strings.Contains(r.stderr, "pods") {
		t.Fatalf("the run does not end by naming the missing evidence and %q:\n%s", fix, r.stderr)
	}
	// The printed fix, as root (no sudo needed here), through a pipe.
	out := t.TempDir()
	sh := c.kubectl + " --kubeconfig " + c.kubeconfig + " -n nodesnap create token nodesnap --duration=10m | " +
		testkit.Binary(t) + " collect --quiet --output-dir " + out + " --kubelet-token-file /dev/stdin"
	cmd := exec.Command("bash", "-o", "pipefail", "-c", sh)
	cmd.Env = withoutToken()
	if b, err := cmd.CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("the printed fix failed: %v\n%s", err, b)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(out, "nodesnap-*.tar.gz"))
	if len(matches) != 1 {
		t.Fatalf("the printed fix left %d bundles", len(matches))
	}
	fixed := &run{path: matches[0], b: readBundle(t, matches[0])}
	// The least-privilege token: everything but the pprof dumps, and the
	// one remedy left is the pprof opt-in.
	if st := fixed.status(t, "kubelet"); st.Status != "ok" &&
		(st.Status != "partial" || len(st.Remedies) != 1 || !strings.Contains(strings.Join(st.Remedies[0].Fix, "\n"), "nodesnap manifests rbac rbac-pprof")) {
		t.Errorf("with the printed fix, kubelet collector: %s %v %+v", st.Status, st.Notes, st.Remedies)
	}
	if pods := podNames(t, fixed.file(t, "kubelet/pods.json")); !contains(pods, "e2e/volume-user") {
		t.Errorf("with the printed fix, kubelet/pods.json lacks e2e/volume-user: %v", pods)
	}
}

// TestHostRunTokenWithoutRights: a token of a ServiceAccount that lacks
// the rights of deploy/kubernetes/rbac.yaml gets 403 from the real kubelet;
// the run names the identity and the binding that fixes it.
func TestHostRunTokenWithoutRights(t *testing.T) {
	c := requireCluster(t)
	c.k(t, "", "-n", "nodesnap", "create", "serviceaccount", "no-rights")
	t.Cleanup(func() { c.k(t, "", "-n", "nodesnap", "delete", "serviceaccount", "no-rights", "--ignore-not-found") })
	token := strings.TrimSpace(c.k(t, "", "-n", "nodesnap", "create", "token", "no-rights", "--duration", "10m"))
	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + token})
	if r.code != 3 {
		t.Fatalf("collect with a token without rights exited %d, want 3\n%s", r.code, r.stderr)
	}
	if st := r.status(t, "kubelet"); st.Status != "partial" && st.Status != "error" {
		t.Errorf("kubelet collector: %s, want partial or error", st.Status)
	}
	for _, want := range []string{"403", "system:serviceaccount:nodesnap:no-rights", "kubectl create clusterrolebinding"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the run's last words lack %q:\n%s", want, r.stderr)
		}
	}
	checkNoSecret(t, r, token)
}

// TestHostRunKubeadmCertificate: on a control-plane node set up by kubeadm,
// the apiserver's kubelet client certificate is the credential meant for
// this path; with no token nodesnap uses it and says so.
func TestHostRunKubeadmCertificate(t *testing.T) {
	c := requireCluster(t)
	const pki = "/etc/kubernetes/pki"
	if _, err := os.Stat("/etc/kubernetes"); err == nil {
		skip.Because(t, "/etc/kubernetes exists on this machine: not planting a kubeadm layout over it")
	}
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll("/etc/kubernetes") })
	src := filepath.Join(filepath.Dir(c.kubeconfig), "pki")
	for _, ext := range []string{".crt", ".key"} {
		b, err := os.ReadFile(filepath.Join(src, "apiserver-kubelet-client"+ext))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pki, "apiserver-kubelet-client"+ext), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := collect(t, nil)
	if st := r.status(t, "kubelet"); st.Status != "ok" {
		t.Fatalf("kubelet collector with kubeadm's certificate: %s %v\n%s", st.Status, st.Notes, r.stderr)
	}
	if req := string(r.file(t, "kubelet/requests.json")); !strings.Contains(req, "apiserver-kubelet-client") {
		t.Errorf("kubelet/requests.json does not say kubeadm's certificate was used:\n%.600s", req)
	}
	key, _ := os.ReadFile(filepath.Join(pki, "apiserver-kubelet-client.key"))
	body := strings.Split(strings.TrimSpace(string(key)), "\n")
	for name, data := range r.b.Files {
		for _, line := range body[1 : len(body)-1] {
			if len(line) >= 32 && bytes.Contains(data, []byte(line)) {
				t.Fatalf("%s holds a line of the kubelet client key", name)
			}
		}
	}
}

// withoutToken is this process's environment without a kubelet token.
func withoutToken() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NODESNAP_KUBELET_TOKEN=") {
			env = append(env, kv)
		}
	}
	return env
}

// TestIncident002LoopHeldByAnotherPodsNamespace reproduces incident 002 on
// the real kubelet and CSI driver: a block-backed volume (a loop device
// with ext4, as rbd is) staged and published to a pod; an agent pod that
// also mounted the device in its own mount namespace (a backup or scanning
// agent; node_exporter's copy of the host's root in the original
// incident); the volume's pod is deleted, the kubelet unpublishes and
// unstages on the host, and the device stays in use, held only in the
// agent's namespace. nodesnap must say so and name the agent's pod and
// container.
//
// (On kernels since 3.18 the host's rmdir of a mountpoint detaches copies
// of that mount in other namespaces, so a mere copy of the staging path no
// longer outlives the unstage; a mount the agent made itself, at a path of
// its own, does.)
func TestIncident002LoopHeldByAnotherPodsNamespace(t *testing.T) {
	c := requireCluster(t)
	for _, tool := range []string{"mkfs.ext4", "truncate"} {
		testkit.RequireTool(t, tool)
	}
	img := "/var/lib/csi-hostpath-data/vol-002.img"
	if out, err := exec.Command("truncate", "-s", "64M", img).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { _ = os.Remove(img) })
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	volume := c.csiVolumeUser("hostpath.csi.k8s.io", "vol-002", "e2e-vol-002", "data-002", "loop-user")
	agent := strings.NewReplacer("NODE_NAME", c.node, "IMAGE", c.image(t)).Replace(`apiVersion: v1
kind: Pod
metadata: {name: host-root-agent, namespace: e2e}
spec:
  nodeName: NODE_NAME
  tolerations: [{operator: Exists}]
  terminationGracePeriodSeconds: 1
  containers:
    - name: agent
      image: IMAGE
      imagePullPolicy: IfNotPresent
      command: ["/usr/local/bin/nodesnap", "hold", "--dir", "/host/var/tmp", "--for", "1h"]
      volumeMounts: [{name: root, mountPath: /host, readOnly: true}]
  volumes:
    - name: root
      hostPath: {path: /}
`)
	t.Cleanup(func() {
		// The claim's pod first: while it waits to start, the kubelet
		// retries the stage, which succeeds the moment the agent lets go,
		// and a later test's new mount namespace would copy that mount.
		c.k(t, "", "-n", "e2e", "delete", "pod", "loop-user", "--ignore-not-found", "--wait=true", "--timeout=2m")
		c.k(t, "", "-n", "e2e", "delete", "pod", "host-root-agent", "--ignore-not-found", "--wait=true", "--timeout=2m")
		c.k(t, "", "-n", "e2e", "delete", "pvc", "data-002", "--ignore-not-found", "--wait=true", "--timeout=1m")
		c.k(t, "", "delete", "pv", "e2e-vol-002", "--ignore-not-found", "--wait=true", "--timeout=1m")
		// The agent's namespace went with its pod, and with it the last
		// mount of the loop device, which detaches itself (autoclear).
		for end := time.Now().Add(30 * time.Second); loopBackedBy(t, img) != "" && time.Now().Before(end); time.Sleep(time.Second) {
		}
		// A mount of it in any namespace keeps it attached; once detached,
		// its number is free for anyone else's loop device.
		if dev := loopBackedBy(t, img); dev != "" {
			t.Errorf("the loop device %s of %s is still attached after the test, mounted in the namespaces of %v", dev, img, mountedBy(dev))
		}
	})
	c.k(t, volume, "apply", "-f", "-")
	c.k(t, "", "-n", "e2e", "wait", "--for=condition=Ready", "pod/loop-user", "--timeout=2m")
	if dev := loopBackedBy(t, img); dev == "" {
		t.Fatalf("no loop device is backed by %s once the volume is staged", img)
	} else {
		t.Logf("the volume is on loop device %s", dev)
	}
	c.k(t, agent, "apply", "-f", "-")
	c.k(t, "", "-n", "e2e", "wait", "--for=condition=Ready", "pod/host-root-agent", "--timeout=2m")
	// The agent mounts the device in its own namespace, at its own /tmp.
	agentPID := ""
	for _, l := range strings.Split(c.k(t, "", "-n", "e2e", "get", "pod", "host-root-agent", "-o", "jsonpath={.status.containerStatuses[0].containerID}"), "\n") {
		agentPID = pidOfContainer(t, strings.TrimPrefix(l, "containerd://"))
	}
	major, minor, _ := strings.Cut(loopBackedBy(t, img), ":")
	// mount -N does the mount(2) inside the agent's namespace, where the
	// node's /dev is /host/dev.
	if out, err := exec.Command("mount", "-N", agentPID, "-t", "ext4", "/host/dev/loop"+minor, "/tmp").CombinedOutput(); err != nil || major != "7" {
		t.Fatalf("mounting the volume's device in the agent's namespace: %v %s", err, out)
	}
	c.k(t, "", "-n", "e2e", "delete", "pod", "loop-user", "--wait=true", "--timeout=2m")
	// The kubelet has unstaged it: the host no longer mounts the loop
	// device, the agent's namespace still does.
	dev := loopBackedBy(t, img)
	if dev == "" {
		t.Fatalf("the loop device of %s was detached: the agent's namespace did not keep the mount", img)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		if !strings.Contains(string(mi), " "+dev+" ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kubelet did not unmount e2e-vol-002 from the host within 60s")
		}
		time.Sleep(time.Second)
	}

	// What the user sees: the claim's pod comes back (as its StatefulSet
	// makes it again) and waits in ContainerCreating, because the driver
	// will not stage an image that is still in use (ceph-csi's "rbd image
	// ... is still being used"): the volume never came off the node.
	c.k(t, volume, "apply", "-f", "-")
	c.waitPodEvent(t, "e2e", "loop-user", "FailedMount", "still being used", 2*time.Minute)
	c.waitInTrouble(t, "e2e", "loop-user")

	kc, _, _, _ := c.saKubeconfig(t)
	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + c.token(t)}, "--kubeconfig", kc, "--node-name", c.node)
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect exited %d\n%s", r.code, r.stderr)
	}
	found := false
	for _, f := range analyzeIDs(t, r.path) {
		if strings.HasPrefix(f, "mount-held-in-foreign-namespace") && strings.Contains(f, "loop") {
			found = true
			if !strings.Contains(f, "in pod e2e/host-root-agent, container agent") {
				t.Errorf("the finding does not name the agent's pod and container: %s", f)
			}
		}
	}
	if !found {
		t.Errorf("analyze does not report the loop device held only in the agent's namespace: %v", analyzeIDs(t, r.path))
	}
	// explain names the chain: the pod cannot start ← its volume's device
	// held in the agent's namespace; from this host run and through the
	// cluster. A healthy pod with a CSI volume has nothing wrong.
	c.explainHostAndFleet(t, r, "e2e", "loop-user", "volume-user", func(where string, first analyze.ChainLink) {
		if first.Finding != "mount-held-in-foreign-namespace" || !strings.Contains(first.Summary, "loop") || !strings.Contains(first.How, "cannot start") {
			t.Errorf("%s: the chain starts with %s %q (%s), want the loop device held in the agent's namespace", where, first.Finding, first.Summary, first.How)
		}
	})
}

// TestIncident003StaleFUSEUnderOrphanedPodDir reproduces incident 003 on
// the real kubelet: a FUSE mount whose daemon stopped answering, under the
// volume directory of a pod the kubelet no longer knows. The kubelet's
// housekeeping (cleanupOrphanedPodDirs) stats it within seconds and blocks
// in request_wait_answer; nodesnap must finish and name the hung mount.
// It runs last: until the mount is aborted the kubelet starts no pod.
func TestIncident003StaleFUSEUnderOrphanedPodDir(t *testing.T) {
	c := requireCluster(t)
	token := c.pprofToken(t)
	uid := "3f0b6a2e-5c1d-4e8f-9a7b-0c3d2e1f0a03"
	podDir := filepath.Join("/var/lib/kubelet/pods", uid)
	mp := filepath.Join(podDir, "volumes/kubernetes.io~csi/pvc-0003/mount")
	t.Cleanup(func() { _ = os.RemoveAll(podDir) })
	f := testkit.HungFUSE(t, mp, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))

	pid, err := os.ReadFile(filepath.Join(filepath.Dir(c.kubeconfig), "pids", "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	kubelet := strings.TrimSpace(string(pid))
	blocked := func() bool {
		tasks, _ := filepath.Glob(filepath.Join("/proc", kubelet, "task", "*", "wchan"))
		for _, w := range tasks {
			if b, _ := os.ReadFile(w); strings.Contains(string(b), "request_wait_answer") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(60 * time.Second)
	for !blocked() && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	if !blocked() {
		t.Fatalf("the kubelet (pid %s) did not block on the hung mount %s within 60s", kubelet, mp)
	}

	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + token}, "--timeout", "90s")
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect exited %d\n%s", r.code, r.stderr)
	}
	findings := analyzeIDs(t, r.path)
	named := false
	for _, f := range findings {
		if strings.HasPrefix(f, "hung-mount") && strings.Contains(f, mp) {
			named = true
		}
	}
	if !named {
		t.Errorf("analyze does not name the hung mount %s: %v", mp, findings)
	}
	t.Logf("findings: %v", findings)
	if err := f.Close(); err != nil {
		t.Errorf("releasing the hung mount: %v", err)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// loopBackedBy returns the major:minor of the loop device backed by img,
// or "".
func loopBackedBy(t *testing.T, img string) string {
	t.Helper()
	devs, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, bf := range devs {
		if b, err := os.ReadFile(bf); err == nil && strings.TrimSpace(string(b)) == img {
			d, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(bf)), "dev"))
			if err == nil {
				return strings.TrimSpace(string(d))
			}
		}
	}
	return ""
}

// pidOfContainer finds the pid of a container's first process by its cgroup.
func pidOfContainer(t *testing.T, id string) string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(id)) {
			return filepath.Base(filepath.Dir(p))
		}
	}
	t.Fatalf("no process of container %s", id)
	return ""
}

// podOf waits for the controller to create a pod matching selector and
// returns its name (kubectl wait -l fails at once while there is none).
func (c *cluster) podOf(t *testing.T, ns, selector string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		name := c.k(t, "", "-n", ns, "get", "pod", "-l", selector, "-o", "jsonpath={.items[*].metadata.name}")
		if f := strings.Fields(name); len(f) > 0 {
			return f[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pod matches %s in %s after %s", selector, ns, within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestIncident003BehindHungMountsElsewhere is incident 003 on a node where
// another mount namespace (a CSI plugin full of stale ceph-fuse mounts)
// holds 200 hung FUSE mounts: the kubelet's own hung volume mount must
// still be probed and reported, analyze must name it and its pod, and
// nothing may say that no probed mount hung. A run on the node: while the
// kubelet's housekeeping is stuck it starts no pod, the Job's included.
func TestIncident003BehindHungMountsElsewhere(t *testing.T) {
	c := requireCluster(t)
	const others = 200
	token := c.pprofToken(t)
	// The 200: mounted here, copied into the holder's private namespace,
	// then detached here, so that only the holder's namespace has them.
	// Cleanup (LIFO): the holder is killed by pid first, then each FUSE
	// connection is aborted and its server stopped.
	plugin := t.TempDir()
	fuses := make([]*testkit.FUSE, 0, others)
	for i := 0; i < others; i++ {
		mp := filepath.Join(plugin, "mnt", fmt.Sprintf("v%03d", i))
		fuses = append(fuses, testkit.HungFUSE(t, mp, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse")))
	}
	holder := testkit.HoldInPrivateNamespace(t, fuses[others-1].Mountpoint())
	for _, f := range fuses {
		if err := unix.Unmount(f.Mountpoint(), unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			t.Fatalf("detaching %s on the host: %v", f.Mountpoint(), err)
		}
	}

	uid := "3f0b6a2e-5c1d-4e8f-9a7b-0c3d2e1f0a33"
	podDir := filepath.Join("/var/lib/kubelet/pods", uid)
	mp := filepath.Join(podDir, "volumes/kubernetes.io~csi/pvc-0033/mount")
	t.Cleanup(func() { _ = os.RemoveAll(podDir) })
	vol := testkit.HungFUSE(t, mp, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	c.waitKubeletBlocked(t, 60*time.Second)

	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + token}, "--timeout", "90s")
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect exited %d\n%s", r.code, r.stderr)
	}
	var rep layout.MountProbeReport
	if err := json.Unmarshal(r.file(t, "mountprobe/probes.json"), &rep); err != nil {
		t.Fatalf("mountprobe/probes.json: %v", err)
	}
	var kubeletProbe *layout.MountProbe
	hungElsewhere := 0
	for i := range rep.Probes {
		p := &rep.Probes[i]
		switch {
		case p.Mountpoint == mp:
			kubeletProbe = p
		case strings.HasPrefix(p.Mountpoint, plugin) && p.Result == layout.ProbeHung && contains(nsStrings(p.Namespaces), strconv.FormatUint(holder.NSInode, 10)):
			hungElsewhere++
		}
	}
	if kubeletProbe == nil || kubeletProbe.Result != layout.ProbeHung {
		t.Errorf("the kubelet's mount %s was not probed hung: %+v", mp, kubeletProbe)
	}
	if hungElsewhere < others/2 {
		t.Errorf("only %d of the %d mounts of namespace %d were probed hung", hungElsewhere, others, holder.NSInode)
	}
	if kubeletProbe != nil {
		t.Logf("probes: %v; the kubelet's mount started at %.0f ms, ended at %.0f ms", rep.Counts, kubeletProbe.StartedMS, kubeletProbe.DoneMS)
	}

	rp := analyzeReport(t, r.path)
	named := false
	for _, f := range rp.Findings {
		if (f.ID == "hung-mount" || f.ID == "mount-not-probed") && strings.Contains(f.Summary, mp) {
			named = true
			if !strings.Contains(f.Summary, "pod "+uid) {
				t.Errorf("the finding names the mount but not its pod %s: %s", uid, f.Summary)
			}
		}
		for _, s := range []string{f.Summary, f.Explanation} {
			if strings.Contains(s, "No probed mount hung") || strings.Contains(s, "No probe of its mounts hung") {
				t.Errorf("%s %s contradicts the hung mounts: %s", f.ID, f.Subject, s)
			}
		}
	}
	if !named {
		t.Errorf("analyze does not name the kubelet's hung mount %s among %d findings", mp, len(rp.Findings))
	}
	checkRankedAndGrouped(t, rp, mp, plugin, strconv.FormatUint(holder.NSInode, 10), hungElsewhere)
	if err := vol.Close(); err != nil {
		t.Errorf("releasing the kubelet's hung mount: %v", err)
	}
}

// waitKubeletBlocked waits for a kubelet thread to sleep in a FUSE request.
func (c *cluster) waitKubeletBlocked(t *testing.T, within time.Duration) {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(filepath.Dir(c.kubeconfig), "pids", "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	kubelet := strings.TrimSpace(string(pid))
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		tasks, _ := filepath.Glob(filepath.Join("/proc", kubelet, "task", "*", "wchan"))
		for _, w := range tasks {
			if b, _ := os.ReadFile(w); strings.Contains(string(b), "request_wait_answer") {
				return
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("the kubelet (pid %s) did not block on a hung mount within %s", kubelet, within)
}

func nsStrings(ns []uint64) []string {
	var out []string
	for _, n := range ns {
		out = append(out, strconv.FormatUint(n, 10))
	}
	return out
}

// analyzeReport runs analyze --json on a bundle (exit 0 or 3).
func analyzeReport(t *testing.T, bundlePath string) *analyze.Report {
	t.Helper()
	out, err := exec.Command(testkit.Binary(t), "analyze", "--json", bundlePath).Output()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 3) {
		t.Fatalf("analyze: %v", err)
	}
	var rep analyze.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("analyze --json: %v\n%.2000s", err, out)
	}
	return &rep
}

// checkRankedAndGrouped: the finding that stops every pod (the kubelet's
// hung mount kubeletMP, which its housekeeping is stuck on) comes first
// among those at warning or above, and the hung mounts under elsewhere,
// all in the mount namespace ns, are one finding (one cause: one FUSE
// daemon, one namespace) standing for each of them, not one per mount.
func checkRankedAndGrouped(t *testing.T, rp *analyze.Report, kubeletMP, elsewhere, ns string, hungElsewhere int) {
	t.Helper()
	var ranked []string
	for i, f := range rp.Findings {
		if f.Severity >= analyze.Warning {
			ranked = append(ranked, fmt.Sprintf("[%d] %s %s %s (%s): %.300s", i+1, f.Severity, f.ID, f.Subject, f.Impact, f.Summary))
		}
	}
	t.Logf("findings at warning or above, in order: %s", strings.Join(ranked[:min(len(ranked), 12)], "; "))
	var first *analyze.Finding
	for i := range rp.Findings {
		if rp.Findings[i].Severity >= analyze.Warning {
			first = &rp.Findings[i]
			break
		}
	}
	if first == nil || (first.ID != "hung-mount" && first.ID != "mount-not-probed") || !strings.Contains(first.Summary, kubeletMP) || first.Impact != analyze.ImpactSyncLoop {
		t.Errorf("the first finding is not the kubelet's mount %s that stops its sync loop: %+v", kubeletMP, first)
	}
	var groups []*analyze.Finding
	loose := 0
	for i := range rp.Findings {
		f := &rp.Findings[i]
		if f.Severity < analyze.Warning {
			continue
		}
		switch {
		case len(f.Members) > 0 && strings.Contains(f.Explanation, elsewhere):
			groups = append(groups, f)
		case strings.HasPrefix(f.Subject, elsewhere):
			loose++
		}
	}
	if len(groups) != 1 || loose != 0 {
		t.Fatalf("the %d hung mounts of namespace %s are %d grouped finding(s) and %d finding(s) of their own, want one group", hungElsewhere, ns, len(groups), loose)
	}
	g := groups[0]
	if len(g.Members) < hungElsewhere || !strings.Contains(g.Summary, "mount namespace "+ns) || !strings.Contains(g.Summary, "one cause") {
		t.Errorf("the group stands for %d mounts (%d probed hung) and says %q; want every one, in namespace %s, one cause", len(g.Members), hungElsewhere, g.Summary, ns)
	}
	t.Logf("grouped: %s", g.Summary)
}

// mountedBy lists the processes ("pid comm") whose mount namespace
// mounts the device major:minor, one per namespace.
func mountedBy(dev string) []string {
	var out []string
	seen := map[string]bool{}
	files, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	for _, f := range files {
		pid := filepath.Base(filepath.Dir(f))
		ns, _ := os.Readlink(filepath.Join("/proc", pid, "ns", "mnt"))
		if ns == "" || seen[ns] {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		seen[ns] = true
		for _, l := range strings.Split(string(b), "\n") {
			if fs := strings.Fields(l); len(fs) > 4 && fs[2] == dev {
				comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
				out = append(out, pid+" "+strings.TrimSpace(string(comm))+" "+ns+" at "+fs[4])
				break
			}
		}
	}
	return out
}
