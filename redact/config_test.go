package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp/syntax"
	"strings"
	"testing"
)

const goodConfig = `# extra redaction for the acme cluster
rules:
  - name: acme-db-password
    literals: ["Acme-DB-pa55", "Acme-DB-old"]
  - name: acme-api-key
    regex: 'acme_[0-9a-f]{16}'
  - name: acme-session
    regex: 'session=(?P<secret>[^;\s]+)'
  - name: acme-fields
    keys: [acme_pin, x-acme-auth]
disable: [bearer-token]
obfuscate:
  hostnames: [db1.acme.example]
  users: [svc-acme]
`

func TestConfigRules(t *testing.T) {
	cfg, err := ParseConfig([]byte(goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON and back, as the supervisor hands it to a child.
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back Config
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Config{"yaml": cfg, "json": &back} {
		r, err := Build(c, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		in := strings.Join([]string{
			"connecting with Acme-DB-pa55 (was Acme-DB-old)",
			"stored as " + base64.RawStdEncoding.EncodeToString([]byte("Acme-DB-pa55")),
			"key acme_0123456789abcdef used",
			"x-acme-state: session=abc123; path=/",
			"ACME_PIN=4711 acmePin: 4711",
			`{"x-acme-auth": "tok"}`,
			"using bearer 8f14e45fceea167a5a36dedd4bea2543",
		}, "\n")
		want := strings.Join([]string{
			"connecting with [REDACTED] (was [REDACTED])",
			"stored as [REDACTED]",
			"key [REDACTED] used",
			"x-acme-state: session=[REDACTED]; path=/",
			"ACME_PIN=[REDACTED] acmePin: 4711",
			`{"x-acme-auth": "[REDACTED]"}`,
			"using bearer 8f14e45fceea167a5a36dedd4bea2543", // bearer-token disabled
		}, "\n")
		got, counts := r.String(in)
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, want)
		}
		wantCounts := map[string]int{"acme-db-password": 3, "acme-api-key": 1, "acme-session": 1, "acme-fields": 2}
		for k, v := range wantCounts {
			if counts[k] != v {
				t.Errorf("%s: %s counted %d, want %d (%v)", name, k, counts[k], v, counts)
			}
		}
		names := strings.Join(r.RuleNames(), ",")
		if strings.Contains(names, "bearer-token") || !strings.Contains(names, "acme-fields") {
			t.Errorf("%s: rule names %s", name, names)
		}
	}
	if len(back.Obfuscate.Hostnames) != 1 || back.Rules[0].Line != 3 {
		t.Errorf("config lost in JSON: %+v", back)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"bad regex", "rules:\n  - name: x\n    regex: '('\n", 3, `invalid regex "(": error parsing regexp: missing closing )`},
		{"empty match", "rules:\n  - name: x\n    regex: 'a*'\n", 3, "matches empty text"},
		{"unknown setting", "rules: []\nredact: yes\n", 2, `unknown setting "redact"`},
		{"unknown rule field", "rules:\n  - name: x\n    regx: 'a'\n", 3, `unknown rule setting "regx"`},
		{"no name", "rules:\n  - literals: [abcdef]\n", 2, "rule 1 has no name"},
		{"bad name", "rules:\n  - name: Acme Pass\n    literals: [abcdef]\n", 2, "use lower-case words"},
		{"builtin name", "rules:\n  - name: jwt\n    literals: [abcdef]\n", 2, "built-in rule"},
		{"duplicate name", "rules:\n  - name: a\n    literals: [abcdef]\n  - name: a\n    literals: [ghijkl]\n", 4, "used twice"},
		{"nothing to match", "rules:\n  - name: a\n", 2, "needs literals, a regex or keys"},
		{"short literal", "rules:\n  - name: a\n    literals:\n      - abcdef\n      - ab\n", 5, "literal 2 is shorter than 4"},
		{"multi-line literal", "rules:\n  - name: a\n    literal: \"ab\\ncd\"\n", 3, "spans lines"},
		{"bad key", "rules:\n  - name: a\n    keys: ['pass word']\n", 3, "not a key name"},
		{"rules not a list", "rules:\n  name: a\n", 2, "expected a list of rules"},
		{"regex list", "rules:\n  - name: a\n    regex: [a, b]\n", 3, "expected one pattern"},
		{"duplicate key", "rules:\n  - name: a\n    regex: 'x'\n    regex: 'y'\n", 4, "set twice"},
		{"yaml syntax", "rules:\n  - name: a\n    regex: x: y\n", 3, "not valid YAML: mapping values are not allowed"},
		{"bad hostname pattern", "obfuscate:\n  hostname_patterns:\n    - 'ok'\n    - '[z-a]'\n", 4, "hostname pattern: invalid regex"},
		{"unknown obfuscate field", "obfuscate:\n  hosts: [a]\n", 2, `unknown obfuscate setting "hosts"`},
		{"not a mapping", "- a\n- b\n", 1, "expected a mapping"},
		{"unknown disable", "disable: [no-such-rule]\n", 0, `"no-such-rule" is not a built-in rule`},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml))
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Line != c.line {
			t.Errorf("%s: error %q: want line %d", c.name, err, c.line)
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %q does not say %q", c.name, err, c.msg)
		}
		if c.line > 0 && !strings.HasPrefix(err.Error(), "redact config line ") {
			t.Errorf("%s: error %q does not start with its line", c.name, err)
		}
	}
	// The regex error keeps its cause for errors.As.
	_, err := ParseConfig([]byte("rules:\n  - name: x\n    regex: '('\n"))
	var se *syntax.Error
	if !errors.As(err, &se) {
		t.Errorf("regex error not wrapped: %v", err)
	}
	// A secret literal is never echoed in a message.
	_, err = ParseConfig([]byte("rules:\n  - name: a\n    literals: [\"x\\ny-hunter2\"]\n"))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error echoes the literal: %v", err)
	}
	if cfg, err := ParseConfig(nil); err != nil || len(cfg.Rules) != 0 {
		t.Errorf("empty config: %v %v", cfg, err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "redact.yaml")
	if err := os.WriteFile(p, []byte("rules:\n  - name: x\n    regex: '('\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(p)
	if err == nil || !strings.HasPrefix(err.Error(), p+": redact config line 3: invalid regex") {
		t.Errorf("LoadConfig: %v", err)
	}
	_, err = LoadConfig(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "reading the redaction config") {
		t.Errorf("missing file: %v", err)
	}
	// A Config from JSON (no YAML lines) is checked by Build as well.
	_, err = Build(&Config{Rules: []ConfigRule{{Name: "x", Regex: "(", Line: 9}}}, Options{})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Line != 9 {
		t.Errorf("Build on a bad JSON config: %v", err)
	}
}
