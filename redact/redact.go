// Package redact removes secrets from text before it reaches disk.
//
// Every byte a collector writes passes through a Writer, which works a line
// at a time (so memory is bounded by MaxLine, however long a line or binary
// blob is) and understands multi-line secrets: PEM private key blocks, YAML
// block scalars under a secret key, and the data of Kubernetes Secret
// manifests. Each removal is counted under a stable, named rule; the counts,
// never the values, go into the bundle's manifest.
//
// Speed comes from not running regular expressions on the common line: one
// pass of a keyword automaton (see matcher) finds the few places where a
// secret can start, and hand-written rules look only there.
//
// Optionally the Redactor also replaces IP addresses, hostnames, MAC
// addresses and user names with tokens that are a keyed hash of the value
// (see Options), so separate processes of one run agree on every token
// without talking to each other.
//
// The built-in rules, all on by default (the names are what the manifest
// counts under, and never change):
//
//	pem-private-key       PEM private key blocks (also in a JSON string with
//	                      literal \n, and base64-encoded, wrapped or not)
//	k8s-secret-data       values of a Secret's data/stringData, in YAML, JSON
//	                      and the last-applied-configuration annotation
//	env-secret            env entries named like a secret ({"name":"DB_PASSWORD","value":...})
//	authorization-header  Authorization/Proxy-Authorization credentials
//	kubeconfig-secret     token, password, client-key-data, id-/refresh-/access-token,
//	                      client-secret in a kubeconfig
//	aws-secret-key        aws_secret_access_key, SecretAccessKey, AWS session tokens
//	azure-storage-key     AccountKey= / SharedAccessKey= in connection strings
//	gcp-private-key       private_key_id (and private_key) of a service-account key
//	mount-secret-option   secret= in ceph/rbd mount options
//	cli-secret-flag       --password=x, --token x, ["--client-secret","x"]
//	secret-assignment     KEY=value (env, logfmt, query strings, mount options)
//	secret-field          "key": "value", key: value, Key:value, key = value
//	url-credentials       the password in scheme://user:password@host
//	bearer-token          "Bearer <token>" in free text
//	jwt                   header.payload.signature tokens (eyJ...)
//	aws-access-key-id     AKIA.../ASIA... key ids
//	ceph-key              ceph secrets (AQ...==), keyrings included
//	azure-sas-signature   sig= of a shared access signature URL
//	vendor-token          tokens known by their prefix (ghp_, glpat-, xoxb-,
//	                      sk-, SG., hvs., AIza, dckr_pat_, ...), which stays
//	node-credential       kubeadm bootstrap tokens, crypt/htpasswd
//	                      hashes, user/password@db, iscsiadm -v, webhook paths
//	known-secret-format   the generated rules of a secret scanner (rules_scanner.go)
//	high-entropy-value    NAME=<random base64> opening a config line
//
// A key names a secret when it contains password, passwd, passphrase,
// secret, token, credential, creds, apikey, private key, pwd, bindpw or
// psk, or ends in the word pass or auth (db_pass, user_auth), and does not
// end in a word that makes it metadata about one (secretName, tokenFile,
// passwordRef, tokenExpirationSeconds, token_type, max_tokens,
// credentialsId, passwordVariable, credential-provider-config). Keys after
// a log prefix (CRI, journal, klog) or an opening quote count as starting
// their line (see logPrefixLen). Left alone
// on purpose, because diagnosis needs them and they hold nothing secret:
// certificates and public keys, file paths (tokenFile, --token-auth-file,
// ceph's secretfile=), secret names and references, counts and TTLs.
package redact

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"sync"
)

// Marker replaces every redacted value. Diagnosis keeps the key, the shape of
// the line and the rule's name in the manifest; the value is gone.
const Marker = "[REDACTED]"

// MaxLine is the longest line the Writer buffers. A longer line is processed
// in pieces of at most MaxLine bytes: memory stays bounded even for binary
// input with no newlines.
const MaxLine = 1 << 20

