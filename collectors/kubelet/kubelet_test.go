package kubelet_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/kubelet"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Helpers shared by the kubelet, runtime and csi tests ("agent" tests:
// the node agents' own view).

// --- a fake kubelet -----------------------------------------------------

const (
	goodToken      = "kubelet-test-token-7f3a9c1e5b2d4086a1e9"
	leastToken     = "least-privilege-token-3e9d1c7b5a2f4860"
	forbiddenToken = "weak-identity-token-0c5e8b7a6d4f3e2a1b"
	// noMetricsToken's identity may read the kubelet's pods, health and
	// configuration but not its metrics or stats.
	noMetricsToken = "no-metrics-identity-token-3f1a9c7e5b2d"
	noMetricsSA    = "system:serviceaccount:ops:reader"
	podSecretValue = "hunter2-database-password-value"
)

// Identities the fake kubelet's API server allows get on nodes/proxy.
const (
	nodesnapSA = "system:serviceaccount:nodesnap:nodesnap"
	kubeadmCN  = "kube-apiserver-kubelet-client"
	operatorCN = "nodesnap-operator"
	// leastSA has deploy/kubernetes/rbac.yaml's least-privilege role.
	leastSA = "system:serviceaccount:nodesnap:least"
)

type fakeKubelet struct {
	srv      *httptest.Server
	ca       *testkit.CA // the kubelet's client CA
	auth     *testkit.KubeletAuth
	requests map[string]int
	mu       sync.Mutex
}

// newFakeKubelet serves, over TLS on 127.0.0.1 with bearer auth, the real
// net/http/pprof handlers of this test process plus healthz, metrics,
// configz and pods.
func newFakeKubelet(t *testing.T) *fakeKubelet {
	t.Helper()
	fk := &fakeKubelet{requests: map[string]int{}}
	mux := testkit.KubeletMux(t)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# TYPE kubelet_running_pods gauge\nkubelet_running_pods 2\n")
	})
	mux.HandleFunc("/configz", func(w http.ResponseWriter, r *http.Request) {
		// A careless server echoing the caller's token in a field the line
		// redactor has no rule for: nodesnap must scrub the bare value.
		fmt.Fprintf(w, `{"kubeletconfig":{"enableDebuggingHandlers":true,"readOnlyPort":0,"staticPodURL":"https://example.invalid/%s"}}`, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	})
	mux.HandleFunc("/pods", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"db-0","namespace":"prod","uid":"8b5c1e2a-0000-4000-8000-000000000001","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"spec\":{\"containers\":[{\"env\":[{\"name\":\"DB_PASSWORD\",\"value\":\"%[1]s\"}]}]}}"}},"spec":{"containers":[{"name":"db","image":"postgres:16","env":[{"name":"DB_PASSWORD","value":"%[1]s"},{"name":"FROM_SECRET","valueFrom":{"secretKeyRef":{"name":"db","key":"pw"}}}]}]}}]}`, podSecretValue)
	})
	// The kubelet of a real node: webhook authentication and
	// authorization, anonymous access off.
	fk.ca = testkit.NewCA(t)
	auth := &testkit.KubeletAuth{
		Tokens:   map[string]string{goodToken: nodesnapSA, forbiddenToken: "system:serviceaccount:monitoring:nodesnap", leastToken: leastSA, noMetricsToken: noMetricsSA},
		ClientCA: fk.ca,
		Allowed: func(user, sub string) bool {
			if user == noMetricsSA {
				return sub == "pods" || sub == "healthz" || sub == "configz"
			}
			if user == leastSA {
				// deploy/kubernetes/rbac.yaml's role: no nodes/proxy.
				return sub == "pods" || sub == "healthz" || sub == "configz" || sub == "metrics" || sub == "stats"
			}
			return user == nodesnapSA || user == kubeadmCN || user == operatorCN
		},
	}
	guarded := auth.Wrap(mux)
	fk.auth = auth
	fk.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fk.mu.Lock()
		fk.requests[r.URL.Path]++
		fk.mu.Unlock()
		guarded.ServeHTTP(w, r)
	}))
	fk.srv.TLS = auth.TLSConfig()
	fk.srv.StartTLS()
	t.Cleanup(fk.srv.Close)
	if !strings.HasPrefix(fk.srv.URL, "https://127.0.0.1:") {
		t.Fatalf("fake kubelet at %s, want 127.0.0.1", fk.srv.URL)
	}
	return fk
}

// caFile writes the fake kubelet's certificate as a CA bundle.
func (fk *fakeKubelet) caFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "kubelet-ca.crt")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fk.srv.Certificate().Raw})
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// root returns a --root under which the kubelet serves with fk's
// certificate, as a kubelet that made its own keeps it
// (/var/lib/kubelet/pki/kubelet.crt): the collector knows the peer then.
func (fk *fakeKubelet) root(t *testing.T) string {
	return kubeletRootWith(t, fk.srv.Certificate())
}

// kubeletRootWith returns a --root whose kubelet serves with cert.
func kubeletRootWith(t *testing.T, cert *x509.Certificate) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "var/lib/kubelet/pki")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	if err := os.WriteFile(filepath.Join(dir, "kubelet.crt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// newFakeReadOnly serves what the kubelet's read-only port serves.
func newFakeReadOnly(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "[+]ping ok\n[-]syncloop failed: reason withheld (read-only port)\n")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "kubelet_running_pods 2\n") })
	mux.HandleFunc("/pods", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"kind":"PodList","items":[]}`) })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			// The token must never be sent to the plain-HTTP port.
			http.Error(w, "a token reached the read-only port", http.StatusTeapot)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func kubeletRequests(t *testing.T, b *supervisortest.Bundle) kubelet.KubeletRequests {
	t.Helper()
	var r kubelet.KubeletRequests
	if err := json.Unmarshal(b.File(t, "kubelet/requests.json"), &r); err != nil {
		t.Fatalf("kubelet/requests.json: %v", err)
	}
	return r
}

