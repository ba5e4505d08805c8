package kube_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/nodesnap/nodesnap/features/fleet"
	"github.com/nodesnap/nodesnap/features/fleet/podspec"
	"github.com/nodesnap/nodesnap/test/s3server"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// scaleNodes is the size of the simulated fleet (NODESNAP_E2E_SCALE_NODES
// overrides it for a quicker look).
func scaleNodes(t *testing.T) int {
	if s := os.Getenv("NODESNAP_E2E_SCALE_NODES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("NODESNAP_E2E_SCALE_NODES=%q", s)
		}
		return n
	}
	return 1000
}

// TestFleetScaleStore runs `nodesnap fleet collect --to s3://…` against
// the e2e cluster's real API server on a thousand Node objects with no
// kubelet, and a real S3-compatible store on loopback. A controller in the
// test stands in for each node's kubelet and collect: it binds nothing
// (fleet pins its pods), but, for each pod of the run on a simulated node,
// it reads the pod's upload URL from the Secret the pod names, PUTs a
// stand-in bundle with it as collect would, and writes the pod's status
// (the collect container ended, its result as its termination message);
// it confirms a pod's deletion as a kubelet does. The run must give every
// node's bundle in the store with its .sha256, within ≤ 5 API requests per
// node, ≤ 10 RBAC objects and Secrets for the whole run, and ≤ 200 MiB of
// memory (the child process's peak RSS); it prints the figures
// docs/performance.md quotes.
func TestFleetScaleStore(t *testing.T) {
	c := requireCluster(t)
	nodes := scaleNodes(t)
	srv := s3server.Start(t, "nodesnap-e2e")
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000 // the test's own requests: not what is measured
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scale := fmt.Sprintf("%08x", rand.Uint32())
	const label = "nodesnap-e2e/scale"
	createScaleNodes(t, cs, label, scale, nodes)

	// What the run creates, counted as the API server announces it.
	created := countCreations(t, cs)

	cctx, stopController := context.WithCancel(ctx)
	standIn := &standInKubelet{t: t, cs: cs, prefix: "nodesnap-scale-" + scale + "-", secrets: map[string]*corev1.Secret{}}
	done := make(chan struct{})
	go func() { defer close(done); standIn.run(cctx) }()
	defer func() { stopController(); <-done }()

	dir := filepath.Join(t.TempDir(), "fleet")
	rctx, cancel := context.WithTimeout(ctx, 25*time.Minute)
	defer cancel()
	args := []string{"fleet", "collect", "-l", label + "=" + scale, "--to", "s3://nodesnap-e2e/scale/",
		"--kubeconfig", c.kubeconfig, "--image", c.image(t), "--output-dir", dir,
		"--max-parallel", "100", "--node-timeout", "5m", "--timeout", "20m", "--output", "json"}
	cmd := exec.CommandContext(rctx, testkit.Binary(t), args...)
	cmd.Env = append(os.Environ(), srv.Env()...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("fleet collect: %v\nstderr:\n%s", err, tail(se.String(), 4000))
	}
	maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	rep := readFleetReport(t, dir)
	if rep.Counts[fleet.StatusOK] != nodes {
		bad := 0
		for _, n := range rep.Nodes {
			if n.Status != fleet.StatusOK && bad < 5 {
				t.Errorf("%s: %s %s", n.Node, n.Status, n.Reason)
				bad++
			}
		}
		t.Fatalf("%v of %d nodes", rep.Counts, nodes)
	}

	// Every node's bundle in the store, the bytes the stand-in sent, its
	// .sha256 beside it naming them.
	sc := srv.Client()
	prefix := "scale/" + rep.RunID + "/"
	objs := map[string]int64{}
	pager := s3.NewListObjectsV2Paginator(sc, &s3.ListObjectsV2Input{Bucket: aws.String("nodesnap-e2e"), Prefix: aws.String(prefix)})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			objs[strings.TrimPrefix(aws.ToString(o.Key), prefix)] = aws.ToInt64(o.Size)
		}
	}
	for _, n := range rep.Nodes {
		name := n.Node + ".tar.gz"
		if objs[name] != standInSize || n.Object != "s3://nodesnap-e2e/"+prefix+name {
			t.Errorf("%s: %d bytes in the store, object %q", n.Node, objs[name], n.Object)
			continue
		}
		out, err := sc.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("nodesnap-e2e"), Key: aws.String(prefix + name + ".sha256")})
		if err != nil {
			t.Errorf("%s: no .sha256: %v", n.Node, err)
			continue
		}
		b, _ := io.ReadAll(out.Body)
		_ = out.Body.Close()
		if want := standInSum(n.Node) + "  " + name + "\n"; string(b) != want {
			t.Errorf("%s: .sha256 %q, want %q", n.Node, b, want)
		}
	}
	if _, ok := objs[fleet.ReportFile]; !ok {
		t.Errorf("no %s beside the bundles", fleet.ReportFile)
	}

	rbac := created.get("serviceaccounts") + created.get("clusterroles") + created.get("clusterrolebindings")
	secrets := created.get("secrets")
	perNode := float64(rep.APIRequests) / float64(nodes)
	rssMiB := float64(maxRSS) / 1024
	t.Logf("FLEET-SCALE nodes=%d api_requests=%d per_node=%.2f rbac_objects=%d secrets=%d pods=%d wall=%s max_rss_mib=%.1f execs=0 uploads_by_standin=%d",
		nodes, rep.APIRequests, perNode, rbac, secrets, created.get("pods"), wall.Round(time.Second), rssMiB, standIn.uploads.Load())
	if perNode > 5 {
		t.Errorf("%.2f API requests per node, want at most 5", perNode)
	}
	if rbac+secrets > 10 {
		t.Errorf("%d RBAC objects and %d Secrets for the run, want at most 10 in all", rbac, secrets)
	}
	if rssMiB > 200 {
		t.Errorf("fleet's peak RSS %.1f MiB, want at most 200", rssMiB)
	}
	if n := created.get("pods"); n != nodes {
		t.Errorf("%d pods created for %d nodes", n, nodes)
	}
	sel := fleet.RunSelector(rep.RunID)
	if out := c.k(t, "", "get", "pods,serviceaccounts,secrets,clusterroles,clusterrolebindings", "-A", "-l", sel, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("the run left in the cluster:\n%s", out)
	}
}