// Rule is one named, single-line redaction added by a caller (see New).
type Rule struct {
	Name string
	// Re matches the secret. If it has a capture group named "secret", only
	// that group is replaced; otherwise the whole match is.
	Re *regexp.Regexp
	// Quick, when set, is a byte string that must occur in the line (case
	// sensitive) for Re to be tried at all; it keeps the common case fast.
	// When it is nil, a literal the pattern requires is used if it has one.
	Quick []byte
}

// Built-in rule identifiers, in priority order: when two rules claim the
// same bytes, the earlier one counts them. Structure-aware rules come first
// (they know the most about what the bytes are), then rules keyed on a field
// name, then rules recognising a secret by its shape alone.
const (
	rulePEM         int32 = iota // pem-private-key
	ruleSecretData               // k8s-secret-data
	ruleEnvSecret                // env-secret
	ruleAuthHeader               // authorization-header
	ruleKubeconfig               // kubeconfig-secret
	ruleAWSSecret                // aws-secret-key
	ruleAzureKey                 // azure-storage-key
	ruleGCPKey                   // gcp-private-key
	ruleMountSecret              // mount-secret-option
	ruleCLIFlag                  // cli-secret-flag
	ruleAssignment               // secret-assignment
	ruleField                    // secret-field
	ruleURLCreds                 // url-credentials
	ruleBearer                   // bearer-token
	ruleJWT                      // jwt
	ruleAWSKeyID                 // aws-access-key-id
	ruleCephKey                  // ceph-key
	ruleAzureSAS                 // azure-sas-signature
	ruleVendor                   // vendor-token
	ruleNode                     // node-credential
	ruleScanner                  // known-secret-format
	ruleEntropy                  // high-entropy-value
	numBuiltin
)

// builtinNames are the stable names the manifest uses; never rename one.
var builtinNames = [numBuiltin]string{
	rulePEM:         "pem-private-key",
	ruleSecretData:  "k8s-secret-data",
	ruleEnvSecret:   "env-secret",
	ruleAuthHeader:  "authorization-header",
	ruleKubeconfig:  "kubeconfig-secret",
	ruleAWSSecret:   "aws-secret-key",
	ruleAzureKey:    "azure-storage-key",
	ruleGCPKey:      "gcp-private-key",
	ruleMountSecret: "mount-secret-option",
	ruleCLIFlag:     "cli-secret-flag",
	ruleAssignment:  "secret-assignment",
	ruleField:       "secret-field",
	ruleURLCreds:    "url-credentials",
	ruleBearer:      "bearer-token",
	ruleJWT:         "jwt",
	ruleAWSKeyID:    "aws-access-key-id",
	ruleCephKey:     "ceph-key",
	ruleAzureSAS:    "azure-sas-signature",
	ruleVendor:      "vendor-token",
	ruleNode:        "node-credential",
	ruleScanner:     "known-secret-format",
	ruleEntropy:     "high-entropy-value",
}

