// Command rulegen writes redact/rules_scanner.go, the table of secret
// formats nodesnap's redactor compiles in, from the default rule set of a
// maintained secret scanner (gitleaks), pinned in this module's go.mod. It is
// a module of its own so that nodesnap does not depend on the scanner's
// dependency tree; `make redact-rules` runs it when the pin moves.
//
// For every rule it keeps the regular expression (Go RE2, as the scanner
// itself compiles it), the keywords the scanner prefilters on, the secret
// group, the entropy floor and the rule's allowlist regexes and stop words.
// A rule is left out, and named in the generated file's header with the
// reason, when its regex does not compile under Go's regexp, when it has no
// regex (a path rule), when it only completes another rule, or when none of
// its keywords is selective enough to keep redaction fast on node text (the
// redactor's key/value rules cover those: they are the generic
// "keyword = value" rules).
//
// It also writes the scanner's own negative examples (values its tests say
// must not be reported) to a JSON file the redact tests read as values to
// keep.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/viper"
	"github.com/zricethezav/gitleaks/v8/config"
)

const scannerModule = "github.com/zricethezav/gitleaks/v8"

// weakKeywords occur all over a node's logs and configuration: a rule whose
// only keywords are among them would run its regex on a large share of
// lines. Such a keyword is replaced by the longest literal the rule's regex
// requires, when that is selective; otherwise the rule is skipped.
var weakKeywords = map[string]bool{
	"key": true, "api": true, "access": true, "auth": true, "token": true,
	"secret": true, "password": true, "passwd": true, "pass": true,
	"credential": true, "creds": true, "client": true, "private": true,
	"bearer": true, "basic": true, "http": true, "https": true, "user": true,
	"login": true, "-----begin": true, "curl": true, "service": true,
	"account": true, "config": true, "cloud": true, "data": true,
	"node": true, "kube": true, "docker": true, "azure": true, "aws": true,
	"google": true, "storage": true, "session": true, "host": true,
}

// ownRules are the scanner's rules the redactor has a rule of its own for,
// one that knows more about the bytes than a single-line regex can.
var ownRules = map[string]string{
	"private-key": "the pem-private-key rule masks PEM blocks across lines, keeping BEGIN and END",
}

type rule struct {
	ID       string
	Regex    string
	Keywords []string
	Group    int
	Entropy  float64
	Allow    []string // allowlist regexes on the secret
	AllowAll []string // allowlist regexes on the whole match
	Stop     []string
}

func main() {
	out := flag.String("out", "../rules_scanner.go", "the Go table to write")
	examples := flag.String("examples", "../corpusgen/scanner_examples.json", "the scanner's own examples to write")
	flag.Parse()
	if err := run(*out, *examples); err != nil {
		fmt.Fprintln(os.Stderr, "rulegen:", err)
		os.Exit(1)
	}
}

