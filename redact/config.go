package redact

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Config is the customer's extra redaction, read from a YAML file
// (--redact-config):
//
//	rules:
//	  - name: acme-db-password        # kebab-case; the manifest counts under it
//	    literals: ["s3cr3t-prod"]     # exact text, anywhere (and its base64)
//	  - name: acme-api-key
//	    regex: 'acme_[0-9a-f]{32}'    # Go syntax; a group named "secret" limits
//	                                  # the replacement to that group
//	  - name: acme-fields
//	    keys: [acme_pin, x-acme-auth] # redact the value of these keys, in every
//	                                  # key/value form the built-in rules know
//	disable: [bearer-token]           # built-in rules to turn off
//	obfuscate:                        # used when obfuscation is on
//	  hostnames: [db1.corp.example]
//	  hostname_patterns: ['[a-z0-9-]+\.corp\.example']
//	  users: [alice]
//
// A regex is only tried on lines that contain the longest literal text it
// requires; one with no literal of three characters or more is tried on
// every line and slows redaction down, so give it one (a prefix such as
// acme_).
//
// A Config is plain data and JSON-serialisable, so the supervisor can pass
// it to child processes; Build turns it into a Redactor.
type Config struct {
	Rules     []ConfigRule    `json:"rules,omitempty"`
	Disable   []string        `json:"disable,omitempty"`
	Obfuscate ObfuscateConfig `json:"obfuscate,omitzero"`
}

// ConfigRule is one custom rule. At least one of Literals, Regex and Keys is
// set.
type ConfigRule struct {
	Name     string   `json:"name"`
	Literals []string `json:"literals,omitempty"`
	Regex    string   `json:"regex,omitempty"`
	Keys     []string `json:"keys,omitempty"`
	// Line is where the rule starts in the file, for error messages.
	Line int `json:"line,omitempty"`

	lines ruleLines // where each field is, when parsed from YAML
}

type ruleLines struct {
	name, regex int
	literals    []int
	keys        []int
}

// ObfuscateConfig adds to Options' hostnames and users.
type ObfuscateConfig struct {
	Hostnames        []string `json:"hostnames,omitempty"`
	HostnamePatterns []string `json:"hostname_patterns,omitempty"`
	Users            []string `json:"users,omitempty"`

	patternLines []int
}

// Settings bundles what a child process needs to build the run's Redactor.
// It contains the obfuscation key: pass it on a pipe, never write it to
// disk.
type Settings struct {
	Config  *Config `json:"config,omitempty"`
	Options Options `json:"options,omitzero"`
}

// Build builds the Redactor the settings describe.
func (s Settings) Build() (*Redactor, error) { return Build(s.Config, s.Options) }

// ConfigError is a problem in the redaction configuration, with the line of
// the file it is on when known.
type ConfigError struct {
	Line int
	Msg  string
	Err  error // the underlying error, if any (an invalid regex, a YAML error)
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("redact config line %d: %s", e.Line, e.Msg)
	}
	return "redact config: " + e.Msg
}

func (e *ConfigError) Unwrap() error { return e.Err }

func cfgErr(line int, err error, format string, args ...any) *ConfigError {
	return &ConfigError{Line: line, Msg: fmt.Sprintf(format, args...), Err: err}
}