// builtinDescriptions say what each built-in rule redacts, for
// docs/redaction.md (WriteRedactionDoc); a test keeps every rule described.
var builtinDescriptions = [numBuiltin]string{
	rulePEM:         "PEM private keys (`-----BEGIN ... PRIVATE KEY-----` and the lines up to its END, also inside a JSON string, and base64-encoded as in a kubeconfig's client-key-data); certificates and public keys stay",
	ruleSecretData:  "the values of a Kubernetes Secret's `data` and `stringData`, in YAML, JSON and the last-applied-configuration annotation",
	ruleEnvSecret:   "the value of an environment variable whose name is a secret's (`DB_PASSWORD=x`, a Kubernetes env entry `{name: DB_PASSWORD, value: x}`)",
	ruleAuthHeader:  "the credentials of an HTTP `Authorization` header (`Authorization: Bearer x`, `-H 'Authorization: Basic x'`); the scheme stays",
	ruleKubeconfig:  "a kubeconfig's credentials in YAML: `token`, `password`, `id-token`, `refresh-token`, `access-token`, `client-secret`, `client-key-data`",
	ruleAWSSecret:   "AWS secret access keys (`aws_secret_access_key`, `AWS_SECRET_ACCESS_KEY`)",
	ruleAzureKey:    "Azure storage account keys (`AccountKey=...` in a connection string)",
	ruleGCPKey:      "the `private_key` of a GCP service-account JSON key",
	ruleMountSecret: "the ceph/rbd `secret=` mount option, in mount tables and command lines",
	ruleCLIFlag:     "the value of a command-line flag whose name is a secret's (`--password x`, `--token=x`)",
	ruleAssignment:  "the value of `key=value` where the key names a secret (shell, env files, INI, log lines)",
	ruleField:       "the value of a field whose name is a secret's in JSON, YAML, XML and Go's %+v (`\"password\": \"x\"`, `password: x`, a registry config's `auth`)",
	ruleURLCreds:    "the password of a URL (`scheme://user:password@host`); the user name stays (or is obfuscated with `--obfuscate user`)",
	ruleBearer:      "a bearer token anywhere (`Bearer <token>`, when it looks like one)",
	ruleJWT:         "JSON Web Tokens (`eyJ...` header.payload.signature)",
	ruleAWSKeyID:    "AWS access key IDs (`AKIA...`, `ASIA...`)",
	ruleCephKey:     "ceph secret keys (`AQ...==`, the base64 of a ceph CryptoKey)",
	ruleAzureSAS:    "the signature (`sig=`) of an Azure shared access signature URL",
	ruleVendor:      "tokens of known vendors by their prefix (GitHub `ghp_`, GitLab `glpat-`, Slack `xox.-`, Stripe, and more)",
	ruleNode:        "credentials in a node tool's own syntax: kubeadm bootstrap tokens anywhere (`abcdef.0123456789abcdef`); crypt and htpasswd hashes (`user:$6$...`, `$apr1$`, `{SSHA}`); Oracle's `user/password@db`; iSCSI CHAP given to `iscsiadm -n node.session.auth.password -v`; URL-encoded `password%3D...`; the secret path segments of webhook URLs (`/hooks/...`, Discord, Teams); a token given to a program's `login` (`vault login <token>`; a host or URL stays)",
	ruleScanner:     "secrets in the format of a rule of a maintained secret scanner's default rule set (" + scannerRulesSource + ", generated by `make redact-rules`): provider tokens and `<vendor>_key = <value>` shapes, each prefiltered on the scanner's own keywords",
	ruleEntropy:     "values that look generated (long, letters and digits, high entropy) next to a secret-like key or after the word that names them in prose (`using api key x`, `with key x`), and tokens of three or more dotted base64url parts anywhere (a Discord bot token); only where no other rule claimed them",
}

// BuiltinRule is a built-in rule's name, as the manifest counts under it
// and disable: names it, and what it redacts.
type BuiltinRule struct {
	Name        string
	Description string
}

// BuiltinRules lists the built-in rules in priority order.
func BuiltinRules() []BuiltinRule {
	out := make([]BuiltinRule, numBuiltin)
	for i := range out {
		out[i] = BuiltinRule{Name: builtinNames[i], Description: builtinDescriptions[i]}
	}
	return out
}

// BuiltinRuleNames lists the names of the built-in rules, all on by default.
func BuiltinRuleNames() []string {
	return append([]string(nil), builtinNames[:]...)
}

// kwKind says what a matcher keyword means.
type kwKind uint8

