package redact

import (
	"bytes"
	"path"
	"strings"
)

// Files whose whole content is the secret, and files of ACCESS:SECRET
// lines: nothing inside them says "secret" (a k3s server token file holds
// the token and a newline), so the line rules cannot see it; their path
// does.

// WholeFileRule is the name the manifest counts a file masked whole under.
const WholeFileRule = "whole-file-secret"

// CredentialFileRule counts the secrets of colon-separated credential
// files (s3fs's passwd-s3fs, PostgreSQL's .pgpass).
const CredentialFileRule = "credential-file"

// secretPathWords name a secret when they are a word of a file's path
// (split at / . _ - and case changes).
var secretPathWords = []string{
	"token", "tokens", "secret", "secrets", "key", "password",
	"credential", "credentials", "creds", "apikey", "authkey", "psk",
}

// publicPathWords make a path no secret's: a certificate, a public key,
// a key's path or a hash of one.
var publicPathWords = []string{"pub", "public", "crt", "cert", "certs", "ca", "csr", "fingerprint", "sha256", "md5", "hash", "known", "hosts", "authorized"}

// knownSecretPaths are files of distributions and of Kubernetes that hold
// a credential and nothing else, whatever their name says ("*" is one
// path element).
var knownSecretPaths = []string{
	"/var/lib/rancher/*/server/token",
	"/var/lib/rancher/*/server/agent-token",
	"/var/lib/rancher/*/server/node-token",
	"/var/lib/rancher/*/agent/token",
	"/etc/rancher/*/token",
	"/etc/rancher/node/password",
	"/var/lib/kubelet/pods/*/volumes/kubernetes.io~projected/*/token",
	"/var/lib/kubelet/pods/*/volumes/kubernetes.io~secret/*/*",
	"/var/run/secrets/kubernetes.io/serviceaccount/token",
	"/run/secrets/kubernetes.io/serviceaccount/token",
	"/var/run/secrets/tokens/*",
	"/etc/kubernetes/pki/*.key",
	"/var/lib/kubelet/pki/*.key",
	"/etc/kubernetes/bootstrap-token",
}

// credentialFiles are ACCESS:SECRET files by base name: the last field of
// each line is the secret.
var credentialFiles = []string{"passwd-s3fs", ".passwd-s3fs", ".pgpass", "pgpass", ".passwd-goofys"}

// WholeFile masks a file read from hostPath when its path says it holds a
// secret: one made of a single token (no blank inside it, whatever its
// length) at a known secret path or a path naming a secret is replaced by
// the Marker and a newline; a credential file of colon-separated fields
// keeps all but its secrets. The value masked is recorded as any other
// (RecordMasked), so its copies elsewhere in the bundle go too. Files that
// are not such a secret come back unchanged, with no counts; the Writer
// redacts them as usual.
func (r *Redactor) WholeFile(hostPath string, data []byte) ([]byte, map[string]int) {
	p := path.Clean(hostPath)
	if credentialFile(p) {
		return r.credentialFile(data)
	}
	tok := bytes.TrimSpace(data)
	if len(tok) < 6 || bytes.ContainsAny(tok, " \t\n\r\x00") || bytes.Equal(tok, []byte(Marker)) {
		return data, nil
	}
	if !knownSecretPath(p) && !secretPath(p) {
		return data, nil
	}
	if r.spread != nil {
		r.spread.add(tok)
	}
	return []byte(Marker + "\n"), map[string]int{WholeFileRule: 1}
}

func credentialFile(p string) bool {
	base := path.Base(p)
	for _, c := range credentialFiles {
		if base == c {
			return true
		}
	}
	return false
}

func knownSecretPath(p string) bool {
	for _, pat := range knownSecretPaths {
		if ok, _ := path.Match(pat, p); ok {
			return true
		}
	}
	return false
}

// secretPath reports whether a word of p's last two elements names a
// secret and none names something public.
func secretPath(p string) bool {
	dir, base := path.Split(p)
	tail := path.Base(dir) + "/" + base
	secret := false
	for _, w := range splitPathWords(tail) {
		lw := strings.ToLower(w)
		for _, pw := range publicPathWords {
			if lw == pw {
				return false
			}
		}
		for _, sw := range secretPathWords {
			if lw == sw {
				secret = true
			}
		}
	}
	return secret
}

func splitPathWords(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || strings.IndexByte("/._-~ ", s[i]) >= 0 {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
			continue
		}
		if i > start && s[i] >= 'A' && s[i] <= 'Z' && s[i-1] >= 'a' && s[i-1] <= 'z' {
			out = append(out, s[start:i])
			start = i
		}
	}
	return out
}

// credentialFile masks the last field of every line of a colon-separated
// credential file (ACCESS:SECRET, bucket:ACCESS:SECRET,
// host:port:db:user:password), comments and blank lines kept.
func (r *Redactor) credentialFile(data []byte) ([]byte, map[string]int) {
	var out bytes.Buffer
	n := 0
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		body := bytes.TrimRight(line, "\r\n")
		t := bytes.TrimSpace(body)
		i := lastUnescapedColon(body)
		if len(t) == 0 || t[0] == '#' || i < 0 || i == len(body)-1 {
			out.Write(line)
			continue
		}
		v := body[i+1:]
		if r.spread != nil {
			r.spread.add(v)
		}
		out.Write(body[:i+1])
		out.WriteString(Marker)
		out.Write(line[len(body):])
		n++
	}
	if n == 0 {
		return data, nil
	}
	return out.Bytes(), map[string]int{CredentialFileRule: n}
}

// lastUnescapedColon is the index of the last ':' not escaped by '\'
// (.pgpass escapes colons in its fields), or -1.
func lastUnescapedColon(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ':' && (i == 0 || b[i-1] != '\\') {
			return i
		}
	}
	return -1
}