// LoadConfig reads and checks a redaction config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the redaction config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ParseConfig parses and checks a redaction config. Every problem is
// reported with its line, so it can be fixed before any collection starts.
func ParseConfig(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return nil, cfgErr(n, err, "not valid YAML: %s", m[2])
		}
		return nil, cfgErr(0, err, "not valid YAML: %v", err)
	}
	cfg := &Config{}
	if len(root.Content) == 0 {
		return cfg, nil // an empty file: no extra rules
	}
	doc := deref(root.Content[0])
	if doc.Kind != yaml.MappingNode {
		return nil, cfgErr(doc.Line, nil, "expected a mapping with rules:, disable: and obfuscate:")
	}
	err := eachKey(doc, func(k, v *yaml.Node) error {
		switch k.Value {
		case "rules":
			if v.Kind != yaml.SequenceNode {
				return cfgErr(v.Line, nil, "rules: expected a list of rules")
			}
			for _, item := range v.Content {
				rl, err := parseRule(deref(item))
				if err != nil {
					return err
				}
				cfg.Rules = append(cfg.Rules, rl)
			}
		case "disable":
			names, _, err := stringList(v, "disable")
			if err != nil {
				return err
			}
			cfg.Disable = names
		case "obfuscate":
			return parseObfuscate(v, &cfg.Obfuscate)
		default:
			return cfgErr(k.Line, nil, "unknown setting %q (expected rules, disable or obfuscate)", k.Value)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// eachKey calls fn for each key of a mapping, rejecting duplicates (YAML
// keeps the last silently, which would hide a rule).
func eachKey(m *yaml.Node, fn func(k, v *yaml.Node) error) error {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := deref(m.Content[i]), deref(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			return cfgErr(k.Line, nil, "expected a setting name")
		}
		if seen[k.Value] {
			return cfgErr(k.Line, nil, "%q is set twice", k.Value)
		}
		seen[k.Value] = true
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// stringList accepts a single string or a list of strings.
func stringList(v *yaml.Node, field string) ([]string, []int, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return []string{v.Value}, []int{v.Line}, nil
	case yaml.SequenceNode:
		var out []string
		var lines []int
		for _, it := range v.Content {
			it = deref(it)
			if it.Kind != yaml.ScalarNode {
				return nil, nil, cfgErr(it.Line, nil, "%s: expected text, found a %s", field, kindName(it))
			}
			out = append(out, it.Value)
			lines = append(lines, it.Line)
		}
		return out, lines, nil
	}
	return nil, nil, cfgErr(v.Line, nil, "%s: expected text or a list of text, found a %s", field, kindName(v))
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func parseRule(n *yaml.Node) (ConfigRule, error) {
	rl := ConfigRule{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return rl, cfgErr(n.Line, nil, "a rule must be a mapping with name: and literals:, regex: or keys:")
	}
	err := eachKey(n, func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode {
				return cfgErr(v.Line, nil, "name: expected text")
			}
			rl.Name, rl.lines.name = v.Value, v.Line
		case "literal", "literals":
			var ls []string
			var lines []int
			ls, lines, err = stringList(v, k.Value)
			rl.Literals = append(rl.Literals, ls...)
			rl.lines.literals = append(rl.lines.literals, lines...)
		case "regex":
			if v.Kind != yaml.ScalarNode {
				return cfgErr(v.Line, nil, "regex: expected one pattern; use a rule per pattern")
			}
			rl.Regex, rl.lines.regex = v.Value, v.Line
		case "key", "keys":
			var ks []string
			var lines []int
			ks, lines, err = stringList(v, k.Value)
			rl.Keys = append(rl.Keys, ks...)
			rl.lines.keys = append(rl.lines.keys, lines...)
		default:
			return cfgErr(k.Line, nil, "unknown rule setting %q (expected name, literals, regex or keys)", k.Value)
		}
		return err
	})
	return rl, err
}

func parseObfuscate(n *yaml.Node, o *ObfuscateConfig) error {
	if n.Kind != yaml.MappingNode {
		return cfgErr(n.Line, nil, "obfuscate: expected a mapping with hostnames:, hostname_patterns: and users:")
	}
	return eachKey(n, func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "hostnames":
			o.Hostnames, _, err = stringList(v, k.Value)
		case "hostname_patterns":
			o.HostnamePatterns, o.patternLines, err = stringList(v, k.Value)
		case "users":
			o.Users, _, err = stringList(v, k.Value)
		default:
			return cfgErr(k.Line, nil, "unknown obfuscate setting %q (expected hostnames, hostname_patterns or users)", k.Value)
		}
		return err
	})
}

var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// minLiteral: shorter literals would redact ordinary text all over.
const minLiteral = 4

func lineOr(lines []int, i, def int) int {
	if i < len(lines) && lines[i] > 0 {
		return lines[i]
	}
	return def
}

