package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

const e2eKubeletToken = "e2e-kubelet-token-4f1c9a7d2b8e6035"

// newE2EKubelet is a kubelet on loopback that authenticates like a real
// node's (webhook authn/authz, anonymous off): e2eKubeletToken is the
// nodesnap ServiceAccount's, allowed everything; anything else is 401.
func newE2EKubelet(t *testing.T) *httptest.Server {
	t.Helper()
	mux := testkit.KubeletMux(t)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "kubelet_running_pods 0\n") })
	mux.HandleFunc("/configz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"kubeletconfig":{}}`) })
	mux.HandleFunc("/pods", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"kind":"PodList","items":[]}`) })
	auth := &testkit.KubeletAuth{
		Tokens:  map[string]string{e2eKubeletToken: "system:serviceaccount:nodesnap:nodesnap"},
		Allowed: func(user, _ string) bool { return user == "system:serviceaccount:nodesnap:nodesnap" },
	}
	srv := httptest.NewUnstartedServer(auth.Wrap(mux))
	srv.TLS = auth.TLSConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	hz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	t.Cleanup(hz.Close)
	t.Setenv("E2E_HEALTHZ_URL", hz.URL)
	return srv
}

func kubeletOnlyArgs(t *testing.T, srv *httptest.Server, extra ...string) []string {
	// A --root holding nothing but the kubelet's serving certificate (the
	// stand-in's, where a self-signed kubelet keeps it): no kubeadm
	// certificate of this machine's is used, and the stand-in is known.
	root := kubeletRoot(t, srv.Certificate())
	return append([]string{"collect", "--only", "kubelet", "--output-dir", t.TempDir(), "--root", root,
		"--kubelet-url", srv.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", os.Getenv("E2E_HEALTHZ_URL")}, extra...)
}

// kubeletRoot is a --root whose kubelet serves with cert
// (/var/lib/kubelet/pki/kubelet.crt).
func kubeletRoot(t *testing.T, cert *x509.Certificate) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "var/lib/kubelet/pki")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubelet.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// By hand with no credential, even --quiet ends by naming the missing
// kubelet evidence and the command that gets it; stdout keeps its one line.
func TestCollectKubeletNoCredentialSaysHowToFix(t *testing.T) {
	if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
		skip.Because(t, "this machine has a pod service-account token, which the kubelet collector would use")
	}
	srv := newE2EKubelet(t)
	r := runNodesnap(t, 60*time.Second, nil, kubeletOnlyArgs(t, srv, "-q")...)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3 (partial)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("stderr:\n%s", r.stderr)
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || !strings.HasSuffix(lines[0], ".tar.gz") {
		t.Errorf("stdout %q, want the bundle's path alone", r.stdout)
	}
	for _, want := range []string{
		"nodesnap: kubelet: missing goroutine dumps, heap profile, metrics, configz (the kubelet's running configuration), pods (the kubelet's own pod list): the kubelet requires a credential (401) and none was given.",
		"\n    NODESNAP_KUBELET_TOKEN=$(kubectl -n nodesnap create token nodesnap --duration=10m) nodesnap collect",
		"\n    kubectl -n nodesnap create token nodesnap --duration=10m | sudo nodesnap collect --kubelet-token-file /dev/stdin",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	m := mustValidate(t, strings.TrimSpace(r.stdout)).Manifest
	if c := collectorByName(t, m, "kubelet"); len(c.Remedies) != 1 || c.Status != bundle.StatusPartial {
		t.Errorf("kubelet %s with remedies %+v", c.Status, c.Remedies)
	}
	// And whoever reads the bundle later sees the same.
	in := runNodesnap(t, 30*time.Second, nil, "inspect", strings.TrimSpace(r.stdout))
	if in.code != 0 || !strings.Contains(in.stdout, "kubelet: missing goroutine dumps") || !strings.Contains(in.stdout, "create token nodesnap") {
		t.Errorf("inspect (exit %d) does not show the remedy:\n%s%s", in.code, in.stdout, in.stderr)
	}
}

// A token piped in (/dev/stdin) or handed over on a descriptor (what
// <(kubectl ...) gives: /dev/fd/N) reaches the kubelet, though collectors
// and their workers run in other processes, and is nowhere in the output.
func TestCollectKubeletTokenOnDescriptors(t *testing.T) {
	srv := newE2EKubelet(t)
	for _, tc := range []struct{ name, file string }{{"stdin", "/dev/stdin"}, {"fd", "/dev/fd/3"}} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := nodesnapCmd(t, nil, kubeletOnlyArgs(t, srv, "--output", "json", "--kubelet-token-file", tc.file)...)
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			if tc.file == "/dev/stdin" {
				cmd.Stdin = pr
			} else {
				cmd.ExtraFiles = []*os.File{pr}
			}
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pr.Close()
			// Written after nodesnap started, as kubectl would.
			time.Sleep(100 * time.Millisecond)
			io.WriteString(pw, e2eKubeletToken+"\n")
			pw.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Fatal("nodesnap did not finish within 60s")
			}
			var res collectResult
			if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
				t.Fatalf("stdout is not the JSON result: %v\n%s\nstderr:\n%s", err, out.String(), errb.String())
			}
			if res.Status != "complete" || res.Collectors["kubelet"] != "ok" || cmd.ProcessState.ExitCode() != 0 {
				t.Errorf("status %s, kubelet %s, exit %d; stderr:\n%s", res.Status, res.Collectors["kubelet"], cmd.ProcessState.ExitCode(), errb.String())
			}
			if len(res.Remedies) != 0 {
				t.Errorf("remedies %+v on a complete run", res.Remedies)
			}
			c := mustValidate(t, res.Path)
			var rq struct {
				TokenSource string `json:"token_source"`
			}
			if err := json.Unmarshal(c.Files["kubelet/requests.json"], &rq); err != nil || rq.TokenSource != "file "+tc.file {
				t.Errorf("requests.json token_source %q (%v), want file %s", rq.TokenSource, err, tc.file)
			}
			_, raw, err := readManifestRaw(res.Path)
			if err != nil {
				t.Fatal(err)
			}
			for name, data := range c.Files {
				if strings.Contains(string(data), e2eKubeletToken) {
					t.Errorf("the token is in %s", name)
				}
			}
			if strings.Contains(string(raw)+out.String()+errb.String(), e2eKubeletToken) {
				t.Error("the token is in the manifest or the output")
			}
		})
	}
}

// A descriptor the shell did not pass (sudo closes all but 0-2) is
// reported as such, with the way around it.
func TestCollectKubeletTokenDescriptorNotPassed(t *testing.T) {
	srv := newE2EKubelet(t)
	r := runNodesnap(t, 60*time.Second, nil, kubeletOnlyArgs(t, srv, "-q", "--kubelet-token-file", "/dev/fd/9")...)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3\nstderr:\n%s", r.code, r.stderr)
	}
	c := collectorByName(t, mustValidate(t, strings.TrimSpace(r.stdout)).Manifest, "kubelet")
	notes := strings.Join(c.Notes, "\n")
	if !strings.Contains(notes, "descriptor 9 is not open in nodesnap") || !strings.Contains(notes, "--kubelet-token-file /dev/stdin") {
		t.Errorf("notes do not say the descriptor was not passed:\n%s", notes)
	}
}

// What the docs show, through a real shell: <(...) as --kubelet-token-file.
func TestCollectKubeletTokenProcessSubstitution(t *testing.T) {
	binaryTest(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		skip.Missing(t, "bash is not installed: no process substitution")
	}
	srv := newE2EKubelet(t)
	args := append([]string{"-c", `exec "$0" "$@" --kubelet-token-file <(sleep 0.2; printf '%s\n' "$E2E_TOKEN")`, os.Args[0]}, kubeletOnlyArgs(t, srv, "-q")...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// bash execs nodesnap: the pid killed at the deadline is nodesnap's.
	cmd := exec.CommandContext(ctx, bash, args...)
	cmd.Env = append(os.Environ(), "NODESNAP_TEST_AS_MAIN=1", "E2E_TOKEN="+e2eKubeletToken)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("nodesnap: %v\nstderr:\n%s", err, errb.String())
	}
	c := mustValidate(t, strings.TrimSpace(out.String()))
	var rq struct {
		TokenSource string `json:"token_source"`
	}
	if err := json.Unmarshal(c.Files["kubelet/requests.json"], &rq); err != nil || !strings.HasPrefix(rq.TokenSource, "file /dev/fd/") {
		t.Errorf("requests.json token_source %q (%v), want file /dev/fd/N", rq.TokenSource, err)
	}
	if k := collectorByName(t, c.Manifest, "kubelet"); k.Status != bundle.StatusOK {
		t.Errorf("kubelet %s: %s", k.Status, k.Error)
	}
}
