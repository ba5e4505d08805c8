package redact

import (
	"strings"
	"testing"
)

// In an environment file or a unit's Environment= line, a variable named
// by a credential word holds a credential whatever it looks like; a path,
// a number or a word that only contains the letters stays.
func TestEnvironmentCredentialWords(t *testing.T) {
	r := Default()
	for _, c := range []struct {
		line, secret string
	}{
		{"TS_KEY=tskey-plain-value", "tskey-plain-value"},
		{"NAME_KEY=mysimplevalue", "mysimplevalue"},
		{"X_RESTRICTED_KEY=abcdefgh", "abcdefgh"},
		{"export VENDOR_AUTH=letmein-please", "letmein-please"},
		{`Environment="AGENT_PRIVATE=plainprivate"`, "plainprivate"},
		{"Environment=SVC_KEY=another-plain", "another-plain"},
		{"DB_PASS_MAIN=plain-main-db", "plain-main-db"},
		{"ExecStart=/usr/bin/tailscale up --authkey=tskey-abc-plain", "tskey-abc-plain"},
		{"iscsid: CHAP secret used: chap1234word", "chap1234word"},
		{"agent: joining, token: K10abc12345", "K10abc12345"},
	} {
		out, _ := r.String(c.line)
		if strings.Contains(out, c.secret) {
			t.Errorf("%q: kept %q: %q", c.line, c.secret, out)
		}
	}
	for _, keep := range []string{
		"KEYBOARD=us",
		"KEYMAP=de-latin1",
		"TLS_KEY=/etc/ssl/private/node.key",
		"CACHE_KEY=somename",
		"HOTKEY_COUNT=12",
		"SSH_KEY=whatever",
		"BYPASS_PROXY=internal",
		"PASS_THROUGH=true",
		"validating token: expired",
		"echo sort_key=name in prose",
	} {
		if out, _ := r.String(keep); out != keep {
			t.Errorf("%q became %q", keep, out)
		}
	}
}
