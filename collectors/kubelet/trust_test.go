package kubelet_test

import (
	"crypto/ecdsa"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/kubelet"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"

	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// selfSigned makes a serving certificate for 127.0.0.1 signed by itself,
// as a kubelet without a CA makes its own.
func selfSigned(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	return issue(t, cn, nil, nil, nil)
}

// issue makes a serving certificate for 127.0.0.1, signed by parent (self
// when nil).
func issue(t *testing.T, cn string, orgs []string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, BasicConstraintsValid: true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// standIn is a listener on loopback serving cert, that records what
// reached it: connections, client certificates, Authorization headers.
type standIn struct {
	url                string
	mu                 sync.Mutex
	conns, clientCerts int
	auth               []string
}

func newStandIn(t *testing.T, cert tls.Certificate) *standIn {
	t.Helper()
	s := &standIn{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		io.WriteString(w, "ok\n")
	}))
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequestClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			s.mu.Lock()
			s.clientCerts += len(cs.PeerCertificates)
			s.mu.Unlock()
			return nil
		},
	}
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// A listener on the kubelet's address whose certificate is not the one
// under the root's kubelet pki gets no token, no client certificate, and
// one handshake only; what needs no credential (the healthz port) is
// still collected, and the manifest says why the rest is not.
func TestKubeletImpostorGetsNoCredential(t *testing.T) {
	noServiceAccountToken(t)
	impostor := newStandIn(t, selfSigned(t, "kubelet"))
	hz := newFakeHealthzPort(t)
	// The root's kubelet serves with another certificate, and kubeadm's
	// client certificate is there to be (not) shown.
	root := kubeletRootWith(t, selfSigned(t, "kubelet").Leaf)
	ca := testkit.NewCA(t)
	_, key := ca.WriteClientCert(t, filepath.Join(root, "etc/kubernetes/pki"), "apiserver-kubelet-client", kubeadmCN, "kubeadm:cluster-admins")
	supervisortest.Flags(t, "kubelet", "--kubelet-url", impostor.url, "--kubelet-token", goodToken,
		"--kubelet-readonly-url", "", "--kubelet-healthz-url", hz.URL)
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: root})

	impostor.mu.Lock()
	conns, certs, auth := impostor.conns, impostor.clientCerts, impostor.auth
	impostor.mu.Unlock()
	if len(auth) != 0 {
		t.Errorf("the impostor received %d requests (Authorization %q)", len(auth), auth)
	}
	if certs != 0 {
		t.Errorf("the impostor was shown %d client certificates", certs)
	}
	if conns != 1 {
		t.Errorf("%d connections to the impostor, want 1: a certificate failure is not retried", conns)
	}
	if b.Res.Status != bundle.StatusPartial {
		t.Errorf("status %q (%s), want partial", b.Res.Status, b.Res.Error)
	}
	if h := string(b.File(t, "kubelet/healthz.txt")); !strings.Contains(h, "healthz port") {
		t.Errorf("healthz.txt = %q, want the healthz port's answer", h)
	}
	rq := kubeletRequests(t, b)
	if !strings.HasPrefix(rq.TLS, "refused: ") {
		t.Errorf("requests.json tls %q, want refused", rq.TLS)
	}
	for _, want := range []string{"no credential was sent to " + strings.TrimPrefix(impostor.url, "https://"), "is not the kubelet's", "/var/lib/kubelet/pki/kubelet.crt", "not asked again"} {
		if !strings.Contains(b.Notes(), want) {
			t.Errorf("notes lack %q:\n%s", want, b.Notes())
		}
	}
	supervisortest.AssertAbsent(t, b, goodToken)
	assertNoKey(t, b, key)
}

