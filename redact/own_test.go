package redact

import (
	"strings"
	"testing"
)

// nodesnap's own secrets are masked wherever they are, whole or cut, and
// counted as nodesnap-own-secret; short values are ignored.
func TestOwnSecrets(t *testing.T) {
	token := "IQoJb3JpZ2luX2VjEJr" + strings.Repeat("Zq8Lm3Nx0Pw5", 80) // a kilobyte, as a session token is
	r, err := Build(nil, Options{Own: []string{"9f2c4b7e1a0d5c3b8e6f", token, "put"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		{"root 42 nodesnap collect --upload https://h/b?X-Amz-Signature=9f2c4b7e1a0d5c3b8e6f&x=1",
			"root 42 nodesnap collect --upload https://h/b?X-Amz-Signature=[REDACTED]&x=1"},
		{"upload failed: " + token + " rejected", "upload failed: [REDACTED] rejected"},
		// Cut by a length limit: the rest of the token goes.
		{"argv: tok=" + token[:40], "argv: tok=[REDACTED]"},
		{"method put used", "method put used"},
	} {
		got, counts := r.String(c.in)
		if got != c.want {
			t.Errorf("%.80q\n got %.120q\nwant %.120q", c.in, got, c.want)
		}
		if c.in != c.want && len(counts) == 0 || strings.HasPrefix(c.in, "upload") && counts[ownRuleName] == 0 {
			t.Errorf("%.80q: counts %v, want %s", c.in, counts, ownRuleName)
		}
	}
	if len(r.m.next16) == 0 {
		t.Error("a kilobyte-long own secret pushed the automaton out of its 16-bit table")
	}
}