// standInSize is the stand-in bundle's size: what the measure is about is
// the API, not the bytes.
const standInSize = 16 << 10

func standInBundle(node string) []byte {
	h := sha256.Sum256([]byte(node))
	r := rand.New(rand.NewPCG(uint64(h[0])|uint64(h[1])<<8|uint64(h[2])<<16, 44))
	b := make([]byte, standInSize)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func standInSum(node string) string {
	h := sha256.Sum256(standInBundle(node))
	return hex.EncodeToString(h[:])
}

// createScaleNodes registers n Node objects labelled label=value, tainted
// so that no DaemonSet of the cluster follows them there, and removes
// them all at the end (one request).
func createScaleNodes(t *testing.T, cs kubernetes.Interface, label, value string, n int) {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		err := cs.CoreV1().Nodes().DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: label + "=" + value})
		if err != nil {
			t.Errorf("removing the simulated nodes: %v", err)
		}
	})
	var wg sync.WaitGroup
	var failed atomic.Int32
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nodesnap-scale-%s-%04d", value, i), Labels: map[string]string{label: value}},
					Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: label, Value: value, Effect: corev1.TaintEffectNoSchedule},
						{Key: label, Value: value, Effect: corev1.TaintEffectNoExecute}}}}
				if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && failed.Add(1) == 1 {
					t.Errorf("creating node %s: %v", node.Name, err)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
}

// creations counts the fleet's objects as the API server announces them,
// each once (by UID).
type creations struct {
	mu   sync.Mutex
	n    map[string]int
	seen map[types.UID]bool
}

func (c *creations) get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind]
}

