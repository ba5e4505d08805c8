package redact

import (
	"bytes"
	"encoding/base64"
)

// The built-in rules. Each is called with the position of the keyword the
// matcher found and looks only around it; all of them are hand-written
// scanners rather than regular expressions so a line that mentions a keyword
// in passing costs a few byte comparisons.

// keyValue handles a secret stem found at line[ks:ke]: key=value,
// key: value, "key": "value", key = value (INI), --key=value, --key value,
// Key:value (Go's %+v), and Kubernetes env entries whose name is a secret.
// The key and the shape stay; only the value goes.
func (p *pass) keyValue(ks, ke int) {
	line := p.line
	if ks >= p.lastKS && ks < p.lastKE {
		return // several stems in one key ("client_secret_token")
	}
	for ks > 0 && isKeyByte(line[ks-1]) {
		ks--
	}
	for ke < len(line) && isKeyByte(line[ke]) {
		ke++
	}
	p.lastKS, p.lastKE = ks, ke
	if p.envName(ks, ke) {
		return
	}
	key := line[ks:ke]
	dashes := 0
	for dashes < len(key) && key[dashes] == '-' {
		dashes++
	}
	name := key[dashes:]
	if len(name) == 0 {
		return
	}

	// A quoted key: "key", 'key', or \"key\" inside a JSON string.
	qs, i, quoted := ks, ke, false
	if ks > 0 && (line[ks-1] == '"' || line[ks-1] == '\'') {
		q := line[ks-1]
		switch {
		case i < len(line) && line[i] == q:
			i++
			quoted, qs = true, ks-1
		case q == '"' && ks > 1 && line[ks-2] == '\\' && i+1 < len(line) && line[i] == '\\' && line[i+1] == '"':
			i += 2
			quoted, qs = true, ks-2
		}
	}
	if p.markup(ks, ke, qs, i, quoted, name) {
		return
	}
	lineStart := p.start && (commentedKeyStart(line) == qs || p.atTextStart(qs))
	// A key right after an opening quote starts the quoted text: a header
	// given to curl (-H "apikey: x"), a logfmt value (header="Token: x").
	// Its value ends at the closing quote and must look generated.
	segEnd := -1
	if !lineStart && !quoted && qs > 0 && (line[qs-1] == '"' || line[qs-1] == '\'') &&
		(qs == 1 || isSpace(line[qs-2]) || line[qs-2] == '=' || line[qs-2] == '(' || line[qs-2] == '[' || line[qs-2] == ',') {
		lineStart = true
		if segEnd = closeQuote(line, qs, line[qs-1]); segEnd < 0 {
			segEnd = len(line)
		}
	}
	strict := segEnd >= 0
	p.segEnd = segEnd
	flow := flowContext(line, qs)

	j := skipSpace(line, i)
	spacedBefore := j > i
	var sep byte
	if j < len(line) && (line[j] == '=' || line[j] == ':') {
		sep = line[j]
	}
	form := formField
	vs := j + 1
	if j+1 < len(line) && (line[j] == '=' && line[j+1] == '>' || line[j] == ':' && line[j+1] == '=') {
		// "password" => "x" (Perl, PHP, Ruby), :password => "x",
		// password := "x" (Go): a field, whatever the spacing.
		if line[j] == ':' || quoted || qs > 0 && line[qs-1] == ':' || lineStart {
			if rule := p.w.r.classifyKey(name, formField); rule >= 0 {
				p.value(skipSpace(line, j+2), rule, false, qs)
			}
		}
		return
	}
	switch {
	case sep == '=':
		if vs < len(line) && line[vs] == '=' {
			return // "==": a comparison, not an assignment
		}
		spaced := spacedBefore || vs < len(line) && isSpace(line[vs])
		if spaced && !lineStart {
			return // "token = x" in prose; INI files have the key first
		}
		switch {
		case dashes > 0:
			form = formFlag
		case !spaced && !quoted:
			form = formAssign
		}
		if !spaced {
			strict = false // KEY=value says what it is wherever it stands
		}
	case sep == ':':
		if vs < len(line) && (line[vs] == ':' || line[vs] == '/') {
			return // "::" or a URL scheme
		}
		spacedAfter := vs < len(line) && isSpace(line[vs])
		if strict && !spacedBefore && !spacedAfter && dashes == 0 && identOnly(name) {
			strict = false // Key:value, as Go prints it, wherever it stands
		}
		switch {
		case quoted, lineStart, flow:
		case !spacedBefore && !spacedAfter && dashes == 0 && identOnly(name):
			// Key:value as Go prints structs and maps.
		case spacedAfter && !spacedBefore:
			// "validating token: expired" is prose; but a value that
			// looks generated is a secret all the same ("daemon config
			// sharedsecret: FaIB...").
			strict = true
		default:
			return
		}
		if quoted && !lineStart && !flow {
			// JSON's unquoted values are numbers, literals and
			// structures: `"db-creds" : secret "db-creds" not found` is
			// a message quoting a name.
			if v := skipSpace(line, vs); v < len(line) && isAlpha(line[v]) && !foldEq(line[v:min(len(line), v+4)], "true") &&
				!foldEq(line[v:min(len(line), v+4)], "null") && !foldEq(line[v:min(len(line), v+5)], "false") {
				return
			}
		}
	case (dashes > 0 || callArgument(line, qs)) && quoted && j < len(line) && line[j] == ',':
		// ["--token", "value"]: a command line kept as a JSON or YAML
		// list; getenv("API_TOKEN", "default"): a call with a default.
		vs = skipSpace(line, j+1)
		if vs >= len(line) && dashes > 0 && p.start {
			// ["--token",\n "value"]: a list printed one element a line
			// (the kubelet's /pods as nodesnap indents it).
			if rule := p.w.r.classifyKey(name, formFlag); rule >= 0 {
				p.w.st.nextLine = nextFlagValue
				p.w.st.nextRule = rule
			}
			return
		}
		if vs+1 >= len(line) || line[vs] != line[qs] || line[vs+1] == '-' {
			return
		}
		if dashes > 0 {
			form = formFlag
		}
		sep = ' '
	case dashes > 0 && (spacedBefore || i < len(line) && line[i] == 0):
		// --flag value, the arguments separated by spaces or, in a raw
		// /proc/<pid>/cmdline, by NULs.
		vs = i
		for vs < len(line) && (isSpace(line[vs]) || line[vs] == 0) {
			vs++
		}
		if vs >= len(line) || line[vs] == '-' {
			return
		}
		form = formFlag
		sep = ' '
	case !strict && !quoted && dashes == 0 && spacedBefore && j < len(line) && !isStop(line[j]) &&
		(lineStart || netrcLogin(line, qs) || afterWord(line, qs, "set")):
		// "bindpw  secret" (ldap.conf, kickstart's rootpw, a .netrc's
		// "password x" line): the key, blanks and one value, nothing
		// after it; or .netrc's one-line "machine h login u password x".
		ve := j
		for ve < len(line) && !isSpace(line[ve]) {
			ve++
		}
		if !lineStart {
			if rule := p.w.r.classifyKey(name, formField); rule >= 0 {
				p.valueSpan(j, ve, rule, contStop)
			}
			return
		}
		if trimRight(line, len(line)) != ve {
			return
		}
		// A config word on a line of its own takes any value; after a log
		// prefix ("Password expired") only one that looks generated.
		configWord := commentedKeyStart(line) == qs && (foldEq(name, "password") || foldEq(name, "passwd") || foldEq(name, "pass"))
		if !configWord && !foldEq(name, "bindpw") && !foldEq(name, "rootpw") && !secretShaped(line[j:ve], 8) {
			return
		}
		if rule := p.w.r.classifyKey(name, formField); rule >= 0 {
			p.valueSpan(j, ve, rule, contStop)
		}
		return
	default:
		return
	}
	if sep == ':' && lineStart && !quoted && !flow && !strict {
		form = formYAML
	}
	rule := p.w.r.classifyKey(name, form)
	if rule < 0 {
		return
	}
	vs = skipSpace(line, vs)
	if vs < len(line) && (line[vs] == '/' || line[vs] == '~') && foldEq(name, "pwd") {
		return // $PWD is a directory
	}
	if strict {
		q := byte(0)
		if vs < len(line) && (line[vs] == '"' || line[vs] == '\'') {
			q = line[vs]
			vs++
		}
		ve := vs
		for ve < len(line) && (isB64(line[ve]) || isB64URL(line[ve]) || line[ve] == '=' || line[ve] == '.' || line[ve] == '~') {
			ve++
		}
		if segEnd >= 0 && ve > segEnd {
			ve = segEnd
		}
		if ve <= vs {
			return // nothing before the closing quote
		}
		end := ve < len(line) && !isSpace(line[ve]) && !isStop(line[ve]) && line[ve] != q
		n := 12
		if segEnd < 0 {
			n = 16 // prose: only what is long and random
		}
		if end || !secretShaped(line[vs:ve], n) {
			return
		}
		p.valueSpan(vs, ve, rule, contStop)
		return
	}
	toEOL := lineStart && !quoted && !flow && (sep == ':' || sep == '=' && form == formField)
	p.value(vs, rule, toEOL, qs)
}

