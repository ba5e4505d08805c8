package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
)

// A process listening on the kubelet's address (port 10250 needs no
// privilege; nodesnap runs when the kubelet is down) with a self-signed
// certificate that is not the one in the root's kubelet pki: through the
// real binary, it receives no token and one handshake, and the manifest
// says why the kubelet's evidence is missing. The same token given to a
// stand-in whose certificate is the root's kubelet.crt gets through.
func TestCollectKubeletImpostorGetsNoToken(t *testing.T) {
	const token = "impostor-test-token-6b1e0c9d4a7f2385"
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "kubelet"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns int
	var auth []string
	impostor := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "ok\n")
	}))
	impostor.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	impostor.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	impostor.Config.ErrorLog = log.New(io.Discard, "", 0)
	impostor.StartTLS()
	t.Cleanup(impostor.Close)

	// The root's kubelet serves with another certificate: the real one's.
	real := newE2EKubelet(t)
	root := kubeletRoot(t, real.Certificate())
	r := runNodesnap(t, 60*time.Second, []string{"NODESNAP_KUBELET_TOKEN=" + token},
		"collect", "-q", "--only", "kubelet", "--output-dir", t.TempDir(), "--root", root,
		"--kubelet-url", impostor.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "")
	mu.Lock()
	gotAuth, gotConns := auth, conns
	mu.Unlock()
	if len(gotAuth) != 0 || gotConns != 1 {
		t.Errorf("the impostor got %d requests (Authorization %q) over %d connections, want none over one handshake", len(gotAuth), gotAuth, gotConns)
	}
	if r.code != exitPartial && r.code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	c := mustValidate(t, strings.TrimSpace(r.stdout))
	k := collectorByName(t, c.Manifest, "kubelet")
	all := k.Error + "\n" + strings.Join(k.Notes, "\n")
	for _, want := range []string{"no credential was sent to " + strings.TrimPrefix(impostor.URL, "https://"), "is not the kubelet's", "/var/lib/kubelet/pki/kubelet.crt"} {
		if !strings.Contains(all, want) {
			t.Errorf("the manifest lacks %q:\n%s", want, all)
		}
	}
	if k.Status == bundle.StatusOK {
		t.Errorf("kubelet ok although nothing came from it")
	}

	// The stand-in whose certificate is the root's kubelet.crt is the
	// kubelet: the same token goes there.
	r = runNodesnap(t, 60*time.Second, []string{"NODESNAP_KUBELET_TOKEN=" + e2eKubeletToken},
		"collect", "-q", "--only", "kubelet", "--output-dir", t.TempDir(), "--root", root, "--no-binary",
		"--kubelet-url", real.URL, "--kubelet-readonly-url", "", "--kubelet-healthz-url", "")
	c = mustValidate(t, strings.TrimSpace(r.stdout))
	if k := collectorByName(t, c.Manifest, "kubelet"); k.Status != bundle.StatusOK {
		t.Errorf("kubelet %s with its own certificate under the root: %s\n%s", k.Status, k.Error, strings.Join(k.Notes, "\n"))
	}
}