// countCreations follows, until the test ends, every kind a run creates
// with the fleet's label, and counts what is added. A watch the API server
// closes (a watcher it finds slow under load) is taken up again where it
// ended, so that no creation is missed.
func countCreations(t *testing.T, cs kubernetes.Interface) *creations {
	c := &creations{n: map[string]int{}, seen: map[types.UID]bool{}}
	sel := fleet.ManagedByLabel + "=" + fleet.ManagedBy
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	type lister func(metav1.ListOptions) (string, error)
	type watcher func(metav1.ListOptions) (watch.Interface, error)
	kinds := map[string]struct {
		list  lister
		watch watcher
	}{
		"pods": {func(o metav1.ListOptions) (string, error) {
			l, err := cs.CoreV1().Pods("").List(ctx, o)
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		}, func(o metav1.ListOptions) (watch.Interface, error) { return cs.CoreV1().Pods("").Watch(ctx, o) }},
		"secrets": {func(o metav1.ListOptions) (string, error) {
			l, err := cs.CoreV1().Secrets("").List(ctx, o)
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		}, func(o metav1.ListOptions) (watch.Interface, error) { return cs.CoreV1().Secrets("").Watch(ctx, o) }},
		"serviceaccounts": {func(o metav1.ListOptions) (string, error) {
			l, err := cs.CoreV1().ServiceAccounts("").List(ctx, o)
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		}, func(o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().ServiceAccounts("").Watch(ctx, o)
		}},
		"clusterroles": {func(o metav1.ListOptions) (string, error) {
			l, err := cs.RbacV1().ClusterRoles().List(ctx, o)
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		}, func(o metav1.ListOptions) (watch.Interface, error) { return cs.RbacV1().ClusterRoles().Watch(ctx, o) }},
		"clusterrolebindings": {func(o metav1.ListOptions) (string, error) {
			l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, o)
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		}, func(o metav1.ListOptions) (watch.Interface, error) {
			return cs.RbacV1().ClusterRoleBindings().Watch(ctx, o)
		}},
	}
	for kind, k := range kinds {
		rv, err := k.list(metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			t.Fatalf("listing %s: %v", kind, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				wi, err := k.watch(metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
				if err != nil {
					if ctx.Err() == nil {
						t.Logf("watching %s from %s: %v", kind, rv, err)
						time.Sleep(200 * time.Millisecond)
					}
					continue
				}
				for ev := range wi.ResultChan() {
					if ev.Type == watch.Error {
						if ctx.Err() != nil {
							break // the test's end
						}
						t.Errorf("watching %s: %v (creations may be missed)", kind, apierrors.FromObject(ev.Object))
						break
					}
					m, err := meta.Accessor(ev.Object)
					if err != nil {
						continue
					}
					rv = m.GetResourceVersion()
					c.mu.Lock()
					if !c.seen[m.GetUID()] {
						c.seen[m.GetUID()] = true
						c.n[kind]++
					}
					c.mu.Unlock()
				}
				wi.Stop()
			}
		}()
	}
	return c
}

// standInKubelet plays, for the simulated nodes, the part of their
// kubelet and of collect in the pod.
type standInKubelet struct {
	t       *testing.T
	cs      kubernetes.Interface
	prefix  string // the simulated nodes' names
	mu      sync.Mutex
	secrets map[string]*corev1.Secret
	uploads atomic.Int64
}

func (k *standInKubelet) run(ctx context.Context) {
	opts := metav1.ListOptions{LabelSelector: fleet.ManagedByLabel + "=" + fleet.ManagedBy}
	work := make(chan *corev1.Pod, 1024)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				k.handle(ctx, p)
			}
		}()
	}
	defer func() { close(work); wg.Wait() }()
	for ctx.Err() == nil {
		w, err := k.cs.CoreV1().Pods(podspec.Namespace).Watch(ctx, opts)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !strings.HasPrefix(p.Spec.NodeName, k.prefix) || ev.Type == watch.Deleted {
				continue
			}
			if p.DeletionTimestamp != nil || (ev.Type == watch.Added && len(p.Status.InitContainerStatuses) == 0) {
				work <- p
			}
		}
		w.Stop()
	}
}

