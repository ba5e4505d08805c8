package redact

import (
	"cmp"
	"slices"
)

// edit replaces line[s:e] with repl.
type edit struct {
	s, e int
	rule int32 // counted when accepted; -1 for no count
	prio int32
	open contKind // how the value ends if it runs past the piece
	obf  bool     // an obfuscation token (never merged with other edits)
	cat  int8     // obfuscation category
	repl string
	orig string // obfuscation: the normalised original, for the mapping
}

// Priorities: lower goes first. Edits that finish what an earlier line or
// piece started come first, then rules in their id order (see rulePEM...),
// then obfuscation, which must never touch bytes a rule redacted.
const (
	prioFirst int32 = 0
	prioData        = 10 + ruleSecretData
	prioObf   int32 = 1 << 30
)

func prioOf(rule int32) int32 { return 10 + rule }

// pass is the per-piece scratch of a Writer: the keyword events, the
// candidate edits the rules proposed and the ones accepted.
type pass struct {
	w      *Writer
	line   []byte
	start  bool // the piece begins a line
	events []event
	cands  []edit
	acc    []edit
	lastKS int   // start of the last key the key/value rule examined
	ran    []int // regex rules already run on this piece
	kindS  int8  // does the line say "kind":"Secret"? 0 not checked, 1 yes, 2 no
}

func (p *pass) begin(line []byte, start bool) {
	p.line = line
	p.start = start
	p.cands = p.cands[:0]
	p.lastKS = -1
	p.ran = p.ran[:0]
	p.kindS = 0
}

// add proposes replacing line[s:e] with repl under rule.
func (p *pass) add(s, e int, rule int32, prio int32, open contKind, repl string) {
	if e <= s && repl == "" {
		return
	}
	if rule >= 0 && p.w.r.off[rule] {
		return
	}
	p.cands = append(p.cands, edit{s: s, e: e, rule: rule, prio: prio, open: open, repl: repl})
}

// redact proposes replacing line[s:e] with the Marker under rule, at the
// rule's own priority.
func (p *pass) redact(s, e int, rule int32, open contKind) {
	if e > s {
		p.add(s, e, rule, prioOf(rule), open, Marker)
	}
}

// run finds the candidate edits of every rule in the piece.
func (p *pass) run() {
	r := p.w.r
	p.events = r.m.scan(p.line, p.events[:0])
	for _, ev := range p.events {
		k := &r.kws[ev.kw]
		s := ev.end - int(k.n)
		if k.exact != nil && string(p.line[s:ev.end]) != string(k.exact) {
			continue
		}
		switch k.kind {
		case kwKey:
			p.keyValue(s, ev.end)
		case kwAuth:
			p.authHeader(s, ev.end)
		case kwBearer:
			p.bearer(s, ev.end)
		case kwJWT:
			p.jwt(s)
		case kwAWSKeyID:
			p.awsKeyID(s)
		case kwCeph:
			p.cephKey(s)
		case kwURL:
			p.urlCreds(s, ev.end)
		case kwSAS:
			p.sasSig(s, ev.end)
		case kwPEMBegin:
			p.pemBegin(s, ev.end)
		case kwB64PEM:
			p.b64PEM(s)
		case kwDataInline:
			p.inlineData(ev.end, k.arg == 1, p.line[s] == '\\')
		case kwLiteral:
			p.redact(s, ev.end, k.arg, contNone)
		case kwRegex:
			p.runRegex(k.arg)
		case kwHost, kwUser, kwHome, kwHostRegex:
			p.obfKeyword(k, s, ev.end)
		}
	}
	for _, i := range r.always {
		p.runRegex(i)
	}
	if r.obf != nil {
		p.obfScan()
	}
}

// runRegex runs a regex rule over the piece, once.
func (p *pass) runRegex(i int32) {
	if slices.Contains(p.ran, int(i)) {
		return
	}
	p.ran = append(p.ran, int(i))
	rr := &p.w.r.regexes[i]
	for _, m := range rr.re.FindAllSubmatchIndex(p.line, -1) {
		s, e := m[0], m[1]
		if rr.group > 0 {
			s, e = m[2*rr.group], m[2*rr.group+1]
		}
		if s >= 0 {
			p.redact(s, e, rr.rule, contNone)
		}
	}
}

// resolve picks the edits to apply: in priority order, an edit that
// overlaps one already accepted is dropped if it lies inside it, and merged
// with it otherwise (so no byte of either secret survives); obfuscation
// tokens never merge. Each accepted edit counts once for its rule.
func (p *pass) resolve() {
	w := p.w
	slices.SortStableFunc(p.cands, func(a, b edit) int {
		if c := cmp.Compare(a.prio, b.prio); c != 0 {
			return c
		}
		return cmp.Compare(b.e-b.s, a.e-a.s) // longer first: FQDN before hostname
	})
	acc := p.acc[:0]
	for _, c := range p.cands {
		// acc is sorted and disjoint: find the accepted edits c overlaps.
		lo, _ := slices.BinarySearchFunc(acc, c.s, func(e edit, s int) int {
			if e.e <= s {
				return -1
			}
			return 1
		})
		hi := lo
		for hi < len(acc) && acc[hi].s < c.e {
			hi++
		}
		if lo == hi {
			acc = slices.Insert(acc, lo, c)
			if c.obf {
				w.obfAccepted(&c)
			} else {
				w.count(c.rule)
			}
			continue
		}
		if c.obf || slices.ContainsFunc(acc[lo:hi], func(e edit) bool { return e.obf }) {
			continue
		}
		merged := acc[lo]
		if hi-lo == 1 && merged.s <= c.s && c.e <= merged.e {
			continue
		}
		merged.s = min(merged.s, c.s)
		merged.e = max(acc[hi-1].e, c.e)
		if merged.e == acc[hi-1].e {
			merged.open = acc[hi-1].open
		} else {
			merged.open = c.open
		}
		if merged.repl == "" {
			merged.repl = c.repl
		}
		acc = slices.Replace(acc, lo, hi, merged)
	}
	p.acc = acc
}
