package testkit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// UploadServer is a test HTTP server that records what each request
// brought, for tests of bundle uploads.
type UploadServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []ReceivedUpload
}

// ReceivedUpload is one request an UploadServer received.
type ReceivedUpload struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
	Form                map[string][]byte // multipart parts by field name
}

// NewUploadServer answers each request with the next status of script
// (the last one repeated); 0 means never answer. A status of 400 or more
// comes with an S3-style XML error body. The server is closed when the
// test ends.
func NewUploadServer(t testing.TB, script ...int) *UploadServer {
	t.Helper()
	s := &UploadServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := ReceivedUpload{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone()}
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			if err := r.ParseMultipartForm(64 << 20); err == nil {
				rec.Form = map[string][]byte{}
				for name, fhs := range r.MultipartForm.File {
					f, _ := fhs[0].Open()
					rec.Form[name], _ = io.ReadAll(f)
					f.Close()
				}
				for name, vs := range r.MultipartForm.Value {
					rec.Form[name] = []byte(vs[0])
				}
			}
		} else {
			rec.Body, _ = io.ReadAll(r.Body)
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

// Requests returns a copy of the requests received so far, in order.
func (s *UploadServer) Requests() []ReceivedUpload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ReceivedUpload(nil), s.reqs...)
}