// handle confirms a deletion, or does a new pod's collection: the upload
// with the pod's own URL, then its status.
func (k *standInKubelet) handle(ctx context.Context, p *corev1.Pod) {
	if p.DeletionTimestamp != nil {
		grace := int64(0)
		err := k.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			k.t.Errorf("confirming the deletion of %s: %v", p.Name, err)
		}
		return
	}
	var ref *corev1.SecretKeySelector
	for _, e := range p.Spec.InitContainers[0].Env {
		if e.Name == "NODESNAP_UPLOAD_URL" && e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil {
		k.t.Errorf("pod %s has no upload URL from a Secret", p.Name)
		return
	}
	sec, err := k.secret(ctx, p.Namespace, ref.Name)
	if err != nil {
		k.t.Errorf("pod %s: its Secret %s: %v", p.Name, ref.Name, err)
		return
	}
	node := p.Spec.NodeName
	body := standInBundle(node)
	up := map[string]any{"ok": true, "status_code": 200, "attempts": 1}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, string(sec.Data[ref.Key]), bytes.NewReader(body))
	if err != nil {
		k.t.Errorf("pod %s: its upload URL: %v", p.Name, err)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	switch {
	case err != nil:
		up = map[string]any{"ok": false, "error": err.Error()}
	case resp.StatusCode/100 != 2:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		up = map[string]any{"ok": false, "status_code": resp.StatusCode, "error": string(msg)}
	default:
		k.uploads.Add(1)
	}
	if resp != nil {
		_ = resp.Body.Close()
	}
	now := metav1.Now()
	result, _ := json.Marshal(map[string]any{"path": "/output/nodesnap-" + node + ".tar.gz", "host_path": "/var/tmp/nodesnap/nodesnap-" + node + ".tar.gz",
		"size": len(body), "sha256": standInSum(node), "status": "complete", "upload": up, "exit_status": 0})
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase, cur.Status.StartTime = corev1.PodRunning, &now
		cur.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podspec.CollectContainer, Image: p.Spec.InitContainers[0].Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: string(result), StartedAt: now, FinishedAt: now}}}}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podspec.HoldContainer, Image: p.Spec.Containers[0].Image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		_, err = k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		k.t.Errorf("writing pod %s's status: %v", p.Name, err)
	}
}

// secret reads a Secret once (a kubelet caches them too).
func (k *standInKubelet) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s := k.secrets[name]; s != nil {
		return s, nil
	}
	s, err := k.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	k.secrets[name] = s
	return s, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestFleetToStore: `fleet collect --to s3://…` on the real node. The
// node's pod (host network) uploads its own bundle to a real store on
// this machine's loopback with the URL the run signed for it; nothing is
// copied back through exec (the output directory holds fleet.json
// alone), the store holds the bundle and its .sha256, and `fleet analyze
// s3://…` reads it back, checked against that checksum.
func TestFleetToStore(t *testing.T) {
	c := requireCluster(t)
	removeNewHostBundles(t)
	srv := s3server.Start(t, "nodesnap-e2e")
	dir := filepath.Join(t.TempDir(), "fleet")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testkit.Binary(t), "fleet", "collect", c.node, "--to", "s3://nodesnap-e2e/real/",
		"--kubeconfig", c.kubeconfig, "--image", c.image(t), "--output-dir", dir, "--node-timeout", "4m")
	cmd.Env = append(os.Environ(), srv.Env()...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	t.Logf("fleet collect --to: %v\n%s%s", err, se.String(), so.String())
	rep := readFleetReport(t, dir)
	row := rowOf(t, rep, c.node)
	if !row.Status.HasBundle() || row.Object == "" || row.Bundle != "" {
		t.Fatalf("%s: %s %q object %q bundle %q", c.node, row.Status, row.Reason, row.Object, row.Bundle)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != fleet.ReportFile {
			t.Errorf("the output directory holds %s: a bundle came back through the cluster", e.Name())
		}
	}
	key := strings.TrimPrefix(row.Object, "s3://nodesnap-e2e/")
	out, err := srv.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("nodesnap-e2e"), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("the bundle is not in the store: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, out.Body)
	_ = out.Body.Close()
	if err != nil || n != row.Size || hex.EncodeToString(h.Sum(nil)) != row.SHA256 {
		t.Errorf("the store holds %d bytes hashing to %x (%v); the node wrote %d, %s", n, h.Sum(nil), err, row.Size, row.SHA256)
	}
	t.Logf("api_requests=%d for one node", rep.APIRequests)

	an := exec.CommandContext(ctx, testkit.Binary(t), "fleet", "analyze", "-o", "json", "s3://nodesnap-e2e/real/")
	an.Env = cmd.Env
	var ao, ae bytes.Buffer
	an.Stdout, an.Stderr = &ao, &ae
	aerr := an.Run()
	var ee *exec.ExitError
	if aerr != nil && (!errors.As(aerr, &ee) || ee.ExitCode() != 3) {
		t.Fatalf("fleet analyze s3://: %v\n%s", aerr, ae.String())
	}
	var view struct {
		Nodes []struct {
			Node  string `json:"node"`
			Error string `json:"error"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(ao.Bytes(), &view); err != nil {
		t.Fatalf("fleet analyze -o json: %v\n%s", err, ao.String())
	}
	if len(view.Nodes) != 1 || view.Nodes[0].Node != c.node || view.Nodes[0].Error != "" {
		t.Errorf("fleet analyze of the store: %+v", view.Nodes)
	}
}
