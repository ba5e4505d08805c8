package redact

import (
	"bytes"
	"math"
)

// Secrets a daemon prints after the word that names them, with no
// separator: "using api key Kx8a...", "sync with key a293...-us2", "server
// token 368a...". Prose uses these words for many things ("key not found",
// "token expired", "secret csi-rbd-secret not found"), so only a value
// that looks generated goes: long, letters and digits, spread over many
// characters, and not a name (dashed ids, paths, URLs, host names).

// proseValue reads the word at line[j:] after the secret word name (the
// key of keyValue, found at qs) and masks it when it looks generated. It
// reports whether it did.
func (p *pass) proseValue(qs, j int) bool {
	line := p.line
	if publicBefore(line, qs) {
		return false // "public key AAAAC3...", "host key ..."
	}
	ve := j
	for ve < len(line) && !isSpace(line[ve]) && line[ve] != 0 && line[ve] != '"' && line[ve] != '\'' &&
		line[ve] != ')' && line[ve] != '[' && line[ve] != ']' && line[ve] != '}' && line[ve] != ',' && line[ve] != ';' && line[ve] != '<' && line[ve] != '>' {
		ve++
	}
	if ve < len(line) && line[ve] == '[' {
		return false // "token0001=[REDACTED]": a key whose value went already
	}
	for ve > j && (line[ve-1] == '.' || line[ve-1] == ':') {
		ve-- // the end of a sentence
	}
	if !proseSecret(line[j:ve]) {
		return false
	}
	// Counted as a generated value beside a secret word: the rules that
	// know the value's own format (vendor prefixes, JWTs, AWS key ids)
	// claim it first and keep what they keep.
	p.fallback(j, ve, ruleEntropy)
	return true
}

// publicBefore: the word before the key at qs says the key is public.
func publicBefore(line []byte, qs int) bool {
	e := qs
	for e > 0 && isSpace(line[e-1]) {
		e--
	}
	s := e
	for s > 0 && isAlnum(line[s-1]) {
		s--
	}
	w := line[s:e]
	return foldEq(w, "public") || foldEq(w, "pub") || foldEq(w, "host") || foldEq(w, "ssh") || foldEq(w, "gpg") || foldEq(w, "pgp")
}

// proseSecret: what a generated credential looks like when nothing around
// it says so beyond the word before it.
func proseSecret(v []byte) bool {
	if len(v) < 16 || len(v) > 4096 || v[0] == '/' || v[0] == '.' || v[0] == '$' || v[0] == '<' || v[0] == '{' {
		return false
	}
	var n [256]int
	letter, digit, upper, lower := false, false, false, false
	dashes, slashes := 0, 0
	for _, b := range v {
		n[b]++
		switch {
		case 'A' <= b && b <= 'Z':
			letter, upper = true, true
		case 'a' <= b && b <= 'z':
			letter, lower = true, true
		case isDigit(b):
			digit = true
		case b == '-':
			dashes++
		case b == '/':
			slashes++
		case b == ':':
			return false // "sha256:...", "host:port", a URL
		case b == '@' || b == '%' || b == '*':
			return false
		}
	}
	if !letter || !digit || dashes > 2 {
		return false // words; ids and names made of dashed parts
	}
	if slashes > 0 && !(upper && lower) {
		return false // namespace/name, a path
	}
	if !upper && isDottedName(v) {
		return false // a host or a Go package
	}
	h, l := 0.0, float64(len(v))
	for _, c := range n {
		if c > 0 {
			f := float64(c) / l
			h -= f * math.Log2(f)
		}
	}
	return h >= 3.3
}

// isDottedName: lower-case labels joined by dots (node-1.example.com,
// csi.ceph.com, v1.28.3).
func isDottedName(v []byte) bool {
	dots := 0
	for _, b := range v {
		if b == '.' {
			dots++
		}
	}
	return dots > 0
}