// The kubelet's own certificate, named by its configuration
// (tlsCertFile, relative to the configuration's directory), lets the
// token through; so does a kubelet serving certificate the cluster CA
// signed (serverTLSBootstrap), found by no pin. A certificate the cluster
// CA signed for something else does not.
func TestKubeletKnownPeers(t *testing.T) {
	noServiceAccountToken(t)
	clusterCA, caKey := newTestCA(t)
	for _, tc := range []struct {
		name  string
		serve tls.Certificate
		files map[string][]byte
		token bool
	}{
		{name: "tlsCertFile", serve: selfSigned(t, "node-1"), token: true},
		{name: "ca-signed kubelet", serve: issue(t, "system:node:node-1", []string{"system:nodes"}, clusterCA, caKey), token: true,
			files: map[string][]byte{"etc/kubernetes/pki/ca.crt": pemCert(clusterCA), "etc/hostname": []byte("node-1\n")}},
		// Another node's kubelet serving certificate (its key stolen, or
		// that node's kubelet answering here): signed by the same CA,
		// valid for the address asked, and still not this node's kubelet.
		{name: "ca-signed kubelet of another node", serve: issue(t, "system:node:node-2", []string{"system:nodes"}, clusterCA, caKey), token: false,
			files: map[string][]byte{"etc/kubernetes/pki/ca.crt": pemCert(clusterCA), "etc/hostname": []byte("node-1\n")}},
		{name: "ca-signed kubelet, this node by its FQDN", serve: issue(t, "system:node:node-1.example.internal", []string{"system:nodes"}, clusterCA, caKey), token: true,
			files: map[string][]byte{"etc/kubernetes/pki/ca.crt": pemCert(clusterCA), "etc/hostname": []byte("node-1\n")}},
		{name: "ca-signed other", serve: issueNoIP(t, "etcd-peer", clusterCA, caKey), token: false,
			files: map[string][]byte{"etc/kubernetes/pki/ca.crt": pemCert(clusterCA)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := newStandIn(t, tc.serve)
			root := t.TempDir()
			files := map[string][]byte{}
			for k, v := range tc.files {
				files[k] = v
			}
			if tc.name == "tlsCertFile" {
				files["var/lib/kubelet/config.yaml"] = []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntlsCertFile: pki/serving.crt\n")
				files["var/lib/kubelet/pki/serving.crt"] = pemCert(tc.serve.Leaf)
			}
			for name, data := range files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			supervisortest.Flags(t, "kubelet", "--kubelet-url", peer.url, "--kubelet-token", goodToken,
				"--kubelet-readonly-url", "", "--kubelet-healthz-url", "")
			b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: root, NoBinary: true})
			peer.mu.Lock()
			auth := peer.auth
			peer.mu.Unlock()
			got := len(auth) > 0 && auth[0] == "Bearer "+goodToken
			if got != tc.token {
				t.Errorf("token sent: %v, want %v (requests.json tls: %q)", got, tc.token, kubeletRequests(t, b).TLS)
			}
			if !tc.token && len(auth) > 0 {
				t.Errorf("%d requests reached a peer that is not the kubelet", len(auth))
			}
		})
	}
}

func newTestCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

// issueNoIP is a serving certificate signed by parent for a DNS name only.
func issueNoIP(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) tls.Certificate {
	c := issue(t, cn, nil, parent, parentKey)
	tmpl := *c.Leaf
	tmpl.IPAddresses, tmpl.DNSNames = nil, []string{cn + ".example"}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, parent, c.Leaf.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: c.PrivateKey, Leaf: leaf}
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func TestParseKubeletServing(t *testing.T) {
	for _, tc := range []struct {
		name, data, config string
		cert, clientCA     string
		bootstrap, wantErr bool
	}{
		{name: "kubeadm", config: "/var/lib/kubelet/config.yaml",
			data:     "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nauthentication:\n  x509:\n    clientCAFile: /etc/kubernetes/pki/ca.crt\n",
			clientCA: "/etc/kubernetes/pki/ca.crt"},
		{name: "relative paths", config: "/etc/kubernetes/kubelet/config.yaml",
			data: "tlsCertFile: ../pki/kubelet.crt\nauthentication: {x509: {clientCAFile: ca.crt}}\n",
			cert: "/etc/kubernetes/pki/kubelet.crt", clientCA: "/etc/kubernetes/kubelet/ca.crt"},
		{name: "bootstrap json", config: "/k/c.json", data: `{"serverTLSBootstrap":true,"tlsCertFile":""}`, bootstrap: true},
		{name: "empty", config: "/c.yaml", data: ""},
		{name: "not yaml", config: "/c.yaml", data: "tlsCertFile: [unclosed", wantErr: true},
		{name: "wrong type", config: "/c.yaml", data: "tlsCertFile: {a: b}", wantErr: true},
		{name: "nul in path", config: "/c.yaml", data: "tlsCertFile: \"/a\\0b\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := kubelet.ParseKubeletServingForTest([]byte(tc.data), tc.config)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if s.TLSCertFile != tc.cert || s.Authentication.X509.ClientCAFile != tc.clientCA || s.ServerTLSBootstrap != tc.bootstrap {
				t.Errorf("got cert %q, client CA %q, bootstrap %v; want %q, %q, %v", s.TLSCertFile, s.Authentication.X509.ClientCAFile,
					s.ServerTLSBootstrap, tc.cert, tc.clientCA, tc.bootstrap)
			}
		})
	}
}

