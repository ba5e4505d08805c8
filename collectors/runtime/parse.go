package runtime

// Pure parsers of the runtimes' configuration (fuzzed).

import (
	"bufio"
	"bytes"
	"regexp"
	"strings"

	"github.com/nodesnap/nodesnap/redact"
)

// ContainerdAddresses are the socket addresses in a containerd config.
type ContainerdAddresses struct {
	GRPC  string `json:"grpc,omitempty"`
	TTRPC string `json:"ttrpc,omitempty"`
	Debug string `json:"debug,omitempty"`
}

// ParseContainerdAddresses reads the address keys of the [grpc], [ttrpc]
// and [debug] tables of a containerd config.toml (versions 1 to 3 all
// keep them there). It understands just enough TOML for that: table
// headers, comments, basic and literal strings; anything else is ignored.
func ParseContainerdAddresses(data []byte) ContainerdAddresses {
	var a ContainerdAddresses
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 || strings.HasPrefix(line, "[[") {
				table = ""
				continue
			}
			table = strings.TrimSpace(line[1:end])
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(key) != "address" {
			continue
		}
		s, ok := tomlString(strings.TrimSpace(val))
		if !ok {
			continue
		}
		switch table {
		case "grpc":
			a.GRPC = s
		case "ttrpc":
			a.TTRPC = s
		case "debug":
			a.Debug = s
		}
	}
	return a
}

// tomlString decodes a TOML basic ("...") or literal ('...') string at the
// start of v, ignoring what follows it (a comment).
func tomlString(v string) (string, bool) {
	if len(v) < 2 {
		return "", false
	}
	switch v[0] {
	case '\'':
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", false
		}
		return v[1 : 1+end], true
	case '"':
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				return b.String(), true
			case c == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '\\', '"':
					b.WriteByte(v[i])
				default:
					// \uXXXX and friends never occur in a socket path.
					return "", false
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", false
	}
	return "", false
}

// Registry credentials in containerd's TOML and in crictl's JSON: "auth"
// (base64 of user:password) is not a key the line redactor treats as
// secret, so these are removed here first.
var (
	tomlSecretRe = regexp.MustCompile(`(?i)\b(auth|password|identitytoken|identity_token|registrytoken|registry_token|token|secret)(\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*')`)
	jsonSecretRe = regexp.MustCompile(`(?i)("(?:auth|password|identitytoken|identity_token|registrytoken|registry_token|token|secret)"\s*:\s*)"(?:[^"\\]|\\.)*"`)
)

// SanitizeRuntimeConfig replaces registry credentials in a containerd
// config.toml or a crictl info JSON with [REDACTED] and says how many.
func SanitizeRuntimeConfig(data []byte) ([]byte, int) {
	n := 0
	out := tomlSecretRe.ReplaceAllFunc(data, func(m []byte) []byte {
		sub := tomlSecretRe.FindSubmatch(m)
		n++
		return []byte(string(sub[1]) + string(sub[2]) + `"` + redact.Marker + `"`)
	})
	out = jsonSecretRe.ReplaceAllFunc(out, func(m []byte) []byte {
		sub := jsonSecretRe.FindSubmatch(m)
		if bytes.HasSuffix(m, []byte(`""`)) {
			return m
		}
		n++
		return []byte(string(sub[1]) + `"` + redact.Marker + `"`)
	})
	return out, n
}
