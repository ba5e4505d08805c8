// Package corpusgen makes a secrets corpus from the redactor's own rule
// table rather than from anyone's examples: for every rule of the scanner
// table compiled into redact (see make redact-rules), a value generated
// from the rule's regular expression, which the rule's regex, secret group
// and entropy floor accept; and the scanner's own negative examples (values
// its tests say are no secret) as values to keep. Tests place both in the
// places a collection reads (files, journal, CRI logs, command lines,
// kubelet answers) and check the bundle.
package corpusgen

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/redact"
)

// Secret is one generated value.
type Secret struct {
	Rule   string // the scanner rule's id
	Text   string // what the rule's regex matched: the value with the context it requires
	Secret string // the secret itself (the rule's secret group)
	// Prefix is how many bytes of Secret are the rule's keyword, which
	// says what kind of token it is and may stay.
	Prefix int
}

func hasKeyword(text string, kws []string) bool {
	low := strings.ToLower(text)
	for _, k := range kws {
		if strings.Contains(low, strings.ToLower(k)) {
			return true
		}
	}
	return false
}

func prefixLen(secret string, kws []string) int {
	n := 0
	low := strings.ToLower(secret)
	for _, k := range kws {
		if strings.HasPrefix(low, strings.ToLower(k)) && len(k) > n {
			n = len(k)
		}
	}
	return n
}

// Generate makes one value for every rule it can, deterministically from
// seed. skipped names the rules it could not make a value for, and why.
func Generate(seed int64) (out []Secret, skipped []string) {
	rnd := rand.New(rand.NewSource(seed))
	for _, r := range redact.ScannerRules() {
		re, err := regexp.Compile(r.Regex)
		if err != nil {
			skipped = append(skipped, r.ID+": "+err.Error())
			continue
		}
		t, err := syntax.Parse(r.Regex, syntax.Perl)
		if err != nil {
			skipped = append(skipped, r.ID+": "+err.Error())
			continue
		}
		t = t.Simplify()
		var s Secret
		ok := false
		for try := 0; try < 40 && !ok; try++ {
			g := &gen{rnd: rnd}
			text := g.walk(t)
			secret, good := secretOf(re, r.Group, text)
			if !good || strings.ContainsAny(secret, "\n\r\t") || strings.ContainsAny(text, "\n\r\x00") {
				continue
			}
			if r.Entropy > 0 && shannon(secret) < r.Entropy {
				continue
			}
			if !hasKeyword(text, r.Keywords) && len(r.Keywords) > 0 {
				// The scanner runs a rule only on text holding one of its
				// keywords (a Facebook token is digits|letters, found
				// where "facebook" is said).
				text = r.Keywords[0] + " " + text
			}
			s, ok = Secret{Rule: r.ID, Text: text, Secret: secret, Prefix: prefixLen(secret, r.Keywords)}, true
		}
		if !ok {
			skipped = append(skipped, r.ID+": no value generated that its own regex and entropy floor accept")
			continue
		}
		if other := (&gen{rnd: rand.New(rand.NewSource(seed + 1))}).walk(t); other == s.Text || strings.HasSuffix(s.Text, other) {
			// A fixed string (a service's constant prefix): nothing of it
			// is secret.
			skipped = append(skipped, r.ID+": its format has no variable part")
			continue
		}
		out = append(out, s)
	}
	return out, skipped
}

// Matches reports whether rule id's own regex still finds secret in line
// (the context a test placed it in may change what the regex sees).
func Matches(id, line, secret string) bool {
	for _, r := range redact.ScannerRules() {
		if r.ID != id {
			continue
		}
		re := regexp.MustCompile(r.Regex)
		for _, m := range re.FindAllStringSubmatchIndex(line, -1) {
			if s, ok := pick(m, r.Group, line); ok && s == secret {
				return true
			}
		}
	}
	return false
}

func secretOf(re *regexp.Regexp, group int, text string) (string, bool) {
	m := re.FindStringSubmatchIndex(text)
	if m == nil {
		return "", false
	}
	return pick(m, group, text)
}

func pick(m []int, group int, text string) (string, bool) {
	s, e := m[0], m[1]
	switch {
	case group > 0 && 2*group+1 < len(m):
		s, e = m[2*group], m[2*group+1]
	case group == 0:
		for g := 1; 2*g+1 < len(m); g++ {
			if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
				s, e = m[2*g], m[2*g+1]
				break
			}
		}
	}
	if s < 0 || e <= s {
		return "", false
	}
	return text[s:e], true
}

// gen writes a string a regexp matches, choosing random letters and digits
// where the pattern allows them (a generated secret is random, as a real
// one is) and the shortest context elsewhere.
type gen struct {
	rnd *rand.Rand
	b   strings.Builder
}

