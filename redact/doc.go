package redact

import (
	"fmt"
	"io"
	"strings"
)

// WriteRedactionDoc writes docs/redaction.md: what is redacted, the
// built-in rules by name (from the rule table), the --redact-config format
// and obfuscation. A test keeps the page up to date.
func WriteRedactionDoc(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Redaction\n\n<!-- Generated from the redact package's rule table by\n" +
		"     go test ./redact -run TestRedactionDocUpToDate -update; do not edit by hand. -->\n\n")
	b.WriteString(`Everything a collector writes goes through the redactor before it touches disk: no
unredacted byte is ever written, not even in the staging directory. A secret is replaced by
` + "`[REDACTED:<rule>]`" + ` (a PEM key's body by one line saying so); the key, the shape of the line
and the text around it stay, so the evidence still reads. The manifest counts redactions per
file and per rule, never the values: ` + "`nodesnap inspect BUNDLE`" + ` shows the totals.

` + "`nodesnap redact BUNDLE`" + ` applies the same rules again, with extra ones or obfuscation, to a bundle
already collected (for a public ticket): it writes a new bundle and leaves the original alone.

## Built-in rules

All on by default, in priority order: when two rules claim the same bytes, the first one
counts them. The names are stable: the manifest counts under them and ` + "`disable:`" + ` names them.

| rule | redacts |
| --- | --- |
`)
	for _, r := range BuiltinRules() {
		fmt.Fprintf(&b, "| `%s` | %s |\n", r.Name, strings.ReplaceAll(r.Description, "|", `\|`))
	}
	b.WriteString(`
A key names a secret when, split into words at ` + "`_ - .`" + ` and case changes, it holds a secret
stem (password, passwd, secret, token, credential, pwd, ...): its whole value goes, to its real
end (quotes, brackets and parentheses inside it included). A key holding a weaker word (key
beside another word, signature, sig, auth, private, pass) masks a value that looks generated. Keys
that describe a secret (secretName, tokenFile, passwordRef, ...) or are public (publicKey,
topologyKey) stay, and so do placeholders and references: ` + "`${VAR}`, `$(cmd)`, `$VAR`, `<your-token>`, `{{ .Var }}`" + `,
` + "`valueFrom`/`secretKeyRef`" + ` entries and ` + "`sha256:`" + ` pins.

` + "`known-secret-format`" + ` compiles in the default rules of a maintained secret scanner (` + scannerRulesSource + `),
generated into ` + "`redact/rules_scanner.go`" + ` by ` + "`make redact-rules`" + ` from the version pinned in
` + "`redact/rulegen/go.mod`" + `; the generated file's header names the rules left out and why. Each rule
runs only on lines holding one of the scanner's keywords for it.

In an environment (an env file such as ` + "`/etc/default/*`" + `, an ` + "`EnvironmentFile=`" + ` target, a line
starting with ` + "`export`" + `, a unit's ` + "`Environment=`" + ` line) a variable named by a weaker word
(` + "`TS_KEY`, `NAME_KEY`, `X_RESTRICTED_KEY`, `AGENT_PRIVATE`" + `) holds what it says: its value goes whatever
it looks like, unless it is a path, a number or a boolean. Words are whole words of the name:
` + "`KEYBOARD`" + ` is no key. A daemon's log line that names the secret it prints (` + "`CHAP secret used: x`" + `,
` + "`password: x`, `token: x`" + `) loses a value of 8 or more letters and digits; one that prints it right
after the word, with nothing between (` + "`using api key x`, `sync with key x`, `server token x`" + `), loses a
value that looks generated (16 or more letters and digits spread over many characters, not a path, a
URL, a host name or an id of dashed parts). A token of three or more dotted base64url parts with long,
mixed first and last parts (a Discord bot token) goes wherever it stands, and so does the argument of a
program's ` + "`login`" + ` (` + "`vault login <token>`" + `) unless it is a flag, a URL or a host.

## Files that are a secret

Some files say nothing around their secret: a k3s server ` + "`token`" + ` file holds the token and a newline.
When nodesnap copies a host file (` + "`nodeconfig`" + `, ` + "`--config-file`" + `), its path decides first:

- a file whose content is one token (no blank inside it) at a known secret path
  (` + "`/var/lib/rancher/*/server/token`" + `, ` + "`node-token`" + `, ` + "`agent-token`" + `, ` + "`/etc/rancher/node/password`" + `, a pod's
  projected service-account ` + "`token`" + `, a Secret volume's files, ` + "`/var/run/secrets/kubernetes.io/serviceaccount/token`" + `,
  ` + "`/etc/kubernetes/pki/*.key`" + `, ` + "`/var/lib/kubelet/pki/*.key`" + `) or at a path whose last two elements hold the
  word token, secret, key, password, credential(s), creds, apikey, authkey or psk (and none of
  pub, public, crt, cert, ca, csr, hash, ...) is replaced whole by ` + "`[REDACTED]`" + `; the manifest counts it as
  ` + "`" + WholeFileRule + "`" + `;
- a colon-separated credential file (` + "`passwd-s3fs`" + `, ` + "`.passwd-s3fs`" + `, ` + "`.pgpass`" + `) keeps every field of each
  line but its last, the secret; the manifest counts them as ` + "`" + CredentialFileRule + "`" + `.

## One answer per value: ` + "`" + SpreadRule + "`" + `

A value masked anywhere in a collection is masked everywhere in its bundle, whatever the text
around its other copies says: a k3s token masked in the k3s configuration is masked in the journal
line that prints it, and so are its base64 (padded or not) and URL-encoded forms. Each collector
records what its redactor masked as keyed hashes (never the value; the key is made for the run
and never written), and before the archive is written a last pass over the staged text files finds
every other copy and masks it; the manifest counts those as ` + "`" + SpreadRule + "`" + `, per file and in its totals.
Only values of ` + fmt.Sprint(SpreadMin) + ` to ` + fmt.Sprint(SpreadMax) + ` bytes that are one token and not ordinary text (a path, a number,
a lower-case word or name, but a run of 20 or more letters with no '-' or '.' in it is looked for, a run
of one character such as ` + "`********`" + `) are looked for. Binary artifacts are left
alone.

Environments a collection reads but does not write feed the same pass: the environment of each
CSI node plugin container (from its OCI config, as the ` + "`csi`" + ` collector finds the plugins) and the
pods' ` + "`env`" + ` values the ` + "`kubelet`" + ` collector drops from ` + "`pods.json`" + `. Each variable is read as a line of an env
file would be; what the rules would mask there (` + "`DRIVER_API_KEY=x`" + `, not ` + "`CSI_ENDPOINT=unix:///csi/csi.sock`" + `)
is masked wherever the bundle holds it, a driver's log printing it bare included.

` + "`nodesnap redact`" + ` ends with the same pass over the new bundle: a value its rules mask in one file is
masked in every other, counted as ` + "`" + SpreadRule + "`" + `, and the files' sizes and digests in the new manifest
follow.

A command line is redacted once, as the line a process table shows, and that result is what both
` + "`processes/ps.txt`" + ` and ` + "`processes/tasks.json`" + ` hold.

nodesnap never carries its own secrets: ` + "`collect`" + ` masks the values it was given as credentials
(its ` + "`--upload`" + ` URL's query, fragment and password, ` + "`--kubelet-token`" + `) wherever a collector finds
them, its own command line in the process list included; the manifest counts them as
` + "`nodesnap-own-secret`" + `.

## Your own rules: ` + "`--redact-config FILE`" + `

` + "`nodesnap collect --redact-config FILE`" + ` (and ` + "`nodesnap redact --redact-config FILE`" + `) adds rules from a
YAML file. A mistake in it is reported with its line number before anything is collected.

` + "```yaml" + `
rules:
  - name: acme-db-password          # kebab-case; the manifest counts under it
    literals: ["s3cr3t-prod"]       # exact text, anywhere (and its base64)
  - name: acme-api-key
    regex: 'acme_[0-9a-f]{32}'      # Go syntax (RE2); a group named "secret"
                                    # limits the replacement to that group
  - name: acme-fields
    keys: [acme_pin, x-acme-auth]   # redact the value of these keys, in every
                                    # key/value form the built-in rules know
disable: [bearer-token]             # built-in rules to turn off, by name
obfuscate:                          # used when obfuscation is on (--obfuscate)
  hostnames: [db1.corp.example]
  hostname_patterns: ['[a-z0-9-]+\.corp\.example']
  users: [alice]
` + "```" + `

- A rule has a ` + "`name`" + ` (kebab-case, not a built-in rule's) and one of ` + "`literals`" + `, ` + "`regex`" + ` or ` + "`keys`" + `.
- A regex must not match empty text. It is only tried on lines that contain the longest
  literal text it requires: one without a literal of three characters or more is tried on
  every line and slows redaction down, so give it one (a prefix such as ` + "`acme_`" + `).
- ` + "`disable`" + ` names built-in rules from the table above; an unknown name is an error that lists
  them.

## Obfuscation: ` + "`--obfuscate ip,hostname,mac,user`" + `

Obfuscation replaces identifying values (not secrets) with consistent tokens, so that the
same host is the same token everywhere in the bundle and the evidence still joins up. The
classes are ` + "`ip`" + `, ` + "`hostname`" + `, ` + "`mac`" + ` and ` + "`user`" + `; ` + "`obfuscate:`" + ` in the config adds the names and
patterns to treat as hostnames and users. The token → value mapping is written beside the
bundle, never inside it: keep it to read the findings back, do not attach it.
`)
	_, err := io.WriteString(w, b.String())
	return err
}