// check validates a Config, whether it came from YAML (precise lines) or
// JSON (each rule's Line). Messages never quote a literal: it is a secret.
func (c *Config) check() error {
	names := map[string]bool{}
	for _, b := range builtinNames {
		names[b] = true
	}
	for i := range c.Rules {
		rl := &c.Rules[i]
		nl := rl.lines.name
		if nl == 0 {
			nl = rl.Line
		}
		switch {
		case rl.Name == "":
			return cfgErr(rl.Line, nil, "rule %d has no name", i+1)
		case !kebab.MatchString(rl.Name):
			return cfgErr(nl, nil, "rule name %q: use lower-case words joined by '-' (it goes into the manifest)", rl.Name)
		case strings.HasPrefix(rl.Name, "obfuscate-"):
			return cfgErr(nl, nil, "rule name %q: names starting with obfuscate- are reserved", rl.Name)
		case names[rl.Name]:
			if _, builtin := builtinID(rl.Name); builtin {
				return cfgErr(nl, nil, "rule name %q is a built-in rule's; choose another", rl.Name)
			}
			return cfgErr(nl, nil, "rule name %q is used twice", rl.Name)
		}
		names[rl.Name] = true
		if len(rl.Literals) == 0 && rl.Regex == "" && len(rl.Keys) == 0 {
			return cfgErr(rl.Line, nil, "rule %q needs literals, a regex or keys", rl.Name)
		}
		for j, l := range rl.Literals {
			ln := lineOr(rl.lines.literals, j, rl.Line)
			switch {
			case len(l) < minLiteral:
				return cfgErr(ln, nil, "rule %q: literal %d is shorter than %d characters and would redact ordinary text", rl.Name, j+1, minLiteral)
			case strings.ContainsAny(l, "\r\n"):
				return cfgErr(ln, nil, "rule %q: literal %d spans lines; the redactor works line by line, so give each line as its own literal", rl.Name, j+1)
			}
		}
		if rl.Regex != "" {
			ln := rl.lines.regex
			if ln == 0 {
				ln = rl.Line
			}
			if _, err := compileRule(rl.Regex); err != nil {
				return cfgErr(ln, err, "%v", err)
			}
		}
		for j, k := range rl.Keys {
			ln := lineOr(rl.lines.keys, j, rl.Line)
			var buf [96]byte
			if len(normKey([]byte(k), &buf)) == 0 || strings.ContainsAny(k, " \t\r\n:=\"'") {
				return cfgErr(ln, nil, "rule %q: key %q is not a key name", rl.Name, k)
			}
		}
	}
	for _, d := range c.Disable {
		if _, ok := builtinID(d); !ok {
			return cfgErr(0, nil, "disable: %q is not a built-in rule (they are: %s)", d, strings.Join(builtinNames[:], ", "))
		}
	}
	for j, pat := range c.Obfuscate.HostnamePatterns {
		if _, err := compileRule(pat); err != nil {
			return cfgErr(lineOr(c.Obfuscate.patternLines, j, 0), err, "hostname pattern: %v", err)
		}
	}
	return nil
}

// compileRule compiles a configured pattern and rejects one that matches
// empty text (it would "redact" between every two bytes).
func compileRule(pat string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(pat)
	if err != nil {
		return nil, fmt.Errorf("invalid regex %q: %w", pat, err)
	}
	if re.MatchString("") {
		return nil, fmt.Errorf("regex %q matches empty text; it must match the secret itself", pat)
	}
	return re, nil
}

func builtinID(name string) (int32, bool) {
	for i, n := range builtinNames {
		if n == name {
			return int32(i), true
		}
	}
	return -1, false
}

// ErrNoKey is returned by Build when obfuscation is asked for without a key.
var ErrNoKey = errors.New("obfuscation needs a per-run key of at least 16 bytes")