// --- tests ---------------------------------------------------------------

// Everything incident 003 needed comes back from a kubelet on loopback,
// and the token is nowhere in the bundle.
func TestKubeletCollectsEverything(t *testing.T) {
	fk := newFakeKubelet(t)
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", fk.srv.URL, "--kubelet-token", goodToken,
		"--kubelet-readonly-url", "http://"+closedPort(t), "--kubelet-profile-seconds", "1")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: fk.root(t)})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	if h := string(b.File(t, "kubelet/healthz.txt")); !strings.Contains(h, "[-]syncloop failed: reason withheld") {
		t.Errorf("healthz.txt = %q", h)
	}
	for _, f := range []string{"kubelet/goroutine-debug1.txt", "kubelet/goroutine-debug2.txt"} {
		if d := b.File(t, f); !bytes.Contains(d, []byte("cleanupOrphanedPodDirs")) {
			t.Errorf("%s has no cleanupOrphanedPodDirs frame (%d bytes)", f, len(d))
		}
	}
	if d := b.File(t, "kubelet/goroutine-debug2.txt"); !bytes.Contains(d, []byte("[chan receive]")) {
		t.Errorf("goroutine-debug2.txt is not a debug=2 dump (no goroutine states)")
	}
	for _, f := range []string{"kubelet/heap.pb.gz", "kubelet/cpu.pb.gz"} {
		d := b.File(t, f)
		if len(d) < 2 || d[0] != 0x1f || d[1] != 0x8b {
			t.Errorf("%s is not a gzipped profile: % x", f, d[:min(len(d), 8)])
		}
		if fe := b.FileEntry(t, f); fe.Kind != "binary" || !strings.Contains(fe.BinaryReason, "pprof protobuf") {
			t.Errorf("%s recorded as kind %q reason %q, want binary pprof protobuf", f, fe.Kind, fe.BinaryReason)
		}
	}
	if d := b.File(t, "kubelet/metrics.txt"); !bytes.Contains(d, []byte("kubelet_running_pods 2")) {
		t.Errorf("metrics.txt = %q", d)
	}
	configz := b.File(t, "kubelet/configz.json")
	if !bytes.Contains(configz, []byte(`"enableDebuggingHandlers": true`)) {
		t.Errorf("configz.json is not the indented configuration: %s", configz)
	}
	if !bytes.Contains(configz, []byte("example.invalid/[REDACTED]")) {
		t.Errorf("the echoed token was not replaced in configz.json: %s", configz)
	}
	pods := b.File(t, "kubelet/pods.json")
	if !bytes.Contains(pods, []byte(`"DB_PASSWORD"`)) || !bytes.Contains(pods, []byte(`"secretKeyRef"`)) {
		t.Errorf("pods.json lost the variable names or references: %s", pods)
	}
	if bytes.Contains(pods, []byte(podSecretValue)) {
		t.Errorf("pods.json holds an environment value: %s", pods)
	}
	rq := kubeletRequests(t, b)
	if rq.TokenSource != "flag --kubelet-token" {
		t.Errorf("token source %q", rq.TokenSource)
	}
	if len(rq.Requests) != 8 {
		t.Errorf("%d requests, want 8 (7 endpoints and the CPU profile): %+v", len(rq.Requests), rq.Requests)
	}
	for _, r := range rq.Requests {
		if r.Port != "secure" || !r.TLSVerified || r.Bytes == 0 || r.File == "" || r.DurationSeconds <= 0 {
			t.Errorf("request %+v: want secure, verified, with bytes, file and duration", r)
		}
		if r.Endpoint == "healthz" && r.StatusCode != 500 {
			t.Errorf("healthz status %d, want 500 recorded", r.StatusCode)
		}
	}
	notes := b.Notes()
	if !strings.HasPrefix(rq.TLS, "verified: ") || !strings.Contains(rq.TLS, "/var/lib/kubelet/pki/kubelet.crt") {
		t.Errorf("requests.json's tls %q does not say the peer was verified against the kubelet's own certificate", rq.TLS)
	}
	if !strings.Contains(notes, "[-]syncloop failed") {
		t.Errorf("the manifest does not surface healthz's failing check:\n%s", notes)
	}
	supervisortest.AssertAbsent(t, b, goodToken)
	supervisortest.AssertAbsent(t, b, podSecretValue)
}

