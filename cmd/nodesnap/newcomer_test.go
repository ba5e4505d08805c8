package main

import (
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeKubeconfig writes a kubeconfig for server, verified against the
// CA in caPEM, with a token, at root+p.
func writeKubeconfig(t *testing.T, root, p, server string, caPEM []byte) string {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	kc := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + server + `", certificate-authority-data: ` + base64.StdEncoding.EncodeToString(caPEM) + `}
users:
- name: u
  user: {token: test-token-not-a-secret}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
	if err := os.WriteFile(full, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return full
}

// testCAPEM is the certificate of a loopback TLS server, as PEM.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	srv := httptest.NewTLSServer(nil)
	defer srv.Close()
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// A run with no API credential ends with a hint that names a kubeconfig
// this node has, as nodesnap reaches it (under --root), and never one it
// lacks: following it must not turn a complete run into a failed one. A
// node with none is told so, and what to do instead.
func TestCredentialHintNamesWhatExists(t *testing.T) {
	ca := testCAPEM(t)
	env := []string{"KUBECONFIG="}
	hint := func(t *testing.T, root string) (runResult, string) {
		t.Helper()
		r := runNodesnap(t, 2*time.Minute, env, "collect", "--only", "cluster", "--root", root, "--output-dir", t.TempDir(), "--timeout", "60s")
		if r.code != exitOK {
			t.Fatalf("exit %d, want 0 (the cluster collector is unsupported without a credential)\n%s", r.code, r.stderr)
		}
		_, after, ok := strings.Cut(r.stderr, "To collect them")
		if !ok {
			t.Fatalf("no hint at the end of the run:\n%s", r.stderr)
		}
		return r, after
	}

	t.Run("none", func(t *testing.T) {
		root := t.TempDir()
		_, h := hint(t, root)
		for _, bad := range []string{"/etc/kubernetes/kubelet.conf", "deploy/kubernetes/rbac.yaml"} {
			if strings.Contains(h, bad) {
				t.Errorf("the hint names %s, which this node (or the binary's user) does not have:\n%s", bad, h)
			}
		}
		for _, want := range []string{"nodesnap manifests rbac | kubectl apply -f -", "--kubeconfig FILE"} {
			if !strings.Contains(h, want) {
				t.Errorf("the hint lacks %q:\n%s", want, h)
			}
		}
	})

	for _, tc := range []struct{ name, path, what string }{
		{"k3s", "/etc/rancher/k3s/k3s.yaml", "k3s"},
		{"rke2 agent", "/var/lib/rancher/rke2/agent/kubelet.kubeconfig", "RKE2"},
		{"k0s", "/var/lib/k0s/kubelet.conf", "k0s"},
		{"microk8s", "/var/snap/microk8s/current/credentials/kubelet.config", "microk8s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			full := writeKubeconfig(t, root, tc.path, "https://127.0.0.1:1", ca)
			_, h := hint(t, root)
			want := "nodesnap collect --kubeconfig " + full
			if !strings.Contains(h, want) || !strings.Contains(h, tc.what) {
				t.Fatalf("the hint lacks %q (%s):\n%s", want, tc.what, h)
			}
			if strings.Contains(h, "/etc/kubernetes/kubelet.conf") {
				t.Errorf("the hint names a kubeconfig the node does not have:\n%s", h)
			}
			// Following it: the kubeconfig is read (the API server it
			// names is not there, which is another matter).
			dir := t.TempDir()
			r := runNodesnap(t, 2*time.Minute, env, "collect", "--only", "cluster", "--root", root, "--output-dir", dir,
				"--timeout", "60s", "--kubeconfig", full)
			if strings.Contains(r.stderr, "does not exist") || strings.Contains(r.stderr, "To collect them") {
				t.Errorf("following the hint (exit %d):\n%s", r.code, r.stderr)
			}
			m := mustValidate(t, bundlePath(t, dir)).Manifest
			c := collectorByName(t, m, "cluster")
			if !strings.Contains(strings.Join(c.Notes, "\n")+c.Error, "--kubeconfig "+full) {
				t.Errorf("the cluster collector did not use %s: %s %s %v", full, c.Status, c.Error, c.Notes)
			}
		})
	}
}

// An upload to a server whose certificate a private CA signed fails with
// the way out named (--ca-file, $SSL_CERT_FILE), and succeeds with either.
func TestUploadPrivateCA(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("collect: %d %s", r.code, r.stderr)
	}
	p := strings.TrimSpace(r.stdout)
	var mu sync.Mutex
	got := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n, _ := io.Copy(io.Discard, req.Body)
		mu.Lock()
		got = int(n)
		mu.Unlock()
	}))
	defer srv.Close()
	url := srv.URL + "/case-42/bundle.tar.gz"
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}

	r = runNodesnap(t, 60*time.Second, nil, "upload", "--retries", "0", p, url)
	if r.code != exitUploadFailed || !strings.Contains(r.stderr, "not trusted") || !strings.Contains(r.stderr, "--ca-file") || !strings.Contains(r.stderr, "SSL_CERT_FILE") {
		t.Errorf("untrusted server: exit %d, want %d and the CA options named:\n%s", r.code, exitUploadFailed, r.stderr)
	}
	r = runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", t.TempDir(), "--upload", url, "--upload-retries", "0"}, fastRun...)...)
	if r.code != exitUploadFailed || !strings.Contains(r.stderr, "--upload-ca-file") {
		t.Errorf("collect --upload to an untrusted server: exit %d, want %d and --upload-ca-file named:\n%s", r.code, exitUploadFailed, r.stderr)
	}
	st, _ := os.Stat(p)
	for name, run := range map[string][]string{
		"--ca-file":     {"upload", "--ca-file", caFile, p, url},
		"SSL_CERT_FILE": {"upload", p, url},
	} {
		env := []string(nil)
		if name == "SSL_CERT_FILE" {
			env = []string{"SSL_CERT_FILE=" + caFile}
		}
		mu.Lock()
		got = 0
		mu.Unlock()
		r = runNodesnap(t, 60*time.Second, env, run...)
		mu.Lock()
		n := got
		mu.Unlock()
		if r.code != exitOK || int64(n) != st.Size() {
			t.Errorf("with %s: exit %d, the server got %d of %d bytes\n%s", name, r.code, n, st.Size(), r.stderr)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "ca.der")
	if err := os.WriteFile(notPEM, srv.Certificate().Raw, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runNodesnap(t, 60*time.Second, nil, "upload", "--ca-file", notPEM, p, url)
	if r.code != exitUsage || !strings.Contains(r.stderr, "no PEM certificate") {
		t.Errorf("--ca-file of a DER file: exit %d, want %d\n%s", r.code, exitUsage, r.stderr)
	}
}

// The binary prints the manifests it was built with, so that the hints
// that apply them work wherever the binary is.
func TestManifestsCommand(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r := runNodesnap(t, 30*time.Second, nil, "manifests", "rbac")
	if r.code != exitOK || r.stdout != string(want) {
		t.Errorf("manifests rbac: exit %d, %d bytes, want deploy/kubernetes/rbac.yaml (%d bytes)\n%s", r.code, len(r.stdout), len(want), r.stderr)
	}
	r = runNodesnap(t, 30*time.Second, nil, "manifests", "rbac", "rbac-pprof")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, string(want)+"---\n") || !strings.Contains(r.stdout, "nodesnap-pprof") {
		t.Errorf("manifests rbac rbac-pprof: exit %d, not one stream of both:\n%s", r.code, r.stdout)
	}
	r = runNodesnap(t, 30*time.Second, nil, "manifests")
	for _, name := range []string{"rbac", "rbac-pprof", "job", "daemonset"} {
		if !strings.Contains(r.stdout, name+" ") {
			t.Errorf("manifests lists no %s:\n%s", name, r.stdout)
		}
	}
	r = runNodesnap(t, 30*time.Second, nil, "manifests", "nope")
	if r.code != exitUsage || !strings.Contains(r.stderr, "rbac") {
		t.Errorf("manifests nope: exit %d, want %d and the names:\n%s", r.code, exitUsage, r.stderr)
	}
}

// report without --output-file writes into the current directory and
// prints the page's whole path; its "Directory shape" section of a node
// with none of dirshape's directories says so once.
func TestReportWholePathAndOneSentence(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 2*time.Minute, nil, "collect", "-q", "--only", "dirshape", "--root", t.TempDir(), "--output-dir", out, "--timeout", "60s")
	if r.code != exitOK && r.code != exitPartial {
		t.Fatalf("collect: exit %d\n%s", r.code, r.stderr)
	}
	b := bundlePath(t, out)
	cwd := t.TempDir()
	cmd := nodesnapCmd(t, nil, "report", b)
	cmd.Dir = cwd
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	want := filepath.Join(cwd, strings.TrimSuffix(filepath.Base(b), ".tar.gz")+".html")
	if got := strings.TrimSpace(string(stdout)); got != want {
		t.Errorf("report printed %q, want the page's whole path %q", got, want)
	}
	page, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	i, j := strings.Index(s, `id="dirs"`), strings.Index(s, `id="goroutines"`)
	if i < 0 || j < i {
		t.Fatalf("no Directory shape section")
	}
	sec := s[i:j]
	sentences := map[string]int{}
	for _, p := range strings.Split(sec, "<p") {
		if k := strings.Index(p, ">"); k >= 0 {
			text := strings.TrimSpace(strings.SplitN(p[k+1:], "</p>", 2)[0])
			text = strings.TrimSuffix(strings.TrimSuffix(text, "."), ", so there is nothing to draw")
			if text != "" {
				sentences[text]++
			}
		}
	}
	for text, n := range sentences {
		if n > 1 {
			t.Errorf("Directory shape says %q %d times", text, n)
		}
	}
	if len(sentences) == 0 {
		t.Errorf("Directory shape says nothing:\n%s", sec)
	}
}
