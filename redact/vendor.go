package redact

import (
	"bytes"
	"encoding/base64"
)

// Vendor tokens: credentials recognisable by their own prefix, with no
// secret word in front of them ("failed to authorize: token ghp_..."). The
// prefixes are those of gitleaks' default rules (v8) for the services a
// node talks to or a workload logs, carried into the keyword automaton so
// a line without one costs nothing more (see docs/decisions/redaction.md). The
// prefix stays, as it tells a support engineer what kind of credential was
// there; the rest goes.

// alphabets of a token's body.
const (
	alAlnum    = iota // [A-Za-z0-9]
	alWord            // [A-Za-z0-9_]
	alWordDash        // [A-Za-z0-9_-]
	alWordDot         // [A-Za-z0-9_.-]
	alB64             // [A-Za-z0-9+/], then '=' padding
	alHex             // [0-9a-fA-F]
	alPath            // [A-Za-z0-9_/-]: a webhook URL's path
)

type vendorToken struct {
	prefix string
	min    int  // shortest body
	al     int8 // body alphabet
	// bound: the byte before the prefix must not be a letter or digit
	// (short prefixes such as "sk-" and "hf_" end ordinary words).
	bound bool
	// mixed: the body needs a digit and an upper-case letter (random, not
	// words: "sk-learn-something" is no key).
	mixed bool
}

