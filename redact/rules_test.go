package redact

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// ruleCase is one input to one rule: want is the exact output, n how many
// times the rule fires. A negative case has want == in and n == 0.
type ruleCase struct {
	rule string
	in   string
	want string
	n    int
}

// pos and neg keep the tables readable.
func pos(rule, in, want string, n int) ruleCase { return ruleCase{rule, in, want, n} }
func neg(rule, in string) ruleCase              { return ruleCase{rule, in, in, 0} }

// keyBody is 64-column base64 like a real key's body.
const keyBody = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2dDRDb0xEJDMgUw5SgZ6lOQO2m7h\n" +
	"ZkhXWr5ZRrGkUvGvY8m0sdqXzjJ6s0lYwqUHvXvC8Yq1Ez0T7yL1p5Q2Wm7n3Kx9\n" +
	"a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4y5Z6A7B8C9D0E1F2\n"

func pemBlock(kind string) string {
	return "-----BEGIN " + kind + "-----\n" + keyBody + "-----END " + kind + "-----\n"
}

// criPEM is an EC key logged by a container, one CRI record a line, and a
// line after it.
func criPEM(body ...string) string {
	const p = "2026-11-23T09:23:10.000010000Z stderr F "
	s := p + "-----BEGIN EC PRIVATE KEY-----\n"
	for _, b := range body {
		s += p + b + "\n"
	}
	return s + p + "-----END EC PRIVATE KEY-----\n" + p + "next line\n"
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// wrap76 wraps base64 the way base64(1) does.
func wrap76(s string) string {
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76] + "\n")
		s = s[76:]
	}
	b.WriteString(s + "\n")
	return b.String()
}

