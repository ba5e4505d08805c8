package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cleanupOrphanedPodDirs stands in for the kubelet's housekeeping stuck on
// a dead cephfs path (incident 003): a goroutine parks here, so goroutine
// dumps served by KubeletMux show this frame.
//
//go:noinline
func cleanupOrphanedPodDirs(stuck <-chan struct{}, parked chan<- struct{}) {
	close(parked)
	<-stuck
}

// KubeletMux returns a mux serving this test process's real net/http/pprof
// handlers (/debug/pprof/...) while one of its goroutines is parked in a
// function named cleanupOrphanedPodDirs, released when the test ends.
// Callers add the kubelet's other endpoints (healthz, metrics, configz,
// pods) and its authentication around it.
func KubeletMux(t testing.TB) *http.ServeMux {
	t.Helper()
	stuck, parked := make(chan struct{}), make(chan struct{})
	go cleanupOrphanedPodDirs(stuck, parked)
	<-parked
	t.Cleanup(func() { close(stuck) })
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// KubeletAuth stands in for a kubelet started with webhook authentication
// and authorization and anonymous access off (--anonymous-auth=false,
// --authentication-token-webhook, --authorization-mode=Webhook): a request
// is authenticated by a client certificate that verifies against the
// kubelet's client CA (user = CN, groups = O) or by a bearer token the API
// server's TokenReview accepts (here: Tokens); anything else is 401. The
// user is then authorized for get on nodes/<subresource> as the API
// server's SubjectAccessReview would (here: Allowed); a refusal is 403 with
// the kubelet's own wording.
type KubeletAuth struct {
	// Tokens maps a bearer token to the user it authenticates as.
	Tokens map[string]string
	// ClientCA verifies client certificates; nil accepts none.
	ClientCA *CA
	// Allowed reports whether user may get nodes/<subresource>.
	Allowed func(user, subresource string) bool
	// NoFineGrained stands in for a kubelet that authorizes /pods,
	// /healthz and /configz as nodes/proxy only.
	NoFineGrained bool
}

// KubeletSubresource is what a kubelet without fine-grained authorization
// (before 1.33, or KubeletFineGrainedAuthz off) authorizes a path as:
// /metrics and /stats have their own subresources, everything else
// (pprof, configz, pods, healthz) is nodes/proxy.
func KubeletSubresource(path string) string {
	for _, s := range []string{"metrics", "stats", "log", "spec"} {
		if path == "/"+s || strings.HasPrefix(path, "/"+s+"/") {
			return s
		}
	}
	if strings.HasPrefix(path, "/logs") {
		return "log"
	}
	return "proxy"
}

// KubeletSubresources is what a kubelet with fine-grained authorization
// (KEP-2862: 1.33 on by default) checks for a path, in order, allowing the
// request if any is allowed: /pods, /runningpods, /healthz and /configz
// their own subresource first, then nodes/proxy.
func KubeletSubresources(path string) []string {
	for _, p := range []struct{ prefix, sub string }{{"/pods", "pods"}, {"/runningpods", "pods"}, {"/healthz", "healthz"}, {"/configz", "configz"}} {
		if path == p.prefix || strings.HasPrefix(path, p.prefix+"/") {
			return []string{p.sub, KubeletSubresource(path)}
		}
	}
	return []string{KubeletSubresource(path)}
}

// Wrap puts authentication and authorization in front of h.
func (a *KubeletAuth) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := a.authenticate(r)
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		subs := KubeletSubresources(r.URL.Path)
		if a.NoFineGrained {
			subs = []string{KubeletSubresource(r.URL.Path)}
		}
		for _, sub := range subs {
			if a.Allowed != nil && a.Allowed(user, sub) {
				h.ServeHTTP(w, r)
				return
			}
		}
		// The kubelet's own wording (pkg/kubelet/server, 1.32 onwards).
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=get, resource=nodes, subresource(s)=%v)", user, subs), http.StatusForbidden)
	})
}

func (a *KubeletAuth) authenticate(r *http.Request) (string, bool) {
	// The kubelet tries the client certificate first, then the token.
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.ClientCA != nil {
		leaf := r.TLS.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: a.ClientCA.Pool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err == nil {
			return leaf.Subject.CommonName, true
		}
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if u, ok := a.Tokens[tok]; ok {
			return u, true
		}
	}
	return "", false
}

// TLSConfig asks clients for a certificate without requiring one (the
// kubelet's own setting: a request without one may still carry a token),
// and leaves its verification to Wrap.
func (a *KubeletAuth) TLSConfig() *tls.Config {
	return &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
}

// CA is a certificate authority for tests: a kubelet's client CA, or
// kubeadm's /etc/kubernetes/pki/ca.crt.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

// NewCA makes a CA valid for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, pool: pool}
}

// Pool is a pool holding the CA.
func (c *CA) Pool() *x509.CertPool { return c.pool }

// ClientCert issues a client certificate for user cn in groups orgs,
// valid from notBefore to notAfter, and returns it and its key as PEM.
func (c *CA) ClientCert(t testing.TB, cn string, orgs []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// WriteClientCert issues a client certificate valid for a day and writes
// it and its key (mode 0600) as dir/name.crt and dir/name.key, making dir.
func (c *CA) WriteClientCert(t testing.TB, dir, name, cn string, orgs ...string) (certPath, keyPath string) {
	t.Helper()
	certPEM, keyPEM := c.ClientCert(t, cn, orgs, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath
}