const (
	kwKey        kwKind = iota // a secret stem or custom key: try key/value forms
	kwAuth                     // "authorization"
	kwBearer                   // "bearer"
	kwJWT                      // "eyJ"
	kwAWSKeyID                 // "AKIA", "ASIA"
	kwCeph                     // "AQ"
	kwURL                      // "://"
	kwUNC                      // "//" starting a word: //user:password@server/share (CIFS)
	kwSAS                      // "sig="
	kwPEMBegin                 // "-----BEGIN"
	kwB64PEM                   // base64 of "-----BEGIN"
	kwDataInline               // "data": / "stringData": (arg 1 for stringData)
	kwLiteral                  // a custom literal (arg: rule; exact: the bytes)
	kwRegex                    // prefilter of a regex rule (arg: index in regexes)
	kwHost                     // an explicit hostname (arg: index in obf.hosts)
	kwHostRegex                // prefilter of a hostname pattern (arg: index)
	kwUser                     // an explicit user name
	kwHome                     // "/home/": the next path element is a user name
	kwVendor                   // a vendor token's prefix (arg: index in vendorTokens)
	kwAzureAD                  // "Q~" of an Entra ID client secret
	kwBasic                    // "basic ": Basic credentials outside a header
	kwPadded                   // "==" ending a base64 value
	kwUserFlag                 // "-u", "--user": user:password
	kwPassFlag                 // "-p": a password beside a user flag
	kwCookie                   // "cookie": a Cookie or Set-Cookie header
	kwHash                     // "$6$", "$apr1$", "{SSHA}": a password hash
	kwAt                       // "@": Oracle's user/password@db
	kwHook                     // "/hooks/", "/webhook/": a webhook URL's secret path
	kwOwn                      // the start of one of nodesnap's own secrets (arg: index in own)
	kwScanner                  // a keyword of a generated scanner rule (arg: index in scannerRules)
	kwLogin                    // " login ": a tool's "<program> login <token>"
	kwDot                      // ".": listed for the rules that start at a dot (see findDots)
)

type keyword struct {
	kind kwKind
	arg  int32
	n    int32 // length in bytes
	// exact, when set, must match the bytes case-sensitively (the matcher
	// folds case).
	exact []byte
}

type regexRule struct {
	rule  int32
	re    *regexp.Regexp
	group int // index of the "secret" group; 0 means the whole match
}

// Redactor holds the rule set. It is safe for concurrent use; each Writer
// keeps its own state.
type Redactor struct {
	names []string // rule id → name: built-ins, then custom rules
	off   []bool   // rule id → disabled by configuration

	m       *matcher
	kws     []keyword
	regexes []regexRule
	always  []int32          // regex rules with no literal to prefilter on
	keys    map[string]int32 // normalised custom key → rule
	own     []string         // nodesnap's own secrets (Options.Own)
	ownRule int32

	obf *obfuscator // nil unless obfuscation is on

	spread *spreadRecorder // nil unless RecordMasked was called

	mu       sync.Mutex
	mappings map[string]string // token → original, from every Writer
}

// New returns a Redactor with the built-in rules and then extra. A Rule
// without a pattern is ignored.
func New(extra ...Rule) *Redactor {
	b := newBuilder()
	for _, rl := range extra {
		if rl.Re == nil {
			continue
		}
		name := rl.Name
		if name == "" {
			name = "custom"
		}
		b.addRegex(b.ruleID(name), rl.Re, rl.Quick)
	}
	return b.finish()
}

// Default returns the built-in rule set.
func Default() *Redactor { return New() }

type builder struct {
	r     *Redactor
	words [][]byte
}

