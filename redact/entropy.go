package redact

import "math"

// entropyAssignment: "NAME=value" or "NAME = 'value'" opening a line of a
// configuration or environment file, where the name says nothing (mimi=,
// SUPER_SEECRET_VALUE=) but the value is a long random string of the
// base64 alphabets with upper case, lower case and digits: what generated
// credentials look like and what paths, flags, UUIDs, digests and words do
// not. Keyed rules run first and claim the values they know.
func (p *pass) entropyAssignment() {
	line := p.line
	ks := indentOf(line)
	i := ks
	for i < len(line) && (isAlnum(line[i]) || line[i] == '_') {
		i++
	}
	if i == ks || i-ks > 64 {
		return
	}
	j := skipBlanks(line, i)
	if j >= len(line) || line[j] != '=' {
		return
	}
	vs := skipBlanks(line, j+1)
	var q byte
	if vs < len(line) && (line[vs] == '"' || line[vs] == '\'') {
		q = line[vs]
		vs++
	}
	ve := vs
	// Dots too: tokens of dotted parts (a Discord bot token, a JWT
	// without its header) are one value.
	for ve < len(line) && (isB64(line[ve]) || isB64URL(line[ve]) || line[ve] == '.') {
		ve++
	}
	pad := ve
	for pad < len(line) && line[pad] == '=' {
		pad++
	}
	rest := pad
	if q != 0 {
		if rest >= len(line) || line[rest] != q {
			return
		}
		rest++
	}
	if trimRight(line, len(line)) != rest || !randomLooking(line[vs:ve]) || notSecretName(line[ks:i]) {
		return
	}
	p.redact(vs, pad, ruleEntropy, contStop)
}

// randomLooking: at least 20 bytes, upper case, lower case and digits, and
// a Shannon entropy of at least 4 bits a byte (random base64 has about 5;
// English words and hex digests have less than 4).
func randomLooking(v []byte) bool {
	if len(v) < 20 || len(v) > 4096 {
		return false
	}
	var n [256]int
	var up, lo, dg bool
	for _, b := range v {
		n[b]++
		switch {
		case 'A' <= b && b <= 'Z':
			up = true
		case 'a' <= b && b <= 'z':
			lo = true
		case isDigit(b):
			dg = true
		}
	}
	if !up || !lo || !dg {
		return false
	}
	h := 0.0
	l := float64(len(v))
	for _, c := range n {
		if c > 0 {
			f := float64(c) / l
			h -= f * math.Log2(f)
		}
	}
	return h >= 4
}

// notSecretName reports a name that says its value is not secret: a CSRF
// token, a reference (…Id, …Name, …File).
func notSecretName(key []byte) bool {
	var buf [96]byte
	n := normKey(key, &buf)
	if hasSuffixStr(n, "csrftoken") || hasSuffixStr(n, "xsrftoken") {
		return true
	}
	for _, s := range metaSuffixes {
		if hasSuffixStr(n, s) {
			return true
		}
	}
	for _, s := range metaWords {
		if wordSuffix(key, s) {
			return true
		}
	}
	return false
}
