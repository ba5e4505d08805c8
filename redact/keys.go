package redact

import "bytes"

// Deciding whether a key names a secret. The key is normalised (lower case,
// separators '-', '_', '.' and spaces removed) so DB_PASSWORD, dbPassword,
// db-password and "db.password" are one key, then:
//   - it must contain a secret stem (password, secret, token, ...);
//   - it must not end in a word that makes it metadata about a secret rather
//     than the secret itself: secretName, tokenFile, passwordRef,
//     tokenExpirationSeconds, token_type. Those values are what a support
//     engineer needs (which secret, which file) and carry nothing secret;
//   - plurals "tokens"/"secrets" are lists or counts ("max_tokens=5",
//     "secrets: [...]"), not secrets.

// secretStems are the words whose presence makes a key secret.
var secretStems = []string{
	"password", "passwd", "passphrase", "secret", "token", "credential",
	"creds", "apikey", "privatekey", "pwd", "bindpw", "rootpw", "psk",
	"encryptionkey", "signingkey", "hmackey", "requirepass", "masterauth", "authkey",
}

// metaSuffixes end keys that describe a secret without holding it.
var metaSuffixes = []string{
	"name", "names", "namespace", "ref", "refs", "reference", "file", "files",
	"filename", "path", "paths", "dir", "directory", "location",
	"expiration", "expirationseconds", "expiry", "expires", "expiresin",
	"expiresat", "seconds", "ttl", "duration", "timeout", "interval",
	"period", "type", "types", "kind", "length", "count", "size", "url",
	"uri", "endpoint", "audience", "audiences", "mode", "policy", "format",
	"enabled", "enable", "disabled", "required", "source", "provider",
	"stdin", "version", "generation", "selector", "store", "tokens",
	"secrets", "cacerthash", "verification",
	// References to a secret by the variable or the configuration holding
	// it: passwordVariable, --image-credential-provider-config.
	"variable", "config", "configuration", "cfg",
	// Settings about a secret: tokenLifetime, passwordMaxAge.
	"lifetime", "validity", "maxage", "limit", "algorithm",
}

// metaWords end keys that reference a secret when they are a word of the
// key's own (credentialsId, secret_ids, tokenVar), not letters that end
// another word ("..._an_i_d").
var metaWords = []string{"id", "ids", "var"}

// codeExtensions: a key like "token.go" is a source file in a goroutine
// frame or a compiler message ("token.go:123"), not a field.
var codeExtensions = []string{
	"go", "c", "h", "cc", "cpp", "py", "rs", "java", "js", "ts", "sh", "rb",
}

// kubeconfigKeys are the secret fields of a kubeconfig's user entry
// (including auth-provider config), matched exactly so their count is
// reported under the kubeconfig rule.
var kubeconfigKeys = []string{
	"token", "password", "id-token", "refresh-token", "access-token",
	"client-secret", "client-key-data",
}

// keyForm says how a key was written, which decides the rule that claims it.
type keyForm uint8

const (
	formField  keyForm = iota // "key": "value", Key:value, key = value (INI)
	formYAML                  // key: value starting a line, as in a kubeconfig
	formAssign                // key=value
	formFlag                  // --key=value, --key value
)

// normKey lowercases key and drops separators into buf. Over-long keys keep
// their tail, where the deciding words are.
func normKey(key []byte, buf *[96]byte) []byte {
	n := 0
	for _, b := range key {
		switch b {
		case '-', '_', '.', ' ':
			continue
		}
		if n == len(buf) {
			copy(buf[:], buf[len(buf)/2:])
			n = len(buf) / 2
		}
		buf[n] = fold(b)
		n++
	}
	return buf[:n]
}

func hasSuffixStr(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[len(b)-len(s):]) == s
}

func hasPrefixStr(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[:len(s)]) == s
}

func containsStr(b []byte, s string) bool {
	return bytes.Contains(b, []byte(s))
}

// wordSuffix reports whether key ends in the word w (lower case) as a word
// of its own: "pass", "db_pass", "dbPass", "DB-PASS", but not "bypass" or
// "compass".
func wordSuffix(key []byte, w string) bool {
	n := len(key) - len(w)
	if n < 0 || !foldEq(key[n:], w) {
		return false
	}
	if n == 0 {
		return true
	}
	switch b := key[n-1]; {
	case b == '_' || b == '-' || b == '.':
		return true
	case 'a' <= b && b <= 'z' && 'A' <= key[n] && key[n] <= 'Z':
		return true // camelCase
	}
	return false
}

