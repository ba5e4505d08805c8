package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// checkClean asserts that nothing the run created is left in the fake
// cluster: no pod, service account, role, binding, and no namespace it
// made.
func checkClean(t *testing.T, s *sim, nsCreated bool) {
	t.Helper()
	ctx := context.Background()
	pods, _ := s.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	sas, _ := s.cs.CoreV1().ServiceAccounts("").List(ctx, metav1.ListOptions{})
	roles, _ := s.cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	bindings, _ := s.cs.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	secrets, _ := s.cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	nss, _ := s.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if n := len(pods.Items) + len(sas.Items) + len(roles.Items) + len(bindings.Items) + len(secrets.Items); n != 0 {
		t.Errorf("left in the cluster: %d pods, %d service accounts, %d cluster roles, %d bindings, %d secrets",
			len(pods.Items), len(sas.Items), len(roles.Items), len(bindings.Items), len(secrets.Items))
	}
	if nsCreated && len(nss.Items) != 0 {
		t.Errorf("the run's namespace is left: %v", nss.Items[0].Name)
	}
}

func rowsByNode(rep *Report) map[string]NodeResult {
	m := map[string]NodeResult{}
	for _, n := range rep.Nodes {
		m[n.Node] = n
	}
	return m
}

func sumFile(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Every kind of node at once: each gets its status and a reason that
// says why, the healthy ones' bundles are saved and verified, the run
// exits 3, fleet.json says the same, and nothing is left in the cluster.
func TestRunStatuses(t *testing.T) {
	s := newSim(t, map[string]behaviour{
		"good": healthy, "part": partialBundle, "full": noResources, "noimg": noImage,
		"slow": slow, "dead": deadKubelet, "crash": collectFails,
	}, 64<<10)
	dir := t.TempDir()
	o := s.options(dir)
	// The slow node never finishes; the others must not miss this on a
	// loaded machine (500 ms did, at load 10-20).
	o.NodeTimeout = 3 * time.Second
	var progress []NodeResult
	o.Progress = func(n NodeResult) { progress = append(progress, n) }
	o.MaxParallel = 1 // Progress is then called from one goroutine at a time
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		st     Status
		reason string
	}{
		"good":  {StatusOK, ""},
		"part":  {StatusPartial, "journal: timed out"},
		"full":  {StatusUnschedulable, "OutOfcpu"},
		"noimg": {StatusImagePull, "ImagePullBackOff"},
		"slow":  {StatusTimeout, "per-node deadline (--node-timeout 3s) passed while collecting"},
		"dead":  {StatusNotReady, "NotReady (Ready=Unknown"},
		"crash": {StatusFailed, "output directory /output is full"},
	}
	rows := rowsByNode(rep)
	for node, w := range want {
		r := rows[node]
		if r.Status != w.st || !strings.Contains(r.Reason, w.reason) {
			t.Errorf("%s: %s %q; want %s with %q", node, r.Status, r.Reason, w.st, w.reason)
		}
		if r.Status.HasBundle() {
			p := filepath.Join(dir, r.Bundle)
			if r.Bundle != node+".tar.gz" || sumFile(t, p) != s.nodes[node].sum || r.SHA256 != s.nodes[node].sum {
				t.Errorf("%s: bundle %q sha256 %s; want %s.tar.gz with the node's sha256 %s", node, r.Bundle, r.SHA256, node, s.nodes[node].sum)
			}
		} else if r.Bundle != "" {
			t.Errorf("%s: %s, yet bundle %q", node, r.Status, r.Bundle)
		}
	}
	if rep.ExitStatus != ExitPartial {
		t.Errorf("exit status %d, want %d", rep.ExitStatus, ExitPartial)
	}
	files, _ := os.ReadDir(dir)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "fleet.json good.tar.gz part.tar.gz" {
		t.Errorf("output directory holds %v; want fleet.json and the two bundles, nothing half-written", names)
	}
	back, err := ReadReport(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Nodes) != 7 || back.Counts[StatusOK] != 1 || back.ExitStatus != ExitPartial || back.Nodes[0].Node != "crash" {
		t.Errorf("fleet.json: %d nodes, counts %v, exit %d", len(back.Nodes), back.Counts, back.ExitStatus)
	}
	final := map[string]bool{}
	for _, p := range progress {
		if p.Phase == PhaseDone {
			final[p.Node] = true
		}
	}
	if len(final) != 7 {
		t.Errorf("progress reported the end of %d nodes, want 7", len(final))
	}
	checkClean(t, s, true)
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes map[string]behaviour
		want  int
	}{
		{"all ok", map[string]behaviour{"a": healthy, "b": healthy}, ExitAllOK},
		{"one partial", map[string]behaviour{"a": healthy, "b": partialBundle}, ExitPartial},
		{"one failed", map[string]behaviour{"a": healthy, "b": noImage}, ExitPartial},
		{"none", map[string]behaviour{"a": noImage, "b": noResources}, ExitNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, c.nodes, 1024)
			rep, err := Run(context.Background(), s.options(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			if rep.ExitStatus != c.want {
				t.Errorf("exit %d, want %d; rows %+v", rep.ExitStatus, c.want, rep.Nodes)
			}
			checkClean(t, s, true)
		})
	}
}

