package redact

import (
	"bytes"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// testdata/corpus holds files as collectors find them on a node (a kubelet
// kubeconfig, a CSI state file, a ceph keyring, journal lines, process
// command lines, mount options, cloud credentials, Secret manifests, the
// kubelet's /pods), with secrets of every kind planted in them.

// planted lists every planted secret (for keys, lines of their bodies).
var planted = []string{
	// kubeconfig: client-key-data (base64 of a PEM EC key: a stretch
	// encoding the private scalar), bootstrap token, basic-auth password
	"a3h1cTZqNkUyUm8waGJmSUZuQW45blZxVlhBak5FZXVvc0FvOGs5SlNJMkRwWGw4",
	"07401b.f395accd246ae52d",
	"Pl4nt-basic-auth-pw",
	// CSI state.json: an ed25519 key in a JSON string
	"MC4CAQAwBQYDK2VwBCIEIMZHJeKRF+YcCyPSidhoGWyjHNie+VN0SpoIf6B4fuSj",
	// ceph keyring
	"AQBvaBFZAAAAABAA6Nd5HhMJaNUmtVJ9p6Ad5Q==",
	// journal: Authorization header, JWT, ceph mount secret, proxy URL, bearer, logfmt password
	"9bXkT2Lq8Rz4Vw1Ny7Hs3Cd6Fj0Pm5Ga",
	"eyJhbGciOiJSUzI1NiIsImtpZCI6IldkM3BUMHI4In0.eyJhdWQiOlsiaHR0cHM6Ly9rdWJlcm5ldGVzLmRlZmF1bHQuc3ZjIl0sImlzcyI6Imh0dHBzOi8va3ViZXJuZXRlcy5kZWZhdWx0LnN2YyIsInN1YiI6InN5c3RlbTpzZXJ2aWNlYWNjb3VudDprdWJlLXN5c3RlbTpjc2ktcmJkcGx1Z2luIn0",
	"Vq3nR7yTtX0kP2mZb8sL5cW1dE4fG6hJ9iK0lM3nO7pQ2rS5tU8vW1xY4zA7bC0dE3fG6hJ9iK2lM5nO8pQ1rS4tU7vW0xY3zA6b",
	"Pl4nt-ceph-mount-secret",
	"Pl4nt-proxy-pw",
	"Pl4ntBearer0123456789abcdef",
	"Pl4nt-logfmt-pw",
	// process command lines
	"Pl4nt-client-secret",
	"Pl4nt-flag-token-value",
	"Pl4ntAwsSecretKey/K7MDENG+bPxRfiCYEXAMPLE",
	// fstab mount options
	"Pl4nt-cifs-pw",
	// AWS credentials file
	"AKIAPL4NTED00000KEY1",
	"Pl4ntSecretAccessKey+wJalrXUtnFEMIK7MDENG",
	// azure.json
	"Pl4nt-aad-client-secret~xyz",
	"Pl4ntAzureAccountKeyEby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq==",
	"Pl4ntSasSig%2Bq1w2e3r4t5y6%3D",
	// GCP service-account key: id and RSA key
	"d1f0c7a6b5e4d3c2b1a09f8e7d6c5b4a39281706",
	"MIICdgIBADANBgkqhkiG9w0BAQEFAASCAmAwggJcAgEAAoGBANM1dYwQSkukypMG",
	"UQf/QNTYFpDsNw==",
	// Secret manifests: data (base64 in the file), last-applied annotation, stringData
	"Pl4nt-secret-data-pw",
	"dbadmin",
	"Pl4nt-stringdata-dsn",
	// kubelet /pods: container args and env
	"Pl4nt-arg-client-secret",
	"Pl4nt-env-db-pw",
	// registry config: auth is base64(user:password)
	"puller:Pl4nt-registry-pw",
	// a key file on disk
	"MHcCAQEEIGBbqCinyc5ZqnyT7Otfxed0yYm71m0AL9a+Pz8MXa8xoAoGCCqGSM49",
	"AwEHoUQDQgAE0sFUKQldSDhWHyIEw8vyVEhIbnHgLd26eJ7NWmNDoAfAAh0T7TV9",
	"d5ybZljk7uT6zbdgEoh/LkYAeUQFlnqdJQ==",
	// containerd journal: a vendor token in prose
	"Pl4ntVendorT0kenAbCdEfGhIjKlMnOpQrSt",
	// /etc/default/kubelet: a random value under a name that says nothing
	"Pl4ntEntr0pyVa1ueQw7Er9Ty2Ui4Op6As8Df0",
	// containerd journal: a token in a format of the scanner rule table
	"0badc0de1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c",
	// kubelet journal: a bootstrap token in a join command line
	"0badc0.de0123456789ab0c",
}

// wantCounts is what the manifest must report for the corpus: every rule,
// each planted secret counted once under the rule that owns it.
var wantCounts = map[string]int{
	"kubeconfig-secret":    3, // client-key-data, token, password
	"pem-private-key":      3, // state.json, sa.json, the .key file
	"ceph-key":             1,
	"authorization-header": 1,
	"jwt":                  1,
	"mount-secret-option":  1,
	"url-credentials":      1,
	"bearer-token":         1,
	"secret-assignment":    2, // logfmt, cifs password=
	"cli-secret-flag":      3, // --client-secret=, --token NUL value, ["--client-secret","x"]
	"aws-secret-key":       2, // credentials file, env on a command line
	"aws-access-key-id":    1,
	"secret-field":         2, // aadClientSecret, registry auth
	"azure-storage-key":    1,
	"azure-sas-signature":  1,
	"gcp-private-key":      1, // private_key_id (the key itself counts as pem)
	"k8s-secret-data":      4, // two data values, last-applied, stringData block
	"env-secret":           1,
	"vendor-token":         1,
	"high-entropy-value":   1,
	"known-secret-format":  1,
	"node-credential":      1,
}

// mustStay is context the redaction must not take with it.
var mustStay = []string{
	"client-certificate-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
	"certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
	"secretfile=/etc/ceph/admin.secret",
	`"token_uri": "https://oauth2.googleapis.com/token"`,
	`"Published": null`,
	"-----BEGIN EC PRIVATE KEY-----\n[REDACTED]\n-----END EC PRIVATE KEY-----\n",
	"--token-file=/var/run/secrets/tokens/csi",
	`{"name":"API_TOKEN","valueFrom":{"secretKeyRef":{"name":"api","key":"token"}}}`,
	`"secretName":"default-token-x9z2q"`,
	"username: kubelet-bootstrap",
	"/var/lib/kubelet/plugins/kubernetes.io/csi/hostpath.csi.k8s.io/2e7c0a9f/globalmount",
	"--image-credential-provider-config=/etc/kubernetes/credential-provider.yaml",
	`name:\"sha256:3b8f2a1e6c4d4e2a9f1b7a5c0d2e8b633b8f2a1e6c4d4e2a9f1b7a5c0d2e8b63\"`,
}

// encodings are the forms a planted secret may take once encoded.
func encodings(s string) []string {
	b := []byte(s)
	return []string{
		s,
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
	}
}

func TestCorpus(t *testing.T) {
	r := Default()
	total := map[string]int{}
	var all bytes.Buffer
	err := filepath.WalkDir("testdata/corpus", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		in, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		w := r.NewWriter(&out)
		if _, err := w.Write(in); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		for k, v := range w.Counts() {
			total[k] += v
		}
		all.Write(out.Bytes())
		for _, p := range planted {
			for _, e := range encodings(p) {
				if bytes.Contains(out.Bytes(), []byte(e)) {
					t.Errorf("%s: planted secret %q survives (as %q)", path, p, e)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(planted) < 20 {
		t.Fatalf("only %d planted secrets; the issue asks for at least 20", len(planted))
	}
	// Every planted secret must actually be in the corpus, raw or encoded,
	// or the test proves nothing about it.
	var in bytes.Buffer
	_ = filepath.WalkDir("testdata/corpus", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			in.Write(b)
		}
		return nil
	})
	for _, p := range planted {
		found := false
		for _, e := range encodings(p) {
			found = found || bytes.Contains(in.Bytes(), []byte(e))
		}
		if !found {
			t.Errorf("planted secret %q is not in the corpus", p)
		}
	}
	for rule, n := range wantCounts {
		if total[rule] != n {
			t.Errorf("rule %s counted %d, want %d", rule, total[rule], n)
		}
	}
	for rule, n := range total {
		if _, ok := wantCounts[rule]; !ok {
			t.Errorf("unexpected count %s=%d", rule, n)
		}
	}
	for _, name := range BuiltinRuleNames() {
		if wantCounts[name] == 0 {
			t.Errorf("the corpus plants nothing for rule %s", name)
		}
	}
	for _, s := range mustStay {
		if !bytes.Contains(all.Bytes(), []byte(s)) {
			t.Errorf("over-redaction: %q is gone", s)
		}
	}
}