// markup handles a secret key in XML: <password>x</password>, and the
// name/value attribute pairs of .NET appSettings and Maven-style
// properties (<add key="ApiKey" value="x"/>, name="password" value="x").
// It reports whether the key was such markup.
func (p *pass) markup(ks, ke, qs, i int, quoted bool, name []byte) bool {
	line := p.line
	switch {
	case ks > 0 && line[ks-1] == '<' && ke < len(line) && line[ke] == '>':
		vs := ke + 1
		ve := bytes.IndexByte(line[vs:], '<')
		if ve < 0 {
			ve = len(line) - vs
		}
		if rule := p.w.r.classifyKey(name, formField); rule >= 0 {
			p.valueSpan(vs, vs+ve, rule, contNone)
		}
		return true
	case quoted && line[qs] == '"' && qs >= 5 && (foldEq(line[qs-4:qs], "key=") || foldEq(line[qs-5:qs], "name=")):
		j := skipSpace(line, i)
		if !hasFoldPrefix(line, j, `value="`) {
			return false
		}
		vs := j + len(`value="`)
		ve := bytes.IndexByte(line[vs:], '"')
		if ve < 0 {
			return false
		}
		if rule := p.w.r.classifyKey(name, formField); rule >= 0 {
			p.valueSpan(vs, vs+ve, rule, contDQuote)
		}
		return true
	}
	return false
}