var vendorTokens = []vendorToken{
	// GitHub
	{prefix: "ghp_", min: 30, al: alWord, bound: true},
	{prefix: "gho_", min: 30, al: alWord, bound: true},
	{prefix: "ghu_", min: 30, al: alWord, bound: true},
	{prefix: "ghs_", min: 30, al: alWord, bound: true},
	{prefix: "ghr_", min: 30, al: alWord, bound: true},
	{prefix: "github_pat_", min: 40, al: alWord, bound: true},
	// GitLab
	{prefix: "glpat-", min: 20, al: alWordDot, bound: true},
	{prefix: "gldt-", min: 20, al: alWordDot, bound: true},
	{prefix: "glsoat-", min: 20, al: alWordDot, bound: true},
	{prefix: "glrt-", min: 20, al: alWordDot, bound: true},
	{prefix: "glrtr-", min: 20, al: alWordDot, bound: true},
	{prefix: "glptt-", min: 20, al: alWordDot, bound: true},
	{prefix: "glcbt-", min: 20, al: alWordDot, bound: true},
	{prefix: "glft-", min: 20, al: alWordDot, bound: true},
	{prefix: "glimt-", min: 20, al: alWordDot, bound: true},
	{prefix: "glagent-", min: 20, al: alWordDot, bound: true},
	{prefix: "gloas-", min: 20, al: alWordDot, bound: true},
	{prefix: "glffct-", min: 20, al: alWordDot, bound: true},
	{prefix: "GR1348941", min: 20, al: alWordDash, bound: true},
	// Slack
	{prefix: "xoxb-", min: 10, al: alWordDash, bound: true},
	{prefix: "xoxp-", min: 10, al: alWordDash, bound: true},
	{prefix: "xoxa-", min: 10, al: alWordDash, bound: true},
	{prefix: "xoxr-", min: 10, al: alWordDash, bound: true},
	{prefix: "xoxs-", min: 10, al: alWordDash, bound: true},
	{prefix: "xoxo-", min: 10, al: alWordDash, bound: true},
	{prefix: "xoxe-", min: 10, al: alWordDash, bound: true},
	{prefix: "xoxe.", min: 10, al: alWordDash, bound: true},
	{prefix: "xapp-", min: 20, al: alWordDash, bound: true},
	{prefix: "hooks.slack.com/services/", min: 10, al: alPath},
	{prefix: "hooks.slack.com/workflows/", min: 10, al: alPath},
	{prefix: "hooks.slack.com/triggers/", min: 10, al: alPath},
	// Stripe
	{prefix: "sk_live_", min: 20, al: alAlnum, bound: true},
	{prefix: "rk_live_", min: 20, al: alAlnum, bound: true},
	{prefix: "sk_test_", min: 20, al: alAlnum, bound: true},
	{prefix: "rk_test_", min: 20, al: alAlnum, bound: true},
	{prefix: "whsec_", min: 24, al: alAlnum, bound: true},
	// OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), OpenRouter (sk-or-)
	{prefix: "sk-", min: 20, al: alWordDash, bound: true, mixed: true},
	// SendGrid: SG.<22>.<43>
	{prefix: "SG.", min: 40, al: alWordDot, bound: true, mixed: true},
	// PyPI: a macaroon, always "pypi-AgE..."
	{prefix: "pypi-AgE", min: 50, al: alWordDash, bound: true},
	// HashiCorp Vault service, batch and recovery tokens
	{prefix: "hvs.", min: 24, al: alWordDash, bound: true},
	{prefix: "hvb.", min: 24, al: alWordDash, bound: true},
	{prefix: "hvr.", min: 24, al: alWordDash, bound: true},
	// Grafana Cloud and service-account tokens
	{prefix: "glc_", min: 32, al: alB64, bound: true},
	{prefix: "glsa_", min: 32, al: alWord, bound: true},
	// JFrog Artifactory API keys
	{prefix: "AKCp", min: 60, al: alAlnum, bound: true},
	// Google API keys and OAuth client secrets
	{prefix: "AIza", min: 30, al: alWordDash, bound: true},
	{prefix: "GOCSPX-", min: 20, al: alWordDash, bound: true},
	// Telegram bot tokens, <bot id>:AA<33>, also in the API's URL path
	// (api.telegram.org/bot<id>:AA...): the bot id stays.
	{prefix: ":AA", min: 31, al: alWordDash, mixed: true},
	// Docker Hub personal and organisation access tokens
	{prefix: "dckr_pat_", min: 20, al: alWordDash, bound: true},
	{prefix: "dckr_oat_", min: 20, al: alWordDash, bound: true},
	// npm, Hugging Face, Clojars
	{prefix: "npm_", min: 36, al: alAlnum, bound: true},
	{prefix: "hf_", min: 30, al: alAlnum, bound: true, mixed: true},
	{prefix: "CLOJARS_", min: 40, al: alAlnum, bound: true},
	// Amazon Bedrock API keys
	{prefix: "ABSK", min: 100, al: alB64, bound: true},
	// Shopify
	{prefix: "shpat_", min: 32, al: alHex, bound: true},
	{prefix: "shpss_", min: 32, al: alHex, bound: true},
	{prefix: "shpca_", min: 32, al: alHex, bound: true},
	{prefix: "shppa_", min: 32, al: alHex, bound: true},
	// DigitalOcean, Doppler, Linear, Postman, Pulumi, Netlify-style tokens
	{prefix: "dop_v1_", min: 64, al: alHex, bound: true},
	{prefix: "doo_v1_", min: 64, al: alHex, bound: true},
	{prefix: "dp.pt.", min: 40, al: alAlnum, bound: true},
	{prefix: "lin_api_", min: 40, al: alAlnum, bound: true},
	{prefix: "PMAK-", min: 50, al: alWordDash, bound: true},
	{prefix: "pul-", min: 40, al: alHex, bound: true},
	// Google OAuth access tokens, Atlassian, Alibaba Cloud key ids, age
	{prefix: "ya29.", min: 30, al: alWordDash, bound: true},
	{prefix: "ATATT3", min: 40, al: alWordDash, bound: true},
	{prefix: "LTAI", min: 16, al: alAlnum, bound: true, mixed: true},
	{prefix: "AGE-SECRET-KEY-1", min: 50, al: alAlnum, bound: true},
	// Square, Sendinblue (Brevo), Databricks, Dynatrace, Sentry, PlanetScale
	{prefix: "sq0atp-", min: 22, al: alWordDash, bound: true},
	{prefix: "sq0csp-", min: 40, al: alWordDash, bound: true},
	{prefix: "xkeysib-", min: 60, al: alWordDash, bound: true},
	{prefix: "dapi", min: 32, al: alHex, bound: true, mixed: false},
	{prefix: "dt0c01.", min: 60, al: alWordDot, bound: true},
	{prefix: "sntrys_", min: 40, al: alB64, bound: true},
	{prefix: "pscale_tkn_", min: 32, al: alWordDot, bound: true},
	{prefix: "pscale_pw_", min: 32, al: alWordDot, bound: true},
	// Notion, Figma, Netlify, Contentful, RubyGems, Slack client tokens
	{prefix: "ntn_", min: 40, al: alAlnum, bound: true},
	{prefix: "figd_", min: 30, al: alWordDash, bound: true},
	{prefix: "nfp_", min: 36, al: alAlnum, bound: true},
	{prefix: "CFPAT-", min: 40, al: alWordDash, bound: true},
	{prefix: "rubygems_", min: 48, al: alHex, bound: true},
	{prefix: "xoxc-", min: 10, al: alWordDash, bound: true},
	// LLM APIs: Groq, xAI, Perplexity, Replicate
	{prefix: "gsk_", min: 40, al: alAlnum, bound: true},
	{prefix: "xai-", min: 40, al: alAlnum, bound: true},
	{prefix: "pplx-", min: 40, al: alAlnum, bound: true},
	{prefix: "r8_", min: 36, al: alAlnum, bound: true, mixed: true},
}