func newBuilder() *builder {
	r := &Redactor{
		names:    append([]string(nil), builtinNames[:]...),
		keys:     map[string]int32{},
		mappings: map[string]string{},
	}
	b := &builder{r: r}
	word := func(k kwKind, arg int32, ws ...string) {
		for _, w := range ws {
			b.word([]byte(w), keyword{kind: k, arg: arg})
		}
	}
	// "pass" also finds password, passwd and passphrase.
	word(kwKey, 0, "pass", "secret", "token",
		"credential", "creds", "apikey", "api_key", "api-key", "privatekey",
		"private_key", "private-key", "key-data", "accountkey", "account-key",
		"account_key", "sharedaccesskey", "auth", "pwd", "bindpw", "rootpw", "psk",
		"encryption", "signing", "hmac", "key", "sig", "private", "cert")
	word(kwCookie, 0, "cookie")
	word(kwAuth, 0, "authorization")
	word(kwBearer, 0, "bearer")
	// A JWT header is base64url of a JSON object: `{"` compact, `{\n  "`
	// or `{ "` pretty-printed.
	for _, w := range []string{"eyJ", "ewog", "ewoi", "eyAi"} {
		b.word([]byte(w), keyword{kind: kwJWT, exact: []byte(w)})
	}
	for _, w := range []string{"AKIA", "ASIA", "ABIA", "ACCA"} {
		b.word([]byte(w), keyword{kind: kwAWSKeyID, exact: []byte(w)})
	}
	for i, vt := range vendorTokens {
		b.word([]byte(vt.prefix), keyword{kind: kwVendor, arg: int32(i), exact: []byte(vt.prefix)})
	}
	b.word([]byte("Q~"), keyword{kind: kwAzureAD, exact: []byte("Q~")})
	word(kwBasic, 0, "basic ")
	b.word([]byte("=="), keyword{kind: kwPadded, exact: []byte("==")})
	for _, w := range []string{"-u", "--user"} {
		b.word([]byte(w), keyword{kind: kwUserFlag, exact: []byte(w)})
	}
	b.word([]byte("-p"), keyword{kind: kwPassFlag, exact: []byte("-p")})
	b.word([]byte("-a"), keyword{kind: kwPassFlag, arg: 1, exact: []byte("-a")})
	b.word([]byte("AQ"), keyword{kind: kwCeph, exact: []byte("AQ")})
	word(kwURL, 0, "://")
	word(kwUNC, 0, "//")
	word(kwSAS, 0, "sig=")
	b.word([]byte("-----BEGIN"), keyword{kind: kwPEMBegin, exact: []byte("-----BEGIN")})
	b.word([]byte(b64Begin), keyword{kind: kwB64PEM, exact: []byte(b64Begin)})
	word(kwDataInline, 0, `"data":`, `\"data\":`)
	word(kwDataInline, 1, `"stringdata":`, `\"stringdata\":`)
	for _, w := range []string{"$1$", "$5$", "$6$", "$y$", "$7$", "$2a$", "$2b$", "$2y$", "$apr1$", "$argon2", "{SHA}", "{SSHA}"} {
		b.word([]byte(w), keyword{kind: kwHash, exact: []byte(w)})
	}
	b.word([]byte("@"), keyword{kind: kwAt, exact: []byte("@")})
	word(kwHook, 0, "/hooks/", "/webhook/", "/webhooks/", "/webhookb2/", "/incomingwebhook/")
	word(kwLogin, 0, " login ")
	// Every dot, from the same scan: the dotted-token and bootstrap-token
	// rules start at one, and no second pass over the line looks for them.
	word(kwDot, 0, ".")
	b.addScannerWords()
	return b
}

// b64Begin is base64("-----BEGIN"): a PEM block stored base64-encoded, as in
// a kubeconfig's client-key-data or a Secret's tls.key.
const b64Begin = "LS0tLS1CRUdJTi"

func (b *builder) word(w []byte, k keyword) {
	k.n = int32(len(w))
	b.words = append(b.words, w)
	b.r.kws = append(b.r.kws, k)
}

// ruleID returns the id of the named rule, adding it if it is new.
func (b *builder) ruleID(name string) int32 {
	for i, n := range b.r.names {
		if n == name {
			return int32(i)
		}
	}
	b.r.names = append(b.r.names, name)
	return int32(len(b.r.names) - 1)
}