// afterWord reports whether the key at qs follows the word w (lower
// case) and blanks: "aws configure set aws_secret_access_key x",
// "CONFIG SET requirepass x".
func afterWord(line []byte, qs int, w string) bool {
	j := qs
	for j > 0 && isSpace(line[j-1]) {
		j--
	}
	return j < qs && j >= len(w) && foldEq(line[j-len(w):j], w) && (j == len(w) || isSpace(line[j-len(w)-1]))
}

// netrcLogin reports whether the key at qs follows "login <user> " on a
// .netrc line ("machine host login user password secret").
func netrcLogin(line []byte, qs int) bool {
	j := qs
	for j > 0 && isSpace(line[j-1]) {
		j--
	}
	for j > 0 && !isSpace(line[j-1]) {
		j--
	}
	for j > 0 && isSpace(line[j-1]) {
		j--
	}
	return j >= 5 && foldEq(line[j-5:j], "login") && (j == 5 || isSpace(line[j-6]))
}

// callArgument reports whether the quoted key at qs is the first argument
// of a call: getenv("API_TOKEN", ...).
func callArgument(line []byte, qs int) bool {
	j := qs - 1
	for j >= 0 && isSpace(line[j]) {
		j--
	}
	return j > 0 && line[j] == '(' && (isAlnum(line[j-1]) || line[j-1] == '_')
}

// secretShaped reports whether v looks like a generated credential rather
// than a word: at least n bytes, with both letters and digits.
func secretShaped(v []byte, n int) bool {
	if len(v) < n {
		return false
	}
	letter, digit := false, false
	for _, b := range v {
		letter = letter || isAlpha(b)
		digit = digit || isDigit(b)
	}
	return letter && digit
}

// atTextStart reports whether a key at qs is the first thing after the
// line's log prefix (and its indentation).
func (p *pass) atTextStart(qs int) bool {
	ts := p.textStart()
	return ts > 0 && ts+commentedKeyStart(p.line[ts:]) == qs
}

// textStart is where the logged text of the line begins (see
// logPrefixLen), worked out once per piece.
func (p *pass) textStart() int {
	if !p.start {
		return 0
	}
	if p.ts < 0 {
		p.ts = logPrefixLen(p.line)
	}
	return p.ts
}

// commentedKeyStart is keyStart, also stepping over a "#" comment lead: a
// commented-out "# password: x" in a config file is still a password.
func commentedKeyStart(line []byte) int {
	i := keyStart(line)
	for i < len(line) && line[i] == '#' {
		i = skipBlanks(line, i+1)
	}
	return i
}

// flowContext reports whether the key at qs follows '{', ',' or '(': a
// YAML flow mapping or a struct dump, whose values end at ',' or '}'.
func flowContext(line []byte, qs int) bool {
	j := qs - 1
	for j >= 0 && isSpace(line[j]) {
		j--
	}
	return j >= 0 && (line[j] == '{' || line[j] == ',' || line[j] == '(')
}

