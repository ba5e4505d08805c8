package redact

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateDoc = flag.Bool("update", false, "rewrite docs/redaction.md from the rule table")

// docs/redaction.md is what the rule table writes, and names every built-in
// rule with what it redacts: go test ./redact -run TestRedactionDocUpToDate
// -update regenerates it.
func TestRedactionDocUpToDate(t *testing.T) {
	for _, r := range BuiltinRules() {
		if r.Name == "" || len(r.Description) < 20 {
			t.Errorf("built-in rule %q has no description in builtinDescriptions", r.Name)
		}
	}
	var b bytes.Buffer
	if err := WriteRedactionDoc(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join("..", "docs", "redaction.md")
	if *updateDoc {
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test ./redact -run TestRedactionDocUpToDate -update writes it)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("docs/redaction.md is out of date: go test ./redact -run TestRedactionDocUpToDate -update")
	}
	for _, name := range BuiltinRuleNames() {
		if !bytes.Contains(got, []byte("| `"+name+"` |")) {
			t.Errorf("docs/redaction.md does not name the built-in rule %s", name)
		}
	}
	// The config format the page shows parses: it is the format, not a
	// description of it.
	_, yml, ok := bytes.Cut(got, []byte("```yaml\n"))
	if !ok {
		t.Fatal("no yaml example in docs/redaction.md")
	}
	yml, _, _ = bytes.Cut(yml, []byte("```"))
	if _, err := ParseConfig(yml); err != nil {
		t.Errorf("the --redact-config example does not parse: %v\n%s", err, yml)
	}
}
