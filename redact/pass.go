package redact

import (
	"bytes"
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
	// fallback: proposed by a rule that reads only the words around the
	// value; dropped where a rule knowing the value's format claimed any
	// of it (see (*pass).fallback).
	fallback bool
	cat      int8 // obfuscation category
	repl     string
	orig     string // obfuscation: the normalised original, for the mapping
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
	w          *Writer
	line       []byte
	start      bool // the piece begins a line
	events     []event
	cands      []edit
	acc        []edit
	lastKS     int // the last key the key/value rule examined: [lastKS, lastKE)
	lastKE     int
	coverS     int // the proposed edit reaching furthest: [coverS, coverE)
	coverE     int
	endAt      int     // where "-----END " is at or after endFrom, -1 if nowhere
	endFrm     int     // -1: not searched yet
	ran        []int   // regex rules already run on this piece
	ranScanner []int32 // generated scanner rules already run on this piece
	bootDone   bool    // bootstrap tokens looked for in this piece
	dots       []int   // where the piece's dots are (findDots)
	dotsDone   bool    // dots holds this piece's
	pending    []scannerHit
	kindS      int8 // the line's JSON "kind": 0 not looked for yet, 1 Secret, 2 other, 3 none
	ts         int  // where the text begins after a log prefix; -1 not worked out yet
	segEnd     int  // >= 0: the value being read ends here (a closing quote)
	cli        cliFacts
}

func (p *pass) begin(line []byte, start bool) {
	p.line = line
	p.start = start
	p.cands = p.cands[:0]
	p.lastKS, p.lastKE = -1, -1
	p.coverS, p.coverE = 0, 0
	p.endFrm = -1
	p.ran = p.ran[:0]
	p.ranScanner = p.ranScanner[:0]
	p.bootDone = false
	p.dotsDone = false
	p.pending = p.pending[:0]
	p.kindS = 0
	p.ts = -1
	p.segEnd = -1
	p.cli = 0
}

// add proposes replacing line[s:e] with repl under rule.
func (p *pass) add(s, e int, rule int32, prio int32, open contKind, repl string) {
	if e <= s || rule >= 0 && p.w.r.off[rule] {
		return
	}
	p.cands = append(p.cands, edit{s: s, e: e, rule: rule, prio: prio, open: open, repl: repl})
	if e > p.coverE && rule != ruleScanner {
		// A generated rule's match does not hide the keywords inside it
		// from the hand-written rules, which know more about the bytes.
		p.coverS, p.coverE = s, e
	}
}

// redact proposes replacing line[s:e] with the Marker under rule, at the
// rule's own priority.
func (p *pass) redact(s, e int, rule int32, open contKind) {
	// Obfuscation tokens are ours, not secrets; redacting a span holding
	// one ("Bearer ip-4479c2861f44+") would make a second pass over an
	// obfuscated bundle count what the first did not.
	if e > s && !hasToken(p.line[s:e]) {
		p.add(s, e, rule, prioOf(rule), open, Marker)
	}
}

// fallback proposes masking line[s:e] under rule without covering it: the
// keywords inside it (ghp_, AKIA, eyJ, hvs.) still run their rules, and
// where one of them claims any of the value, its edit stands alone.
func (p *pass) fallback(s, e int, rule int32) {
	v := p.line[s:e]
	if e <= s || p.w.r.off[rule] || hasToken(v) || bytes.Contains(v, []byte(Marker)) {
		return
	}
	p.cands = append(p.cands, edit{s: s, e: e, rule: rule, prio: prioOf(rule), open: contStop, repl: Marker, fallback: true})
}