func inAlphabet(b byte, al int8) bool {
	switch al {
	case alAlnum:
		return isAlnum(b)
	case alWord:
		return isAlnum(b) || b == '_'
	case alWordDash:
		return isB64URL(b)
	case alWordDot:
		return isB64URL(b) || b == '.'
	case alB64:
		return isB64(b)
	case alHex:
		return isHex(b)
	case alPath:
		return isB64URL(b) || b == '/'
	}
	return false
}

// vendor handles vendor token i whose prefix is line[s:e].
func (p *pass) vendor(i int32, s, e int) {
	line := p.line
	vt := &vendorTokens[i]
	if vt.bound && s > 0 && (isAlnum(line[s-1]) || line[s-1] == '_') {
		return
	}
	if vt.prefix == ":AA" && (s == 0 || !isDigit(line[s-1])) {
		return // a Telegram token follows its bot's numeric id
	}
	if vt.prefix == "sk-" {
		// The kind of key stays with the prefix: sk-proj-, sk-ant-api03-.
		for _, sub := range []string{"proj-", "ant-api03-", "ant-", "or-v1-", "svcacct-", "admin-"} {
			if bytes.HasPrefix(line[e:], []byte(sub)) {
				e += len(sub)
				break
			}
		}
	}
	j := e
	upper, digit := false, false
	for j < len(line) && inAlphabet(line[j], vt.al) {
		upper = upper || 'A' <= line[j] && line[j] <= 'Z'
		digit = digit || isDigit(line[j])
		j++
	}
	if vt.al == alB64 {
		for j < len(line) && line[j] == '=' {
			j++
		}
	}
	// A trailing '.' or '-' ends a sentence or a word, not the token.
	for j > e && (line[j-1] == '.' || line[j-1] == '-') && vt.al != alB64 {
		j--
	}
	if j-e < vt.min || vt.mixed && !(upper && digit) {
		return
	}
	if placeholder(line[e:j]) || scannerAllows(line[s:j]) || scannerRejects(line[s:j], line[e:j]) {
		// A placeholder (ghp_xxxx..., glpat-XXXX-XXXX), or a value the
		// scanner's rule for this prefix lists as public.
		return
	}
	p.redact(e, j, ruleVendor, contStop)
}

// azureADSecret: an Entra ID (Azure AD) client secret,
// [A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}; the matcher found "Q~" at s.
func (p *pass) azureADSecret(s int) {
	line := p.line
	tildeWord := func(b byte) bool { return isAlnum(b) || b == '_' || b == '~' || b == '.' }
	if s < 4 || !isDigit(line[s-1]) || !tildeWord(line[s-2]) || !tildeWord(line[s-3]) || !tildeWord(line[s-4]) {
		return
	}
	start := s - 4
	if start > 0 && (tildeWord(line[start-1]) || line[start-1] == '-') {
		return
	}
	j := s + 2
	for j < len(line) && (tildeWord(line[j]) || line[j] == '-') {
		j++
	}
	if n := j - s - 2; n < 31 || n > 34 {
		return
	}
	p.redact(start, j, ruleVendor, contStop)
}

// basicCredentials: "Basic <base64 of user:password>" outside an
// Authorization header (a header value kept in a config file or echoed in
// a log line). The word stays; the credentials go.
func (p *pass) basicCredentials(s, e int) {
	line := p.line
	if s > 0 && isAlnum(line[s-1]) {
		return
	}
	vs := skipSpace(line, e)
	ve := vs
	for ve < len(line) && isB64(line[ve]) {
		ve++
	}
	for ve < len(line) && line[ve] == '=' {
		ve++
	}
	if ve-vs < 8 || ve < len(line) && isAlnum(line[ve]) {
		return
	}
	v := line[vs:ve]
	var buf [96]byte
	n := min(len(v), 128) &^ 3
	dec, err := base64.StdEncoding.AppendDecode(buf[:0], v[:n])
	if err != nil && len(dec) == 0 {
		if dec, err = base64.RawStdEncoding.AppendDecode(buf[:0], bytes.TrimRight(v, "=")); err != nil {
			return
		}
	}
	c := bytes.IndexByte(dec, ':')
	if c <= 0 {
		return
	}
	for _, b := range dec {
		if b < 0x20 || b > 0x7e {
			return
		}
	}
	p.redact(vs, ve, ruleAuthHeader, contStop)
}

