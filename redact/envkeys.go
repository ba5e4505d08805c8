package redact

// Environments and log lines that name their secret: see keyValue.

// envContext reports whether the key at qs is a variable of an
// environment: first on its line (an env file, /etc/default/*), after
// "export", or after a systemd unit's "Environment=" (quoted or not).
func (p *pass) envContext(qs int) bool {
	line := p.line
	j := qs
	if j > 0 && (line[j-1] == '"' || line[j-1] == '\'') {
		j--
	}
	const env = "environment="
	if j >= len(env) && foldEq(line[j-len(env):j], env) {
		return true
	}
	k := j
	for k > 0 && isSpace(line[k-1]) {
		k--
	}
	if k < j && k >= 6 && foldEq(line[k-6:k], "export") && (k == 6 || isSpace(line[k-7])) {
		j = k - 6
	}
	return p.start && (commentedKeyStart(line) == j || p.atTextStart(j))
}

// plainValue reports whether the value at vs is something other than a
// credential whatever its key says: a path, a number, a boolean.
func plainValue(line []byte, vs int) bool {
	if vs < len(line) && (line[vs] == '"' || line[vs] == '\'') {
		vs++
	}
	e := vs
	for e < len(line) && !isSpace(line[e]) && line[e] != '"' && line[e] != '\'' {
		e++
	}
	v := line[vs:e]
	if len(v) == 0 || v[0] == '/' || v[0] == '~' || v[0] == '.' {
		return true
	}
	digits := true
	for _, c := range v {
		digits = digits && isDigit(c)
	}
	for _, w := range []string{"true", "false", "yes", "no", "none", "null", "on", "off"} {
		if foldEq(v, w) {
			return true
		}
	}
	return digits
}

// verbColon returns where the ':' is when line[j:] is one of a few words
// that stand between a secret's name and its value in a log line ("used:",
// "is:", "value:"), or -1.
func verbColon(line []byte, j int) int {
	e := j
	for e < len(line) && isAlpha(line[e]) {
		e++
	}
	if e == j || e+1 >= len(line) || line[e] != ':' || !isSpace(line[e+1]) {
		return -1
	}
	for _, w := range []string{"used", "is", "was", "value", "set", "given", "sent"} {
		if foldEq(line[j:e], w) {
			return e
		}
	}
	return -1
}
