package kubelet

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/daemon"
	"github.com/nodesnap/nodesnap/collectors/nodeconfig"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// Knowing the kubelet before giving it anything. Port 10250 needs no
// privilege, and nodesnap runs exactly when the kubelet may be down: a
// credential goes only to a peer whose serving certificate is the one the
// kubelet itself serves with (found under --root), or one the cluster's CA
// issued to a kubelet. Anything else gets no credential at all.

// Where a kubelet keeps its serving certificate when its configuration
// names none: --cert-dir, by default /var/lib/kubelet/pki, holds the
// self-signed kubelet.crt, or with serverTLSBootstrap the CA-signed
// kubelet-server-current.pem (certificate and key).
const (
	kubeletDefaultCertDir    = "/var/lib/kubelet/pki"
	kubeletDefaultConfig     = "/var/lib/kubelet/config.yaml"
	kubeletSelfSignedCert    = "kubelet.crt"
	kubeletServerCurrentCert = "kubelet-server-current.pem"
	// KubeadmClusterCA is the cluster CA on a kubeadm node.
	KubeadmClusterCA = "/etc/kubernetes/pki/ca.crt"
	// ServiceAccountCAPath is the cluster CA a pod gets beside its token
	// (the kube-root-ca.crt ConfigMap), in the pod's own filesystem.
	ServiceAccountCAPath = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// embeddedKubeletCerts are the serving certificates of kubelets that run
// inside another binary (k3s, RKE2), whose flags no command line shows.
var embeddedKubeletCerts = []string{
	"/var/lib/rancher/k3s/agent/serving-kubelet.crt",
	"/var/lib/rancher/rke2/agent/serving-kubelet.crt",
}

// kubeletTrust is what the local kubelet is known to serve with.
type kubeletTrust struct {
	// pins are serving certificates found where the kubelet keeps them: a
	// peer presenting one of these is the kubelet.
	pins []pinnedCert
	// roots are cluster CAs; a peer they signed is accepted when its
	// certificate is a kubelet's serving certificate (see caVerify).
	roots  *x509.CertPool
	caFrom []string
	// where says where the kubelet's configuration was found.
	where string
	// nodes are this node's names (lower case): a cluster-CA-signed
	// kubelet certificate must be one of theirs (see nodeNames).
	nodes []string
}

type pinnedCert struct {
	cert *x509.Certificate
	from string
}

func (t *kubeletTrust) empty() bool { return len(t.pins) == 0 && len(t.caFrom) == 0 }

// sources words what the peer is checked against, for a note.
func (t *kubeletTrust) sources() string {
	var s []string
	for _, p := range t.pins {
		s = append(s, "the serving certificate "+p.from)
	}
	for _, c := range t.caFrom {
		s = append(s, "a kubelet certificate signed by the cluster CA "+c)
	}
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, ", or ")
}

// kubeletCertError is a peer that is not the kubelet: its certificate
// matches nothing the kubelet is known to serve with.
type kubeletCertError struct{ msg string }

func (e *kubeletCertError) Error() string { return e.msg }

// verify decides whether the peer of a TLS connection is the kubelet. It
// returns what vouched for it.
func (t *kubeletTrust) verify(cs tls.ConnectionState) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", &kubeletCertError{"the peer presented no certificate"}
	}
	leaf := cs.PeerCertificates[0]
	for _, p := range t.pins {
		if bytes.Equal(leaf.Raw, p.cert.Raw) {
			return "its certificate is " + p.from, nil
		}
	}
	if t.roots != nil {
		how, err := caVerify(leaf, cs.PeerCertificates[1:], t.roots, cs.ServerName, t.nodes)
		if err == nil {
			return how, nil
		}
		var other *otherNodeError
		if errors.As(err, &other) {
			return "", &kubeletCertError{other.Error()}
		}
	}
	subject := leaf.Subject.CommonName
	if subject == "" {
		subject = leaf.Subject.String()
	}
	return "", &kubeletCertError{fmt.Sprintf("its certificate (subject %q, issuer %q) is not the kubelet's: it matches none of %s",
		subject, leaf.Issuer.CommonName, t.sources())}
}