func run(out, examples string) error {
	version, dir, err := moduleVersion()
	if err != nil {
		return err
	}
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(config.DefaultConfig)); err != nil {
		return fmt.Errorf("reading the scanner's default config: %w", err)
	}
	var vc config.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return fmt.Errorf("decoding the scanner's default config: %w", err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		return fmt.Errorf("translating the scanner's default config: %w", err)
	}
	var rules []rule
	var skipped []string
	for _, id := range cfg.OrderedRules {
		r := cfg.Rules[id]
		switch {
		case r.Regex == nil:
			skipped = append(skipped, id+": no regex (a file path rule)")
			continue
		case r.SkipReport:
			skipped = append(skipped, id+": only completes another rule")
			continue
		}
		if why, ok := ownRules[id]; ok {
			skipped = append(skipped, id+": "+why)
			continue
		}
		src := r.Regex.String()
		if _, err := regexp.Compile(src); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: does not compile as Go RE2: %v", id, err))
			continue
		}
		kws, why := selective(r.Keywords, src)
		if kws == nil {
			skipped = append(skipped, id+": "+why)
			continue
		}
		if !strings.Contains(src, "(?i") {
			// A case-sensitive regex: the keyword as the regex spells it
			// (A3-, not a3-, which every UUID holds), compared exactly.
			for i, k := range kws {
				if j := strings.Index(strings.ToLower(src), k); j >= 0 && src[j:j+len(k)] != k {
					kws[i] = src[j : j+len(k)]
				}
			}
		}
		nr := rule{ID: id, Regex: src, Keywords: kws, Group: r.SecretGroup, Entropy: r.Entropy}
		if names := r.Regex.SubexpNames(); nr.Group == 0 && len(names) > 1 && names[1] != "" {
			// Named groups are parts of the token (a JWT's claims), not
			// the secret: the whole match is.
			nr.Group = -1
		}
		for _, a := range r.Allowlists {
			if len(a.Commits) > 0 || len(a.Paths) > 0 {
				// Paths and commits mean nothing on a node; with an AND
				// condition the allowlist would need them.
				if a.MatchCondition == config.AllowlistMatchAnd {
					continue
				}
			}
			for _, re := range a.Regexes {
				switch a.RegexTarget {
				case "match", "line":
					nr.AllowAll = append(nr.AllowAll, re.String())
				default:
					nr.Allow = append(nr.Allow, re.String())
				}
			}
			nr.Stop = append(nr.Stop, a.StopWords...)
		}
		rules = append(rules, nr)
	}
	var global []string
	for _, a := range cfg.Allowlists {
		if a.MatchCondition == config.AllowlistMatchAnd && (len(a.Paths) > 0 || len(a.Commits) > 0) {
			continue
		}
		if a.RegexTarget != "" && a.RegexTarget != "secret" {
			continue
		}
		for _, re := range a.Regexes {
			global = append(global, re.String())
		}
	}
	if err := writeTable(out, version, rules, skipped, global); err != nil {
		return err
	}
	return writeExamples(examples, version, dir, rules)
}

// moduleVersion asks the go command which version of the scanner this
// module pins, and where its source is.
func moduleVersion() (string, string, error) {
	b, err := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", scannerModule).Output()
	if err != nil {
		return "", "", fmt.Errorf("finding the pinned %s: %w", scannerModule, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return "", "", fmt.Errorf("finding the pinned %s: unexpected answer %q", scannerModule, b)
	}
	return f[0], f[1], nil
}

// selective returns the keywords to prefilter a rule on: its own when each
// is selective, else the longest literal its regex requires; nil and the
// reason when there is none.
func selective(kws []string, src string) ([]string, string) {
	var out []string
	weak := false
	for _, k := range kws {
		k = strings.ToLower(k)
		if len(k) < 3 || weakKeywords[k] {
			weak = true
			continue
		}
		out = append(out, k)
	}
	if !weak && len(out) > 0 {
		return out, ""
	}
	lit := strings.ToLower(requiredLiteral(src))
	if len(lit) >= 4 && !weakKeywords[lit] {
		return []string{lit}, ""
	}
	if len(kws) == 0 {
		return nil, "no keyword, and its regex requires no literal to prefilter on"
	}
	return nil, fmt.Sprintf("keywords %q occur on too many node log lines, and its regex requires no selective literal (a hand-written rule or the key/value rules cover what it finds)", kws)
}

// requiredLiteral returns the longest literal text every match of src must
// contain.
func requiredLiteral(src string) string {
	t, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return ""
	}
	return longest(t.Simplify())
}

