package kubelet_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
)

// hostileKubelet is a kubelet stand-in on loopback (plain HTTP, no
// authentication) whose every answer is served by h.
func hostileKubelet(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// A kubelet that trickles: every answer starts and then stalls past its
// deadline. What came is kept, and the collector is partial, naming every
// endpoint as cut short: an answer that started is not an answer read.
func TestKubeletTrickleIsPartial(t *testing.T) {
	url := hostileKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "0123456789")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", url, "--kubelet-token", goodToken, "--kubelet-insecure",
		"--kubelet-readonly-url", "", "--kubelet-request-timeout", "1s", "--kubelet-profile-seconds", "0")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{})
	if b.Res.Status != bundle.StatusPartial {
		t.Fatalf("status %q, want partial", b.Res.Status)
	}
	if !strings.Contains(b.Res.Error, "cut short") {
		t.Errorf("the collector's error does not say the answers were cut short: %s", b.Res.Error)
	}
}

// A kubelet that floods: every answer is endless. The collector keeps
// what fits under its caps, says the answers were cut, and its own record
// (requests.json) is whole.
func TestKubeletFloodKeepsItsRecord(t *testing.T) {
	url := hostileKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("kubelet_flood_metric{a=\"b\"} 1\n", 4096))
		if strings.HasPrefix(r.URL.Path, "/pods") || strings.HasPrefix(r.URL.Path, "/configz") {
			io.WriteString(w, `{"items":[`)
			chunk = []byte(strings.Repeat(`{"metadata":{"name":"x"}},`, 4096))
		}
		// Bounded, so the test ends whatever happens: 512 MiB per answer.
		for sent := 0; sent < 512<<20; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	supervisortest.Flags(t, "kubelet", "--kubelet-healthz-url", "", "--kubelet-url", url, "--kubelet-token", goodToken, "--kubelet-insecure",
		"--kubelet-readonly-url", "", "--kubelet-profile-seconds", "0")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{MaxFileBytes: 2 << 20, MaxCollectorBytes: 6 << 20})
	if b.Res.Status != bundle.StatusPartial {
		t.Errorf("status %q, want partial", b.Res.Status)
	}
	raw := b.File(t, "kubelet/requests.json")
	var rq struct {
		Requests []struct {
			Endpoint  string `json:"endpoint"`
			Truncated bool   `json:"truncated"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(raw, &rq); err != nil || len(rq.Requests) < 6 {
		t.Fatalf("requests.json (%d bytes) is not the collector's whole record: %v", len(raw), err)
	}
	cut := 0
	for _, r := range rq.Requests {
		if r.Truncated {
			cut++
		}
	}
	if cut == 0 {
		t.Errorf("no request is marked truncated: %s", raw)
	}
	var total int64
	for _, f := range b.Manifest.Files {
		if f.Collector == "kubelet" {
			total += f.Size
		}
	}
	if total > 6<<20 {
		t.Errorf("the kubelet collector wrote %d bytes, past its 6 MiB cap", total)
	}
	t.Logf("flooded: %d bytes kept, %d of %d answers cut, collector peak RSS %d KiB", total, cut, len(rq.Requests), b.Res.MaxRSSKiB)
}
