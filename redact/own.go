package redact

import "bytes"

// nodesnap's own secrets: what it was given to do its job (a pre-signed
// upload URL, a kubelet token) must never end up in the bundle it writes,
// whoever records it: the process list shows its own command line, an
// error may quote the URL. The supervisor passes them in Options.Own;
// every Writer of the run masks them wherever they are.

// ownRuleName is what the manifest counts them under.
const ownRuleName = "nodesnap-own-secret"

// ownPrefix is how much of an own secret goes into the automaton; the rest
// is compared where it hits. A pre-signed URL's security token runs to a
// kilobyte, which would not fit the automaton's compact table.
const ownPrefix = 16

// minOwn: shorter values are not credentials (a query's "1" or "put").
const minOwn = 6

func (b *builder) addOwn(own []string) {
	seen := map[string]bool{}
	for _, v := range own {
		if len(v) < minOwn || seen[v] || bytes.ContainsAny([]byte(v), "\n\r") {
			continue
		}
		seen[v] = true
		if b.r.own == nil {
			b.r.ownRule = b.ruleID(ownRuleName)
		}
		w := []byte(v[:min(len(v), ownPrefix)])
		b.word(w, keyword{kind: kwOwn, arg: int32(len(b.r.own)), exact: w})
		b.r.own = append(b.r.own, v)
	}
}

// ownSecret handles the start of own secret i at s: the whole value goes,
// or, when the line holds only its start (cut by a length limit), the rest
// of the line's token.
func (p *pass) ownSecret(i int32, s int) {
	v := p.w.r.own[i]
	line := p.line
	e := s + len(v)
	if e > len(line) || string(line[s:e]) != v {
		e = s
		for e < len(line) && !isSpace(line[e]) && line[e] != '"' && line[e] != '\'' && line[e] != 0 {
			e++
		}
	}
	p.redact(s, e, p.w.r.ownRule, contNone)
}
