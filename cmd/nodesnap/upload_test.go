package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// uploadServer records what each request brought.
type uploadServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []receivedUpload
}

type receivedUpload struct {
	method, path, query string
	header              http.Header
	body                []byte
	form                map[string][]byte // multipart parts by field name
}

// newUploadServer answers each request with the next status of script
// (the last one repeated); 0 means never answer.
func newUploadServer(t *testing.T, script ...int) *uploadServer {
	s := &uploadServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := receivedUpload{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header.Clone()}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			if err := r.ParseMultipartForm(64 << 20); err == nil {
				rec.form = map[string][]byte{}
				for name, fhs := range r.MultipartForm.File {
					f, _ := fhs[0].Open()
					rec.form[name], _ = io.ReadAll(f)
					f.Close()
				}
				for name, vs := range r.MultipartForm.Value {
					rec.form[name] = []byte(vs[0])
				}
			}
		} else {
			rec.body, _ = io.ReadAll(r.Body)
		}
		s.mu.Lock()
		n := len(s.reqs)
		s.reqs = append(s.reqs, rec)
		s.mu.Unlock()
		status := script[min(n, len(script)-1)]
		if status == 0 {
			<-r.Context().Done() // the client gave up
			return
		}
		if status >= 400 {
			w.WriteHeader(status)
			io.WriteString(w, `<?xml version="1.0"?><Error><Code>Nope</Code><Message>scripted failure</Message><StringToSign>secret-ish</StringToSign></Error>`)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *uploadServer) requests() []receivedUpload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]receivedUpload(nil), s.reqs...)
}

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
	srv := newUploadServer(t, 200)
	out := t.TempDir()
	url := srv.URL + "/bucket/case-42/node.tar.gz?" + presignSecret
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "--output-dir", out, "--upload", url}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	p := bundlePath(t, out)
	sum, data := fileSHA256(t, p)
	reqs := srv.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if got.method != http.MethodPut || got.path != "/bucket/case-42/node.tar.gz" || got.query != presignSecret {
		t.Errorf("request %s %s?%s", got.method, got.path, got.query)
	}
	if !bytes.Equal(got.body, data) {
		t.Errorf("server received %d bytes that differ from the %d-byte bundle", len(got.body), len(data))
	}
	if h := got.header.Get(SHA256Header); h != sum {
		t.Errorf("%s: %q, bundle sha256 %s", SHA256Header, h, sum)
	}
	if ct := got.header.Get("Content-Type"); ct != "" {
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
	srv := newUploadServer(t, 500, 503, 201)
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
	reqs := srv.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, q := range reqs {
		if !bytes.Equal(q.body, data) {
			t.Errorf("attempt %d carried %d bytes, not the %d-byte bundle", i+1, len(q.body), len(data))
		}
	}
}

// A server that takes the bytes and never answers costs the upload
// timeout and no more; the bundle stays on disk, the exit status says the
// upload failed (5), and the message says where the bundle is.
func TestCollectUploadServerNeverAnswers(t *testing.T) {
	srv := newUploadServer(t, 0)
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
	srv := newUploadServer(t, 403, 200)
	r = runNodesnap(t, 60*time.Second, []string{UploadURLEnv + "=" + srv.URL + "/api/cases/42/files"},
		"upload", "--method", "post", "--field", "attachment", "--headers-file", hf, p)
	if r.code != exitUploadFailed {
		t.Fatalf("403: exit %d, want %d (a 403 is final)\n%s", r.code, exitUploadFailed, r.stderr)
	}
	if n := len(srv.requests()); n != 1 {
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
	reqs := srv.requests()
	got := reqs[len(reqs)-1]
	if got.method != http.MethodPost || !bytes.Equal(got.form["attachment"], data) {
		t.Errorf("server got %s with field attachment of %d bytes, want POST of the %d-byte bundle", got.method, len(got.form["attachment"]), len(data))
	}
	if got.header.Get("Authorization") != "Bearer hunter2-ticket-token" || got.header.Get("X-Case") != "42" || got.header.Get(SHA256Header) != sum {
		t.Errorf("headers %v", got.header)
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
	before := len(srv.requests())
	r = runNodesnap(t, 30*time.Second, nil, "upload", other, srv.URL+"/x")
	if r.code != exitFatal || !strings.Contains(r.stderr, "not a nodesnap bundle") || len(srv.requests()) != before {
		t.Errorf("non-bundle: exit %d, %q, %d requests", r.code, r.stderr, len(srv.requests())-before)
	}
}

// In-process: an attempt that stalls (the server reads nothing and answers
// nothing) is abandoned after the stall timeout and retried.
func TestUploaderStallRetried(t *testing.T) {
	srv := newUploadServer(t, 0, 200)
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	data := bytes.Repeat([]byte("nodesnap"), 1<<10)
	os.WriteFile(p, data, 0o600)
	up, err := newUploader(&uploadOptions{url: srv.URL + "/s", method: "put", retries: 2, timeout: 20 * time.Second,
		stallTimeout: 500 * time.Millisecond, backoff: 10 * time.Millisecond}, "")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := up.upload(context.Background(), p, int64(len(data)), "abc")
	if !res.OK || res.Attempts != 2 {
		t.Fatalf("result %+v, want ok on the second attempt", res)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s: the stalled attempt was not cut at its stall timeout", d)
	}
}

// In-process: the last error says why and how often; a connection refused
// everywhere is retried up to --retries.
func TestUploaderGivesUp(t *testing.T) {
	srv := newUploadServer(t, 200)
	u := srv.URL
	srv.Close() // nothing listens there now
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(p, []byte("x"), 0o600)
	up, err := newUploader(&uploadOptions{url: u + "/?sig=topsecretvalue", method: "put", retries: 2, timeout: 20 * time.Second,
		stallTimeout: time.Second, backoff: 10 * time.Millisecond}, "upload-")
	if err != nil {
		t.Fatal(err)
	}
	res := up.upload(context.Background(), p, 1, "abc")
	if res.OK || res.Attempts != 3 || !strings.Contains(res.Error, "gave up after 3 attempts") || !strings.Contains(res.Error, "refused") {
		t.Errorf("result %+v", res)
	}
	if strings.Contains(res.Error+res.URL, "topsecretvalue") {
		t.Errorf("the URL's query leaked: %+v", res)
	}
}

func TestReadHeadersFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content string
		ok      bool
	}{
		{"A: b\n# c\n\nX-Y:  z z \n", true},
		{"no colon here\n", false},
		{"Bad Name: v\n", false},
		{"Content-Length: 5\n", false},
		{"x-nodesnap-sha256: 00\n", false},
	} {
		p := filepath.Join(dir, "h")
		os.WriteFile(p, []byte(c.content), 0o600)
		h, vals, err := readHeadersFile(p)
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.content, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimSpace(strings.SplitN(c.content, ":", 2)[0])) && !strings.Contains(err.Error(), "sets") {
			t.Errorf("%q: the error %q quotes the file", c.content, err)
		}
		if c.ok && (h.Get("X-Y") != "z z" || len(vals) != 2) {
			t.Errorf("%q: %v %v", c.content, h, vals)
		}
	}
}