// classifyKey returns the rule that redacts the value of key, or -1. key is
// the key as written, without leading dashes or quotes.
func (r *Redactor) classifyKey(key []byte, form keyForm) int32 {
	if len(key) == 0 {
		return -1
	}
	var buf [96]byte
	n := normKey(key, &buf)
	if id, ok := r.keys[string(n)]; ok {
		return id
	}
	if string(n) == "clientkeydata" {
		return ruleKubeconfig
	}
	if string(n) == "auth" && (form == formField || form == formYAML) {
		// Docker/containerd registry config: "auth" is base64(user:pass).
		return ruleField
	}
	if hasSuffixStr(n, "accountkey") || hasSuffixStr(n, "sharedaccesskey") {
		return ruleAzureKey
	}
	stem := wordSuffix(key, "pass") || wordSuffix(key, "auth")
	for _, s := range secretStems {
		if stem || containsStr(n, s) {
			stem = true
			break
		}
	}
	if !stem {
		return -1
	}
	if hasPrefixStr(n, "public") && !containsStr(n, "pass") && !containsStr(n, "secret") {
		return -1 // publicToken, public_key: published on purpose
	}
	switch {
	case hasSuffixStr(n, "csrftoken"), hasSuffixStr(n, "xsrftoken"), string(n) == "oldpwd":
		// A CSRF token lives as long as a page; OLDPWD is a directory.
		return -1
	}
	if foldEq(key, "private_key_id") {
		return ruleGCPKey
	}
	for _, s := range metaSuffixes {
		if hasSuffixStr(n, s) {
			return -1
		}
	}
	for _, s := range metaWords {
		if wordSuffix(key, s) && !hasSuffixStr(n, "secretid") {
			return -1 // but Vault's secret_id is a credential
		}
	}
	if dot := bytes.LastIndexByte(key, '.'); dot >= 0 {
		ext := key[dot+1:]
		for _, e := range codeExtensions {
			if foldEq(ext, e) {
				return -1
			}
		}
	}
	switch {
	case containsStr(n, "secretaccesskey"), containsStr(n, "aws") && containsStr(n, "sessiontoken"):
		return ruleAWSSecret
	case foldEq(key, "private_key"), foldEq(key, "private_key_id"):
		// The field names of a GCP service-account key file.
		return ruleGCPKey
	case form == formFlag:
		return ruleCLIFlag
	case form == formAssign && string(key) == "secret":
		// Lower-case secret= is the ceph/rbd mount option.
		return ruleMountSecret
	case form == formAssign:
		return ruleAssignment
	}
	if form == formYAML {
		for _, k := range kubeconfigKeys {
			if foldEq(key, k) {
				return ruleKubeconfig
			}
		}
	}
	return ruleField
}

// weakWords make a key secret only with a value that looks generated:
// "key" beside another word (license_key, auth-key, client.key),
// signature, sig, auth and private as words of their own.
var weakWords = []string{"key", "signature", "sig", "auth", "private", "hmac", "cert", "pass"}

// publicWords beside "key" say the key is no credential: topologyKey,
// publicKey, the key of a label or a map.
var publicWords = []string{
	"public", "pub", "topology", "label", "labels", "sort", "cache", "partition",
	"primary", "foreign", "node", "match", "lookup", "map", "host", "hash",
	"routing", "shard", "idempotency", "dedup", "group", "object", "field",
	"column", "index", "by", "annotation", "selector", "ssh", "gpg", "pgp",
	"fingerprint", "kms", "verify", "verification", "ca", "trust", "root",
}

// keyWords splits a key at '_', '-', '.', blanks and lower-to-upper case
// changes into ws (without allocating); it returns how many words there
// are, or -1 when there are more than len(ws).
func keyWords(key []byte, ws *[8][]byte) int {
	n, start := 0, -1
	flush := func(end int) bool {
		if start >= 0 && end > start {
			if n == len(ws) {
				return false
			}
			ws[n] = key[start:end]
			n++
		}
		start = -1
		return true
	}
	for i, c := range key {
		switch {
		case c == '_' || c == '-' || c == '.' || c == ' ':
			if !flush(i) {
				return -1
			}
		case 'A' <= c && c <= 'Z' && i > 0 && ('a' <= key[i-1] && key[i-1] <= 'z' || isDigit(key[i-1])):
			if !flush(i) {
				return -1
			}
			start = i
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if !flush(len(key)) {
		return -1
	}
	return n
}

// weakKey returns the rule for a key holding a weak secret word (see
// weakWords) and nothing that makes it public or metadata, or -1.
func weakKey(key []byte, form keyForm) int32 {
	var ws [8][]byte
	n := keyWords(key, &ws)
	if n <= 0 || n == 1 && foldEq(ws[0], "sig") {
		return -1 // a lone sig= is the SAS rule's
	}
	weak := false
	for _, w := range ws[:n] {
		for _, p := range publicWords {
			if foldEq(w, p) {
				return -1
			}
		}
		for _, ww := range weakWords {
			if foldEq(w, ww) && (ww != "key" && ww != "cert" || n > 1) {
				weak = true
			}
		}
	}
	if !weak || foldEq(ws[n-1], "cert") {
		return -1 // certificates are public
	}
	var buf [96]byte
	nk := normKey(key, &buf)
	for _, s := range metaSuffixes {
		if hasSuffixStr(nk, s) {
			return -1
		}
	}
	for _, s := range metaWords {
		if wordSuffix(key, s) {
			return -1
		}
	}
	switch form {
	case formFlag:
		return ruleCLIFlag
	case formAssign:
		return ruleAssignment
	}
	return ruleField
}

// credentialHeaders are HTTP headers whose value is a credential whatever
// it looks like (normalised as normKey does): given to curl or wget in
// quotes, any value goes.
var credentialHeaders = map[string]bool{
	"xauthtoken": true, "xapikey": true, "apikey": true, "privatetoken": true,
	"xvaulttoken": true, "xconsultoken": true, "xaccesstoken": true, "xgoogapikey": true,
	"xamzsecuritytoken": true, "xregistryauth": true, "ocpapimsubscriptionkey": true,
	"xfunctionskey": true, "xapitoken": true, "xauthkey": true, "xsessiontoken": true,
	"xnomadtoken": true, "jobtoken": true, "deploytoken": true, "xapisecret": true,
}

func credentialHeader(key []byte) bool {
	var buf [96]byte
	return credentialHeaders[string(normKey(key, &buf))]
}