// loginArg handles "<program> login <token>" (vault login s.Xy..., a CLI
// logging in with a token given as its argument): line[s:e] is " login ".
// The program is the first word of the line's text or of a table's
// column; the argument goes
// unless it is a flag, a URL or a host (docker login registry.example.com
// names a registry, not a secret).
func (p *pass) loginArg(s, e int) {
	line := p.line
	ts := 0
	if p.start {
		ts = p.textStart()
	}
	ts = skipBlanks(line, ts)
	if ts >= s {
		return
	}
	// The program: the first word of the text, or a word that starts a
	// column of a table (after a tab or two spaces, as ps prints its
	// COMMAND); anything else is prose.
	ps := s
	for ps > ts && !isSpace(line[ps-1]) {
		ps--
	}
	if ps > ts && line[ps-1] != '\t' && !(ps-2 >= ts && line[ps-2] == ' ') {
		return
	}
	vs := e
	ve := vs
	for ve < len(line) && !isSpace(line[ve]) && line[ve] != 0 && line[ve] != '"' && line[ve] != '\'' {
		ve++
	}
	v := line[vs:ve]
	if len(v) < 8 || v[0] == '-' || containsStr(v, "://") || containsStr(v, "=") || hostLike(v) {
		return
	}
	upper, lower, other := false, false, false
	for _, b := range v {
		switch {
		case 'A' <= b && b <= 'Z':
			upper = true
		case 'a' <= b && b <= 'z':
			lower = true
		default:
			other = true // digits, '_', '.'
		}
	}
	if !other && !(upper && lower) {
		return // a word
	}
	p.fallback(vs, ve, ruleNode)
}

// hostLike: a host name or address, with an optional port and path
// (localhost, registry.example.com:5000/team, 10.0.0.1).
func hostLike(v []byte) bool {
	if i := bytes.IndexByte(v, '/'); i >= 0 {
		v = v[:i]
	}
	if i := bytes.IndexByte(v, ':'); i >= 0 {
		v = v[:i]
	}
	if foldEq(v, "localhost") {
		return true
	}
	dots := 0
	for _, b := range v {
		switch {
		case b == '.':
			dots++
		case 'a' <= b && b <= 'z', isDigit(b), b == '-':
		default:
			return false
		}
	}
	return dots > 0
}

// dottedTokens masks generated tokens made of three or more base64url
// parts joined by dots, anywhere: a Discord bot token
// (<base64 id>.<time>.<HMAC>), a JWT whose header was cut off, a signed
// session. Names made of dotted parts (hosts, Go packages, versions,
// file.go:12) have short or lower-case parts; these have a long first
// and last part of mixed case and digits.
func (p *pass) dottedTokens() {
	line := p.line
	if len(line) < 50 {
		return // shorter than the shortest token
	}
	dots := p.findDots()
	if len(dots) < 2 {
		return // three parts at least
	}
	i := 0
	for _, dot := range dots {
		if dot < i {
			continue // inside the parts read from an earlier dot
		}
		// The cheap tests first, as almost every dot of a log line ends a
		// file name, a host's label or a number: a first part needs 20
		// bytes before the dot, a second part 5 base64url bytes and a dot
		// after it.
		if dot < 20 {
			continue
		}
		f := dot + 1
		for f < len(line) && f-dot <= 5 && isB64URL(line[f]) {
			f++
		}
		if f-dot-1 < 5 {
			continue
		}
		s := dot
		for s > 0 && dot-s < 256 && isB64URL(line[s-1]) {
			s--
		}
		if dot-s < 20 || s > 0 && (line[s-1] == '.' || isB64URL(line[s-1])) {
			continue
		}
		if hasPrefixStr(line[s:], "eyJ") {
			continue // a JWT is the JWT rule's (its later dots follow a part, not a first part)
		}
		// The parts after the first.
		parts, e, last := 1, dot, 0
		for e < len(line) && line[e] == '.' {
			j := e + 1
			for j < len(line) && isB64URL(line[j]) {
				j++
			}
			if j-e-1 < 5 {
				break
			}
			parts++
			last = j - e - 1
			e = j
		}
		i = max(e, dot+1)
		if parts < 3 || last < 20 || e-s < 50 || e < len(line) && (line[e] == '/' || line[e] == '=') {
			continue
		}
		if s >= p.coverS && e <= p.coverE {
			continue // a rule masks it already
		}
		if !randomLooking(line[s:e]) {
			continue
		}
		p.fallback(s, e, ruleEntropy)
	}
}

// findDots lists where the piece's dots are, for the rules that start at
// a dot (dotted tokens, bootstrap tokens): the keyword matcher's scan
// lists them (kwDot) as it reads the line, into a slice the pass keeps;
// this finds them when no scan ran.
func (p *pass) findDots() []int {
	if p.dotsDone {
		return p.dots
	}
	p.dotsDone = true
	line := p.line
	p.dots = p.dots[:0]
	for i := 0; ; {
		k := bytes.IndexByte(line[i:], '.')
		if k < 0 {
			return p.dots
		}
		p.dots = append(p.dots, i+k)
		i += k + 1
	}
}
