package redact

import (
	"bytes"
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
	named := false // "password: x" in a log line: the key names what follows
	p.segEnd = segEnd
	flow := flowContext(line, qs)

	j := skipSpace(line, i)
	spacedBefore := j > i
	if !quoted && p.nodeKeyValue(name, i, j) {
		return
	}
	var sep byte
	if j < len(line) && (line[j] == '=' || line[j] == ':') {
		sep = line[j]
	} else if c := verbColon(line, j); c > 0 && !quoted && dashes == 0 {
		// "CHAP secret used: x", "password is: x": a daemon's log line
		// naming the secret it prints.
		j, i, sep, spacedBefore = c, c, ':', false
	}
	form := formField
	vs := j + 1
	arrow := 2
	if hasFoldPrefix(line, j, `=\u003e`) {
		arrow = len(`=\u003e`) // "=>" as Go's JSON encoder escapes it
	}
	if j+1 < len(line) && (line[j] == '=' && (line[j+1] == '>' || arrow > 2) || line[j] == ':' && line[j+1] == '=') {
		// "password" => "x" (Perl, PHP, Ruby), :password => "x",
		// password := "x" (Go): a field, whatever the spacing.
		if line[j] == ':' || quoted || qs > 0 && line[qs-1] == ':' || lineStart {
			if rule := p.w.r.classifyKey(name, formField); rule >= 0 {
				p.value(skipSpace(line, j+arrow), rule, false, qs)
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
			// "token = x" in prose; INI files have the key first. But a
			// value that looks generated is a secret all the same
			// ("loaded config alibaba_secret = Kx8a...").
			strict = true
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
			strict, named = true, true
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
	case !quoted && dashes == 0 && spacedBefore && sep == 0 && j < len(line) && !isStop(line[j]) && isAlnum(name[len(name)-1]):
		// "using api key Kx8a...": a daemon's prose naming the value it
		// prints, with nothing between them (a word, not the end of a
		// PEM header's "KEY-----").
		p.proseValue(qs, j)
		return
	default:
		return
	}
	if sep == ':' && lineStart && !quoted && !flow && !strict {
		form = formYAML
	}
	rule := p.w.r.classifyKey(name, form)
	vs = skipSpace(line, vs)
	if rule < 0 {
		// A key with a weaker secret word (license_key, X-Amz-Signature,
		// auth-key): only a value that looks generated goes. But in an
		// environment file or a unit's Environment= line, a variable
		// named by such a word (TS_KEY, NAME_KEY, X_RESTRICTED_KEY)
		// holds what it says, whatever it looks like.
		if rule = weakKey(name, form); rule < 0 {
			return
		}
		strict = !(form == formAssign && identOnly(name) && p.envContext(qs) && !plainValue(line, vs))
		named = false
	}
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
		for ve < len(line) && (isB64(line[ve]) || isB64URL(line[ve]) || line[ve] == '=' || line[ve] == '.' || line[ve] == '~' || line[ve] == '%') {
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
		switch {
		case named:
			n = 8 // a daemon's "secret used: x", "token: x"
		case segEnd < 0:
			n = 16 // prose: only what is long and random
		}
		if end || !secretShaped(line[vs:ve], n) && !(segEnd >= 0 && credentialHeader(name)) {
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
	if placeholderValue(line, vs) {
		return // ${NPM_TOKEN}, $(cat /run/secrets/pw), <your-token>: no secret here
	}
	c := line[vs]
	switch {
	case c == '[' && !toEOL || c == '[' && bytes.IndexByte(line[vs:], ']') > 0 && (vs+1 < len(line) && (line[vs+1] == '"' || line[vs+1] == '\'')):
		// A list of strings under a secret key (an HTTP header's values,
		// {"X-Api-Key": ["v"]}): every string in it.
		p.stringList(vs, rule)
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
		if (b == '(' || b == '[' || b == '{') && e > vs {
			// "pa(ss)word": a bracket inside a value opens part of it; the
			// value runs past its closing bracket.
			if c := closeBracket(line, e); c > e {
				e = c + 1
				continue
			}
		}
		if isStop(b) {
			return e
		}
		e++
	}
	return min(e, len(line))
}

// closeBracket returns the index of the bracket closing the one at i on
// the same line, before any blank; -1 if there is none.
func closeBracket(line []byte, i int) int {
	open := line[i]
	closer := map[byte]byte{'(': ')', '[': ']', '{': '}'}[open]
	depth := 0
	for j := i; j < len(line) && j < i+256; j++ {
		switch line[j] {
		case open:
			depth++
		case closer:
			depth--
			if depth == 0 {
				return j
			}
		case ' ', '\t', '"', '\'', 0:
			return -1
		}
	}
	return -1
}

// placeholderValue reports whether the value at vs is a reference or a
// placeholder rather than a secret: ${VAR}, $(command), $VAR, {{ .Var }},
// <your-token>, %VAR%.
func placeholderValue(line []byte, vs int) bool {
	v := line[vs:]
	if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
		q := v[0]
		e := closeQuote(line, vs+1, q)
		if e < 0 {
			return false
		}
		v = line[vs+1 : e]
	} else {
		e := vs
		for e < len(line) && !isSpace(line[e]) && line[e] != ',' && line[e] != ';' && line[e] != '"' && line[e] != '\'' {
			e++
		}
		v = line[vs:e]
	}
	return isPlaceholder(v)
}

func isPlaceholder(v []byte) bool {
	n := len(v)
	switch {
	case n < 2:
		return false
	case v[0] == '$' && (v[1] == '{' && v[n-1] == '}' || v[1] == '(' && v[n-1] == ')'):
		return true
	case v[0] == '$' && identOnly(v[1:]):
		return true
	case v[0] == '<' && v[n-1] == '>' && bytes.IndexByte(v[1:n-1], '<') < 0:
		return true
	case n >= 4 && v[0] == '{' && v[1] == '{' && v[n-1] == '}' && v[n-2] == '}':
		return true
	case v[0] == '%' && v[n-1] == '%' && n > 2 && identOnly(v[1:n-1]):
		return true
	}
	return false
}

// stringList redacts every quoted string of the list opening at vs
// (["a", "b"]), on this line.
func (p *pass) stringList(vs int, rule int32) {
	line := p.line
	i := vs + 1
	for i < len(line) {
		i = skipSpace(line, i)
		if i >= len(line) || line[i] == ']' {
			return
		}
		q := line[i]
		if q != '"' && q != '\'' {
			return
		}
		e := closeQuote(line, i+1, q)
		if e < 0 {
			e = len(line)
		}
		if !isPlaceholder(line[i+1 : e]) {
			p.valueSpan(i+1, e, rule, contNone)
		}
		i = skipSpace(line, e+1)
		if i < len(line) && line[i] == ',' {
			i++
		}
	}
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