func ruleCases() []ruleCase {
	jwt := "eyJhbGciOiJSUzI1NiIsImtpZCI6Ik1qQTJPVEUifQ.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0.dGhpcy1pcy1hLXNpZ25hdHVyZS1vZi1zb3J0cw"
	rsaB64 := b64(pemBlock("RSA PRIVATE KEY"))
	certB64 := b64("-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBATANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwptaW5p\n-----END CERTIFICATE-----\n")
	return []ruleCase{
		// authorization-header
		pos("authorization-header", "Authorization: Bearer abcdef0123456789", "Authorization: Bearer [REDACTED]", 1),
		pos("authorization-header", `curl -H "Authorization: Basic dXNlcjpwYXNzd29yZA==" https://x`, `curl -H "Authorization: Basic [REDACTED]" https://x`, 1),
		pos("authorization-header", `curl -H 'authorization: token ghp_abc123def456' https://x`, `curl -H 'authorization: token [REDACTED]' https://x`, 1),
		pos("authorization-header", `headers=map[Authorization:[Bearer s3cr3t-t0k3n] Accept:[*/*]]`, `headers=map[Authorization:[Bearer [REDACTED]] Accept:[*/*]]`, 1),
		pos("authorization-header", `{"Authorization": "Digest username=\"bob\", response=\"6629fae4\"", "x": 1}`, `{"Authorization": "Digest [REDACTED]", "x": 1}`, 1),
		pos("authorization-header", `Proxy-Authorization: Basic Ym9iOnNlY3JldA==`, `Proxy-Authorization: Basic [REDACTED]`, 1),
		neg("authorization-header", "--authorization-mode=Webhook --authorization-webhook-cache-authorized-ttl=5m"),
		neg("authorization-header", `"authorization":{"mode":"Webhook","webhook":{"cacheAuthorizedTTL":"5m0s"}}`),
		neg("authorization-header", "authorization failed for user system:node:worker-1"),
		neg("authorization-header", "Authorization: Bearer [REDACTED]"),

		// bearer-token
		pos("bearer-token", "using Bearer 8f14e45fceea167a5a36dedd4bea2543 for the request", "using Bearer [REDACTED] for the request", 1),
		neg("bearer-token", `err="invalid bearer token, square/go-jose: error in cryptographic primitive"`),
		neg("bearer-token", "falling back to bearer authentication"),
		neg("bearer-token", "--bearer-token-file=/var/run/secrets/token"),

		// jwt
		pos("jwt", "token is "+jwt+" ok", "token is [REDACTED] ok", 1),
		pos("jwt", `{"status":{"value":"`+jwt+`"}}`, `{"status":{"value":"[REDACTED]"}}`, 1),
		neg("jwt", "eyJhbGciOiJSUzI1NiJ9 alone is only a header"),

		// pem-private-key
		pos("pem-private-key", pemBlock("RSA PRIVATE KEY"), "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n-----END RSA PRIVATE KEY-----\n", 1),
		pos("pem-private-key", pemBlock("EC PRIVATE KEY"), "-----BEGIN EC PRIVATE KEY-----\n[REDACTED]\n-----END EC PRIVATE KEY-----\n", 1),
		pos("pem-private-key", pemBlock("OPENSSH PRIVATE KEY"), "-----BEGIN OPENSSH PRIVATE KEY-----\n[REDACTED]\n-----END OPENSSH PRIVATE KEY-----\n", 1),
		pos("pem-private-key", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233\n\n"+keyBody+"-----END RSA PRIVATE KEY-----\n",
			"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233\n\n[REDACTED]\n-----END RSA PRIVATE KEY-----\n", 1),
		pos("pem-private-key", "tls.key: |\n    "+strings.ReplaceAll(pemBlock("PRIVATE KEY"), "\n", "\n    ")+"x: 1\n",
			"tls.key: |\n    -----BEGIN PRIVATE KEY-----\n    [REDACTED]\n    -----END PRIVATE KEY-----\n    x: 1\n", 1),
		pos("pem-private-key", `{"key":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n","cert":"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"}`,
			`{"key":"-----BEGIN PRIVATE KEY-----[REDACTED]-----END PRIVATE KEY-----\n","cert":"-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"}`, 1),
		pos("pem-private-key", "  ca.key: "+rsaB64+"\n", "  ca.key: [REDACTED]\n", 1),
		pos("pem-private-key", wrap76(rsaB64)+"done\n", "[REDACTED]\ndone\n", 1),
		neg("pem-private-key", "-----BEGIN CERTIFICATE-----\nMIIC5zCCAc+gAwIBAgIBATANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwptaW5p\n-----END CERTIFICATE-----\n"),
		neg("pem-private-key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----\n"),
		neg("pem-private-key", "    client-certificate-data: "+certB64+"\n"),
		// A log line that only names the armour must not eat what follows.
		neg("pem-private-key", "error: expected -----BEGIN RSA PRIVATE KEY----- header\nI0101 12:00:00.000000 next line stays\n"),
		// Re-redacting a redacted key changes and counts nothing.
		neg("pem-private-key", "-----BEGIN RSA PRIVATE KEY-----\n[REDACTED]\n-----END RSA PRIVATE KEY-----\n"),

		// kubeconfig-secret
		pos("kubeconfig-secret", "    token: 0123456789abcdef0123456789abcdef\n", "    token: [REDACTED]\n", 1),
		pos("kubeconfig-secret", "    client-key-data: "+rsaB64+"\n", "    client-key-data: [REDACTED]\n", 1),
		pos("kubeconfig-secret", "    password: 'hunter2 with spaces'\n", "    password: '[REDACTED]'\n", 1),
		pos("kubeconfig-secret", "        id-token: abc.def\n        refresh-token: xyz123\n", "        id-token: [REDACTED]\n        refresh-token: [REDACTED]\n", 2),
		pos("kubeconfig-secret", "# password: changeme\n", "# password: [REDACTED]\n", 1),
		neg("kubeconfig-secret", "    client-certificate-data: "+certB64+"\n"),
		neg("kubeconfig-secret", "    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\n    tokenFile: /var/run/secrets/token\n"),
		neg("kubeconfig-secret", "    token: [REDACTED]\n"),

		// ceph-key
		pos("ceph-key", "[client.admin]\n\tkey = AQBvaBFZAAAAABAA6Nd5HhMJaNUmtVJ9p6Ad5Q==\n", "[client.admin]\n\tkey = [REDACTED]\n", 1),
		pos("ceph-key", `ceph auth get-key client.k8s: "AQD5vMFbAAAAABAAPSHbbcrBX6S8pj4xWKk7Dg=="`, `ceph auth get-key client.k8s: "[REDACTED]"`, 1),
		neg("ceph-key", "type: Opaque\naqua AQUEOUS AQ=="),

		// mount-secret-option
		pos("mount-secret-option", "mount -t ceph 10.0.0.1:6789:/ /mnt -o name=admin,secret=plainsecret,mds_namespace=x",
			"mount -t ceph 10.0.0.1:6789:/ /mnt -o name=admin,secret=[REDACTED],mds_namespace=x", 1),
		neg("mount-secret-option", "mount -t ceph 10.0.0.1:6789:/ /mnt -o name=admin,secretfile=/etc/ceph/admin.secret"),
		neg("mount-secret-option", "1520 30 0:58 / /mnt/cephfs rw,relatime shared:512 - ceph 10.0.0.1:6789:/ rw,name=admin,secret=<hidden>,acl"),

		// aws
		pos("aws-access-key-id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = [REDACTED]", 1),
		pos("aws-access-key-id", `"AccessKeyId": "ASIAY34FZKBOKMUTVV7A"`, `"AccessKeyId": "[REDACTED]"`, 1),
		neg("aws-access-key-id", "timezone Asia/Tokyo; AKIA is a prefix; AKIAIOSFODNN7EXAMPLEX"),
		pos("aws-secret-key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = [REDACTED]", 1),
		pos("aws-secret-key", "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "export AWS_SECRET_ACCESS_KEY=[REDACTED]", 1),
		pos("aws-secret-key", `"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG", "Expiration": "2024-01-01T00:00:00Z"`, `"SecretAccessKey": "[REDACTED]", "Expiration": "2024-01-01T00:00:00Z"`, 1),

		neg("aws-secret-key", "AWS_SECRET_ACCESS_KEY_FILE=/run/secrets/aws AWS_REGION=eu-west-1"),

		// azure
		pos("azure-storage-key", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
			"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=[REDACTED];EndpointSuffix=core.windows.net", 1),
		neg("azure-storage-key", "AccountName=acct;EndpointSuffix=core.windows.net storageAccountKeyRef: x"),
		pos("azure-sas-signature", "https://acct.blob.core.windows.net/c/b?sv=2020-08-04&ss=b&sp=r&sig=abc%2Bdef%3D&se=2024-01-01",
			"https://acct.blob.core.windows.net/c/b?sv=2020-08-04&ss=b&sp=r&sig=[REDACTED]&se=2024-01-01", 1),
		neg("azure-sas-signature", "kill -s sig=9 is not a url parameter; design=x"),

		// gcp
		pos("gcp-private-key", `  "private_key_id": "3f5e0c5ab4b1d8c0f27d1e7b7a7c4d5e6f708192",`, `  "private_key_id": "[REDACTED]",`, 1),
		neg("gcp-private-key", `  "client_email": "sa@proj.iam.gserviceaccount.com", "private_key_file": "/etc/gcp/key.json",`),

		// url-credentials
		pos("url-credentials", "HTTPS_PROXY=http://proxyuser:pr0xyP4ss@proxy.corp:3128", "HTTPS_PROXY=http://proxyuser:[REDACTED]@proxy.corp:3128", 1),
		pos("url-credentials", "redis://:s3cret@redis:6379/0", "redis://:[REDACTED]@redis:6379/0", 1),
		pos("url-credentials", "git clone https://bob:p@ss@git.corp/repo.git", "git clone https://bob:[REDACTED]@git.corp/repo.git", 1),
		neg("url-credentials", "https://127.0.0.1:10250/debug/pprof/goroutine?debug=2 ssh://git@github.com/x unix:///run/containerd/containerd.sock"),

		// cli-secret-flag
		pos("cli-secret-flag", "kubelet --token=abc123 --password s3cretpw --token-file=/x", "kubelet --token=[REDACTED] --password [REDACTED] --token-file=/x", 2),
		pos("cli-secret-flag", "kubeadm\x00join\x0010.0.0.1:6443\x00--token\x00abcdef.0123456789abcdef\x00--discovery-token-ca-cert-hash\x00sha256:1234",
			"kubeadm\x00join\x0010.0.0.1:6443\x00--token\x00[REDACTED]\x00--discovery-token-ca-cert-hash\x00sha256:1234", 1),
		pos("cli-secret-flag", "csi-driver --client-secret=abc --secret xyz", "csi-driver --client-secret=[REDACTED] --secret [REDACTED]", 2),
		neg("cli-secret-flag", "docker login --password-stdin -u bob registry.io"),
		neg("cli-secret-flag", "kube-apiserver --service-account-key-file=/etc/k/sa.pub --token-auth-file=/etc/k/tokens.csv --secret-name=x --enable-bootstrap-token-auth=true"),

		// secret-assignment
		pos("secret-assignment", `level=info msg="login" password=hunter2 user=bob`, `level=info msg="login" password=[REDACTED] user=bob`, 1),
		pos("secret-assignment", `DB_PASSWORD="two words" API_KEY=k-123 X=1`, `DB_PASSWORD="[REDACTED]" API_KEY=[REDACTED] X=1`, 2),
		pos("secret-assignment", "GET /v1/objects?access_token=ya29.a0AfH6SMB&page=2", "GET /v1/objects?access_token=[REDACTED]&page=2", 1),
		pos("secret-assignment", `Environment="REGISTRY_PASSWORD=pa55"`, `Environment="REGISTRY_PASSWORD=[REDACTED]"`, 1),
		neg("secret-assignment", "max_tokens=5 PASSWORD_FILE=/run/pw TOKEN_TTL=3600 token_type=Bearer enabled=true"),
		neg("secret-assignment", "if token == expected {"),

		// secret-field
		pos("secret-field", `{"apiKey": "k-8f14e45f", "user": "bob", "db": {"password": "x\"y"}}`, `{"apiKey": "[REDACTED]", "user": "bob", "db": {"password": "[REDACTED]"}}`, 2),
		pos("secret-field", `"{\"clientSecret\":\"abc\",\"id\":1}"`, `"{\"clientSecret\":\"[REDACTED]\",\"id\":1}"`, 1),
		pos("secret-field", "&Config{Host:https://10.0.0.1:6443, BearerToken:abc123secret, Password:pw}", "&Config{Host:https://10.0.0.1:6443, BearerToken:[REDACTED], Password:[REDACTED]}", 2),
		pos("secret-field", `{"auths":{"registry.io":{"auth":"dXNlcjpwYXNz","identitytoken":"xyz"}}}`, `{"auths":{"registry.io":{"auth":"[REDACTED]","identitytoken":"[REDACTED]"}}}`, 2),
		pos("secret-field", "X-Auth-Token: 0123456789abcdef\n", "X-Auth-Token: [REDACTED]\n", 1),
		pos("secret-field", "db:\n  admin_password: |\n    line one\n    line two\n  host: x\n", "db:\n  admin_password: |\n    [REDACTED]\n  host: x\n", 1),
		pos("secret-field", "[default]\nsecret_key = abc def\n", "[default]\nsecret_key = [REDACTED]\n", 1),
		neg("secret-field", "secretName: my-secret\nsecretRef:\n  name: x\ntokenExpirationSeconds: 3600\nautomountServiceAccountToken: false\n"),
		neg("secret-field", "error validating token: expired; the password: check failed"),
		neg("secret-field", `{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"},"secret":{"secretName":"x"}}`),
		neg("secret-field", "image: registry.corp/secret-app:v1.2 token.go:123 +0x1a"),

		// env-secret
		pos("env-secret", `"env":[{"name":"DB_PASSWORD","value":"hunter2"},{"name":"HOME","value":"/root"}]`, `"env":[{"name":"DB_PASSWORD","value":"[REDACTED]"},{"name":"HOME","value":"/root"}]`, 1),
		pos("env-secret", "env:\n- name: DB_PASSWORD\n  value: hunter2\n- name: X\n  value: y\n", "env:\n- name: DB_PASSWORD\n  value: [REDACTED]\n- name: X\n  value: y\n", 1),
		pos("env-secret", "Env:[]EnvVar{EnvVar{Name:API_TOKEN,Value:t0k3n,ValueFrom:nil,},}", "Env:[]EnvVar{EnvVar{Name:API_TOKEN,Value:[REDACTED],ValueFrom:nil,},}", 1),
		neg("env-secret", `{"name":"TOKEN_FILE","value":"/var/run/t"},{"name":"my-secret-vol","secret":{"secretName":"s"}}`),
		neg("env-secret", "- name: default-token-x9z2q\n  secret:\n    secretName: default-token-x9z2q\n"),

		// k8s-secret-data
		pos("k8s-secret-data", "apiVersion: v1\ndata:\n  password: aHVudGVyMg==\n  username: YWRtaW4=\nkind: Secret\nmetadata:\n  name: db\n",
			"apiVersion: v1\ndata:\n  password: [REDACTED]\n  username: [REDACTED]\nkind: Secret\nmetadata:\n  name: db\n", 2),
		pos("k8s-secret-data", "kind: Secret\nstringData:\n  config.yaml: |\n    user: a\n    pass: b\n  plain: text\ntype: Opaque\n",
			"kind: Secret\nstringData:\n  config.yaml: |\n    [REDACTED]\n  plain: [REDACTED]\ntype: Opaque\n", 2),
		pos("k8s-secret-data", "items:\n- apiVersion: v1\n  data:\n    .dockerconfigjson: eyJhdXRocyI6e319\n  kind: Secret\n",
			"items:\n- apiVersion: v1\n  data:\n    .dockerconfigjson: [REDACTED]\n  kind: Secret\n", 1),
		pos("k8s-secret-data", `"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"token\":\"aHVudGVyMg==\"},\"kind\":\"Secret\"}"`,
			`"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"data\":{\"token\":\"[REDACTED]\"},\"kind\":\"Secret\"}"`, 1),
		pos("k8s-secret-data", "{\n  \"data\": {\n    \"tls.crt\": \"Y2VydA==\",\n    \"tls.key\": \"a2V5\"\n  },\n  \"kind\": \"Secret\"\n}\n",
			"{\n  \"data\": {\n    \"tls.crt\": \"[REDACTED]\",\n    \"tls.key\": \"[REDACTED]\"\n  },\n  \"kind\": \"Secret\"\n}\n", 2),
		pos("k8s-secret-data", "apiVersion: v1\nkind: Secret\nmetadata:\n  ownerReferences:\n  - kind: Deployment\n    name: app\ndata:\n  note: not base64 but secret\n",
			"apiVersion: v1\nkind: Secret\nmetadata:\n  ownerReferences:\n  - kind: Deployment\n    name: app\ndata:\n  note: [REDACTED]\n", 1),
		neg("k8s-secret-data", "apiVersion: v1\nkind: ConfigMap\ndata:\n  mode: aGVsbG8=\n  config: |\n    a: b\n"),
		neg("k8s-secret-data", `{"apiVersion":"v1","data":{"mode":"aGVsbG8="},"kind":"ConfigMap"}`),
		neg("k8s-secret-data", "metadata:\n  name: x\nspec:\n  data: plain\n"),

		// vendor-token: the prefix says what it is; the prefix stays.
		pos("vendor-token", "failed to authorize: token ghp_Zq8Lm3Nx0Pw5Rt7Yu2Io4As6Df9Gh1Jk3Lm5 lacks read:packages",
			"failed to authorize: token ghp_[REDACTED] lacks read:packages", 1),
		pos("vendor-token", "clone with 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 done",
			"clone with github_pat_[REDACTED] done", 1),
		pos("vendor-token", "runner glrt-Xy7zQw3eRt5yUi8oPa2s registered", "runner glrt-[REDACTED] registered", 1),
		pos("vendor-token", "notify bot=xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUv channel=#ops",
			"notify bot=xoxb-[REDACTED] channel=#ops", 1),
		pos("vendor-token", "POST https://hooks.slack.com/services/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: 404",
			"POST https://hooks.slack.com/services/[REDACTED]: 404", 1),
		pos("vendor-token", `msg="api: sk-proj-Ab3De5Gh7Jk9Mn1Pq3St5Vw7Yz9Bc2Ef4Hi6Kl8"`, `msg="api: sk-proj-[REDACTED]"`, 1),
		pos("vendor-token", "remote write bearer=glc_eyJvIjoiMTIzIiwibiI6InN0YWNrIiwiayI6ImFiYyJ9Cg== ok",
			"remote write bearer=glc_[REDACTED] ok", 1),
		pos("vendor-token", "quota exceeded for key AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW", "quota exceeded for key AIza[REDACTED]", 1),
		pos("vendor-token", "vault login hvs.CAESIJ3x9Zq7Lm2Np4Rt6Vw8Yz0Ab1Cd3Ef5Gh7", "vault login hvs.[REDACTED]", 1),
		pos("vendor-token", "tenant login with y9x8Q~Wv7u6T5s4R3q2P1o0N9m8L7k6J5i4H3g2F failed", "tenant login with [REDACTED] failed", 1),
		neg("vendor-token", "release notes: abcd8Q~short and Zy9x8Q~Wv7u6T5s4R3q2P1o0N9m8L7k6J5i4H3g2F"),
		pos("vendor-token", "oauth refresh ok: ya29.a0AfB_byC3d4E5f6G7h8I9j0KlMnOpQrStUvWxYz", "oauth refresh ok: ya29.[REDACTED]", 1),
		pos("vendor-token", "using dapi0123456789abcdef0123456789abcdef for the job", "using dapi[REDACTED] for the job", 1),
		neg("vendor-token", "mounted /dev/disk-by-id/sk-Abc123 and /var/lib/hf_cache"),
		neg("vendor-token", "the rapid dapi-client and ya29 notes"),
		neg("vendor-token", "task-proj-runner sk-learn-something-long-enough-here"),
		neg("vendor-token", "ghp_ prefix named in docs, glpat-short, xoxb-1"),
		neg("vendor-token", "refreshing ghp_IaxQOZazDYHwynFz"),

		// high-entropy-value: a random value under a name that says nothing.
		pos("high-entropy-value", "mimi=Qw7Er9Ty2Ui4Op6As8Df0Gh1Jk3Lz5Xc7Vb9Nm2", "mimi=[REDACTED]", 1),
		pos("high-entropy-value", "SUPER_SEECRET_VALUE = 'bG9uZyBzdHJpbmcgb2YgcmFuZG9tIGJ5dGVzIGhlcmUx'", "SUPER_SEECRET_VALUE = '[REDACTED]'", 1),
		neg("high-entropy-value", "KUBELET_EXTRA_ARGS=--node-labels=zone=eu-west-1a,pool=Default7"),
		neg("high-entropy-value", "IMAGE_DIGEST=3b8f2a1e6c4d4e2a9f1b7a5c0d2e8b633b8f2a1e6c4d4e2a9f1b7a5c0d2e8b63"),
		neg("high-entropy-value", "NODE_UUID=3b8f2a1e-6c4d-4e2a-9f1b-7a5c0d2e8b63"),
		neg("high-entropy-value", "credentialsId = 'Zq8Lm3Nx0Pw5Rt7Yu2Io4As6Df9Gh1Jk3'"),
		neg("high-entropy-value", "HOSTNAME=ip-10-0-12-34.eu-west-1.compute.internal"),

		// Keys after a log prefix are at the start of their line.
		pos("secret-field", "2026-11-23T09:23:03.000003000Z stderr F   secret: Zx8Cv7Bn6Mm5",
			"2026-11-23T09:23:03.000003000Z stderr F   secret: [REDACTED]", 1),
		pos("secret-field", "I1123 09:20:11.000000       1 config.go:50] private-key: abc.def-ghi_jkl",
			"I1123 09:20:11.000000       1 config.go:50] private-key: [REDACTED]", 1),
		pos("secret-field", "2026-11-23T19:34:46.570985+0000 node-1 kubelet[2231]: oldpassword: hunter22",
			"2026-11-23T19:34:46.570985+0000 node-1 kubelet[2231]: oldpassword: [REDACTED]", 1),
		pos("secret-field", "Nov 23 09:20:11 node-1 app[7]: todo_secret_x = qwertyuiop",
			"Nov 23 09:20:11 node-1 app[7]: todo_secret_x = [REDACTED]", 1),
		neg("secret-field", "I1123 09:20:11.000000       1 auth.go:50] token refresh failed: the server asked for credentials"),
		// A header or a config line quoted in a log: the quote starts it.
		pos("secret-field", `I1123 09:18:07.000000 1 http.go:72] -H "apikey: 0c6d6f2e-7d4b-4c1a-9e3f-2b8a5c7d9e10" -H "Accept: x"`,
			`I1123 09:18:07.000000 1 http.go:72] -H "apikey: [REDACTED]" -H "Accept: x"`, 1),
		pos("secret-field", `level=info msg="deploy" header="X-Service-Token: 9f8e7d6c5b4a3210"`,
			`level=info msg="deploy" header="X-Service-Token: [REDACTED]"`, 1),
		neg("secret-field", `level=info msg="token: expired" user=bob`),
		// Prose, but the value is long and random.
		pos("secret-field", "daemon config sharedsecret: Ab3De5Gh7Jk9Mn1Pq3St5Vw7 loaded",
			"daemon config sharedsecret: [REDACTED] loaded", 1),
		neg("secret-field", `notes = "Maven - io.jsonwebtoken:jjwt-jackson-0.11.2"`),
		neg("secret-field", `MountVolume.SetUp failed for volume "db-creds" : secret "db-creds" not found`),
		// Vocabulary: creds, pass, *_auth, bindpw, pwd; references kept.
		pos("secret-field", "creds = Pq7Wx2Yz", "creds = [REDACTED]", 1),
		pos("secret-assignment", "cifs user=svc,pass=Hx4Jk8Ln", "cifs user=svc,pass=[REDACTED]", 1),
		pos("secret-field", `{"user_auth": "c3ZjOkh4NEprOExu"}`, `{"user_auth": "[REDACTED]"}`, 1),
		pos("secret-field", "bindpw      ldapbindsecret", "bindpw      [REDACTED]", 1),
		pos("secret-field", "machine git.example.com login deploy password hunter2", "machine git.example.com login deploy password [REDACTED]", 1),
		pos("secret-field", "machine x\n  login deploy\n  password hunter2\n", "machine x\n  login deploy\n  password [REDACTED]\n", 1),
		neg("secret-field", "I1123 09:20:11.000000 1 auth.go:50] password expired"),
		pos("secret-assignment", "user=sa;pwd=Mq3Rt8Vz;encrypt=true", "user=sa;pwd=[REDACTED];encrypt=true", 1),
		neg("secret-assignment", "PWD=/root OLDPWD=/home/bob"),
		neg("secret-field", "bypass = true, compass = north"),
		neg("secret-field", `usernamePassword(credentialsId: '3f1c', usernameVariable: 'USER', passwordVariable: 'PASS')`),
		neg("cli-secret-flag", "--image-credential-provider-config=/etc/kubernetes/credential-provider.yaml"),
		neg("secret-assignment", "PuttyPassword=0"),
		neg("secret-field", "real_secret_name: db-creds"),
		pos("secret-field", "real_secret_which_isnt_an_i_d = Kj4Lm8Np2Qr6", "real_secret_which_isnt_an_i_d = [REDACTED]", 1),
		// getenv("NAME", "default")
		pos("secret-field", `utils.GetEnvOrDefault("api_token", "7c1e9a3b-5d2f")`, `utils.GetEnvOrDefault("api_token", "[REDACTED]")`, 1),
		// Key material under "key:"/"shared:", which say no secret word.
		pos("secret-field", `      key: "cHJpdmF0ZS1rZXktYnl0ZXM=="`, `      key: "[REDACTED]"`, 1),
		pos("secret-field", `keys="{public: cHVibGljLWtleQ==, shared: cHJlc2hhcmVkLWtleQ==}"`, `keys="{public: cHVibGljLWtleQ==, shared: [REDACTED]}"`, 1),
		neg("secret-field", `key: "io.cri-containerd.image"`),
		// A value under a secret key with nothing after it.
		pos("kubeconfig-secret", "password:\n    secure: quickbrownfoxvalue\nname: x\n", "password:\n    secure: [REDACTED]\nname: x\n", 1),
		pos("secret-field", "secrets_here =\n    hunter2\n    0123456789abcdef\n[next]\n", "secrets_here =\n    [REDACTED]\n    [REDACTED]\n[next]\n", 2),
		neg("secret-field", "volumes:\n- name: db\n  secret:\n    secretName: db-creds\n    defaultMode: 420\n"),
		// JSON printed one element a line: the value on the next line.
		pos("cli-secret-flag", "\"args\": [\n  \"--client-secret\",\n  \"c0ffee-Secret\",\n  \"--v=2\"\n]\n",
			"\"args\": [\n  \"--client-secret\",\n  \"[REDACTED]\",\n  \"--v=2\"\n]\n", 1),
		pos("env-secret", "{\n  \"name\": \"DB_PASSWORD\",\n  \"value\": \"hunter2x\"\n}\n",
			"{\n  \"name\": \"DB_PASSWORD\",\n  \"value\": \"[REDACTED]\"\n}\n", 1),
		neg("cli-secret-flag", "\"args\": [\n  \"--token-file\",\n  \"/var/run/token\"\n]\n"),
		neg("env-secret", "{\n  \"name\": \"DB_HOST\",\n  \"value\": \"db.local\"\n}\n"),
		// A key logged line by line in a CRI log: each line keeps its prefix
		// (a valid CRI record), the short last body line goes too.
		pos("pem-private-key", criPEM("MHcCAQEEIGBbqCinyc5ZqnyT7Otfxed0yYm71m0AL9a+Pz8MXa8xoAoGCCqGSM49", "AwEHoUQDQgAE0sFUKQldSDhWHyIE=="),
			criPEM("[REDACTED]"), 1),
		// A backslash inside an unquoted value is part of it.
		pos("cli-secret-flag", `--admin-password=Adm1n\\pw2 --x=1`, `--admin-password=[REDACTED] --x=1`, 1),

		// Markup and code: XML elements, appSettings pairs, =>, :=.
		pos("secret-field", `<server><id>nexus</id><username>deploy</username><password>Xy7Zq9Lm</password></server>`,
			`<server><id>nexus</id><username>deploy</username><password>[REDACTED]</password></server>`, 1),
		pos("secret-field", `<add key="ApiKey" value="Xy7Zq9LmQw3" />`, `<add key="ApiKey" value="[REDACTED]" />`, 1),
		pos("secret-field", `'db_password' => 'Xy7Zq9Lm',`, `'db_password' => '[REDACTED]',`, 1),
		pos("secret-field", `  client.token := "Xy7Zq9Lm"`, `  client.token := "[REDACTED]"`, 1),
		neg("secret-field", `<passwordPolicy>strict</passwordPolicy><tokenFile>/etc/t</tokenFile>`),
		neg("secret-field", `<add key="TokenLifetime" value="3600" />`),
		// Command lines: curl's user:password, a password beside a user.
		pos("cli-secret-flag", "sshpass -p Xy7Zq9Lm ssh root@10.0.0.9", "sshpass -p [REDACTED] ssh root@10.0.0.9", 1),
		pos("cli-secret-flag", "mysql -u root -pXy7Zq9Lm appdb", "mysql -u root -p[REDACTED] appdb", 1),
		neg("cli-secret-flag", "kube-proxy -p 10256 --cluster-cidr=10.0.0.0/8"),
		pos("cli-secret-flag", "redis-cli -h 10.0.0.5 -a Zq8Lm3Nx ping", "redis-cli -h 10.0.0.5 -a [REDACTED] ping", 1),
		neg("cli-secret-flag", "tar -a -cf x.tar.gz dir"),
		pos("aws-secret-key", "aws configure set aws_secret_access_key Zq8Lm3Nx0Pw5Rt7Yu2Io4", "aws configure set aws_secret_access_key [REDACTED]", 1),
		pos("secret-field", "CONFIG SET requirepass Zq8Lm3Nx", "CONFIG SET requirepass [REDACTED]", 1),
		pos("secret-field", `signing_key = "Zq8Lm3Nx0Pw5"`, `signing_key = "[REDACTED]"`, 1),
		pos("secret-field", "encryption_key: 0123456789abcdef0123456789abcdef", "encryption_key: [REDACTED]", 1),
		neg("secret-field", "encryption: aescbc encryption_key_id: 7 --encryption-provider-config=/etc/k/enc.yaml"),
		// Cookie headers: the values are sessions.
		pos("authorization-header", "Cookie: session=Zq8Lm3NxAb1Cd2; theme=dark-mode", "Cookie: session=[REDACTED]; theme=[REDACTED]", 2),
		pos("authorization-header", `"Set-Cookie":["sid=Zq8Lm3NxAb1Cd2; Path=/; HttpOnly"]`, `"Set-Cookie":["sid=[REDACTED]; Path=/; HttpOnly"]`, 1),
		neg("authorization-header", "cookie: none set"),
		pos("cli-secret-flag", "curl -u elastic:Pw-9x8y7z https://localhost:9200", "curl -u elastic:[REDACTED] https://localhost:9200", 1),
		pos("cli-secret-flag", "curl --user kevin:'Qz8 x7' -X PATCH", "curl --user kevin:'[REDACTED]' -X PATCH", 1),
		pos("cli-secret-flag", `["curl","-u","admin:S3cr3tPw","https://x"]`, `["curl","-u","admin:[REDACTED]","https://x"]`, 1),
		pos("cli-secret-flag", "docker login registry.example.com -u robot -p Zx9Cv8Bn7", "docker login registry.example.com -u robot -p [REDACTED]", 1),
		neg("cli-secret-flag", "ssh -p 2222 admin@10.0.0.1"),
		neg("cli-secret-flag", "mysqld --user=mysql --datadir=/var/lib/mysql"),
		neg("cli-secret-flag", "useradd -u 1001 -p"),

		// Basic credentials outside a header.
		pos("authorization-header", `      "Basic c3ZjOlpxOExtM054MFB3NQ=="`, `      "[REDACTED]"`[0:7]+`Basic [REDACTED]"`, 1),
		neg("authorization-header", "basic auth is enabled for realm Basic0123"),
		neg("authorization-header", "Basic YWJjZGVmZ2hpams= decodes to no colon"),

		// Node formats by name.
		pos("node-credential", "runcmd: [kubeadm join 10.0.0.1:6443 abcdef.0123456789abcdef]", "runcmd: [kubeadm join 10.0.0.1:6443 [REDACTED]]", 1),
		pos("node-credential", "admin:$apr1$r31.....$HqJZimcKQFAMYayBlzkrA/", "admin:[REDACTED]", 1),
		pos("node-credential", "sqlplus system/Oracle123@//db.example.com:1521/ORCLPDB1", "sqlplus system/[REDACTED]@//db.example.com:1521/ORCLPDB1", 1),
		pos("node-credential", "https://discord.com/api/webhooks/1234567890/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 404",
			"https://discord.com/api/webhooks/1234567890/[REDACTED] 404", 1),
		neg("node-credential", "image docker.io/library/nginx@sha256:abc and getty@tty1.service /run/user/1000/systemd@x"),
		neg("node-credential", "kubeadm join 10.0.0.1:6443 --discovery-token-ca-cert-hash sha256:7c2e4f8a9b1d3e5f7a9c"),
		neg("node-credential", "POST /hooks/ready 200"),
		pos("cli-secret-flag", "iscsiadm -m node -T iqn.2020-01.com.x:tgt --op=update -n node.session.auth.password -v ChapS3cret99",
			"iscsiadm -m node -T iqn.2020-01.com.x:tgt --op=update -n node.session.auth.password -v [REDACTED]", 1),
		pos("cli-secret-flag", "mysql -uroot -pS3cretPass -h db", "mysql -uroot -p[REDACTED] -h db", 1),
		pos("secret-field", `staticPodURLHeader: {"X-Api-Key": ["Kx8aP2qL9mN3vB7cR5tY1wZ4"]}`, `staticPodURLHeader: {"X-Api-Key": ["[REDACTED]"]}`, 1),
		pos("secret-field", `  "license_key": "Kx8aP2qL9mN3vB7cR5tY1wZ4",`, `  "license_key": "[REDACTED]",`, 1),
		pos("secret-assignment", "DB_PASSWORD=abc(def)ghi rest", "DB_PASSWORD=[REDACTED] rest", 1),
		pos("secret-assignment", "https://s3/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=9f2c4b7e1a0d5c3b8e6f4a2d",
			"https://s3/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=[REDACTED]", 1),
		neg("secret-assignment", "NPM_TOKEN=${NPM_TOKEN}"),
		neg("secret-field", "token: <your-token>"),
		neg("secret-field", "topologyKey: kubernetes.io/hostname"),
		neg("secret-field", "publicKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGk"),

		// Formats of the generated scanner rule table.
		pos("known-secret-format", "label printer shippo_live_0a1b2c3d4e5f60718293a4b5c6d7e8f901234567 rejected",
			"label printer [REDACTED] rejected", 1),
		pos("known-secret-format", "MAILGUN_DOMAIN=mg.example.com MAILGUN_SIGNING=key-3a06f1c2b9d84e57a1c0d2e3f4a5b6c7",
			"MAILGUN_DOMAIN=mg.example.com MAILGUN_SIGNING=[REDACTED]", 1),
		neg("known-secret-format", "MAILGUN_DOMAIN=mg.example.com MAILGUN_SIGNING=key-notavalueatall"),
		neg("known-secret-format", "shippo_live_ is the prefix of a live token"),

		// AWS key ids of every published prefix.
		pos("aws-access-key-id", "accessKeyID=ABIA5X7ZQ2W4E6R8T0Y1", "accessKeyID=[REDACTED]", 1),
		pos("aws-access-key-id", "context credential ACCAZ3X5C7V9B1N2M4Q6 rejected", "context credential [REDACTED] rejected", 1),
		// A JWT whose header was pretty-printed before encoding.
		pos("jwt", "accepted "+base64.RawURLEncoding.EncodeToString([]byte("{\n  \"alg\": \"HS256\",\n  \"typ\": \"JWT\"\n}"))+".eyJzdWIiOiIxIn0.c2lnbmF0dXJlLWJ5dGVz",
			"accepted [REDACTED]", 1),
		neg("jwt", "accepted "+base64.RawURLEncoding.EncodeToString([]byte("{\n  \"name\": \"x\"\n}"))+".eyJzdWIiOiIxIn0.c2ln"),

		// Prose naming the value it prints, with nothing between them.
		pos("high-entropy-value", "geo client: using api key Qm7Zt2Lk9Wx4Rv8Pn3Ys6Hd1", "geo client: using api key [REDACTED]", 1),
		pos("high-entropy-value", "list sync with key 9f8e7d6c5b4a39281706f5e4d3c2b1a0-eu7 ok", "list sync with key [REDACTED] ok", 1),
		pos("high-entropy-value", "joined with server token 5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b.", "joined with server token [REDACTED].", 1),
		neg("high-entropy-value", "secret csi-rbd-secret not found in namespace kube-system"),
		neg("high-entropy-value", "lock key pvc-7d3f1a2b-9c8e-4f6a-b5d4-3e2f1a0b9c8d held by node-1"),
		neg("high-entropy-value", "token expired at 2026-12-07T10:00:00Z for kube-system/csi-node-sa1"),
		neg("high-entropy-value", "added public key AAAAC3NzaC1lZDI1NTE5AAAAIGx7Qm9Pz2Lk4Ws8Rt1Vn6Yd3"),
		neg("high-entropy-value", "reading key node-2.us-east-1.compute.internal from cache"),
		neg("high-entropy-value", "token sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071 pinned"),
		// Dotted generated tokens anywhere (a Discord bot token's shape).
		pos("high-entropy-value", "notifier ready (bot OTk4NzY1NDMyMTAxMjM0NTY3.Xq9Lm2.pR7sT1uV3wX5yZ8aB0cD2eF4gH6iJ)",
			"notifier ready (bot [REDACTED])", 1),
		neg("high-entropy-value", "loaded k8s.io/kubernetes/pkg/volume/csi.csiAttacher.WaitForAttach from vendor/k8s.io/kubernetes/pkg/volume/csi/csi_attacher.go"),
		// A Telegram bot token, the bot's id staying.
		pos("vendor-token", "GET https://api.telegram.org/bot5566778899:AAF3kLm9Pq2Rs7Tu1Vw4Xy8Za0Bc6De5Fg7/getMe 200",
			"GET https://api.telegram.org/bot5566778899:AA[REDACTED]/getMe 200", 1),
		// A program's "login <token>"; a registry or URL stays.
		pos("node-credential", "vault login sample_node_root_1", "vault login [REDACTED]", 1),
		neg("node-credential", "docker login registry.example.com:5000"),
		neg("node-credential", "successful login recorded for admin"),
		neg("node-credential", "kubelet: user login root_admin1 from 10.0.0.1"),
		pos("node-credential", "   2666    2666 S futex_do_wait            vault login sample_node_root_1", "   2666    2666 S futex_do_wait            vault login [REDACTED]", 1),
	}
}

func TestRules(t *testing.T) {
	r := Default()
	for _, tc := range ruleCases() {
		got, counts := r.String(tc.in)
		if got != tc.want {
			t.Errorf("%s: %q\n got %q\nwant %q", tc.rule, tc.in, got, tc.want)
			continue
		}
		if counts[tc.rule] != tc.n {
			t.Errorf("%s: %q: counted %d, want %d (all counts %v)", tc.rule, tc.in, counts[tc.rule], tc.n, counts)
		}
		total := 0
		for _, n := range counts {
			total += n
		}
		if total != tc.n {
			t.Errorf("%s: %q: other rules fired too: %v", tc.rule, tc.in, counts)
		}
		// Redacting again changes nothing and counts nothing: the manifest
		// of a re-redacted bundle must not claim new secrets.
		again, c2 := r.String(got)
		if again != got || len(c2) != 0 {
			t.Errorf("%s: not idempotent on %q: %q %v", tc.rule, got, again, c2)
		}
	}
}

// TestEveryRuleTested keeps the table honest: every built-in rule has at
// least one positive and one negative case.
func TestEveryRuleTested(t *testing.T) {
	p, n := map[string]bool{}, map[string]bool{}
	for _, tc := range ruleCases() {
		if tc.n > 0 {
			p[tc.rule] = true
		} else {
			n[tc.rule] = true
		}
	}
	for _, name := range BuiltinRuleNames() {
		if !p[name] {
			t.Errorf("rule %s has no positive case", name)
		}
		if !n[name] {
			t.Errorf("rule %s has no negative case", name)
		}
	}
}

// TestChunking: how the input is split into Write calls must not change the
// output (collectors write in whatever pieces they read).
func TestChunking(t *testing.T) {
	r := Default()
	for _, tc := range ruleCases() {
		for _, size := range []int{1, 2, 3, 7, 64} {
			var out bytes.Buffer
			w := r.NewWriter(&out)
			in := []byte(tc.in)
			for len(in) > 0 {
				n := min(size, len(in))
				if _, err := w.Write(in[:n]); err != nil {
					t.Fatal(err)
				}
				in = in[n:]
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("%s in %d-byte writes: got %q, want %q", tc.rule, size, out.String(), tc.want)
			}
		}
	}
}
