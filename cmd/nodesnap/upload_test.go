package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
)

func fileSHA256(t *testing.T, p string) (string, []byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), b
}

const presignSecret = "X-Amz-Signature=0123456789abcdef-very-secret"

// --upload PUTs the exact bundle, its sha256 in a header, and the
// pre-signed URL's signature appears nowhere: not on the terminal, not in
// the manifest's record of the command line.
func TestCollectUploadPUT(t *testing.T) {
	srv := testkit.NewUploadServer(t, 200)
	out := t.TempDir()
	url := srv.URL + "/bucket/case-42/node.tar.gz?" + presignSecret
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "--output-dir", out, "--upload", url}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	p := bundlePath(t, out)
	sum, data := fileSHA256(t, p)
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if got.Method != http.MethodPut || got.Path != "/bucket/case-42/node.tar.gz" || got.Query != presignSecret {
		t.Errorf("request %s %s?%s", got.Method, got.Path, got.Query)
	}
	if !bytes.Equal(got.Body, data) {
		t.Errorf("server received %d bytes that differ from the %d-byte bundle", len(got.Body), len(data))
	}
	if h := got.Header.Get(SHA256Header); h != sum {
		t.Errorf("%s: %q, bundle sha256 %s", SHA256Header, h, sum)
	}
	if ct := got.Header.Get("Content-Type"); ct != "" {
		t.Errorf("PUT carried Content-Type %q; pre-signed URLs may have signed its absence", ct)
	}
	if !strings.Contains(r.stdout, "Uploaded to "+srv.URL+"/bucket/case-42/node.tar.gz?…") || !strings.Contains(r.stdout, p) {
		t.Errorf("final lines do not say where it went and where the copy is:\n%s", r.stdout)
	}
	c := mustValidate(t, p)
	for what, text := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "manifest command line": strings.Join(c.Manifest.CommandLine, " ")} {
		if strings.Contains(text, "very-secret") {
			t.Errorf("the URL's signature is in the %s: %s", what, text)
		}
	}
	if !strings.Contains(strings.Join(c.Manifest.CommandLine, " "), "--upload "+srv.URL+"/bucket/case-42/node.tar.gz?…") {
		t.Errorf("manifest command line %q does not record the upload target", c.Manifest.CommandLine)
	}
}

// A server failing twice (500, then 503 with Retry-After) then taking it
// is retried with backoff; every attempt carries the whole bundle.
func TestCollectUploadRetries(t *testing.T) {
	srv := testkit.NewUploadServer(t, 500, 503, 201)
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{fastEnv},
		append([]string{"collect", "--output-dir", out, "--output", "json", "--upload", srv.URL + "/u", "--upload-backoff", "100ms"}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var res collectResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--output json: %v\n%s", err, r.stdout)
	}
	if res.Upload == nil || !res.Upload.OK || res.Upload.Attempts != 3 || res.Upload.StatusCode != 201 {
		t.Errorf("upload result %+v, want ok after 3 attempts with 201", res.Upload)
	}
	_, data := fileSHA256(t, res.Path)
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, q := range reqs {
		if !bytes.Equal(q.Body, data) {
			t.Errorf("attempt %d carried %d bytes, not the %d-byte bundle", i+1, len(q.Body), len(data))
		}
	}
}

// A server that takes the bytes and never answers costs the upload
// timeout and no more; the bundle stays on disk, the exit status says the
// upload failed (5), and the message says where the bundle is.
func TestCollectUploadServerNeverAnswers(t *testing.T) {
	srv := testkit.NewUploadServer(t, 0)
	out := t.TempDir()
	const uploadTimeout = 3 * time.Second
	r := runNodesnap(t, 60*time.Second, []string{fastEnv},
		append([]string{"collect", "--output-dir", out, "--output", "json", "--upload", srv.URL + "/u", "--upload-timeout", uploadTimeout.String()}, fastRun...)...)
	if r.code != exitUploadFailed {
		t.Fatalf("exit %d, want %d\n%s\n%s", r.code, exitUploadFailed, r.stdout, r.stderr)
	}
	var res collectResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--output json: %v\n%s", err, r.stdout)
	}
	p := bundlePath(t, out)
	mustValidate(t, p)
	if res.Path != p || res.Upload == nil || res.Upload.OK || res.ExitStatus != exitUploadFailed {
		t.Errorf("json result %+v, want a failed upload of %s", res, p)
	}
	if d := res.Upload.DurationSeconds; d < uploadTimeout.Seconds()-0.2 || d > uploadTimeout.Seconds()+2 {
		t.Errorf("upload took %.1fs, want about its %s timeout", d, uploadTimeout)
	}
	if !strings.Contains(r.stderr, "kept at "+p) || !strings.Contains(r.stderr, "--upload-timeout") {
		t.Errorf("stderr does not say the bundle is kept and why the upload failed:\n%s", r.stderr)
	}
}