// A kubelet configuration under --root is the node's to write: whatever
// it holds, reading it ends without a panic, and every path it yields is
// absolute and clean.
func FuzzParseKubeletServing(f *testing.F) {
	f.Add([]byte("tlsCertFile: pki/k.crt\nserverTLSBootstrap: true\n"), "/var/lib/kubelet/config.yaml")
	f.Add([]byte(`{"authentication":{"x509":{"clientCAFile":"../../ca"}}}`), "/a/b/c.json")
	f.Add([]byte("&a [*a, *a, *a]"), "/c")
	f.Fuzz(func(t *testing.T, data []byte, config string) {
		if !strings.HasPrefix(config, "/") {
			config = "/" + config
		}
		s, err := kubelet.ParseKubeletServingForTest(data, config)
		if err != nil {
			return
		}
		for _, p := range []string{s.TLSCertFile, s.Authentication.X509.ClientCAFile} {
			if p != "" && (!strings.HasPrefix(p, "/") || filepath.Clean(p) != p) {
				t.Errorf("path %q is not absolute and clean", p)
			}
		}
	})
}

// The least-privilege role (no nodes/proxy): with --kubelet-pprof=false
// the run is complete and says what it left out; with the dumps asked for,
// everything else comes and the one remedy is the pprof opt-in, its risk
// beside it; on a kubelet without fine-grained authorization the
// refusals say so.
func TestKubeletLeastPrivilege(t *testing.T) {
	fk := newFakeKubelet(t)
	root := fk.root(t)
	args := []string{"--kubelet-url", fk.srv.URL, "--kubelet-token", leastToken, "--kubelet-readonly-url", "", "--kubelet-healthz-url", ""}

	supervisortest.Flags(t, "kubelet", append(args, "--kubelet-pprof=false")...)
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: root})
	if b.Res.Status != bundle.StatusOK {
		t.Errorf("pprof off: status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	if !strings.Contains(b.Notes(), "goroutine dumps and heap profile not asked (--kubelet-pprof=false)") {
		t.Errorf("the notes do not say the dumps were left out:\n%s", b.Notes())
	}
	fk.mu.Lock()
	pprofAsked := fk.requests["/debug/pprof/goroutine"] + fk.requests["/debug/pprof/heap"]
	fk.mu.Unlock()
	if pprofAsked != 0 {
		t.Errorf("%d pprof requests with --kubelet-pprof=false", pprofAsked)
	}

	supervisortest.Flags(t, "kubelet", args...)
	b = supervisortest.Collect(t, "kubelet", collectors.Common{Root: root, NoBinary: true})
	if b.Res.Status != bundle.StatusPartial {
		t.Errorf("pprof asked: status %q, want partial", b.Res.Status)
	}
	for _, f := range []string{"kubelet/healthz.txt", "kubelet/pods.json", "kubelet/configz.json", "kubelet/metrics.txt"} {
		b.File(t, f)
	}
	rs := remedies(t, b)
	if len(rs) != 1 || !strings.Contains(rs[0].Reason, "exec into every pod") ||
		!strings.Contains(strings.Join(rs[0].Fix, "\n"), "nodesnap manifests rbac rbac-pprof") || !strings.Contains(strings.Join(rs[0].Fix, "\n"), "--kubelet-pprof=false") {
		t.Errorf("remedies %+v, want the pprof opt-in with its risk", rs)
	}

	fk.auth.NoFineGrained = true
	b = supervisortest.Collect(t, "kubelet", collectors.Common{Root: root, NoBinary: true})
	if !strings.Contains(b.Notes(), "no fine-grained authorization (before Kubernetes 1.33, or the KubeletFineGrainedAuthz feature gate off)") {
		t.Errorf("a kubelet without fine-grained authorization is not named:\n%s", b.Notes())
	}
	if _, ok := b.Files["kubelet/metrics.txt"]; !ok {
		t.Error("metrics (nodes/metrics) missing on a kubelet without fine-grained authorization")
	}
}

