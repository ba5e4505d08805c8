package redact

import (
	"bytes"
	"encoding/base64"
)

// Rules that recognise a credential by its name or its shape: Kubernetes env
// entries named like a secret, Authorization headers, bearer tokens, JWTs,
// cloud access keys, Ceph keys, credentials in URLs and SAS signatures.

// envName handles a stem inside the value of a "name" key: a Kubernetes env
// entry such as {"name":"DB_PASSWORD","value":"x"}, "- name: DB_PASSWORD"
// followed by "  value: x", or EnvVar{Name:DB_PASSWORD,Value:x,}. It reports
// whether line[ks:ke] was such a name.
func (p *pass) envName(ks, ke int) bool {
	line := p.line
	j := ks
	quoted, esc := false, false
	if j > 0 && line[j-1] == '"' {
		quoted = true
		j--
		if j > 0 && line[j-1] == '\\' {
			esc = true
			j--
		}
	}
	for j > 0 && line[j-1] == ' ' {
		j--
	}
	if j == 0 || line[j-1] != ':' {
		return false
	}
	j--
	for j > 0 && line[j-1] == ' ' {
		j--
	}
	if quoted {
		if j == 0 || line[j-1] != '"' {
			return false
		}
		j--
		if esc {
			if j == 0 || line[j-1] != '\\' {
				return false
			}
			j--
		}
	}
	if j < 4 || !foldEq(line[j-4:j], "name") || j > 4 && isKeyByte(line[j-5]) {
		return false
	}
	nameCol := j - 4 // where an unquoted YAML "name:" starts
	rule := p.w.r.classifyKey(line[ks:ke], formAssign)
	if rule < 0 {
		return true
	}
	if rule < numBuiltin {
		rule = ruleEnvSecret
	}
	i := ke
	if quoted {
		switch {
		case !esc && i < len(line) && line[i] == '"':
			i++
		case esc && i+1 < len(line) && line[i] == '\\' && line[i+1] == '"':
			i += 2
		default:
			return true
		}
	}
	i = skipSpace(line, i)
	if i >= len(line) {
		if p.start && !quoted && keyStart(line) == nameCol {
			p.w.st.envIndent = nameCol // "value:" comes on the next line
		}
		return true
	}
	if line[i] == ',' {
		i = skipSpace(line, i+1)
		if i >= len(line) && quoted && !esc && p.start {
			// Pretty-printed JSON: "name": "DB_PASSWORD", and its
			// "value" on the next line.
			p.w.st.nextLine = nextEnvValue
			return true
		}
	} else if quoted || i == ke {
		return true
	}
	switch {
	case i < len(line) && line[i] == '"':
		i++
	case i+1 < len(line) && line[i] == '\\' && line[i+1] == '"':
		i += 2
	}
	if !hasFoldPrefix(line, i, "value") {
		return true
	}
	i += len("value")
	switch {
	case i < len(line) && line[i] == '"':
		i++
	case i+1 < len(line) && line[i] == '\\' && line[i+1] == '"':
		i += 2
	}
	i = skipSpace(line, i)
	if i >= len(line) || line[i] != ':' {
		return true
	}
	p.value(skipSpace(line, i+1), rule, false, 0)
	return true
}

// yamlValue redacts the value of a YAML key at column ks whose ':' ends at
// after (the "value:" line of an env entry).
func (p *pass) yamlValue(ks, after int, rule int32) {
	p.value(skipSpace(p.line, after), rule, true, ks)
}

// authHeader: "Authorization: Bearer x", "authorization=x",
// "Authorization":["Basic x"], -H 'Authorization: Digest ...'. The scheme
// stays; the credentials go.
func (p *pass) authHeader(ks, ke int) {
	line := p.line
	if ks > 0 && isAlnum(line[ks-1]) || ke < len(line) && isKeyByte(line[ke]) {
		return // "authorization-mode", "authorizations"
	}
	i := ke
	switch {
	case i < len(line) && (line[i] == '"' || line[i] == '\''):
		i++
	case i+1 < len(line) && line[i] == '\\' && line[i+1] == '"':
		i += 2
	}
	i = skipSpace(line, i)
	if i >= len(line) || line[i] != ':' && line[i] != '=' {
		return
	}
	i = skipSpace(line, i+1)
	if bytes.HasPrefix(line[i:], []byte(Marker)) {
		return // redacted before
	}
	var closer byte
	esc := false
	if i < len(line) && line[i] == '[' {
		closer = ']'
		i++
	}
	switch {
	case i < len(line) && (line[i] == '"' || line[i] == '\''):
		closer = line[i]
		i++
	case i+1 < len(line) && line[i] == '\\' && line[i+1] == '"':
		esc = true
		i += 2
	}
	i = skipSpace(line, i)
	ws := i
	for i < len(line) && (isAlnum(line[i]) || line[i] == '-') {
		i++
	}
	word := line[ws:i]
	vs := ws
	single := true
	if bytes.HasPrefix(line[skipSpace(line, i):], []byte(Marker)) {
		return // redacted before
	}
	if i < len(line) && line[i] == ' ' && len(word) > 0 && len(word) <= 24 {
		if j := skipSpace(line, i); j < len(line) && !isStop(line[j]) {
			vs = j
			single = false
			for _, s := range []string{"bearer", "basic", "token", "negotiate", "apikey"} {
				if foldEq(word, s) {
					single = true
				}
			}
		}
	}
	var ve int
	switch {
	case single:
		ve = vs
		for ve < len(line) && !isStop(line[ve]) {
			ve++
		}
		if vs == ws && (foldEq(line[vs:ve], "bearer") || foldEq(line[vs:ve], "basic")) {
			return // a scheme with no credentials
		}
	case esc:
		ve = closeEscQuote(line, vs)
	case closer != 0:
		if ve = closeQuote(line, vs, closer); ve < 0 {
			ve = len(line)
		}
	default:
		ve = trimRight(line, len(line))
	}
	p.valueSpan(vs, ve, ruleAuthHeader, contStop)
}