// run finds the candidate edits of every rule in the piece.
func (p *pass) run() {
	r := p.w.r
	p.events = r.m.scan(p.line, p.events[:0])
	p.dots, p.dotsDone = p.dots[:0], true
	for _, ev := range p.events {
		k := &r.kws[ev.kw]
		if k.kind == kwDot {
			p.dots = append(p.dots, ev.end-1)
			continue
		}
		s := ev.end - int(k.n)
		if k.exact != nil && string(p.line[s:ev.end]) != string(k.exact) {
			continue
		}
		if s >= p.coverS && s < p.coverE && k.kind != kwPEMBegin && k.kind != kwB64PEM {
			// Inside a value already being redacted: whatever the keyword
			// starts is part of that secret. Skipping it also keeps a line
			// made of one keyword repeated ("token=token=...") linear.
			continue
		}
		switch k.kind {
		case kwKey:
			p.keyValue(s, ev.end)
			p.segEnd = -1
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
		case kwUNC:
			// Only where "//" starts a word: "://" is the URL rule's, and
			// "a//b" is a path.
			if s == 0 || isSpace(p.line[s-1]) || p.line[s-1] == '"' || p.line[s-1] == '\'' || p.line[s-1] == '=' || p.line[s-1] == '(' {
				p.urlCreds(s, ev.end)
			}
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
		case kwVendor:
			p.vendor(k.arg, s, ev.end)
		case kwAzureAD:
			p.azureADSecret(s)
		case kwBasic:
			p.basicCredentials(s, ev.end)
		case kwPadded:
			p.paddedKey(s)
		case kwUserFlag:
			p.userPassFlag(s, ev.end)
		case kwPassFlag:
			if k.arg == 0 {
				p.passwordFlag(s, ev.end)
			} else {
				p.redisPassword(s, ev.end)
			}
		case kwCookie:
			p.cookies(s, ev.end)
		case kwHash:
			p.passwordHash(s, ev.end)
		case kwAt:
			p.oracleCreds(s)
		case kwHook:
			p.webhookPath(ev.end)
		case kwOwn:
			p.ownSecret(k.arg, s)
		case kwLogin:
			p.loginArg(s, ev.end)
		case kwScanner:
			if t := &scannerTriggers[k.arg]; t.exact && bytes.HasPrefix(p.line[s:], []byte(t.kw)) ||
				!t.exact && (len(t.kw) == int(k.n) || hasFoldPrefix(p.line, s, t.kw)) {
				p.pending = append(p.pending, scannerHit{rule: t.rule, s: s, e: s + len(t.kw)})
			}
		}
	}
	p.runPendingScanners()
	if p.start {
		p.entropyAssignment()
	}
	p.dottedTokens()
	p.bootstrapTokens()
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

// resolve picks the edits to apply. Candidates that overlap form a
// cluster; within one, in priority order, an edit that overlaps one already
// accepted is dropped if it lies inside it, and merged with it otherwise (so
// no byte of either secret survives); obfuscation tokens never merge. Each
// accepted edit counts once for its rule. Clusters keep the work linear in
// the number of candidates however many a line has.
func (p *pass) resolve() {
	w := p.w
	slices.SortFunc(p.cands, func(a, b edit) int { return cmp.Compare(a.s, b.s) })
	acc := p.acc[:0]
	for i := 0; i < len(p.cands); {
		j, end := i+1, p.cands[i].e
		for j < len(p.cands) && p.cands[j].s < end {
			end = max(end, p.cands[j].e)
			j++
		}
		cluster := p.cands[i:j]
		i = j
		if len(cluster) == 1 {
			acc = append(acc, cluster[0])
			w.accepted(&cluster[0])
			continue
		}
		slices.SortStableFunc(cluster, func(a, b edit) int {
			if c := cmp.Compare(a.prio, b.prio); c != 0 {
				return c
			}
			return cmp.Compare(b.e-b.s, a.e-a.s) // longer first: FQDN before hostname
		})
		base := len(acc)
		for _, c := range cluster {
			acc = w.acceptInto(acc, base, c)
		}
	}
	p.acc = acc
}

// accepted counts an applied edit.
func (w *Writer) accepted(e *edit) {
	if e.obf {
		w.obfAccepted(e)
	} else {
		w.count(e.rule)
	}
}

// acceptInto adds candidate c to acc[base:], which is sorted and disjoint.
func (w *Writer) acceptInto(acc []edit, base int, c edit) []edit {
	cur := acc[base:]
	lo, _ := slices.BinarySearchFunc(cur, c.s, func(e edit, s int) int {
		if e.e <= s {
			return -1
		}
		return 1
	})
	hi := lo
	for hi < len(cur) && cur[hi].s < c.e {
		hi++
	}
	if lo == hi {
		w.accepted(&c)
		return slices.Insert(acc, base+lo, c)
	}
	if c.obf || slices.ContainsFunc(cur[lo:hi], func(e edit) bool { return e.obf }) {
		return acc
	}
	merged := cur[lo]
	if hi-lo == 1 && merged.s <= c.s && c.e <= merged.e {
		return acc
	}
	if c.rule == ruleScanner && cur[hi-1].e >= c.e {
		// A generated rule's match is the whole token, prefix and all;
		// the rule that claimed its body first kept the prefix, which
		// says what kind of credential was there.
		return acc
	}
	if c.fallback {
		// Masked only where no rule that knows the value's format claimed
		// it; that rule's edit stands as it is.
		return acc
	}
	merged.s = min(merged.s, c.s)
	merged.e = max(cur[hi-1].e, c.e)
	if merged.e == cur[hi-1].e {
		merged.open = cur[hi-1].open
	} else {
		merged.open = c.open
	}
	if merged.repl == "" {
		merged.repl = c.repl
	}
	return slices.Replace(acc, base+lo, base+hi, merged)
}