// With the kubelet's CA the certificate is verified, and the token may
// come from the environment.
func TestKubeletVerifiesWithCA(t *testing.T) {
	fk := newFakeKubelet(t)
	t.Setenv(kubelet.KubeletTokenEnv, goodToken)
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", fk.srv.URL, "--kubelet-ca-file", fk.caFile(t), "--kubelet-readonly-url", "")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{NoBinary: true})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	rq := kubeletRequests(t, b)
	if rq.TokenSource != "environment "+kubelet.KubeletTokenEnv || !strings.HasPrefix(rq.TLS, "verified") {
		t.Errorf("token source %q, tls %q", rq.TokenSource, rq.TLS)
	}
	for _, r := range rq.Requests {
		if r.Endpoint == "heap" {
			if r.Skipped == "" {
				t.Errorf("heap requested despite --no-binary: %+v", r)
			}
			continue
		}
		if !r.TLSVerified || r.File == "" {
			t.Errorf("request %+v: want verified and saved", r)
		}
	}
	if _, ok := b.Files["kubelet/heap.pb.gz"]; ok {
		t.Errorf("heap profile kept despite --no-binary")
	}
	if strings.Contains(b.Notes(), "not verified") {
		t.Errorf("notes say unverified although a CA was given:\n%s", b.Notes())
	}
	supervisortest.AssertAbsent(t, b, goodToken)
}

// A rejected token is reported as such, with the permission needed; the
// read-only port still gives healthz, metrics and pods, and never sees the
// token.
func TestKubeletWrongToken(t *testing.T) {
	fk := newFakeKubelet(t)
	ro := newFakeReadOnly(t)
	const wrong = "not-the-right-token-5a4b3c2d1e0f"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", fk.srv.URL, "--kubelet-token-file", tokenFile, "--kubelet-readonly-url", ro.URL)
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: fk.root(t)})
	if b.Res.Status != bundle.StatusPartial {
		t.Fatalf("status %q (%s), want partial", b.Res.Status, b.Res.Error)
	}
	notes := b.Notes()
	for _, want := range []string{"the token was rejected (401)", "get on nodes/pods, nodes/healthz, nodes/configz, nodes/metrics and nodes/stats"} {
		if !strings.Contains(notes, want) {
			t.Errorf("manifest notes lack %q:\n%s", want, notes)
		}
	}
	if h := string(b.File(t, "kubelet/healthz.txt")); !strings.Contains(h, "(read-only port)") {
		t.Errorf("healthz.txt = %q, want the read-only port's", h)
	}
	for _, f := range []string{"kubelet/metrics.txt", "kubelet/pods.json"} {
		b.File(t, f)
	}
	for _, f := range []string{"kubelet/goroutine-debug1.txt", "kubelet/configz.json"} {
		if _, ok := b.Files[f]; ok {
			t.Errorf("%s present although the token was rejected", f)
		}
	}
	rq := kubeletRequests(t, b)
	if !strings.HasPrefix(rq.TokenSource, "file ") {
		t.Errorf("token source %q", rq.TokenSource)
	}
	var n401, nro int
	for _, r := range rq.Requests {
		switch {
		case r.Port == "secure" && r.StatusCode == 401:
			n401++
		case r.Port == "read-only" && r.StatusCode == 200:
			nro++
		case r.Port == "read-only":
			t.Errorf("read-only request %+v", r)
		}
	}
	if n401 != 7 || nro != 3 {
		t.Errorf("%d secure 401s and %d read-only answers, want 7 and 3: %+v", n401, nro, rq.Requests)
	}
	supervisortest.AssertAbsent(t, b, wrong)
}