// caVerify accepts a certificate that chains to roots, is valid now for
// serving, and is either this node's kubelet serving certificate as the
// kubelet-serving signer issues them (CN system:node:NAME, O system:nodes,
// NAME one of nodes) or valid for the address asked (serverName). Another
// node's kubelet certificate is refused: whoever holds that node's key is
// not this node's kubelet.
func caVerify(leaf *x509.Certificate, inter []*x509.Certificate, roots *x509.CertPool, serverName string, nodes []string) (string, error) {
	pool := x509.NewCertPool()
	for _, c := range inter {
		pool.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return "", err
	}
	if name, ok := strings.CutPrefix(leaf.Subject.CommonName, "system:node:"); ok && name != "" && hasOrg(leaf, "system:nodes") {
		if sameNode(name, nodes) {
			return "its certificate is node " + name + "'s serving certificate (this node), signed by the cluster CA", nil
		}
		// Another node's kubelet: only where the operator's URL names
		// that node (--kubelet-url https://node-2:10250), never on this
		// node's own addresses.
		if serverName == "" || loopback(serverName) || leaf.VerifyHostname(serverName) != nil {
			return "", &otherNodeError{name: name, nodes: nodes}
		}
	}
	if serverName != "" && leaf.VerifyHostname(serverName) == nil {
		return "its certificate is signed by the cluster CA for " + serverName, nil
	}
	return "", errors.New("signed by the cluster CA but neither this node's kubelet serving certificate nor valid for " + serverName)
}

// loopback reports whether host is this machine by name or address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// otherNodeError is a kubelet serving certificate of a node that is not
// this one.
type otherNodeError struct {
	name  string
	nodes []string
}

func (e *otherNodeError) Error() string {
	if len(e.nodes) == 0 {
		return fmt.Sprintf("its certificate is node %s's kubelet serving certificate, but this node's name is unknown (no hostname, --hostname-override or kubelet client certificate under the root), so it cannot be told from another node's", e.name)
	}
	return fmt.Sprintf("its certificate is node %s's kubelet serving certificate, not this node's (%s): another node's certificate does not make its holder this node's kubelet",
		e.name, strings.Join(e.nodes, ", "))
}

// sameNode reports whether a node name is one of this node's names: equal
// ignoring case, or, where one of the two is a bare host name, equal in
// their first label (a kubelet registered by its FQDN on a host whose
// hostname is short, or the reverse).
func sameNode(name string, nodes []string) bool {
	name = strings.ToLower(name)
	for _, n := range nodes {
		if n == name {
			return true
		}
		if !strings.Contains(n, ".") || !strings.Contains(name, ".") {
			a, _, _ := strings.Cut(n, ".")
			b, _, _ := strings.Cut(name, ".")
			if a != "" && a == b {
				return true
			}
		}
	}
	return false
}

func hasOrg(c *x509.Certificate, org string) bool {
	for _, o := range c.Subject.Organization {
		if o == org {
			return true
		}
	}
	return false
}

// kubeletServing is what a kubelet's configuration file says about its
// serving certificate. Relative paths are the config file's directory's.
type kubeletServing struct {
	TLSCertFile        string `json:"tlsCertFile"`
	ServerTLSBootstrap bool   `json:"serverTLSBootstrap"`
	Authentication     struct {
		X509 struct {
			ClientCAFile string `json:"clientCAFile"`
		} `json:"x509"`
	} `json:"authentication"`
}

