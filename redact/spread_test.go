package redact

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A value one rule masked in one file is masked wherever else it is, in
// its own, base64 and URL-encoded forms, and nothing else is touched.
func TestSpreadMasksOtherOccurrences(t *testing.T) {
	key, err := NewSpreadKey()
	if err != nil {
		t.Fatal(err)
	}
	r := Default()
	r.RecordMasked(key)
	const tok = "K10f3a9c2e7b1d84::server:9b2e61c0a7d4f85e"
	const pass = "Sw0rdf!sh+42/x"
	out, counts := r.String("token: " + tok + "\nDB_PASSWORD=" + pass + "\n")
	if strings.Contains(out, tok) || strings.Contains(out, pass) || len(counts) == 0 {
		t.Fatalf("first pass did not mask: %q", out)
	}
	vals := r.Masked()
	if len(vals) < 2 {
		t.Fatalf("recorded %d hashes, want the two values and their forms", len(vals))
	}
	for _, v := range vals {
		if strings.Contains(v.Sum, tok) || strings.Contains(v.Sum, pass) {
			t.Fatal("a hash holds the value")
		}
	}
	dir := t.TempDir()
	pad := strings.Repeat("x", spreadChunk-3) // puts a copy across a chunk boundary
	files := map[string]string{
		"token":   tok + "\n",
		"journal": "Dec 07 agent[1]: joining with " + tok + " now\n" + pad + tok + "\nend\n",
		"b64":     "data: " + base64.StdEncoding.EncodeToString([]byte(pass)) + "\n",
		"url":     "GET /login?p=" + url.QueryEscape(pass) + " 200\n",
		"clean":   "nothing secret here; K10f3a9c2e7b1d8 is a prefix only\n",
	}
	var paths []string
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	sp := Spread{Key: key, Values: vals}
	got, err := sp.MaskFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"token": 1, "journal": 2, "b64": 1, "url": 1}
	for name, n := range want {
		if got[filepath.Join(dir, name)] != n {
			t.Errorf("%s: masked %d, want %d", name, got[filepath.Join(dir, name)], n)
		}
	}
	if n := got[filepath.Join(dir, "clean")]; n != 0 {
		t.Errorf("clean: masked %d", n)
	}
	for name, body := range files {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		for _, v := range []string{tok, pass, base64.StdEncoding.EncodeToString([]byte(pass)), url.QueryEscape(pass)} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s still holds %q", name, v)
			}
		}
		if name == "clean" && string(b) != body {
			t.Errorf("clean file changed: %q", b)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			t.Errorf("%s keeps the scrubbing bytes", name)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(files) {
		t.Errorf("left %d entries in the directory, want %d", len(ents), len(files))
	}
}

// Short, path-like, numeric and word-like values are not spread: they are
// also ordinary text.
func TestSpreadableValues(t *testing.T) {
	for v, want := range map[string]bool{
		"short":                      false,
		"********":                   false,
		"/etc/kubernetes/pki/ca.crt": false,
		"1700000000123":              false,
		"kube-system":                false,
		"abcdef.0123456789abcdef":    true,
		"CHANGE_ME_PLEASE":           true,
		"hunter2hunter2":             true,
		"two words":                  false,
		"internationalisation":       true,
		"qwertyuiopasdfghjklzxcvb":   true,
		"csi-rbdplugin-provisioner":  false,
		"kubernetes.io.volume.csi":   false,
		"passwordless":               false,
	} {
		if got := spreadable([]byte(v)); got != want {
			t.Errorf("spreadable(%q) = %v, want %v", v, got, want)
		}
	}
}

// An environment that is not written (a container's OCI config) still
// tells the last pass what its secret variables hold; its other values
// (paths, names, endpoints) are not looked for.
func TestRecordEnv(t *testing.T) {
	key, err := NewSpreadKey()
	if err != nil {
		t.Fatal(err)
	}
	r := Default()
	r.RecordEnv([]string{"DRIVER_API_KEY=Qz81mPplainEnvValue"}) // before RecordMasked: nothing
	r.RecordMasked(key)
	if len(r.Masked()) != 0 {
		t.Fatal("recorded before RecordMasked")
	}
	const secret = "Qz81mPplainEnvValue"
	r.RecordEnv([]string{"CSI_ENDPOINT=unix:///csi/csi.sock", "NODE_ID=worker-7.example.internal", "DRIVER_API_KEY=" + secret, "NOVALUE"})
	p := filepath.Join(t.TempDir(), "0.log")
	body := "driver started on worker-7.example.internal at unix:///csi/csi.sock\nconnected with " + secret + "\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	sp := Spread{Key: key, Values: r.Masked()}
	n, err := sp.MaskFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if n != 1 || bytes.Contains(b, []byte(secret)) || !bytes.Contains(b, []byte("worker-7.example.internal at unix:///csi/csi.sock")) {
		t.Fatalf("masked %d: %q", n, b)
	}
}