func identOnly(b []byte) bool {
	for _, c := range b {
		if !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// value redacts the value that starts at vs. toEOL says an unquoted value
// runs to the end of the line (YAML, INI); keyCol is the key's column, the
// indentation a YAML block scalar's lines must exceed.
func (p *pass) value(vs int, rule int32, toEOL bool, keyCol int) {
	line := p.line
	if vs >= len(line) {
		if toEOL && p.segEnd < 0 {
			// Nothing after "password:" or "secret =": the value is on the
			// deeper lines below (a YAML map, INI continuation lines).
			ts := p.textStart()
			if keyCol < ts {
				ts = 0
			}
			st := &p.w.st
			st.nestCol = keyCol - ts
			st.nestRule = rule
			st.nestPrefixed = ts > 0
		}
		return
	}
	c := line[vs]
	switch {
	case c == '"' || c == '\'':
		open := contDQuote
		if c == '\'' {
			open = contSQuote
		}
		e := closeQuote(line, vs+1, c)
		if e < 0 {
			e = len(line)
		}
		p.valueSpan(vs+1, e, rule, open)
	case c == '\\' && vs+1 < len(line) && line[vs+1] == '"':
		e := closeEscQuote(line, vs+2)
		p.valueSpan(vs+2, e, rule, contEscQuote)
	case c == '{' || c == '[':
		// A structure: its own fields are checked one by one.
	case toEOL && (c == '|' || c == '>'):
		// A YAML block scalar: the secret is on the deeper lines below.
		if len(bytes.Trim(line[vs+1:], "+-0123456789 \t\r")) == 0 {
			st := &p.w.st
			st.scalarIndent = keyCol
			st.scalarRule = rule
			st.scalarMarked = false
		}
	case toEOL:
		e := trimRight(line, len(line))
		if p.segEnd >= 0 {
			e = trimRight(line, p.segEnd)
		}
		if h := bytes.Index(line[vs:e], []byte(" #")); h >= 0 {
			e = trimRight(line, vs+h)
		}
		p.valueSpan(vs, e, rule, contEOL)
	default:
		p.valueSpan(vs, unquotedEnd(line, vs), rule, contStop)
	}
}

// unquotedEnd is where an unquoted value starting at vs ends: at a byte
// that ends values, except that a backslash escaping anything but a quote
// or a control letter (\n, \t) is part of the value ("adm\\pw").
func unquotedEnd(line []byte, vs int) int {
	e := vs
	for e < len(line) {
		b := line[e]
		if b == '\\' && e+1 < len(line) {
			switch line[e+1] {
			case '"', '\'', 'n', 'r', 't':
				return e
			}
			e += 2
			continue
		}
		if isStop(b) {
			return e
		}
		e++
	}
	return min(e, len(line))
}

// valueSpan redacts line[s:e] unless it is empty, already redacted or a
// placeholder that holds no secret.
func (p *pass) valueSpan(s, e int, rule int32, open contKind) {
	v := p.line[s:e]
	if len(v) == 0 || len(v) == 1 && isDigit(v[0]) || bytes.Contains(v, []byte(Marker)) {
		return // nothing, a switch ("PuttyPassword=0"), or redacted before
	}
	switch {
	case foldEq(v, "null"), foldEq(v, "nil"), foldEq(v, "none"), string(v) == "~",
		foldEq(v, "true"), foldEq(v, "false"), string(v) == "<nil>":
		return
	}
	p.redact(s, e, rule, open)
}

// closeQuote returns the index of the quote q closing a string whose text
// starts at i, honouring backslash escapes in double-quoted strings; -1 if
// the line ends first.
func closeQuote(line []byte, i int, q byte) int {
	for ; i < len(line); i++ {
		switch line[i] {
		case '\\':
			if q == '"' {
				i++
			}
		case q:
			return i
		}
	}
	return -1
}

// closeEscQuote finds the end of a string written inside another JSON
// string (\"like this\"): the \" whose decoded quote is not itself escaped.
// It returns the index of that backslash, or len(line).
func closeEscQuote(line []byte, i int) int {
	innerEsc := false
	for i < len(line) {
		at := i
		c := line[i]
		if c == '\\' && i+1 < len(line) {
			c = line[i+1]
			i += 2
		} else {
			i++
		}
		switch {
		case c == '"' && !innerEsc:
			return at
		case c == '\\' && !innerEsc:
			innerEsc = true
		default:
			innerEsc = false
		}
	}
	return len(line)
}

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