// A token whose identity lacks permission is told apart from a rejected
// one, with the kubelet's own explanation.
func TestKubeletForbidden(t *testing.T) {
	fk := newFakeKubelet(t)
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", fk.srv.URL, "--kubelet-token", forbiddenToken, "--kubelet-readonly-url", "")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: fk.root(t)})
	if b.Res.Status != bundle.StatusError {
		t.Fatalf("status %q, want error", b.Res.Status)
	}
	want := "the token's identity lacks permission (403): it needs get on nodes/pods, nodes/healthz, nodes/configz, nodes/metrics and nodes/stats"
	if !strings.Contains(b.Res.Error, want) {
		t.Errorf("error %q lacks %q", b.Res.Error, want)
	}
	notes := b.Notes()
	for _, want := range []string{"subresource(s)=[pods proxy]", "/metrics is authorized as get nodes/metrics", "/pods is authorized as get nodes/pods (or nodes/proxy)",
		"exec into every pod"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	supervisortest.AssertAbsent(t, b, forbiddenToken)
}

// Where the secure port refuses connections, the read-only port serves
// what it can.
func TestKubeletReadOnlyFallback(t *testing.T) {
	ro := newFakeReadOnly(t)
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", "https://"+closedPort(t), "--kubelet-token", goodToken, "--kubelet-readonly-url", ro.URL)
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: kubeletRootWith(t, selfSigned(t, "kubelet").Leaf)})
	if b.Res.Status != bundle.StatusPartial {
		t.Fatalf("status %q (%s), want partial", b.Res.Status, b.Res.Error)
	}
	for _, f := range []string{"kubelet/healthz.txt", "kubelet/metrics.txt", "kubelet/pods.json"} {
		b.File(t, f)
	}
	if !strings.Contains(b.Notes(), "connection refused") {
		t.Errorf("notes do not say the secure port refused:\n%s", b.Notes())
	}
	supervisortest.AssertAbsent(t, b, goodToken)
}

// A kubelet that accepts connections and never answers costs one request
// deadline, not one per endpoint, and not the collector's.
func TestKubeletUnresponsive(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	const deadline = 2 * time.Second
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", "https://"+l.Addr().String(), "--kubelet-token", goodToken,
		"--kubelet-readonly-url", "", "--kubelet-request-timeout", deadline.String())
	start := time.Now()
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: kubeletRootWith(t, selfSigned(t, "impostor").Leaf)})
	elapsed := time.Since(start)
	if b.Res.Status != bundle.StatusError {
		t.Errorf("status %q, want error", b.Res.Status)
	}
	// Seven endpoints one after another would take 7×2s.
	if limit := 2*deadline + 3*time.Second; b.Res.DurationSeconds > limit.Seconds() {
		t.Errorf("collector took %.1fs, want about one %s deadline (limit %s)", b.Res.DurationSeconds, deadline, limit)
	}
	rq := kubeletRequests(t, b)
	for _, r := range rq.Requests {
		if !strings.Contains(r.Error, "no answer within 2s") {
			t.Errorf("request %s: error %q, want no answer within 2s", r.Endpoint, r.Error)
		}
	}
	t.Logf("whole run %s", elapsed)
	supervisortest.AssertAbsent(t, b, goodToken)
}

// The token is never sent to a kubelet nothing under the root vouches for,
// and a remote one is not even connected to.
func TestKubeletRefusesUnverifiedRemote(t *testing.T) {
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", "https://192.0.2.10:10250", "--kubelet-token", goodToken, "--kubelet-readonly-url", "")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: t.TempDir()})
	if b.Res.Status != bundle.StatusError {
		t.Errorf("status %q, want error", b.Res.Status)
	}
	all := b.Res.Error + "\n" + b.Notes()
	for _, want := range []string{"no credential was sent to 192.0.2.10:10250", "--kubelet-ca-file"} {
		if !strings.Contains(all, want) {
			t.Errorf("manifest lacks %q:\n%s", want, all)
		}
	}
	if b.Res.DurationSeconds > 5 {
		t.Errorf("took %.1fs: it must refuse before connecting", b.Res.DurationSeconds)
	}
	supervisortest.AssertAbsent(t, b, goodToken)
}