func longest(t *syntax.Regexp) string {
	switch t.Op {
	case syntax.OpLiteral:
		for _, c := range t.Rune {
			if c > 127 {
				return ""
			}
		}
		return string(t.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return longest(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return longest(t.Sub[0])
		}
	case syntax.OpConcat:
		best, run := "", ""
		for _, s := range t.Sub {
			if s.Op == syntax.OpLiteral {
				run += longest(s)
				continue
			}
			if len(run) > len(best) {
				best = run
			}
			run = ""
			if l := longest(s); len(l) > len(best) {
				best = l
			}
		}
		if len(run) > len(best) {
			best = run
		}
		return best
	}
	return ""
}

func quoteList(ss []string) string {
	if len(ss) == 0 {
		return "nil"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = goString(s)
	}
	return "[]string{" + strings.Join(q, ", ") + "}"
}

// goString quotes s as a raw string when it can, for readable regexes.
func goString(s string) string {
	if !strings.Contains(s, "`") && !strings.ContainsAny(s, "\r\x00") && strconv.CanBackquote(s) {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

func writeTable(out, version string, rules []rule, skipped, global []string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by redact/rulegen from %s %s; DO NOT EDIT.\n", scannerModule, version)
	b.WriteString("// Regenerate with `make redact-rules` after moving the pin in redact/rulegen/go.mod.\n//\n")
	fmt.Fprintf(&b, "// %d rules compiled in. Left out:\n", len(rules))
	for _, s := range skipped {
		fmt.Fprintf(&b, "//   - %s\n", s)
	}
	b.WriteString("\npackage redact\n\n")
	fmt.Fprintf(&b, "// scannerRulesSource names the rule set the table was generated from.\nconst scannerRulesSource = %q\n\n", scannerModule+" "+version)
	b.WriteString("// scannerAllow are the scanner's global allowlist regexes on a secret.\n")
	fmt.Fprintf(&b, "var scannerAllow = %s\n\n", quoteList(global))
	b.WriteString("var scannerRules = []scannerRule{\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "\t{id: %q, kw: %s, re: %s, group: %d, entropy: %v, allow: %s, allowMatch: %s, stop: %s},\n",
			r.ID, quoteList(r.Keywords), goString(r.Regex), r.Group, r.Entropy, quoteList(r.Allow), quoteList(r.AllowAll), quoteList(r.Stop))
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return fmt.Errorf("formatting the generated table: %w", err)
	}
	return os.WriteFile(out, src, 0o644)
}

// examples are the scanner's test values, by rule.
type examples struct {
	Source string              `json:"source"`
	Keep   map[string][]string `json:"keep"` // values the scanner's tests say are no secret
}

// writeExamples reads the negative examples ("fps") of every rule from the
// scanner's rule sources (cmd/generate/config/rules/*.go) and writes them,
// for the rules compiled in.
func writeExamples(out, version, dir string, rules []rule) error {
	in := map[string]bool{}
	for _, r := range rules {
		in[r.ID] = true
	}
	ex := examples{Source: scannerModule + " " + version + " cmd/generate/config/rules", Keep: map[string][]string{}}
	files, _ := filepath.Glob(filepath.Join(dir, "cmd", "generate", "config", "rules", "*.go"))
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return fmt.Errorf("reading the scanner's rule source %s: %w", filepath.Base(path), err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			id, fps := "", []string(nil)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.KeyValueExpr:
					if k, ok := n.Key.(*ast.Ident); ok && k.Name == "RuleID" {
						if s, ok := stringLit(n.Value); ok && id == "" {
							id = s
						}
					}
				case *ast.AssignStmt:
					for i, l := range n.Lhs {
						if k, ok := l.(*ast.Ident); ok && k.Name == "fps" && i < len(n.Rhs) {
							if cl, ok := n.Rhs[i].(*ast.CompositeLit); ok {
								for _, e := range cl.Elts {
									if s, ok := stringLit(e); ok {
										fps = append(fps, s)
									}
								}
							}
						}
					}
				}
				return true
			})
			if id != "" && in[id] && len(fps) > 0 {
				ex.Keep[id] = append(ex.Keep[id], fps...)
			}
		}
	}
	for k := range ex.Keep {
		sort.Strings(ex.Keep[k])
	}
	b, err := json.MarshalIndent(ex, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// stringLit is the value of a string literal or a concatenation of them.
func stringLit(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringLit(e.X)
		b, ok2 := stringLit(e.Y)
		return a + b, ok1 && ok2
	}
	return "", false
}