// Build returns a Redactor with the built-in rules, cfg's custom rules
// (cfg may be nil) and the obfuscation opts asks for.
func Build(cfg *Config, opts Options) (*Redactor, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	b := newBuilder()
	for _, rl := range cfg.Rules {
		id := b.ruleID(rl.Name)
		for _, lit := range rl.Literals {
			b.word([]byte(lit), keyword{kind: kwLiteral, arg: id, exact: []byte(lit)})
			// The literal base64-encoded, as it would sit in a Secret's
			// data or a Basic header built from it alone.
			enc := base64.RawStdEncoding.EncodeToString([]byte(lit))
			b.word([]byte(enc), keyword{kind: kwLiteral, arg: id, exact: []byte(enc)})
		}
		if rl.Regex != "" {
			re, err := compileRule(rl.Regex)
			if err != nil {
				return nil, cfgErr(rl.Line, err, "%v", err)
			}
			b.addRegex(id, re, nil)
		}
		for _, k := range rl.Keys {
			var buf [96]byte
			b.r.keys[string(normKey([]byte(k), &buf))] = id
			b.word([]byte(keyWord(k)), keyword{kind: kwKey})
		}
	}
	b.addOwn(opts.Own)
	var hosts, users []string
	var hostRes []*regexp.Regexp
	var cats [numCats]bool
	if len(opts.Obfuscate) > 0 {
		if len(opts.Key) < 16 {
			return nil, ErrNoKey
		}
		for _, c := range opts.Obfuscate {
			i := catIndex(c)
			if i < 0 {
				return nil, fmt.Errorf("unknown obfuscation category %q (expected ip, hostname, mac or user)", c)
			}
			cats[i] = true
		}
		hosts = append(append(hosts, opts.Hostnames...), cfg.Obfuscate.Hostnames...)
		users = append(append(users, opts.Users...), cfg.Obfuscate.Users...)
		for _, pat := range cfg.Obfuscate.HostnamePatterns {
			re, err := compileRule(pat)
			if err != nil {
				return nil, cfgErr(0, err, "hostname pattern: %v", err)
			}
			hostRes = append(hostRes, re)
		}
	}
	if cats != [numCats]bool{} {
		o := &obfuscator{key: append([]byte(nil), opts.Key...)}
		for i := range o.cats {
			o.cats[i] = obfCat{on: cats[i], counter: "obfuscate-" + catNames[i]}
		}
		if cats[catHost] {
			for _, h := range hosts {
				h = strings.ToLower(strings.TrimSpace(h))
				if len(h) > 0 && len(h) <= 253 && !slices.Contains(notHostnames, h) {
					b.word([]byte(h), keyword{kind: kwHost})
				}
			}
			for i, re := range hostRes {
				o.hostRes = append(o.hostRes, re)
				if lit := requiredLiteral(re); len(lit) >= 3 {
					b.word([]byte(lit), keyword{kind: kwHostRegex, arg: int32(i)})
				} else {
					o.hostAlway = append(o.hostAlway, int32(i))
				}
			}
		}
		if cats[catUser] {
			for _, u := range users {
				if u = strings.TrimSpace(u); u != "" {
					b.word([]byte(u), keyword{kind: kwUser, exact: []byte(u)})
				}
			}
			b.word([]byte("/home/"), keyword{kind: kwHome})
		}
		b.r.obf = o
	}
	r := b.finish()
	for _, d := range cfg.Disable {
		id, _ := builtinID(d)
		r.off[id] = true
	}
	return r, nil
}

func catIndex(c string) int {
	switch strings.ToLower(strings.TrimSpace(c)) {
	case "ip", "ips":
		return catIP
	case "hostname", "hostnames", "host":
		return catHost
	case "mac", "macs":
		return catMAC
	case "user", "users", "username":
		return catUser
	}
	return -1
}

// keyWord picks the matcher keyword for a custom key: its longest word, so
// that db_pin, DB_PIN and dbPin are all found (the key/value rule then
// compares the whole normalised key).
func keyWord(k string) string {
	best, cur := "", []byte{}
	flush := func() {
		if len(cur) > len(best) {
			best = string(cur)
		}
		cur = cur[:0]
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '-' || c == '_' || c == '.':
			flush()
		case 'A' <= c && c <= 'Z' && i > 0 && 'a' <= k[i-1] && k[i-1] <= 'z':
			flush()
			cur = append(cur, c)
		default:
			cur = append(cur, c)
		}
	}
	flush()
	if len(best) < 3 {
		return k
	}
	return best
}