// The token does not leak through fmt or pflag's usage text either.
func TestKubeletTokenNeverPrints(t *testing.T) {
	s, _ := collectors.Lookup("kubelet")
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	s.Flags(fs)
	t.Cleanup(func() { s.Flags(pflag.NewFlagSet("reset", pflag.ContinueOnError)) })
	if err := fs.Parse([]string{"--kubelet-token", goodToken}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	fs.SetOutput(&out)
	fs.PrintDefaults()
	fmt.Fprintf(&out, "%v %+v %#v %s %q", s.Options, s.Options, s.Options, s.Options, s.Options)
	fmt.Fprint(&out, fs.Lookup("kubelet-token").Value.String())
	if strings.Contains(out.String(), goodToken) {
		t.Errorf("token printed: %s", out.String())
	}
	raw, err := json.Marshal(s.Options)
	if err != nil || !bytes.Contains(raw, []byte(goodToken)) {
		t.Errorf("options JSON (the child's only way to get the token) = %s, %v", raw, err)
	}
}

func TestKubeletScrubberSplitWrites(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	text := strings.Repeat("x", 100) + secret + "mid" + secret + secret + "end" + secret[:5]
	for chunk := 1; chunk <= len(text); chunk++ {
		var out bytes.Buffer
		w := kubelet.NewKubeletScrubberForTest(&out, secret)
		for i := 0; i < len(text); i += chunk {
			w.Write([]byte(text[i:min(i+chunk, len(text))]))
		}
		w.Close()
		want := strings.ReplaceAll(text, secret, "[REDACTED]")
		if out.String() != want {
			t.Fatalf("chunk %d: %q, want %q", chunk, out.String(), want)
		}
	}
}

// PodEnv lists the literal env values of every container, and only
// those: a valueFrom entry has none.
func TestPodEnv(t *testing.T) {
	got := kubelet.PodEnv([]byte(`{"items":[{"spec":{"containers":[{"name":"csi-plugin","env":[
		{"name":"CSI_ENDPOINT","value":"unix:///csi/csi.sock"},
		{"name":"DRIVER_API_KEY","value":"Qz81mPplain"},
		{"name":"NODE_ID","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}}]}],
		"initContainers":[{"env":[{"name":"INIT_TOKEN","value":"x9"}]}]}}]}`))
	sort.Strings(got)
	want := []string{"CSI_ENDPOINT=unix:///csi/csi.sock", "DRIVER_API_KEY=Qz81mPplain", "INIT_TOKEN=x9"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("PodEnv = %q, want %q", got, want)
	}
	if kubelet.PodEnv([]byte("not json")) != nil {
		t.Fatal("PodEnv of a non-JSON answer")
	}
}

func FuzzRedactPodSecrets(f *testing.F) {
	f.Add([]byte(`{"items":[{"spec":{"containers":[{"env":[{"name":"A","value":"x"}]}]}}]}`))
	f.Add([]byte(`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}`))
	f.Add([]byte(`[1, "env", {"env": {"value": 3}}]`))
	f.Add([]byte(`{"env":[{"value":"a"},{"value":""}],`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Every env value PodEnv reports is one RedactPodSecrets drops.
		env := kubelet.PodEnv(data)
		out, n, err := kubelet.RedactPodSecrets(data)
		if err != nil {
			return
		}
		if n < len(env) {
			t.Fatalf("PodEnv found %d values, RedactPodSecrets dropped %d", len(env), n)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not JSON: %s", out)
		}
		if n < 0 {
			t.Fatalf("negative count")
		}
		// A second pass finds only markers, which it leaves as they are.
		again, _, err := kubelet.RedactPodSecrets(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %s -> %s (%v)", out, again, err)
		}
		if bytes.Contains(data, []byte(`"value"`)) && bytes.Contains(out, []byte(`"env"`)) {
			var v any
			_ = json.Unmarshal(out, &v)
			checkNoEnvValues(t, v, "")
		}
	})
}

// checkNoEnvValues fails if any object in an "env" list keeps a non-empty
// string value other than the marker.
func checkNoEnvValues(t *testing.T, v any, key string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if key == "env" && k == "value" {
				if s, ok := c.(string); ok && s != "" && s != "[REDACTED]" {
					t.Fatalf("env value %q kept", s)
				}
				continue
			}
			checkNoEnvValues(t, c, k)
		}
	case []any:
		for _, c := range x {
			checkNoEnvValues(t, c, key)
		}
	}
}

// The token scrubber sits on every text byte from the kubelet: a 100k
// goroutine dump is tens of megabytes.
func BenchmarkKubeletScrubber(b *testing.B) {
	var dump bytes.Buffer
	for dump.Len() < 8<<20 {
		dump.WriteString("goroutine 4242 [chan receive, 93 minutes]:\nk8s.io/kubernetes/pkg/kubelet.(*Kubelet).cleanupOrphanedPodDirs(0xc000a1b000, {0xc0012d4000, 0x3a, 0x40}, 0xc0003f2b40)\n\tpkg/kubelet/kubelet_volumes.go:190 +0x6a5\n")
	}
	data := dump.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		w := kubelet.NewKubeletScrubberForTest(io.Discard, goodToken)
		for i := 0; i < len(data); i += 32 << 10 {
			w.Write(data[i:min(i+32<<10, len(data))])
		}
		w.Close()
	}
}

// /pods of a full node: 110 pods with 20 variables each.
func BenchmarkRedactPodSecrets(b *testing.B) {
	var items []string
	for p := 0; p < 110; p++ {
		var env []string
		for e := 0; e < 20; e++ {
			env = append(env, fmt.Sprintf(`{"name":"VAR_%d","value":"value-%d-%d"}`, e, p, e))
		}
		items = append(items, fmt.Sprintf(`{"metadata":{"name":"pod-%d","uid":"%08d-0000-4000-8000-000000000000","annotations":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"busybox","env":[%s]}]},"status":{"phase":"Running"}}`, p, p, strings.Join(env, ",")))
	}
	data := []byte(`{"kind":"PodList","apiVersion":"v1","items":[` + strings.Join(items, ",") + `]}`)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, n, err := kubelet.RedactPodSecrets(data); err != nil || n != 2200 {
			b.Fatalf("%d, %v", n, err)
		}
	}
}

// --- credentials on a real node: no token, client certificates ----------