// bearer: "Bearer <token>" anywhere. The token must look like one (a digit,
// or long) so that "bearer authentication" and "Bearer token" stay.
func (p *pass) bearer(ks, ke int) {
	line := p.line
	if ks > 0 && isAlnum(line[ks-1]) || ke >= len(line) || line[ke] != ' ' && line[ke] != '\t' {
		return
	}
	vs := skipSpace(line, ke)
	ve := vs
	digit := false
	for ve < len(line) && (isB64URL(line[ve]) || isB64(line[ve]) || line[ve] == '.' || line[ve] == '~') {
		digit = digit || isDigit(line[ve])
		ve++
	}
	for ve < len(line) && line[ve] == '=' {
		ve++
	}
	if n := ve - vs; n < 8 || !digit && n < 20 {
		return
	}
	p.redact(vs, ve, ruleBearer, contStop)
}

// b64urlRun returns the end of the base64url run starting at i.
func b64urlRun(line []byte, i int) int {
	for i < len(line) && isB64URL(line[i]) {
		i++
	}
	return i
}

// jwt: header.payload.signature, each base64url; the header of every JWT
// is base64 of `{"`, "eyJ".
func (p *pass) jwt(s int) {
	line := p.line
	if s > 0 && (isB64URL(line[s-1]) || isB64(line[s-1])) {
		return
	}
	e1 := b64urlRun(line, s)
	if e1-s < 10 || e1 >= len(line) || line[e1] != '.' {
		return
	}
	if line[s+2] != 'J' {
		// A pretty-printed header ("{\n  \"alg\"..."): only a JOSE
		// header, which names its algorithm, makes this a token.
		var buf [48]byte
		n := min(e1-s, 64) &^ 3
		dec, _ := base64.RawURLEncoding.AppendDecode(buf[:0], line[s:s+n])
		if !bytes.Contains(dec, []byte(`"alg"`)) && !bytes.Contains(dec, []byte(`"typ"`)) {
			return
		}
	}
	e2 := b64urlRun(line, e1+1)
	if e2-e1-1 < 2 || e2 >= len(line) || line[e2] != '.' {
		return
	}
	end := b64urlRun(line, e2+1)
	// An encrypted JWT (JWE) has five parts.
	for n := 0; n < 2 && end < len(line) && line[end] == '.'; n++ {
		end = b64urlRun(line, end+1)
	}
	p.redact(s, end, ruleJWT, contStop)
}

// awsKeyID: AKIA (long-term), ASIA (temporary), ABIA or ACCA and 16 more
// [A-Z0-9].
func (p *pass) awsKeyID(s int) {
	line := p.line
	if s > 0 && isAlnum(line[s-1]) {
		return
	}
	e := s + 4
	for e < len(line) && e-s < 20 && ('A' <= line[e] && line[e] <= 'Z' || isDigit(line[e])) {
		e++
	}
	if e-s != 20 || e < len(line) && isAlnum(line[e]) {
		return
	}
	p.redact(s, e, ruleAWSKeyID, contNone)
}

// cephKey: a ceph secret is base64 of a 28-byte CryptoKey whose first byte
// (the type) is 1, so it always reads "AQ" + 36 characters + "==".
func (p *pass) cephKey(s int) {
	line := p.line
	if s > 0 && isB64(line[s-1]) {
		return
	}
	e := s
	for e < len(line) && isB64(line[e]) {
		e++
	}
	if e-s != 38 || e+2 > len(line) || line[e] != '=' || line[e+1] != '=' {
		return
	}
	e += 2
	if e < len(line) && (isB64(line[e]) || line[e] == '=') {
		return
	}
	p.redact(s, e, ruleCephKey, contNone)
}

// urlCreds: scheme://user:password@host. The password goes; the user name
// stays (or is obfuscated with the "user" category).
func (p *pass) urlCreds(ks, ke int) {
	line := p.line
	at := -1
	j := ke
scan:
	for ; j < len(line); j++ {
		switch b := line[j]; {
		case b == '/' || b == '?' || b == '#' || isSpace(b) || b == '"' || b == '\'' ||
			b == '<' || b == '>' || b == '\\' || b == '`' || b == 0:
			break scan
		case b == '@':
			at = j
		}
	}
	if at < 0 {
		return
	}
	info := line[ke:at]
	user := info
	if c := bytes.IndexByte(info, ':'); c >= 0 {
		user = info[:c]
		p.valueSpan(ke+c+1, at, ruleURLCreds, contNone)
	}
	p.obfUser(ke, ke+len(user))
}

// sasSig: the signature of an Azure shared access signature URL
// (...&sig=...), which is what makes the URL a credential.
func (p *pass) sasSig(ks, ke int) {
	line := p.line
	if ks == 0 || line[ks-1] != '?' && line[ks-1] != '&' && line[ks-1] != ';' {
		return
	}
	e := ke
	for e < len(line) && !isStop(line[e]) {
		e++
	}
	p.valueSpan(ke, e, ruleAzureSAS, contStop)
}
