package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// apiServer answers the requests NewClient's clients make the way an API
// server does, recording each as "METHOD path?query".
type apiServer struct {
	mu     sync.Mutex
	seen   []string
	agents map[string]bool
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Method+" "+r.URL.RequestURI())
	if a.agents == nil {
		a.agents = map[string]bool{}
	}
	a.agents[r.UserAgent()] = true
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/v1/namespaces/missing":
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
			Message: `namespaces "missing" not found`})
	case r.URL.Path == "/api/v1/nodes":
		_ = json.NewEncoder(w).Encode(corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"},
			Items: []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}})
	case r.URL.Path == "/apis/rbac.authorization.k8s.io/v1/clusterroles" && r.Method == http.MethodPost:
		var role rbacv1.ClusterRole
		if err := json.NewDecoder(r.Body).Decode(&role); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		role.UID = "uid-1"
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(role)
	case r.URL.Path == "/api/v1/namespaces/ns1/pods" && r.URL.Query().Get("watch") == "true":
		// Two events, then the watch ends as a server's timeout ends it.
		enc := json.NewEncoder(w)
		for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning} {
			pod := corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "p1", ResourceVersion: "7"}, Status: corev1.PodStatus{Phase: phase}}
			raw, _ := json.Marshal(pod)
			_ = enc.Encode(metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: raw}})
		}
	case strings.HasSuffix(r.URL.Path, "/log"):
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "the log\n")
	default:
		http.Error(w, "unexpected request", http.StatusTeapot)
	}
}

// TestNewClient drives the client NewClient builds (the binary's; the
// other tests use client-go's fake clientset) against a server that
// answers like an API server: the paths of both API groups, query
// parameters, bodies and a NotFound status that apierrors recognises.
func TestNewClient(t *testing.T) {
	api := &apiServer{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	_, err = c.CoreV1().Namespaces().Get(ctx, "missing", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Get of a missing namespace: %v, want a NotFound status error", err)
	}
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "a=b"})
	if err != nil {
		t.Fatalf("listing nodes: %v", err)
	}
	if len(nodes.Items) != 2 || nodes.Items[1].Name != "n2" {
		t.Errorf("listed nodes %+v, want n1 and n2", nodes.Items)
	}
	role, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a cluster role: %v", err)
	}
	if role.Name != "r" || role.UID != "uid-1" {
		t.Errorf("created role %s (uid %s), want r (uid-1): the answer was not decoded", role.Name, role.UID)
	}
	limit := int64(100)
	rc, err := c.CoreV1().Pods("ns1").GetLogs("p1", &corev1.PodLogOptions{Container: "c1", LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		t.Fatalf("streaming a log: %v", err)
	}
	b, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(b) != "the log\n" {
		t.Errorf("log %q, want %q", b, "the log\n")
	}
	api.mu.Lock()
	for ua := range api.agents {
		// An API server's audit log names the client by it.
		if ua != rest.DefaultKubernetesUserAgent() {
			t.Errorf("a request went out with User-Agent %q, want %q", ua, rest.DefaultKubernetesUserAgent())
		}
	}
	api.mu.Unlock()
	w, err := c.CoreV1().Pods("ns1").Watch(ctx, metav1.ListOptions{LabelSelector: "a=b", ResourceVersion: "5"})
	if err != nil {
		t.Fatalf("watching pods: %v", err)
	}
	var phases []corev1.PodPhase
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified {
			phases = append(phases, p.Status.Phase)
		}
	}
	if len(phases) != 2 || phases[1] != corev1.PodRunning {
		t.Errorf("watched phases %v, want Pending then Running", phases)
	}
	err = c.CoreV1().Pods("ns1").Delete(ctx, "p1", metav1.DeleteOptions{})
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Errorf("Delete answered 418: %v, want a status error", err)
	}

	want := []string{
		"GET /api/v1/namespaces/missing",
		"GET /api/v1/nodes?labelSelector=a%3Db",
		"POST /apis/rbac.authorization.k8s.io/v1/clusterroles",
		"GET /api/v1/namespaces/ns1/pods/p1/log?container=c1&limitBytes=100",
		"GET /api/v1/namespaces/ns1/pods?labelSelector=a%3Db&resourceVersion=5&watch=true",
		"DELETE /api/v1/namespaces/ns1/pods/p1",
	}
	// The run's report counts what reached the server.
	if n := c.(requestCounter).Requests(); n != int64(len(want)) {
		t.Errorf("the client counted %d requests, want %d", n, len(want))
	}
	if strings.Join(api.seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(api.seen, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoClientset keeps client-go's clientset and its scheme (every API
// group's client and types, about 14 MB of the binary) and its fake-client
// machinery (managed fields, OpenAPI models: 3 MB more) out of fleet and so
// out of the nodesnap binary.
func TestNoClientset(t *testing.T) {
	// go test puts the go command that runs it first in PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("finding the go command: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if !strings.Contains(string(out), "\nk8s.io/client-go/rest ") {
		t.Fatalf("go list -deps does not list k8s.io/client-go/rest: the test is not reading fleet's dependencies:\n%s", out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[min(len(f), 1):] {
			for _, bad := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/testing"} {
				if imp == bad || strings.HasPrefix(imp, bad+"/") {
					t.Errorf("%s imports %s, which brings client-go's scheme of every API group or its fake clients' machinery", f[0], imp)
				}
			}
		}
	}
}