// parseKubeletServing reads a KubeletConfiguration (YAML or JSON) for its
// serving certificate and client CA, with paths made absolute against the
// file's directory.
func parseKubeletServing(data []byte, configPath string) (kubeletServing, error) {
	var s kubeletServing
	if err := yaml.Unmarshal(data, &s); err != nil {
		return kubeletServing{}, fmt.Errorf("the kubelet configuration %s is not YAML a kubelet reads: %w", configPath, err)
	}
	abs := func(p string) string {
		if p == "" || strings.ContainsRune(p, 0) {
			return ""
		}
		if !path.IsAbs(p) {
			p = path.Join(path.Dir(configPath), p)
		}
		return path.Clean(p)
	}
	s.TLSCertFile = abs(s.TLSCertFile)
	s.Authentication.X509.ClientCAFile = abs(s.Authentication.X509.ClientCAFile)
	return s, nil
}

// kubeletTrustFlags are the kubelet's command-line flags that say where its
// serving certificate is.
var kubeletTrustFlags = []string{"--config", "--tls-cert-file", "--cert-dir", "--client-ca-file", "--hostname-override"}

// runningKubelet finds the kubelet the kernel vouches for (package
// daemon: root in the node's user namespace, a root-owned executable) and
// returns its flags that matter here (the last value of each). A process
// calling itself kubelet that fails a check is not the kubelet: refused
// names it and the check.
func runningKubelet(ctx context.Context, env *collectors.Env) (flags map[string]string, who string, refused []string) {
	kubelets, bad := daemon.Kubelets(ctx, env, 1)
	for _, r := range bad {
		refused = append(refused, r.String())
	}
	if len(kubelets) == 0 {
		return nil, "", refused
	}
	k := kubelets[0]
	flags = map[string]string{}
	for _, fv := range nodeconfig.ConfigPathsFromCmdline(k.Args, kubeletTrustFlags, "") {
		flags[fv.Flag] = fv.Value
	}
	return flags, "kubelet pid " + strconv.Itoa(k.PID), refused
}

// findKubeletTrust gathers what the local kubelet serves with: the
// certificate its configuration names (tlsCertFile, --tls-cert-file), the
// certificates in its certificate directory, and the cluster CA (the
// pod's, kubeadm's, the kubelet's client CA). Every file is read under
// --root through an isolated read. problems are what could not be used.
func findKubeletTrust(ctx context.Context, env *collectors.Env) (t kubeletTrust, problems []string) {
	flags, who, refused := runningKubelet(ctx, env)
	problems = append(problems, refused...)
	configPath := kubeletDefaultConfig
	t.where = "the default paths (no running kubelet found)"
	if who != "" {
		t.where = "the command line of " + who
		if v := flags["--config"]; v != "" {
			configPath = v
		}
	}
	certDir := kubeletDefaultCertDir
	if v := flags["--cert-dir"]; v != "" {
		certDir = v
	}
	tlsCert := flags["--tls-cert-file"]
	clientCA := flags["--client-ca-file"]
	bootstrap := false
	if r, err := env.Host().Read(ctx, hostfs.Clean(configPath), 1<<20); err == nil {
		s, perr := parseKubeletServing(r.Data, configPath)
		switch {
		case perr != nil:
			problems = append(problems, perr.Error())
		default:
			// Flags win over the file, as in the kubelet.
			if tlsCert == "" {
				tlsCert = s.TLSCertFile
			}
			if clientCA == "" {
				clientCA = s.Authentication.X509.ClientCAFile
			}
			bootstrap = s.ServerTLSBootstrap
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		problems = append(problems, fmt.Sprintf("cannot read the kubelet configuration %s: %v", configPath, err))
	}

	pin := func(p string) {
		r, err := env.Host().Read(ctx, hostfs.Clean(p), 1<<20)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				problems = append(problems, fmt.Sprintf("cannot read the kubelet's serving certificate %s: %v", p, err))
			}
			return
		}
		c := firstCert(r.Data)
		clear(r.Data) // kubelet-server-current.pem holds the key too
		if c == nil {
			problems = append(problems, fmt.Sprintf("%s holds no PEM certificate", p))
			return
		}
		t.pins = append(t.pins, pinnedCert{cert: c, from: p})
	}
	switch {
	case tlsCert != "":
		pin(tlsCert)
	case bootstrap:
		pin(path.Join(certDir, kubeletServerCurrentCert))
	default:
		pin(path.Join(certDir, kubeletSelfSignedCert))
		pin(path.Join(certDir, kubeletServerCurrentCert))
		if who == "" {
			// No process called kubelet: k3s and RKE2 run it inside
			// their own binary, with its serving certificate here.
			for _, p := range embeddedKubeletCerts {
				pin(p)
			}
		}
	}

	t.nodes = nodeNames(ctx, env, flags["--hostname-override"], certDir)

	t.roots = x509.NewCertPool()
	addCA := func(data []byte, from string) {
		if t.roots.AppendCertsFromPEM(data) {
			t.caFrom = append(t.caFrom, from)
		}
	}
	// The pod's own CA: in nodesnap's pod, not under --root.
	var r isolate.ReadFileResult
	if err := env.Do(ctx, isolate.OpReadFile, ServiceAccountCAPath, isolate.ReadFileRequest{Path: ServiceAccountCAPath, Max: 1 << 20}, &r); err == nil {
		addCA(r.Data, ServiceAccountCAPath)
	}
	for _, p := range []string{clientCA, KubeadmClusterCA} {
		if p == "" {
			continue
		}
		if r, err := env.Host().Read(ctx, hostfs.Clean(p), 1<<20); err == nil {
			addCA(r.Data, p)
		}
	}
	if len(t.caFrom) == 0 {
		t.roots = nil
	}
	return t, problems
}

