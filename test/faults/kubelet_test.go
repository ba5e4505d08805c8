package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors/kubelet"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// A kubelet that answers badly rather than not at all, through the real
// binary: one that trickles (every answer starts, then stalls) and one
// that floods (every answer is endless). Both used to leave the kubelet
// collector "ok": any answer that started counted as read, and a flood
// squeezed out the collector's own requests.json while it peaked at 399 MiB.

// kubeletCaps keep a flooded run small: what the collector may write.
const (
	kubeletFileCap      = 2 << 20
	kubeletCollectorCap = 8 << 20
)

// hostileKubeletServer serves h on loopback, plain HTTP, until the test
// ends; handlers are told to stop through the request's context.
func hostileKubeletServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// kubeletFault runs the binary against a kubelet stand-in with a token
// given through the environment (a planted secret: it must not appear in
// the bundle).
func kubeletFault(t *testing.T, name string, h http.HandlerFunc, check func(*testing.T, *bundle.Manifest, map[string][]byte)) {
	n := newNode(t)
	token := fmt.Sprintf("rel-kubelet-token-%d-9f8e7d6c5b4a", time.Now().UnixNano())
	n.secrets = append(n.secrets, token)
	url := hostileKubeletServer(t, h)
	runFault(t, name, n, []string{kubelet.KubeletTokenEnv + "=" + token},
		[]string{"--kubelet-url", url, "--kubelet-insecure", "--kubelet-readonly-url", "", "--kubelet-healthz-url", "",
			"--kubelet-profile-seconds", "0", "--kubelet-request-timeout", "2s",
			"--max-file-size", fmt.Sprint(kubeletFileCap), "--max-collector-size", fmt.Sprint(kubeletCollectorCap)},
		[]func(*testing.T, *bundle.Manifest, map[string][]byte){check})
}

func TestKubeletTrickles(t *testing.T) {
	testkit.RequireRoot(t)
	for i := 0; i < rounds(1, 3); i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			kubeletFault(t, "kubelet trickles (10 bytes, then nothing)", func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "0123456789")
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(time.Minute):
				}
			}, func(t *testing.T, m *bundle.Manifest, _ map[string][]byte) {
				c := m.Collector("kubelet")
				if c == nil {
					t.Fatal("no kubelet collector in the manifest")
				}
				if c.Status != bundle.StatusPartial || !strings.Contains(c.Error, "cut short") {
					t.Errorf("kubelet collector %s: %q; want partial, saying its answers were cut short", c.Status, c.Error)
				}
				if m.Status != bundle.StatusPartial {
					t.Errorf("bundle %s, want partial", m.Status)
				}
			})
		})
	}
}

func TestKubeletFloods(t *testing.T) {
	testkit.RequireRoot(t)
	for i := 0; i < rounds(1, 3); i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			kubeletFault(t, "kubelet floods (endless answers)", func(w http.ResponseWriter, r *http.Request) {
				chunk := []byte(strings.Repeat("kubelet_flood_metric{a=\"b\"} 1\n", 4096))
				if strings.HasPrefix(r.URL.Path, "/pods") || strings.HasPrefix(r.URL.Path, "/configz") {
					_, _ = io.WriteString(w, `{"items":[`)
					chunk = []byte(strings.Repeat(`{"metadata":{"name":"x"}},`, 4096))
				}
				// Bounded, so the stand-in ends whatever happens: 1 GiB.
				for sent := 0; sent < 1<<30 && r.Context().Err() == nil; sent += len(chunk) {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}, func(t *testing.T, m *bundle.Manifest, files map[string][]byte) {
				c := m.Collector("kubelet")
				if c == nil {
					t.Fatal("no kubelet collector in the manifest")
				}
				if c.Status != bundle.StatusPartial {
					t.Errorf("kubelet collector %s, want partial", c.Status)
				}
				var rq struct {
					Requests []struct {
						Endpoint  string `json:"endpoint"`
						Truncated bool   `json:"truncated"`
					} `json:"requests"`
				}
				raw := files["kubelet/requests.json"]
				if err := json.Unmarshal(raw, &rq); err != nil || len(rq.Requests) < 6 {
					t.Fatalf("kubelet/requests.json (%d bytes) is not the collector's whole record: %v", len(raw), err)
				}
				cut := 0
				for _, r := range rq.Requests {
					if r.Truncated {
						cut++
					}
				}
				if cut == 0 {
					t.Errorf("no request of %d is marked truncated", len(rq.Requests))
				}
				var total int64
				for _, f := range m.Files {
					if f.Collector == "kubelet" {
						total += f.Size
					}
				}
				if total > kubeletCollectorCap {
					t.Errorf("the kubelet collector kept %d bytes, past its %d cap", total, kubeletCollectorCap)
				}
				// The issue measured 399 MiB: every answer read whole.
				if c.MaxRSSKiB > 128<<10 {
					t.Errorf("the kubelet collector peaked at %d KiB, want at most 128 MiB", c.MaxRSSKiB)
				}
				t.Logf("flooded: %d bytes kept, %d of %d answers cut, collector peak RSS %d KiB", total, cut, len(rq.Requests), c.MaxRSSKiB)
			})
		})
	}
}