func (b *builder) addRegex(rule int32, re *regexp.Regexp, quick []byte) {
	idx := int32(len(b.r.regexes))
	g := re.SubexpIndex("secret")
	if g < 0 {
		g = 0
	}
	b.r.regexes = append(b.r.regexes, regexRule{rule: rule, re: re, group: g})
	lit := quick
	if lit == nil {
		lit = []byte(requiredLiteral(re))
	}
	if len(lit) < 3 {
		b.r.always = append(b.r.always, idx)
		return
	}
	// The matcher folds case, so it is a prefilter for quick and for a
	// case-insensitive pattern's literal alike.
	b.word(lit, keyword{kind: kwRegex, arg: idx})
}

func (b *builder) finish() *Redactor {
	b.r.m = newMatcher(b.words)
	b.r.off = make([]bool, len(b.r.names))
	return b.r
}

// requiredLiteral returns the longest run of literal text every match of re
// must contain, or "" if it has none (alternations, optional parts).
func requiredLiteral(re *regexp.Regexp) string {
	t, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return ""
	}
	return longestLiteral(t.Simplify())
}

func longestLiteral(t *syntax.Regexp) string {
	switch t.Op {
	case syntax.OpLiteral:
		if t.Flags&syntax.FoldCase != 0 {
			// The matcher folds ASCII only; a case-insensitive non-ASCII
			// letter could match bytes the prefilter would not see.
			for _, c := range t.Rune {
				if c > 127 {
					return ""
				}
			}
		}
		return string(t.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return longestLiteral(t.Sub[0])
	case syntax.OpRepeat:
		if t.Min >= 1 {
			return longestLiteral(t.Sub[0])
		}
	case syntax.OpConcat:
		best, run := "", ""
		for _, s := range t.Sub {
			if s.Op == syntax.OpLiteral {
				if l := longestLiteral(s); l != "" {
					run += l
					continue
				}
			}
			// Anything but usable literal text ends the run.
			if len(run) > len(best) {
				best = run
			}
			run = ""
			if l := longestLiteral(s); len(l) > len(best) {
				best = l
			}
		}
		if len(run) > len(best) {
			best = run
		}
		return best
	}
	return ""
}

// RuleNames lists the names of the rules in order: built-ins, custom rules,
// then the obfuscation counters ("obfuscate-ip", ...) when obfuscation is on.
func (r *Redactor) RuleNames() []string {
	var names []string
	for i, n := range r.names {
		if !r.off[i] {
			names = append(names, n)
		}
	}
	if r.obf != nil {
		for _, c := range r.obf.cats {
			if c.on {
				names = append(names, c.counter)
			}
		}
	}
	return names
}

// Line redacts one line (without its newline) and adds what it removed to
// counts. It has no memory of earlier lines, so it cannot see multi-line
// secrets such as PEM blocks; use a Writer for streams.
func (r *Redactor) Line(line []byte, counts map[string]int) []byte {
	var out bytes.Buffer
	w := r.NewWriter(&out)
	_, _ = w.Write(line)
	_ = w.Close()
	for k, v := range w.Counts() {
		counts[k] += v
	}
	return out.Bytes()
}

// String redacts a short string (an error message, a command line) and
// returns the counts.
func (r *Redactor) String(s string) (string, map[string]int) {
	var b bytes.Buffer
	w := r.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.String(), w.Counts()
}

// Mappings returns a copy of every obfuscation token this Redactor's
// Writers produced, mapped to the original value. The supervisor writes
// them beside the bundle, never inside it. Empty when obfuscation is off.
func (r *Redactor) Mappings() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]string, len(r.mappings))
	for k, v := range r.mappings {
		m[k] = v
	}
	return m
}

func (r *Redactor) addMapping(token, orig string) {
	r.mu.Lock()
	r.mappings[token] = orig
	r.mu.Unlock()
}