func (g *gen) walk(t *syntax.Regexp) string {
	g.b.Reset()
	g.emit(t)
	return g.b.String()
}

func (g *gen) emit(t *syntax.Regexp) {
	switch t.Op {
	case syntax.OpLiteral:
		// As written: a token's fixed part has the case its issuer gives it.
		for _, r := range t.Rune {
			g.b.WriteRune(r)
		}
	case syntax.OpCharClass:
		g.b.WriteRune(g.class(t.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		// An unescaped '.' in a pattern stands for a dot more often
		// than not (hooks.slack.com).
		g.b.WriteByte('.')
	case syntax.OpCapture:
		g.emit(t.Sub[0])
	case syntax.OpStar:
		// Zero repetitions: a star is the optional tail of a format.
	case syntax.OpPlus:
		n := 1
		if isClass(t.Sub[0]) {
			n = 20
		}
		for i := 0; i < n; i++ {
			g.emit(t.Sub[0])
		}
	case syntax.OpQuest:
	case syntax.OpRepeat:
		n := t.Min
		if n > 0 && t.Max > t.Min && isClass(t.Sub[0]) {
			n += g.rnd.Intn(min(t.Max-t.Min, 8) + 1)
		}
		for i := 0; i < n; i++ {
			g.emit(t.Sub[0])
		}
	case syntax.OpConcat:
		for _, s := range t.Sub {
			g.emit(s)
		}
	case syntax.OpAlternate:
		// The end of text or a blank, where a format ends in one of
		// several terminators; else any branch.
		for _, s := range t.Sub {
			if s.Op == syntax.OpEndText || s.Op == syntax.OpEndLine {
				return
			}
		}
		// A key's separator: '=' or ':' as configuration writes it.
		for _, s := range t.Sub {
			if s.Op == syntax.OpLiteral && (string(s.Rune) == "=" || string(s.Rune) == ":") {
				g.emit(s)
				return
			}
		}
		g.emit(t.Sub[g.rnd.Intn(len(t.Sub))])
	}
}

func isClass(t *syntax.Regexp) bool {
	return t.Op == syntax.OpCharClass || t.Op == syntax.OpAnyCharNotNL
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// class picks a character of the class given as ranges: a random letter
// or digit when it has some, else a blank, else its first printable one.
func (g *gen) class(ranges []rune) rune {
	in := func(c rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= c && c <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	var cand []rune
	for _, c := range alnum {
		if in(c) {
			cand = append(cand, c)
		}
	}
	if len(cand) > 0 {
		return cand[g.rnd.Intn(len(cand))]
	}
	for _, c := range " =:" {
		if in(c) {
			return c
		}
	}
	for c := rune(0x21); c < 0x7f; c++ {
		if in(c) {
			return c
		}
	}
	return 'a'
}

func shannon(s string) float64 {
	var n [256]int
	for i := 0; i < len(s); i++ {
		n[s[i]]++
	}
	h, l := 0.0, float64(len(s))
	for _, c := range n {
		if c > 0 {
			f := float64(c) / l
			h -= f * math.Log2(f)
		}
	}
	return h
}

//go:embed scanner_examples.json
var examplesJSON []byte

// Keep is one of the scanner's negative examples.
type Keep struct {
	Rule  string
	Value string
}

// Keeps returns the scanner's negative examples that are single values
// (no blanks, no key of their own) and that no rule of the scanner reports
// (an example negative for one rule can be another's true positive: an
// admin key is no API key): placed after a neutral word they must come
// through a collection unchanged.
func Keeps() ([]Keep, string, error) {
	var ex struct {
		Source string              `json:"source"`
		Keep   map[string][]string `json:"keep"`
	}
	if err := json.Unmarshal(examplesJSON, &ex); err != nil {
		return nil, "", fmt.Errorf("reading the scanner's examples: %w", err)
	}
	var out []Keep
	seen := map[string]bool{}
	rules := redact.ScannerRules()
	res := make([]*regexp.Regexp, len(rules))
	for i, r := range rules {
		res[i], _ = regexp.Compile(r.Regex)
	}
	reported := func(v string) bool {
		for i, r := range rules {
			if res[i] == nil || !hasKeyword(v, r.Keywords) {
				continue
			}
			for _, m := range res[i].FindAllStringSubmatchIndex(v, -1) {
				if s, ok := pick(m, r.Group, v); ok && (r.Entropy == 0 || shannon(s) >= r.Entropy) {
					return true
				}
			}
		}
		return false
	}
	for rule, vs := range ex.Keep {
		for _, v := range vs {
			if len(v) < 8 || strings.ContainsAny(v, " \t\n\r\"'`=:,;{}()[]<>\\") || seen[v] || reported(v) {
				continue
			}
			seen[v] = true
			out = append(out, Keep{Rule: rule, Value: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	return out, ex.Source, nil
}