// paddedKey: a base64 value with '=' padding under a key that holds key
// material without saying "secret": WireGuard's "key:" (a private key) and
// "shared:"/"psk" (a preshared key). The matcher found "==" at s.
func (p *pass) paddedKey(s int) {
	line := p.line
	e := s + 2
	if e < len(line) && (isB64(line[e]) || line[e] == '=') {
		return
	}
	vs := s
	for vs > 0 && isB64(line[vs-1]) {
		vs--
	}
	if e-vs < 16 {
		return
	}
	i := vs
	if i > 0 && (line[i-1] == '"' || line[i-1] == '\'') {
		i--
	}
	for i > 0 && isSpace(line[i-1]) {
		i--
	}
	if i == 0 || line[i-1] != ':' && line[i-1] != '=' {
		return
	}
	i--
	if i > 0 && (line[i-1] == '"' || line[i-1] == '\'') {
		i--
	}
	for i > 0 && isSpace(line[i-1]) {
		i--
	}
	ke := i
	for i > 0 && isKeyByte(line[i-1]) {
		i--
	}
	key := line[i:ke]
	var buf [96]byte
	switch string(normKey(key, &buf)) {
	case "key", "psk", "shared", "preshared", "presharedkey", "wgkey", "pskey":
	default:
		return
	}
	p.redact(vs, e, ruleField, contStop)
}

// argStart reports whether a command-line argument may start at s: at the
// line's start, after a blank or a NUL (a raw /proc/<pid>/cmdline), or as
// an element of a JSON list.
func argStart(line []byte, s int) bool {
	return s == 0 || isSpace(line[s-1]) || line[s-1] == 0 || line[s-1] == '"' || line[s-1] == '\''
}

// nextArg returns where the argument after a flag ending at e starts:
// after blanks or NULs, or after `","` in a JSON list. eq allows
// "--flag=value".
func nextArg(line []byte, e int, eq bool) (int, bool) {
	switch {
	case e >= len(line):
		return 0, false
	case eq && line[e] == '=':
		return e + 1, true
	case isSpace(line[e]) || line[e] == 0:
		for e < len(line) && (isSpace(line[e]) || line[e] == 0) {
			e++
		}
		return e, e < len(line)
	case line[e] == '"' && e+1 < len(line) && line[e+1] == ',':
		e = skipSpace(line, e+2)
		if e < len(line) && line[e] == '"' {
			return e + 1, true
		}
	}
	return 0, false
}

// argEnd is where an unquoted argument starting at vs ends.
func argEnd(line []byte, vs int) int {
	for vs < len(line) && !isSpace(line[vs]) && line[vs] != 0 && line[vs] != '"' && line[vs] != '\'' {
		vs++
	}
	return vs
}

// userPassFlag: curl's "-u user:password" and "--user user:password"
// (also "--user=..."), the password quoted or not. The user stays.
func (p *pass) userPassFlag(s, e int) {
	line := p.line
	if !argStart(line, s) {
		return
	}
	vs, ok := nextArg(line, e, true)
	if !ok {
		return
	}
	if vs < len(line) && line[vs] == '\'' {
		vs++
	}
	c := vs
	for c < len(line) && line[c] != ':' && !isSpace(line[c]) && line[c] != 0 && line[c] != '"' && line[c] != '\'' {
		c++
	}
	if c >= len(line) || line[c] != ':' || c == vs {
		return
	}
	ps := c + 1
	var q byte
	if ps < len(line) && line[ps] == '\'' {
		q = line[ps]
		ps++
	}
	pe := argEnd(line, ps)
	if q != 0 {
		if k := bytes.IndexByte(line[ps:], q); k >= 0 {
			pe = ps + k
		}
	}
	if pe > ps {
		p.valueSpan(ps, pe, ruleCLIFlag, contStop)
	}
}

// passwordFlag: "-p <password>" of a command that also names a user
// ("docker login -u x -p y", "twine upload -u __token__ -p pypi-...",
// "mysql -u root -pSECRET"), or of sshpass. Without a user flag "-p" is a
// port, a path or a profile.
func (p *pass) passwordFlag(s, e int) {
	line := p.line
	if !argStart(line, s) {
		return
	}
	f := p.cliFacts()
	userFlag, mysql := f&cliUserFlag != 0, f&cliMySQL != 0
	if !userFlag && !mysql && f&cliSSHPass == 0 {
		return
	}
	if e < len(line) && !isSpace(line[e]) && !isStop(line[e]) && line[e] != '=' && (userFlag || mysql) {
		// mysql -u root -pSECRET: the password right after the flag.
		if ve := argEnd(line, e); ve > e {
			p.valueSpan(e, ve, ruleCLIFlag, contStop)
		}
		return
	}
	vs, ok := nextArg(line, e, false)
	if !ok || line[vs] == '-' {
		return
	}
	if ve := argEnd(line, vs); ve > vs {
		p.valueSpan(vs, ve, ruleCLIFlag, contStop)
	}
}