func FuzzReadHeadersFile(f *testing.F) {
	f.Add([]byte("Authorization: Bearer x\n"))
	f.Add([]byte("A:\r\nB: c\n#d\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "h")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Skip()
		}
		h, vals, err := readHeadersFile(p)
		if err != nil {
			for _, v := range strings.Split(string(b), "\n") {
				if len(v) > 12 && strings.Contains(err.Error(), v) {
					t.Errorf("error %q quotes a line of the file", err)
				}
			}
			return
		}
		for k, vs := range h {
			if !headerName.MatchString(k) || refuseHeaders[k] {
				t.Errorf("accepted header name %q", k)
			}
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Errorf("accepted value %q", v)
				}
			}
		}
		_ = vals
	})
}

func TestSafeURLAndRedactArgs(t *testing.T) {
	got := redactArgs([]string{"nodesnap", "collect", "--upload", "https://u:pw@h.example/p/q?X-Amz-Signature=s3cr3t#frag", "--upload=https://h.example/x?sig=abc", "--upload", "::bad"})
	want := "nodesnap collect --upload https://h.example/p/q?… --upload=https://h.example/x?… --upload [REDACTED]"
	if strings.Join(got, " ") != want {
		t.Errorf("redactArgs = %q, want %q", strings.Join(got, " "), want)
	}
}

func TestServerDetail(t *testing.T) {
	for body, want := range map[string]string{
		`<Error><Code>AccessDenied</Code><Message>Request has expired</Message><CanonicalRequest>PUT /x sig</CanonicalRequest></Error>`: "AccessDenied (Request has expired)",
		"quota exceeded\nsecond line": "quota exceeded",
		"":                            "",
		"\x1b[31mred\x1b[0m":          "[31mred[0m",
	} {
		if got := serverDetail([]byte(body)); got != want {
			t.Errorf("serverDetail(%q) = %q, want %q", body, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	if d := retryAfter("7"); d != 7*time.Second {
		t.Errorf("7: %s", d)
	}
	if d := retryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); d < 59*time.Minute {
		t.Errorf("date: %s", d)
	}
	if d := retryAfter("soon"); d != 0 {
		t.Errorf("soon: %s", d)
	}
}

// Ctrl-C during the upload ends the upload, not the process: exit 5, the
// bundle kept, and the customer told where it is.
func TestCollectUploadInterrupted(t *testing.T) {
	srv := newUploadServer(t, 0)
	out := t.TempDir()
	cmd := nodesnapCmd([]string{fastEnv}, append([]string{"collect", "--output-dir", out, "--upload", srv.URL + "/u", "--upload-timeout", "60s"}, fastRun...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(srv.requests()) == 0 && time.Now().Before(deadline) {
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

// BenchmarkUploaderPUT: a 32 MiB bundle PUT to a local server that reads
// and discards it: the uploader's own cost per byte.
func BenchmarkUploaderPUT(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	p := filepath.Join(b.TempDir(), "b.tar.gz")
	const size = 32 << 20
	if err := os.WriteFile(p, bytes.Repeat([]byte{0x5a}, size), 0o600); err != nil {
		b.Fatal(err)
	}
	up, err := newUploader(&uploadOptions{url: srv.URL + "/b", method: "put", timeout: time.Minute,
		stallTimeout: time.Minute, backoff: time.Millisecond}, "")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := up.upload(context.Background(), p, size, "00"); !res.OK {
			b.Fatal(res.Error)
		}
	}
}
