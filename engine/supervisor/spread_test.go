package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/redact"
)

// The last pass the supervisor asks for carries the hashes the children
// sent, leaves binary artifacts alone, and the output worker's hook masks
// the staged copies with them.
func TestSpreadPassRequest(t *testing.T) {
	key, err := redact.NewSpreadKey()
	if err != nil {
		t.Fatal(err)
	}
	red := redact.Default()
	red.RecordMasked(key)
	const secret = "Sup3r-Secret-Value-42"
	if out, _ := red.String("password=" + secret); strings.Contains(out, secret) {
		t.Fatalf("not masked: %q", out)
	}
	r := &run{spreadKey: key, masked: map[redact.ValueHash]bool{}, results: map[string]*collectorRun{
		"kubelet": {records: map[string]*collectors.FileRecord{
			"heap.pprof": {Path: "heap.pprof", Binary: true},
			"pods.json":  {Path: "pods.json"},
		}},
	}}
	if r.spread() != nil {
		t.Error("a pass with nothing masked was asked for")
	}
	for _, h := range red.Masked() {
		r.masked[h] = true
	}
	sp := r.spread()
	if sp == nil {
		t.Fatal("no pass asked for")
	}
	if !sp.Skip["kubelet/heap.pprof"] || sp.Skip["kubelet/pods.json"] {
		t.Errorf("skip list %v: want the binary artifact only", sp.Skip)
	}
	if strings.Contains(string(sp.Pass), secret) {
		t.Fatal("the request holds the value")
	}
	p := filepath.Join(t.TempDir(), "pods.json")
	if err := os.WriteFile(p, []byte(`{"args":["--join","`+secret+`"]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := outputdir.Masker(sp.Pass, []string{p})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if got[p] != 1 || strings.Contains(string(b), secret) {
		t.Errorf("masked %v: %s", got, b)
	}
}

// The manifest counts the last pass's masks per file, beside what the
// collector counted, and in its totals.
func TestManifestCountsMaskedElsewhere(t *testing.T) {
	r, specs := testRun(t, 0, nil)
	record(r, "alpha", "a.log", "b.log")
	r.results["alpha"].records["a.log"].Redactions = map[string]int{"secret-field": 2}
	h := staged(map[string][]string{"alpha": {"a.log", "b.log"}})
	h.Files["alpha"][0].Masked = 3
	h.Files["alpha"][1].Masked = 1
	m := r.manifest(specs, h)
	got := map[string]map[string]int{}
	for _, fe := range m.Files {
		got[fe.Path] = fe.Redactions
	}
	if a := got["alpha/a.log"]; a["secret-field"] != 2 || a[redact.SpreadRule] != 3 {
		t.Errorf("alpha/a.log: %v", a)
	}
	if b := got["alpha/b.log"]; b[redact.SpreadRule] != 1 {
		t.Errorf("alpha/b.log: %v", b)
	}
	if m.Redaction.Rules[redact.SpreadRule] != 4 || m.Redaction.Total != 6 {
		t.Errorf("totals %v, %d", m.Redaction.Rules, m.Redaction.Total)
	}
	if r.results["alpha"].records["a.log"].Redactions[redact.SpreadRule] != 0 {
		t.Error("the collector's own record was changed")
	}
}