// newFakeHealthzPort serves what the kubelet's healthz port (10248) serves:
// /healthz, plain HTTP, no authentication.
func newFakeHealthzPort(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "a token reached the healthz port", http.StatusTeapot)
			return
		}
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "[+]ping ok\n[-]syncloop failed: reason withheld (healthz port)\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// noServiceAccountToken skips where the machine running the tests is a
// pod: the collector would rightly use that pod's token.
func noServiceAccountToken(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(kubelet.ServiceAccountTokenPath); err == nil {
		skip.Because(t, "%s exists here (a pod?): the collector would use it", kubelet.ServiceAccountTokenPath)
	}
}

func remedies(t *testing.T, b *supervisortest.Bundle) []bundle.Remedy {
	t.Helper()
	if len(b.Res.Remedies) == 0 {
		t.Fatalf("the manifest records no remedy for %s; notes:\n%s", b.Res.Name, b.Notes())
	}
	return b.Res.Remedies
}

// By hand on a real node with no token: what needs no credential is
// collected (healthz from the healthz port), the run is partial, and the
// manifest names each piece of evidence left out and the commands that get
// it next time.
func TestKubeletNoCredential(t *testing.T) {
	noServiceAccountToken(t)
	fk := newFakeKubelet(t)
	hz := newFakeHealthzPort(t)
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "http://"+closedPort(t), "--kubelet-healthz-url", hz.URL)
	// An empty --root: no kubeadm certificate to fall back on.
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: t.TempDir()})
	if b.Res.Status != bundle.StatusPartial {
		t.Fatalf("status %q (%s), want partial", b.Res.Status, b.Res.Error)
	}
	if h := string(b.File(t, "kubelet/healthz.txt")); !strings.Contains(h, "(healthz port)") {
		t.Errorf("healthz.txt = %q, want the healthz port's", h)
	}
	rq := kubeletRequests(t, b)
	if rq.TokenSource != "none" || rq.CredentialSource != "none" {
		t.Errorf("token source %q, credential %q, want none", rq.TokenSource, rq.CredentialSource)
	}
	var n401 int
	for _, r := range rq.Requests {
		if r.Port == "secure" && r.StatusCode == 401 {
			n401++
		}
		if r.Port == "healthz" && (r.Endpoint != "healthz" || r.StatusCode != 200) {
			t.Errorf("healthz-port request %+v", r)
		}
	}
	if n401 != 7 {
		t.Errorf("%d secure 401s, want 7: %+v", n401, rq.Requests)
	}
	rs := remedies(t, b)
	if len(rs) != 1 {
		t.Fatalf("%d remedies, want 1: %+v", len(rs), rs)
	}
	r := rs[0]
	want := []string{"goroutine dumps", "heap profile", "metrics", "configz (the kubelet's running configuration)", "pods (the kubelet's own pod list)"}
	if strings.Join(r.Missing, "|") != strings.Join(want, "|") {
		t.Errorf("missing %q, want %q", r.Missing, want)
	}
	if !strings.Contains(r.Reason, "requires a credential (401) and none was given") {
		t.Errorf("reason %q", r.Reason)
	}
	fix := strings.Join(r.Fix, "\n")
	for _, want := range []string{
		"NODESNAP_KUBELET_TOKEN=$(kubectl -n nodesnap create token nodesnap --duration=10m) nodesnap collect",
		"kubectl -n nodesnap create token nodesnap --duration=10m | sudo nodesnap collect --kubelet-token-file /dev/stdin",
		"nodesnap manifests rbac | kubectl apply -f -",
		"--kubelet-client-cert",
	} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix lacks %q:\n%s", want, fix)
		}
	}
	if !strings.Contains(b.Notes(), "none was given") {
		t.Errorf("the notes do not say why:\n%s", b.Notes())
	}
}

// A client certificate given by flag authenticates alone; its identity is
// recorded, its key is not.
func TestKubeletClientCertFlags(t *testing.T) {
	fk := newFakeKubelet(t)
	dir := t.TempDir()
	crt, key := fk.ca.WriteClientCert(t, dir, "operator", operatorCN, "ops")
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "",
		"--kubelet-client-cert", crt, "--kubelet-client-key", key)
	b := supervisortest.Collect(t, "kubelet", collectors.Common{NoBinary: true, Root: fk.root(t)})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	rq := kubeletRequests(t, b)
	if want := "client certificate " + crt + " (CN=" + operatorCN + ", O=ops; valid until "; !strings.HasPrefix(rq.CredentialSource, want) {
		t.Errorf("credential %q, want prefix %q", rq.CredentialSource, want)
	}
	if rq.TokenSource != "none" {
		t.Errorf("token source %q, want none", rq.TokenSource)
	}
	if len(b.Res.Remedies) != 0 {
		t.Errorf("remedies %+v on a complete run", b.Res.Remedies)
	}
	assertNoKey(t, b, key)
}

// assertNoKey fails if any line of a PEM key's body is in the bundle.
func assertNoKey(t *testing.T, b *supervisortest.Bundle, keyPath string) {
	t.Helper()
	data, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		t.Fatalf("%s holds no PEM", keyPath)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			supervisortest.AssertAbsent(t, b, line)
		}
	}
}

