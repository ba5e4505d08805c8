package redact

import "bytes"

// Node formats known by name rather than by a key: the credentials a
// Kubernetes node's own tools write in their own syntax. Counted under
// node-credential.

// nodeKeyValue handles forms of a secret key the key/value rule does not
// know, starting after the key (line[i:], the first non-blank at j):
// iscsiadm's "-n node.session.auth.password -v SECRET" (also --value=),
// and a URL-encoded "password%3DSECRET". It reports whether it handled the
// key.
func (p *pass) nodeKeyValue(name []byte, i, j int) bool {
	line := p.line
	switch {
	case i < len(line) && hasFoldPrefix(line, i, "%3d"):
		rule := p.w.r.classifyKey(name, formAssign)
		if rule < 0 {
			return false
		}
		vs := i + 3
		ve := vs
		for ve < len(line) && !isStop(line[ve]) && !hasFoldPrefix(line, ve, "%26") && line[ve] != '#' {
			ve++
		}
		p.valueSpan(vs, ve, rule, contStop)
		return true
	case j > i && j+2 < len(line) && line[j] == '-' && (line[j+1] == 'v' && isSpace(line[j+2]) || hasFoldPrefix(line, j, "--value")):
		// iscsiadm -m node ... -o update -n node.session.auth.password -v PASS
		rule := p.w.r.classifyKey(name, formFlag)
		if rule < 0 {
			return false
		}
		vs := j + 2
		if line[j+1] == '-' {
			vs = j + len("--value")
			if vs < len(line) && line[vs] == '=' {
				vs++
			}
		}
		vs = skipSpace(line, vs)
		if vs >= len(line) {
			return true
		}
		var q byte
		if line[vs] == '"' || line[vs] == '\'' {
			q = line[vs]
			vs++
		}
		ve := argEnd(line, vs)
		if q != 0 {
			if k := bytes.IndexByte(line[vs:], q); k >= 0 {
				ve = vs + k
			}
		}
		p.valueSpan(vs, ve, rule, contStop)
		return true
	}
	return false
}

// bootstrapTokens: kubeadm bootstrap tokens ([a-z0-9]{6}.[a-z0-9]{16},
// with a digit) anywhere (a cloud-init runcmd or write_files, a join
// script, a kubelet log). Once per piece; the pattern has no literal for
// the automaton, so every '.' is looked at, most rejected at the byte
// after it.
func (p *pass) bootstrapTokens() {
	if p.bootDone {
		return
	}
	p.bootDone = true
	line := p.line
	if len(line) < 23 {
		return
	}
	for _, i := range p.findDots() {
		if i < 6 {
			continue
		}
		if i+17 > len(line) {
			return
		}
		if c := line[i+1]; !isDigit(c) && (c < 'a' || c > 'z') {
			continue
		}
		s, e := i-6, i+17
		if s > 0 && (isAlnum(line[s-1]) || line[s-1] == '.' || line[s-1] == '-' || line[s-1] == '_') ||
			e < len(line) && (isAlnum(line[e]) || line[e] == '-' || line[e] == '_') {
			continue
		}
		ok, digit := true, false
		for k := s; k < e && ok; k++ {
			if k == i {
				continue
			}
			c := line[k]
			ok = isDigit(c) || 'a' <= c && c <= 'z'
			digit = digit || isDigit(c)
		}
		if ok && digit {
			p.redact(s, e, ruleNode, contNone)
		}
	}
}

// passwordHash: a crypt(3) or htpasswd hash ($1$, $5$, $6$, $y$, $2y$,
// $apr1$, $argon2..., {SHA}, {SSHA}) after "user:" (htpasswd, /etc/shadow,
// a user's passwd field in cloud-init) or as a value. The hash goes to the
// next ':' or blank.
func (p *pass) passwordHash(s, e int) {
	line := p.line
	if s > 0 {
		switch line[s-1] {
		case ':', ' ', '\t', '"', '\'', '=':
		default:
			return
		}
	}
	ve := e
	for ve < len(line) && line[ve] > ' ' && line[ve] < 0x7f && line[ve] != ':' && line[ve] != '"' && line[ve] != '\'' && line[ve] != ',' {
		ve++
	}
	if ve-e < 8 {
		return
	}
	p.redact(s, ve, ruleNode, contStop)
}

// oracleCreds: Oracle's user/password@db (sqlplus scott/tiger@orcl, a
// connect string in an environment variable). The '@' was found at at;
// the password is the run before it back to a '/' that follows a user
// name starting a word. An image digest (repo/name@sha256:...) is none.
func (p *pass) oracleCreds(at int) {
	line := p.line
	if at+1 >= len(line) || hasFoldPrefix(line, at+1, "sha256:") || hasFoldPrefix(line, at+1, "sha512:") {
		return
	}
	if c := line[at+1]; !isAlnum(c) && c != '/' && c != '(' && c != '_' {
		return
	}
	ps := at
	for ps > 0 && line[ps-1] > ' ' && line[ps-1] < 0x7f && line[ps-1] != '/' && line[ps-1] != '@' && line[ps-1] != ':' &&
		line[ps-1] != '"' && line[ps-1] != '\'' && line[ps-1] != '=' {
		ps--
	}
	if at-ps < 2 || ps == 0 || line[ps-1] != '/' {
		return
	}
	us := ps - 1
	for us > 0 && (isAlnum(line[us-1]) || line[us-1] == '_' || line[us-1] == '$' || line[us-1] == '#') {
		us--
	}
	if ps-1-us < 2 || !isAlpha(line[us]) {
		return
	}
	if us > 0 {
		switch line[us-1] {
		case ' ', '\t', '"', '\'', '=', '(', 0:
		default:
			return
		}
	}
	p.valueSpan(ps, at, ruleNode, contNone)
}

// webhookPath: the secret path segments of a webhook URL (Slack, Discord,
// Teams, Mattermost, any ".../hooks/<secret>"): every segment after the
// hooks part that looks generated.
func (p *pass) webhookPath(e int) {
	line := p.line
	i := e
	for i < len(line) {
		s := i
		for i < len(line) && !isSpace(line[i]) && line[i] != '/' && line[i] != '?' && line[i] != '#' &&
			line[i] != '"' && line[i] != '\'' && line[i] != 0 && line[i] != '&' {
			i++
		}
		if seg := line[s:i]; len(seg) >= 16 && secretShaped(seg, 16) || len(seg) >= 24 && shannon(seg) >= 3.5 {
			p.redact(s, i, ruleNode, contNone)
		}
		if i >= len(line) || line[i] != '/' {
			return
		}
		i++
	}
}