// A bundle corrupted between the API and the file is caught by the node's
// checksum, reported, and not saved.
func TestCorruptionInTransit(t *testing.T) {
	s := newSim(t, map[string]behaviour{"a": healthy, "b": healthy}, 256<<10)
	dir := t.TempDir()
	o := s.options(dir)
	o.TransitHook = func(node string, w io.Writer) io.Writer {
		if node != "b" {
			return w
		}
		return &flipper{w: w, at: 100 << 10}
	}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsByNode(rep)
	if rows["a"].Status != StatusOK {
		t.Errorf("a: %s %s", rows["a"].Status, rows["a"].Reason)
	}
	b := rows["b"]
	if b.Status != StatusFailed || !strings.Contains(b.Reason, "checksum mismatch") || !strings.Contains(b.Reason, s.nodes["b"].sum) || b.Bundle != "" {
		t.Errorf("b: %s %q bundle %q; want failed with a checksum mismatch naming the node's sha256", b.Status, b.Reason, b.Bundle)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*b.tar.gz*"))
	if len(matches) != 0 {
		t.Errorf("the corrupted bundle was kept: %v", matches)
	}
	if rep.ExitStatus != ExitPartial {
		t.Errorf("exit %d, want 3", rep.ExitStatus)
	}
}

// flipper inverts one byte of the stream at offset at.
type flipper struct {
	w   io.Writer
	at  int64
	off int64
}

func (f *flipper) Write(p []byte) (int, error) {
	if i := f.at - f.off; i >= 0 && i < int64(len(p)) {
		q := append([]byte(nil), p...)
		q[i] ^= 0xff
		p = q
	}
	f.off += int64(len(p))
	return f.w.Write(p)
}

func TestSelection(t *testing.T) {
	nodes := map[string]behaviour{"a": healthy, "b": healthy, "c": noImage}
	for _, c := range []struct {
		name     string
		set      func(*Options)
		want     []string
		wantErr  error
		usage    bool
		failedOf string
	}{
		{name: "all", set: func(o *Options) {}, want: []string{"a", "b", "c"}},
		{name: "selector", set: func(o *Options) { o.All, o.Selector = false, "pool=good" }, want: []string{"a", "b"}},
		{name: "names", set: func(o *Options) { o.All, o.Names = false, []string{"c", "a", "a"} }, want: []string{"a", "c"}},
		{name: "unknown name", set: func(o *Options) { o.All, o.Names = false, []string{"a", "zz"} }, want: []string{"a", "zz"}, failedOf: "zz"},
		{name: "selector matches nothing", set: func(o *Options) { o.All, o.Selector = false, "pool=none" }, wantErr: ErrNoNodes},
		{name: "bad selector", set: func(o *Options) { o.All, o.Selector = false, "pool==,=" }, usage: true},
		{name: "two selections", set: func(o *Options) { o.Selector = "pool=good" }, usage: true},
		{name: "none", set: func(o *Options) { o.All = false }, usage: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSim(t, nodes, 512)
			o := s.options(t.TempDir())
			c.set(&o)
			rep, err := Run(context.Background(), o)
			var ue *UsageError
			switch {
			case c.usage:
				if !errors.As(err, &ue) {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			case c.wantErr != nil:
				if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), "pool=none") {
					t.Fatalf("err %v, want %v naming the selector", err, c.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			var got []string
			for _, n := range rep.Nodes {
				got = append(got, n.Node)
				if n.Node == c.failedOf && (n.Status != StatusFailed || !strings.Contains(n.Reason, "no node of this name")) {
					t.Errorf("%s: %s %q", n.Node, n.Status, n.Reason)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("nodes %v, want %v", got, c.want)
			}
			checkClean(t, s, true)
		})
	}
}

// With --no-rbac the run uses deploy/kubernetes/rbac.yaml's service
// account in an existing namespace, and creates and deletes only pods.
func TestNoRBAC(t *testing.T) {
	s := newSim(t, map[string]behaviour{"a": healthy}, 512)
	o := s.options(t.TempDir())
	o.NoRBAC = true
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "nodesnap manifests rbac") {
		t.Fatalf("without the namespace: %v; want an error pointing at the manifests", err)
	}
	ctx := context.Background()
	_, err1 := s.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nodesnap"}}, metav1.CreateOptions{})
	_, err2 := s.cs.CoreV1().ServiceAccounts("nodesnap").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nodesnap", Namespace: "nodesnap"}}, metav1.CreateOptions{})
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	var sa string
	s.cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetResource().Resource != "pods" {
			t.Errorf("--no-rbac created a %s", a.GetResource().Resource)
		} else {
			sa = a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).Spec.ServiceAccountName
		}
		return false, nil, nil
	})
	o.OutputDir = t.TempDir()
	rep, err := Run(ctx, o)
	if err != nil || rep.ExitStatus != ExitAllOK {
		t.Fatalf("%v %+v", err, rep)
	}
	if sa != podspec.ServiceAccount {
		t.Errorf("pods ran as %q, want %q", sa, podspec.ServiceAccount)
	}
	if _, err := s.cs.CoreV1().Namespaces().Get(ctx, "nodesnap", metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace it did not create was deleted: %v", err)
	}
}

