package main

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// explainBundle is an analyze fixture with the API's view of its node.
func explainBundle(t *testing.T, incident, view string) string {
	t.Helper()
	files := map[string]string{}
	for name, b := range testkit.ReadTree(t, filepath.Join("..", "..", "read", "analyze", "testdata", incident)) {
		if name != "_manifest.json" {
			files[name] = string(b)
		}
	}
	if view != "" {
		b, err := os.ReadFile(filepath.Join("..", "..", "read", "analyze", "testdata", "cluster", view+".json"))
		if err != nil {
			t.Fatal(err)
		}
		files["cluster/objects.json"] = string(b)
	}
	return analyzeBundle(t, files)
}

// explain prints one pod's chain from a bundle: the stuck pod's cause with
// evidence and fix (exit 3), "nothing wrong found" with what was checked
// for a healthy one (exit 0), the same as JSON, and says when the bundle
// has no cluster view.
func TestExplainCommand(t *testing.T) {
	stuck := explainBundle(t, "incident004-csi-published-lost", "004-v1.34")
	r := runNodesnap(t, time.Minute, nil, "explain", "pod/hello-xxxxxx", "-n", "default", "--bundle", stuck)
	t.Logf("explain pod/hello-xxxxxx:\n%s", r.stdout)
	if r.code != exitPartial {
		t.Errorf("exit %d, want %d\n%s\n%s", r.code, exitPartial, r.stdout, r.stderr)
	}
	for _, want := range []string{"stuck Terminating for 3h", "csi-published-state-lost", "how it hurts the pod: cannot finish terminating", "evidence:", "fix:", "checked:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("explain output lacks %q:\n%s", want, r.stdout)
		}
	}

	healthy := explainBundle(t, "healthy", "healthy-v1.31")
	r = runNodesnap(t, time.Minute, nil, "explain", "pod/web-1", "-n", "shop", "--bundle", healthy)
	if r.code != exitOK || !strings.Contains(r.stdout, "nothing wrong found on the node for this pod") || !strings.Contains(r.stdout, "checked:") {
		t.Errorf("healthy pod: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	r = runNodesnap(t, time.Minute, nil, "explain", "pod/batch-9", "-n", "jobs", "--bundle", healthy, "-o", "json")
	var e struct {
		Verdict string `json:"verdict"`
		Details struct {
			Symptom string   `json:"symptom"`
			Missing []string `json:"missing"`
		} `json:"details"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || r.code != exitPartial {
		t.Fatalf("-o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if e.Verdict != "unexplained" || !strings.HasPrefix(e.Details.Symptom, "stuck Terminating") || len(e.Details.Missing) == 0 {
		t.Errorf("json: %+v", e)
	}

	bare := explainBundle(t, "healthy", "")
	r = runNodesnap(t, time.Minute, nil, "explain", "pod/web-1", "-n", "shop", "--bundle", bare)
	if r.code != exitPartial || !strings.Contains(r.stdout, "no cluster view") {
		t.Errorf("bundle without the cluster view: exit %d\n%s", r.code, r.stdout)
	}

	r = runNodesnap(t, time.Minute, nil, "explain", "deploy/web", "--bundle", bare)
	if r.code != exitUsage {
		t.Errorf("explain deploy/web: exit %d, want usage\n%s", r.code, r.stderr)
	}
}

// Without --bundle, explain asks the API for the pod's node; a pod no
// scheduler placed has none, and explain says so instead of collecting.
func TestExplainUnscheduledPod(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/shop/pods/db-0" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"db-0","namespace":"shop"},"spec":{"containers":[{"name":"c","image":"x"}]},
		  "status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/3 nodes are available: 3 Insufficient memory."}]}}`)
	}))
	defer srv.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf("apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority-data: %s\nusers:\n- name: u\n  user:\n    token: abc\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\n", srv.URL, ca)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runNodesnap(t, time.Minute, nil, "explain", "pod/db-0", "-n", "shop", "--kubeconfig", kc, "-o", "json")
	if r.code != exitFatal || !strings.Contains(r.stdout, `"verdict": "not-scheduled"`) || !strings.Contains(r.stdout, "Insufficient memory") {
		t.Errorf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestParsePodArg(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"pod/db-0", "db-0", true},
		{"pods/db-0", "db-0", true},
		{"db-0", "db-0", true},
		{"deploy/web", "", false},
		{"pod/", "", false},
		{"pod/a/b", "", false},
	}
	for _, tt := range tests {
		got, err := parsePodArg(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parsePodArg(%q) = %q, %v", tt.in, got, err)
		}
	}
}