// A kubelet inside k3s (no process called kubelet) is known by the
// serving certificate k3s keeps for it.
func TestKubeletEmbeddedInK3s(t *testing.T) {
	noServiceAccountToken(t)
	cert := selfSigned(t, "node-1")
	peer := newStandIn(t, cert)
	root := t.TempDir()
	p := filepath.Join(root, "var/lib/rancher/k3s/agent/serving-kubelet.crt")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, pemCert(cert.Leaf), 0o644); err != nil {
		t.Fatal(err)
	}
	supervisortest.Flags(t, "kubelet", "--kubelet-url", peer.url, "--kubelet-token", goodToken,
		"--kubelet-readonly-url", "", "--kubelet-healthz-url", "")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: root, NoBinary: true})
	peer.mu.Lock()
	auth := peer.auth
	peer.mu.Unlock()
	if len(auth) == 0 || auth[0] != "Bearer "+goodToken {
		t.Errorf("the k3s kubelet got no token; requests.json tls %q", kubeletRequests(t, b).TLS)
	}
}

// Plain HTTP proves nothing about the peer, on loopback neither: without
// --kubelet-insecure the token is not sent there.
func TestKubeletPlainHTTPGetsNoToken(t *testing.T) {
	var mu sync.Mutex
	var auth []string
	url := hostileKubelet(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "ok\n")
	})
	supervisortest.Flags(t, "kubelet", "--kubelet-url", url, "--kubelet-token", goodToken,
		"--kubelet-readonly-url", "", "--kubelet-healthz-url", "")
	b := supervisortest.Collect(t, "kubelet", collectors.Common{Root: t.TempDir(), NoBinary: true})
	mu.Lock()
	defer mu.Unlock()
	for _, a := range auth {
		if a != "" {
			t.Errorf("a plain-HTTP listener received Authorization %q", a)
		}
	}
	if !strings.Contains(b.Notes()+b.Res.Error, "plain HTTP cannot tell the kubelet from whoever listens there") {
		t.Errorf("the manifest does not say why no credential was sent:\n%s\n%s", b.Res.Error, b.Notes())
	}
}

func TestSameNode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		want  bool
	}{
		{"node-1", []string{"node-1"}, true},
		{"Node-1", []string{"node-1"}, true},
		{"node-1.example.internal", []string{"node-1"}, true},       // registered by FQDN, hostname short
		{"node-1", []string{"node-1.example.internal"}, true},       // the reverse
		{"node-1.a.internal", []string{"node-1.b.internal"}, false}, // two FQDNs must be equal
		{"node-2", []string{"node-1", "node-1.example.internal"}, false},
		{"node-10", []string{"node-1"}, false},
		{"node-1", nil, false},
	} {
		if got := kubelet.SameNodeForTest(tc.name, tc.nodes); got != tc.want {
			t.Errorf("sameNode(%q, %q) = %v, want %v", tc.name, tc.nodes, got, tc.want)
		}
	}
}
