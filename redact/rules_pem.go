package redact

import (
	"bytes"
	"encoding/base64"
)

// Rules for key material spread over a block: PEM private keys, on one
// line or many, and the base64 data of Secrets and kubeconfigs kept inline.

// pemBegin: "-----BEGIN <type> PRIVATE KEY-----". When the END is on the
// same line (a key kept in a JSON string with literal \n), the body is
// replaced in place; otherwise the Writer drops the body lines that follow.
// Certificates and public keys are not secret and stay.
func (p *pass) pemBegin(s, e int) {
	line := p.line
	if e >= len(line) || line[e] != ' ' {
		return
	}
	j := e + 1
	for j < len(line) && ('A' <= line[j] && line[j] <= 'Z' || isDigit(line[j]) || line[j] == ' ') {
		j++
	}
	if !bytes.HasPrefix(line[j:], []byte("-----")) || !bytes.Contains(line[e:j], []byte("PRIVATE KEY")) {
		return
	}
	body := j + 5
	if end := p.nextEnd(body); end >= 0 {
		if b := line[body:end]; pemBodyLike(b) && pemBodyContent(b) && b64Count(b) >= 16 {
			p.add(body, end, rulePEM, prioOf(rulePEM), contNone, Marker)
		}
		return
	}
	// The body follows on the next lines, or on this one after a literal
	// \n (a key in a JSON string, cut at MaxLine). Anything else after the
	// armour is prose that mentions it, not a key.
	rest := line[skipSpace(line, body):]
	inline := bytes.HasPrefix(rest, []byte(`\n`)) || bytes.HasPrefix(rest, []byte(`\r\n`)) || bytes.HasPrefix(rest, []byte(`\\n`))
	if len(rest) > 0 && !inline && !isMarkerLine(rest) {
		return
	}
	st := &p.w.st
	st.block = blockPEM
	st.blockMarked, st.blockCounted, st.blockBody = false, false, false
	st.blockPrefixed = p.textStart() > 0
	if inline && pemBodyContent(rest) {
		// The body starts on this line: replace it here, count it once.
		p.add(body, len(line), rulePEM, prioOf(rulePEM), contNone, Marker)
		st.blockMarked, st.blockCounted, st.blockBody = true, true, true
	}
}

// nextEnd returns the index of the first "-----END " at or after i, or
// -1. The answer is remembered, so a line of many BEGINs is searched once.
func (p *pass) nextEnd(i int) int {
	if p.endFrm < 0 || i < p.endFrm || p.endAt >= 0 && p.endAt < i {
		p.endFrm = i
		p.endAt = bytes.Index(p.line[i:], []byte("-----END "))
		if p.endAt >= 0 {
			p.endAt += i
		}
	}
	return p.endAt
}

// b64Count counts base64 alphabet bytes.
func b64Count(b []byte) int {
	n := 0
	for _, c := range b {
		if isB64(c) {
			n++
		}
	}
	return n
}

// b64PEM: a PEM private key stored base64-encoded (kubeconfig
// client-key-data, a Secret's tls.key). Decoding the start tells a key from
// a certificate, which stays. A key wrapped over several lines (base64
// output) has its following lines dropped by the Writer.
func (p *pass) b64PEM(s int) {
	line := p.line
	if s > 0 && isB64(line[s-1]) {
		return
	}
	e := s
	for e < len(line) && (isB64(line[e]) || line[e] == '=') {
		e++
	}
	head := line[s:e]
	if len(head) > 96 {
		head = head[:96]
	}
	dec := make([]byte, 72)
	n, _ := base64.StdEncoding.Decode(dec, head[:len(head)&^3])
	if !bytes.Contains(dec[:n], []byte("PRIVATE KEY")) {
		return
	}
	p.add(s, e, rulePEM, prioOf(ruleJWT), contStop, Marker)
	if width := e - s; trimRight(line, len(line)) == e && line[e-1] != '=' && width%4 == 0 && width >= 60 {
		// A long, unpadded run that ends the line was wrapped (base64
		// wraps at 76, openssl at 64): the key goes on below, unless its
		// END armour is in this part already.
		all := make([]byte, base64.StdEncoding.DecodedLen(width))
		n, _ := base64.StdEncoding.Decode(all, line[s:e])
		if !bytes.Contains(all[:n], []byte("-----END")) {
			st := &p.w.st
			st.block = blockB64
			st.blockMarked, st.blockCounted = true, true
			st.b64Width = width
		}
	}
}

// inlineData: "data":{...} or "stringData":{...} on one line, as in a
// kubectl.kubernetes.io/last-applied-configuration annotation (where the
// quotes are escaped). Values are redacted when the object is a Secret, or
// look like base64 (Secret data always is), or are stringData.
func (p *pass) inlineData(after int, stringData, esc bool) {
	line := p.line
	i := skipSpace(line, after)
	if i >= len(line) || line[i] != '{' {
		return
	}
	i++
	kind := p.inlineKind()
	if !stringData && kind == 2 {
		return // a ConfigMap's data is not secret (its secret-named keys still are)
	}
	secret := stringData || kind == 1
	str := func(i int) (int, int, bool) {
		if esc {
			if i+1 < len(line) && line[i] == '\\' && line[i+1] == '"' {
				e := closeEscQuote(line, i+2)
				if e+1 < len(line) {
					return i + 2, e, true
				}
			}
			return 0, 0, false
		}
		if i < len(line) && line[i] == '"' {
			if e := closeQuote(line, i+1, '"'); e >= 0 {
				return i + 1, e, true
			}
		}
		return 0, 0, false
	}
	for n := 0; n < 10000; n++ {
		i = skipSpace(line, i)
		if i < len(line) && line[i] == ',' {
			i = skipSpace(line, i+1)
		}
		_, ke, ok := str(i)
		if !ok {
			return
		}
		i = ke + 1
		if esc {
			i++
		}
		i = skipSpace(line, i)
		if i >= len(line) || line[i] != ':' {
			return
		}
		vs, ve, ok := str(skipSpace(line, i+1))
		if !ok {
			return
		}
		if v := line[vs:ve]; secret || base64Shaped(v) {
			open := contDQuote
			if esc {
				open = contEscQuote
			}
			if len(v) > 0 && !bytes.Contains(v, []byte(Marker)) {
				p.add(vs, ve, ruleSecretData, prioData, open, Marker)
			}
		}
		i = ve + 1
		if esc {
			i++
		}
	}
}

// inlineKind tells what kind of object a single-line JSON document is:
// 1 a Secret, 2 another kind, 0 not said.
func (p *pass) inlineKind() int8 {
	if p.kindS == 0 {
		p.kindS = 3
		for _, k := range []string{`"kind":"`, `"kind": "`, `\"kind\":\"`} {
			i := bytes.Index(p.line, []byte(k))
			if i < 0 {
				continue
			}
			v := p.line[i+len(k):]
			if bytes.HasPrefix(v, []byte("Secret")) && len(v) > 6 && (v[6] == '"' || v[6] == '\\') {
				p.kindS = 1
			} else {
				p.kindS = 2
			}
			break
		}
	}
	return p.kindS % 3
}

// jsonString returns the index just past the JSON string starting at i,
// or -1.
func (p *pass) jsonString(i int) int {
	if i >= len(p.line) || p.line[i] != '"' {
		return -1
	}
	e := closeQuote(p.line, i+1, '"')
	if e < 0 {
		return -1
	}
	return e + 1
}
