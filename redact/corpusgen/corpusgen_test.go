package corpusgen

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/redact"
)

// TestGeneratedCorpusRedact: every generated value, in every node context,
// through the redactor: none may survive; the scanner's own negative
// examples must come through, all but at most 2. The figures are printed.
func TestGeneratedCorpusRedact(t *testing.T) {
	secrets, skipped := Generate(1)
	for _, s := range skipped {
		t.Logf("no value for %s", s)
	}
	if len(secrets) < len(redact.ScannerRules())*9/10 {
		t.Fatalf("values for only %d of %d rules", len(secrets), len(redact.ScannerRules()))
	}
	r := redact.Default()
	placed, leaked := 0, 0
	for i, s := range secrets {
		for _, c := range Contexts {
			line := c.Line(s.Text, i)
			if !Matches(s.Rule, line, s.Secret) && !strings.Contains(line, jsonString(s.Text)) {
				continue // the context changed what the rule sees
			}
			placed++
			out, _ := r.String(line)
			if strings.Contains(out, s.Secret) || containsPiece(out, s.Secret[s.Prefix:], 16) {
				leaked++
				t.Errorf("leak %s in %s: %s", s.Rule, c.Name, out)
			}
		}
	}
	keeps, src, err := Keeps()
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i, k := range keeps {
		for _, c := range Contexts[:4] {
			line := c.Line("value "+k.Value+" kept", i)
			if out, _ := r.String(line); !strings.Contains(out, k.Value) {
				lost++
				t.Logf("over-redaction of %s's negative example %q in %s: %s", k.Rule, k.Value, c.Name, out)
				break
			}
		}
	}
	if lost > 2 {
		t.Errorf("%d of %d negative examples of %s masked; at most 2 may be", lost, len(keeps), src)
	}
	t.Logf("generated corpus (%s): %d values of %d rules placed %d times: %d leaked; %d of %d negative examples masked",
		redact.ScannerSource(), len(secrets), len(redact.ScannerRules()), placed, leaked, lost, len(keeps))
}

// containsPiece reports whether any n-byte piece of secret is in out.
func containsPiece(out, secret string, n int) bool {
	for i := 0; i+n <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+n]) {
			return true
		}
	}
	return false
}