// cliFacts are what the command-line rules ask of the whole line, worked
// out once per piece: a line with a thousand "-p" in it (a JSON line of
// process names and paths) asked them a thousand times, each a scan of
// the line.
type cliFacts uint8

const (
	cliKnown cliFacts = 1 << iota
	cliMySQL
	cliSSHPass
	cliUserFlag
	cliRedis
)

func (p *pass) cliFacts() cliFacts {
	if p.cli&cliKnown != 0 {
		return p.cli
	}
	line := p.line
	f := cliKnown
	if bytes.Contains(line, []byte("mysql")) || bytes.Contains(line, []byte("mariadb")) {
		f |= cliMySQL
	}
	if bytes.Contains(line, []byte("sshpass")) {
		f |= cliSSHPass
	}
	if hasUserFlag(line) {
		f |= cliUserFlag
	}
	if bytes.Contains(line, []byte("redis-cli")) {
		f |= cliRedis
	}
	p.cli = f
	return f
}

// hasUserFlag reports a "-u"/"--username"/"--user" argument in line.
func hasUserFlag(line []byte) bool {
	for _, f := range []string{"-u", "--username", "--user"} {
		for i := 0; ; {
			k := bytes.Index(line[i:], []byte(f))
			if k < 0 {
				break
			}
			a := i + k
			b := a + len(f)
			if argStart(line, a) {
				if _, ok := nextArg(line, b, true); ok {
					return true
				}
				if f == "-u" && b < len(line) && isAlnum(line[b]) {
					return true // mysql -uroot
				}
			}
			i = b
		}
	}
	return false
}

// redisPassword: redis-cli's "-a <password>".
func (p *pass) redisPassword(s, e int) {
	line := p.line
	if !argStart(line, s) || p.cliFacts()&cliRedis == 0 {
		return
	}
	if vs, ok := nextArg(line, e, false); ok && line[vs] != '-' {
		p.valueSpan(vs, argEnd(line, vs), ruleCLIFlag, contStop)
	}
}

// cookies: the values of a Cookie or Set-Cookie header ("Cookie: a=x;
// b=y"), which are sessions. The names stay.
func (p *pass) cookies(s, e int) {
	line := p.line
	if s > 0 && isAlnum(line[s-1]) && !(s >= 4 && foldEq(line[s-4:s], "set-")) {
		return
	}
	i := e
	if i < len(line) && (line[i] == '"' || line[i] == '\'') {
		i++
	}
	if i >= len(line) || line[i] != ':' {
		return
	}
	i = skipSpace(line, i+1)
	for i < len(line) && (line[i] == '[' || line[i] == '"' || line[i] == '\'') {
		i++
	}
	for n := 0; n < 64 && i < len(line); n++ {
		k := i
		for k < len(line) && line[k] != '=' && line[k] != ';' && !isSpace(line[k]) && line[k] != '"' && line[k] != '\'' {
			k++
		}
		if k >= len(line) || line[k] != '=' || k == i {
			return
		}
		vs := k + 1
		ve := vs
		for ve < len(line) && line[ve] != ';' && !isSpace(line[ve]) && line[ve] != '"' && line[ve] != '\'' && line[ve] != ',' {
			ve++
		}
		if ve-vs >= 4 {
			p.valueSpan(vs, ve, ruleAuthHeader, contStop)
		}
		if ve >= len(line) || line[ve] != ';' {
			return
		}
		i = skipSpace(line, ve+1)
	}
}

// placeholder reports whether a token's body is a stand-in rather than a
// generated value: low entropy (xxxx, XXXX-XXXX) or the words people type
// where the token goes (RANDOMSTRINGHERE, your-token).
func placeholder(body []byte) bool {
	if shannon(body) < 3 {
		return true
	}
	for _, w := range placeholderWords {
		if containsFold(body, w) {
			return true
		}
	}
	return false
}

// containsFold reports whether b holds the lower-case ASCII word w,
// ignoring case, without allocating.
func containsFold(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		if fold(b[i]) == w[0] && foldEq(b[i:i+len(w)], w) {
			return true
		}
	}
	return false
}

// placeholderWords do not occur in a random body of the lengths vendors
// issue (five letters or more of one word), but do in stand-ins.
var placeholderWords = []string{"random", "your", "placeholder", "changeme", "dummy", "xxxx"}
