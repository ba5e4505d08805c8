package cluster

import (
	"encoding/base64"
	"os"
	"strings"
	"testing"
)

// FuzzKubeconfig: a kubeconfig is read from the node (the kubelet's, under
// --root) and is not trusted: no input panics, and no credential is ever
// accepted without a CA to verify the server.
func FuzzKubeconfig(f *testing.F) {
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\n    certificate-authority-data: " + ca + "\nusers:\n- name: u\n  user:\n    token: abc\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"))
	f.Add([]byte("clusters:\n- name: c\n  cluster:\n    server: https://x\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"))
	f.Add([]byte("users:\n- name: u\n  user:\n    exec: {command: aws}\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		read := func(p string, max int64) ([]byte, error) {
			if p == "/kc" {
				return append([]byte(nil), data...), nil
			}
			if strings.HasSuffix(p, ".pem") || strings.HasSuffix(p, ".crt") {
				return data, nil
			}
			return nil, os.ErrNotExist
		}
		c, err := loadKubeconfig(read, "/kc", "", "test")
		if err == nil && (c.roots == nil || c.server == nil || c.server.Scheme != "https" || (c.token == "" && c.cert == nil)) {
			t.Fatalf("accepted a credential without a verifiable https server: %+v", c)
		}
	})
}