// On a kubeadm control-plane node, the API server's own client certificate
// for the kubelet (under --root) is used when no token is given, and the
// manifest says so; a token given wins over it.
func TestKubeletKubeadmCertUnderRoot(t *testing.T) {
	noServiceAccountToken(t)
	fk := newFakeKubelet(t)
	root := fk.root(t)
	_, key := fk.ca.WriteClientCert(t, filepath.Join(root, "etc/kubernetes/pki"), "apiserver-kubelet-client", kubeadmCN, "kubeadm:cluster-admins")
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{NoBinary: true, Root: root})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	want := "kubeadm apiserver-kubelet-client certificate /etc/kubernetes/pki/apiserver-kubelet-client.crt (CN=" + kubeadmCN + ", O=kubeadm:cluster-admins; valid until "
	if rq := kubeletRequests(t, b); !strings.HasPrefix(rq.CredentialSource, want) {
		t.Errorf("credential %q, want prefix %q", rq.CredentialSource, want)
	}
	if !strings.Contains(b.Notes(), "shown the kubeadm apiserver-kubelet-client certificate") {
		t.Errorf("notes do not say which credential was used:\n%s", b.Notes())
	}
	assertNoKey(t, b, key)

	// A token given is what the operator chose: the certificate stays.
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "", "--kubelet-token", goodToken)
	b = supervisortest.Collect(t, "kubelet", collectors.Common{NoBinary: true, Root: root})
	if rq := kubeletRequests(t, b); b.Res.Status != bundle.StatusOK || rq.CredentialSource != "bearer token (flag --kubelet-token)" {
		t.Errorf("with a token: status %q, credential %q", b.Res.Status, rq.CredentialSource)
	}
}

// Refusals an operator fixes in RBAC (403) or with another credential
// (401) each name their fix.
func TestKubeletCredentialRefusals(t *testing.T) {
	fk := newFakeKubelet(t)
	other := testkit.NewCA(t)
	dir := t.TempDir()
	nodeCrt, nodeKey := fk.ca.WriteClientCert(t, dir, "node", "system:node:node-1", "system:nodes")
	strangerCrt, strangerKey := other.WriteClientCert(t, dir, "stranger", operatorCN)
	for _, tc := range []struct {
		name        string
		args        []string
		errWant     string
		reason, fix []string
	}{
		{"service account without binding", []string{"--kubelet-token", forbiddenToken},
			"the token's identity lacks permission",
			[]string{"system:serviceaccount:monitoring:nodesnap may not get nodes/", "nodes/metrics", "(403)"},
			[]string{"nodesnap manifests rbac | kubectl apply -f - && kubectl create clusterrolebinding nodesnap-monitoring-nodesnap --clusterrole=nodesnap --serviceaccount=monitoring:nodesnap"}},
		{"the node's own certificate", []string{"--kubelet-client-cert", nodeCrt, "--kubelet-client-key", nodeKey},
			"the client certificate's identity lacks permission",
			[]string{"system:node:node-1 may not get nodes/", "nodes/metrics", "(403)"},
			[]string{"not granted the kubelet's subresources", "NODESNAP_KUBELET_TOKEN=$(kubectl -n nodesnap create token nodesnap --duration=10m) nodesnap collect"}},
		{"certificate of another CA", []string{"--kubelet-client-cert", strangerCrt, "--kubelet-client-key", strangerKey},
			"the client certificate was rejected (401)",
			[]string{"the kubelet rejected the client certificate " + strangerCrt + " (CN=" + operatorCN},
			[]string{"NODESNAP_KUBELET_TOKEN=$(kubectl -n nodesnap create token nodesnap --duration=10m) nodesnap collect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			supervisortest.Flags(t, "kubelet", append([]string{"--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", ""}, tc.args...)...)
			b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: fk.root(t)})
			if b.Res.Status != bundle.StatusError || !strings.Contains(b.Res.Error, tc.errWant) {
				t.Errorf("status %q error %q, want error with %q", b.Res.Status, b.Res.Error, tc.errWant)
			}
			rs := remedies(t, b)
			if len(rs[0].Missing) != 6 {
				t.Errorf("missing %q, want all six kinds of evidence", rs[0].Missing)
			}
			for _, w := range tc.reason {
				if !strings.Contains(rs[0].Reason, w) {
					t.Errorf("reason %q lacks %q", rs[0].Reason, w)
				}
			}
			fix := strings.Join(rs[0].Fix, "\n")
			for _, w := range tc.fix {
				if !strings.Contains(fix, w) {
					t.Errorf("fix lacks %q:\n%s", w, fix)
				}
			}
			supervisortest.AssertAbsent(t, b, forbiddenToken)
		})
	}
}