// Ctrl-C: the nodes still running are interrupted, what the run created is
// removed. A second Ctrl-C (Abandon) stops the clean-up, and the report
// lists what is left.
func TestInterrupt(t *testing.T) {
	for _, abandon := range []bool{false, true} {
		t.Run(map[bool]string{false: "cleaned", true: "abandoned"}[abandon], func(t *testing.T) {
			s := newSim(t, map[string]behaviour{"a": healthy, "b": slow, "c": slow}, 512)
			o := s.options(t.TempDir())
			o.NodeTimeout = time.Minute
			ctx, cancel := context.WithCancel(context.Background())
			ab := make(chan struct{})
			o.Abandon = ab
			if abandon {
				// Deletions hang (an API server that stopped answering).
				var once sync.Once
				s.cs.PrependReactor("delete", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
					once.Do(func() { close(ab) })
					return true, nil, errors.New("the server is currently unable to handle the request")
				})
			}
			o.Progress = func(n NodeResult) {
				if n.Node == "a" && n.Status == StatusOK {
					cancel()
				}
			}
			o.MaxParallel = 1
			rep, err := Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			rows := rowsByNode(rep)
			if rows["a"].Status != StatusOK || rows["b"].Status != StatusInterrupted || rows["c"].Status != StatusInterrupted {
				t.Errorf("rows %+v", rep.Nodes)
			}
			if !rep.Interrupted || rep.ExitStatus != ExitPartial {
				t.Errorf("interrupted %v exit %d", rep.Interrupted, rep.ExitStatus)
			}
			if !abandon {
				if len(rep.Leftovers) != 0 {
					t.Errorf("leftovers %v", rep.Leftovers)
				}
				checkClean(t, s, true)
				return
			}
			left := strings.Join(rep.Leftovers, "\n")
			for _, want := range []string{"clusterrole " + rep.RunID, "clusterrolebinding " + rep.RunID, "serviceaccount nodesnap/" + rep.RunID, "namespace nodesnap"} {
				if !strings.Contains(left, want) {
					t.Errorf("leftovers %q lack %q", left, want)
				}
			}
		})
	}
}

// A user who may not create RBAC gets an error that says what to do, each
// node a row that says the run could not start, and nothing left behind.
func TestSetupForbidden(t *testing.T) {
	s := newSim(t, map[string]behaviour{"a": healthy}, 512)
	s.cs.PrependReactor("create", "clusterroles", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, "x", errors.New("user cannot create"))
	})
	dir := t.TempDir()
	rep, err := Run(context.Background(), s.options(dir))
	if err == nil || !strings.Contains(err.Error(), "--no-rbac") || !apierrors.IsForbidden(err) {
		t.Fatalf("err %v; want the API's Forbidden, wrapped with the way out (--no-rbac)", err)
	}
	if rep == nil || rep.Nodes[0].Status != StatusFailed || !strings.Contains(rep.Nodes[0].Reason, "could not start") || rep.ExitStatus != ExitNone {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, ReportFile)); err != nil {
		t.Errorf("no fleet.json: %v", err)
	}
	checkClean(t, s, true)
}