// firstCert is the first certificate of a PEM file (the leaf).
func firstCert(data []byte) *x509.Certificate {
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil
		}
		return c
	}
	return nil
}

// kubeletPreflight makes one TLS handshake with the kubelet's port before
// any request, so that a peer that is not the kubelet is found once, said
// once, and never asked again: a certificate failure is not retried. A
// port that refuses or does not finish a handshake is not asked again
// either: every request would meet the same.
func kubeletPreflight(ctx context.Context, cfg *tls.Config, host string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := &tls.Dialer{Config: cfg, NetDialer: &net.Dialer{}}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	_ = conn.Close() // a handshake only: nothing was sent, nothing is owed
	return nil
}

// kubeletCertFailure reports an error that says the peer's certificate
// was not accepted.
func kubeletCertFailure(err error) bool {
	var ce *kubeletCertError
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ce) || errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// nodeNameEnv is the node's name a pod of the manifests is given
// (cluster.NodeNameEnv, from spec.nodeName).
const nodeNameEnv = "NODESNAP_NODE"

// nodeNames are the names this node goes by, lower case: the one its pod
// was scheduled on, the kubelet's --hostname-override, the node its
// kubelet's client certificate names (system:node:NAME), and its host
// name (the kernel's and /etc/hostname under the root), which is the
// kubelet's default node name.
func nodeNames(ctx context.Context, env *collectors.Env, override, certDir string) []string {
	var out []string
	add := func(s string) {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" || strings.ContainsAny(s, " \t\n/") || len(s) > 253 {
			return
		}
		for _, have := range out {
			if have == s {
				return
			}
		}
		out = append(out, s)
	}
	add(os.Getenv(nodeNameEnv))
	add(override)
	if r, err := env.Host().Read(ctx, hostfs.Path(path.Join(certDir, "kubelet-client-current.pem")), 1<<20); err == nil {
		if c := firstCert(r.Data); c != nil {
			if n, ok := strings.CutPrefix(c.Subject.CommonName, "system:node:"); ok {
				add(n)
			}
		}
		clear(r.Data) // the client key is in the same file
	}
	for _, p := range []hostfs.Path{"/proc/sys/kernel/hostname", "/etc/hostname"} {
		if r, err := env.Host().Read(ctx, p, 4096); err == nil {
			add(string(r.Data))
		}
	}
	return out
}