// A token handed over on a descriptor of nodesnap's own (<(kubectl ...),
// a pipe) is read before collection: a worker would open its own.
func TestKubeletTokenFromDescriptor(t *testing.T) {
	fk := newFakeKubelet(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	go func() {
		io.WriteString(w, goodToken+"\n")
		w.Close()
	}()
	fdPath := fmt.Sprintf("/dev/fd/%d", r.Fd())
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "", "--kubelet-token-file", fdPath)
	kubelet.PrepareKubeletToken(context.Background())
	b := supervisortest.Collect(t, "kubelet", collectors.Common{NoBinary: true, Root: fk.root(t)})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	if rq := kubeletRequests(t, b); rq.TokenSource != "file "+fdPath {
		t.Errorf("token source %q", rq.TokenSource)
	}
	supervisortest.AssertAbsent(t, b, goodToken)

	// Nothing ever written: the read ends at its deadline, and says so.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r2.Close(); w2.Close() })
	fdPath = fmt.Sprintf("/dev/fd/%d", r2.Fd())
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "",
		"--kubelet-token-file", fdPath, "--kubelet-request-timeout", "300ms")
	start := time.Now()
	kubelet.PrepareKubeletToken(context.Background())
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("reading a silent pipe took %s, want about 300ms", d)
	}
	b = supervisortest.Collect(t, "kubelet", collectors.Common{NoBinary: true, Root: fk.root(t)})
	if !strings.Contains(b.Notes(), "nothing was written to it within 300ms") {
		t.Errorf("notes do not say the pipe stayed silent:\n%s", b.Notes())
	}
}

// An expired kubeadm certificate is reported, not sent.
func TestKubeletExpiredKubeadmCert(t *testing.T) {
	noServiceAccountToken(t)
	fk := newFakeKubelet(t)
	root := fk.root(t)
	pki := filepath.Join(root, "etc/kubernetes/pki")
	crt, key := fk.ca.ClientCert(t, kubeadmCN, []string{"kubeadm:cluster-admins"}, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	if err := os.MkdirAll(pki, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pki, "apiserver-kubelet-client.crt"), crt, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pki, "apiserver-kubelet-client.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{NoBinary: true, Root: root})
	if !strings.Contains(b.Notes(), "kubeadm's client certificate "+filepath.Join(pki, "apiserver-kubelet-client.crt")+" expired on ") {
		t.Errorf("notes do not say the certificate expired:\n%s", b.Notes())
	}
	if rq := kubeletRequests(t, b); rq.CredentialSource != "none" {
		t.Errorf("credential %q, want none", rq.CredentialSource)
	}
	if rs := remedies(t, b); !strings.Contains(rs[0].Reason, "none was given") {
		t.Errorf("reason %q", rs[0].Reason)
	}
}

// The kubelet collector's own replacements (pods' environment values, the
// token echoed back) are counted in the manifest's redaction report like
// the redactor's.
func TestKubeletOwnRedactionsCounted(t *testing.T) {
	fk := newFakeKubelet(t)
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", fk.srv.URL, "--kubelet-token", goodToken,
		"--kubelet-readonly-url", "http://"+closedPort(t), "--kubelet-profile-seconds", "1")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: fk.root(t)})
	if n := b.FileEntry(t, "kubelet/pods.json").Redactions[kubelet.RedactionPodEnv]; n < 1 {
		t.Errorf("pods.json records %d %s redactions, want the environment values counted", n, kubelet.RedactionPodEnv)
	}
	if n := b.FileEntry(t, "kubelet/configz.json").Redactions[kubelet.RedactionKubeletToken]; n < 1 {
		t.Errorf("configz.json records %d %s redactions, want the echoed token counted", n, kubelet.RedactionKubeletToken)
	}
	rules := b.Manifest.Redaction.Rules
	if rules[kubelet.RedactionPodEnv] < 1 || rules[kubelet.RedactionKubeletToken] < 1 {
		t.Errorf("manifest redaction rules %v lack the kubelet collector's own", rules)
	}
}

// A token that may read the kubelet's pods but not its metrics is told it
// lacks nodes/metrics (and nodes/stats), not nodes/proxy or every
// subresource: the hint names what the kubelet refused.
func TestKubeletRefusalNamesTheSubresource(t *testing.T) {
	fk := newFakeKubelet(t)
	supervisortest.Flags(t, "kubelet", "--kubelet-url", fk.srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "",
		"--kubelet-token", noMetricsToken, "--kubelet-pprof=false")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: fk.root(t)})
	rs := remedies(t, b)
	if len(rs) == 0 {
		t.Fatalf("no remedy; status %s (%s)", b.Res.Status, b.Res.Error)
	}
	r := rs[0].Reason
	refused, _, _ := strings.Cut(r, " (403)")
	if !strings.HasPrefix(refused, noMetricsSA+" may not get nodes/metrics") || strings.Contains(refused, "nodes/proxy") || strings.Contains(refused, "nodes/pods") {
		t.Errorf("reason %q: want it to name nodes/metrics as what was refused, not nodes/proxy or nodes/pods", r)
	}
	supervisortest.AssertAbsent(t, b, noMetricsToken)
}