// The upload command sends a bundle made earlier, as a multipart form with
// the chosen field name and the headers of --headers-file, whose values
// are never printed; the URL may come from the environment.
func TestUploadCommandMultipart(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("collect: %d %s", r.code, r.stderr)
	}
	p := strings.TrimSpace(r.stdout)
	sum, data := fileSHA256(t, p)
	hf := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(hf, []byte("# ticket system\nAuthorization: Bearer hunter2-ticket-token\n\nX-Case: 42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testkit.NewUploadServer(t, 403, 200)
	r = runNodesnap(t, 60*time.Second, []string{UploadURLEnv + "=" + srv.URL + "/api/cases/42/files"},
		"upload", "--method", "post", "--field", "attachment", "--headers-file", hf, p)
	if r.code != exitUploadFailed {
		t.Fatalf("403: exit %d, want %d (a 403 is final)\n%s", r.code, exitUploadFailed, r.stderr)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("a 403 was retried: %d requests", n)
	}
	if !strings.Contains(r.stderr, "403") || !strings.Contains(r.stderr, "Nope (scripted failure)") || strings.Contains(r.stderr, "secret-ish") {
		t.Errorf("403 message should give the server's code and message and nothing else of its answer:\n%s", r.stderr)
	}
	r = runNodesnap(t, 60*time.Second, []string{UploadURLEnv + "=" + srv.URL + "/api/cases/42/files"},
		"upload", "--method", "post", "--field", "attachment", "--headers-file", hf, p)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	reqs := srv.Requests()
	got := reqs[len(reqs)-1]
	if got.Method != http.MethodPost || !bytes.Equal(got.Form["attachment"], data) {
		t.Errorf("server got %s with field attachment of %d bytes, want POST of the %d-byte bundle", got.Method, len(got.Form["attachment"]), len(data))
	}
	if got.Header.Get("Authorization") != "Bearer hunter2-ticket-token" || got.Header.Get("X-Case") != "42" || got.Header.Get(SHA256Header) != sum {
		t.Errorf("headers %v", got.Header)
	}
	if strings.Contains(r.stdout+r.stderr, "hunter2") {
		t.Errorf("a header value was printed:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, sum) {
		t.Errorf("stdout does not give the sha256:\n%s", r.stdout)
	}

	// Not a bundle: refused before anything is sent.
	other := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(other, []byte("not a bundle\n"), 0o600)
	before := len(srv.Requests())
	r = runNodesnap(t, 30*time.Second, nil, "upload", other, srv.URL+"/x")
	if r.code != exitFatal || !strings.Contains(r.stderr, "not a nodesnap bundle") || len(srv.Requests()) != before {
		t.Errorf("non-bundle: exit %d, %q, %d requests", r.code, r.stderr, len(srv.Requests())-before)
	}
}

// Ctrl-C during the upload ends the upload, not the process: exit 5, the
// bundle kept, and the customer told where it is.
func TestCollectUploadInterrupted(t *testing.T) {
	srv := testkit.NewUploadServer(t, 0)
	out := t.TempDir()
	cmd := nodesnapCmd(t, []string{fastEnv}, append([]string{"collect", "--output-dir", out, "--upload", srv.URL + "/u", "--upload-timeout", "60s"}, fastRun...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(srv.Requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatal("SIGINT did not end the upload")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s after SIGINT", d)
	}
	p := bundlePath(t, out)
	mustValidate(t, p)
	if code := cmd.ProcessState.ExitCode(); code != exitUploadFailed {
		t.Errorf("exit %d, want %d\n%s", code, exitUploadFailed, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted") || !strings.Contains(stderr.String(), "kept at "+p) {
		t.Errorf("stderr does not say the upload was interrupted and where the bundle is:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, ".nodesnap.lock")); err == nil {
		t.Errorf("lock file left behind")
	}
}

// A collection that uploads to a pre-signed URL records nodesnap's own
// process in processes/ps.txt like any other: its signature and security
// token must appear nowhere in the bundle (nor its manifest, nor the
// terminal), in any form, while the rest of nodesnap's command line does.
func TestCollectUploadOwnSecretsNowhere(t *testing.T) {
	testkit.RequireRoot(t)
	srv := testkit.NewUploadServer(t, 200)
	out := t.TempDir()
	const sig = "9f2c4b7e1a0d5c3b8e6f4a2d1c0b9e8f7a6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b"
	const tok = "IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2F%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQDx7tSecurityTok3n"
	u := srv.URL + "/bucket/case-43/node.tar.gz?X-Amz-Algorithm=AWS4-HMAC-SHA256" +
		"&X-Amz-Credential=ASIAQ3EXAMPLE7TOKENX%2F20261128%2Fus-east-1%2Fs3%2Faws4_request" +
		"&X-Amz-Date=20261128T080000Z&X-Amz-Expires=3600&X-Amz-Security-Token=" + tok +
		"&X-Amz-SignedHeaders=host&X-Amz-Signature=" + sig
	r := runNodesnap(t, 120*time.Second, nil, "collect", "--output-dir", out, "--upload", u,
		"--only", "processes", "--timeout", "60s")
	if r.code != exitOK && r.code != exitPartial {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	p := bundlePath(t, out)
	c := mustValidate(t, p)
	_, mraw, err := readManifestRaw(p)
	if err != nil {
		t.Fatal(err)
	}
	ps := string(c.Files["processes/ps.txt"])
	if !strings.Contains(ps, "/bucket/case-43/node.tar.gz") {
		t.Fatalf("processes/ps.txt does not show nodesnap's own command line, so this proves nothing:\n%.2000s", ps)
	}
	everything := map[string][]byte{"(stdout)": []byte(r.stdout), "(stderr)": []byte(r.stderr), "manifest.json": mraw}
	for n, b := range c.Files {
		everything[n] = b
	}
	tokDecoded := strings.ReplaceAll(tok, "%2F", "/")
	for _, secret := range []string{sig, sig[:16], sig[32:], tok, tokDecoded, "SecurityTok3n"} {
		for n, b := range everything {
			if i := bytes.Index(b, []byte(secret)); i >= 0 {
				t.Errorf("%q of the upload URL is in %s: …%s…", secret, n, b[max(0, i-80):min(len(b), i+len(secret)+20)])
			}
		}
	}
}
