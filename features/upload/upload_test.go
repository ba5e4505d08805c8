package upload

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// In-process: an attempt that stalls (the server reads nothing and answers
// nothing) is abandoned after the stall timeout and retried.
func TestUploaderStallRetried(t *testing.T) {
	srv := testkit.NewUploadServer(t, 0, 200)
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	data := bytes.Repeat([]byte("nodesnap"), 1<<10)
	os.WriteFile(p, data, 0o600)
	up, err := New(&Options{URL: srv.URL + "/s", Method: "put", Retries: 2, Timeout: 20 * time.Second,
		StallTimeout: 500 * time.Millisecond, Backoff: 10 * time.Millisecond}, "", "nodesnap/test")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := up.Upload(context.Background(), p, int64(len(data)), "abc")
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
	srv := testkit.NewUploadServer(t, 200)
	u := srv.URL
	srv.Close() // nothing listens there now
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(p, []byte("x"), 0o600)
	up, err := New(&Options{URL: u + "/?sig=topsecretvalue", Method: "put", Retries: 2, Timeout: 20 * time.Second,
		StallTimeout: time.Second, Backoff: 10 * time.Millisecond}, "upload-", "nodesnap/test")
	if err != nil {
		t.Fatal(err)
	}
	res := up.Upload(context.Background(), p, 1, "abc")
	if res.OK || res.Attempts != 3 || !strings.Contains(res.Error, "gave up after 3 attempts") || !strings.Contains(res.Error, "refused") {
		t.Errorf("result %+v", res)
	}
	if strings.Contains(res.Error+res.URL, "topsecretvalue") {
		t.Errorf("the URL's query leaked: %+v", res)
	}
}

// In-process: a server whose certificate is not trusted is tried once:
// a retry would only repeat the handshake with the same certificate.
func TestUploaderTLSFailureNotRetried(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(p, []byte("x"), 0o600)
	up, err := New(&Options{URL: srv.URL + "/s", Method: "put", Retries: 3, Timeout: 20 * time.Second,
		StallTimeout: time.Second, Backoff: 10 * time.Millisecond}, "", "nodesnap/test")
	if err != nil {
		t.Fatal(err)
	}
	res := up.Upload(context.Background(), p, 1, "abc")
	mu.Lock()
	n := conns
	mu.Unlock()
	if res.OK || res.Attempts != 1 || n != 1 || !strings.Contains(res.Error, "certificate is not trusted") {
		t.Errorf("result %+v after %d connections, want one refused attempt", res, n)
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
			t.Fatal(err)
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
	up, err := New(&Options{URL: srv.URL + "/b", Method: "put", Timeout: time.Minute,
		StallTimeout: time.Minute, Backoff: time.Millisecond}, "", "nodesnap/test")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := up.Upload(context.Background(), p, size, "00"); !res.OK {
			b.Fatal(res.Error)
		}
	}
}
