package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/daemon"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// How the cluster collector finds a credential for the API server, most
// deliberate first, least privileged by default:
//
//  1. --kubeconfig: the operator chose it.
//  2. The pod's own service account (/var/run/secrets/kubernetes.io/
//     serviceaccount/token and ca.crt, the API server from
//     KUBERNETES_SERVICE_HOST/PORT): nodesnap runs as a pod of the
//     manifests, whose ClusterRole is get/list on exactly what it reads.
//  3. $KUBECONFIG: the operator's environment said so.
//  4. The kubelet's own kubeconfig on the host (/etc/kubernetes/kubelet.conf
//     of kubeadm, /var/lib/kubelet/kubeconfig, k3s's): the node's identity
//     system:node:NAME, which the Node authorizer lets read this node, the
//     pods bound to it and their volumes, and nothing of other nodes.
//
// /etc/kubernetes/admin.conf is never taken by itself: it is cluster-admin,
// far more than reading one node's view needs. Pass it with --kubeconfig
// where the kubelet's identity is not enough (it cannot list events).

// ServiceAccountDir is where a pod's token and CA are projected; like the
// kubelet collector's token it is not under --root: it is nodesnap's own.
var ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// KubeletKubeconfigs are where kubelets keep their kubeconfig, host paths
// read under --root.
var KubeletKubeconfigs = []string{
	"/etc/kubernetes/kubelet.conf",
	"/var/lib/kubelet/kubeconfig",
	"/etc/kubernetes/kubelet.kubeconfig",
	"/var/lib/rancher/k3s/agent/kubelet.kubeconfig",
}

// credential is how to reach the API server. It lives only in the
// collector's memory.
type credential struct {
	server   *url.URL
	roots    *x509.CertPool
	tlsName  string
	token    string
	cert     *tls.Certificate
	source   string // said in requests.json and the manifest; never the secret
	tlsHow   string
	identity string // the client certificate's user, when known
	rootsPEM []byte // the CA certificates of a kubeconfig
}

// errNoCredential: nothing to authenticate with; the collector is
// unsupported, not failed.
var errNoCredential = errors.New("no credential for the API server")

// reader reads a file nodesnap sees (own) or a host path (under --root).
type reader struct {
	ctx context.Context
	env *collectors.Env
}

func (r reader) own(p string, max int64) ([]byte, error) {
	var res isolate.ReadFileResult
	if err := r.env.Do(r.ctx, isolate.OpReadFile, p, isolate.ReadFileRequest{Path: p, Max: max}, &res); err != nil {
		return nil, err
	}
	return res.Data, nil
}

func (r reader) host(p string, max int64) ([]byte, error) {
	res, err := r.env.Host().Read(r.ctx, hostfs.Clean(p), max)
	if err != nil {
		return nil, err
	}
	return res.Data, nil
}

// resolveCredential picks the credential (see above); notes are what the
// manifest should say about candidates passed over.
func resolveCredential(ctx context.Context, env *collectors.Env, o Options) (*credential, []string, error) {
	rd := reader{ctx, env}
	var notes []string
	if o.Kubeconfig != "" {
		c, err := loadKubeconfig(rd.own, o.Kubeconfig, o.Context, "--kubeconfig "+o.Kubeconfig)
		return c, nil, err
	}
	kubelets, refused := kubeletKubeconfigs(ctx, env, rd)
	notes = append(notes, refused...)
	if c, err := serviceAccount(rd); err == nil {
		// The pod runs in the node's network: reach the API server as the
		// node's kubelet does, not through the Service address, which
		// needs the node's service proxy (itself maybe what is sick).
		for _, k := range kubelets {
			if kc, err := loadKubeconfigFor(k.read, k.path, "", k.what, false); err == nil {
				c.server, c.tlsName = kc.server, kc.tlsName
				c.roots = mergePools(c.roots, kc.rootsPEM)
				c.source += "; the API server at the address " + k.what + " names"
				break
			}
		}
		return c, notes, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		notes = append(notes, err.Error())
	}
	if kc := os.Getenv("KUBECONFIG"); kc != "" {
		first, _, _ := strings.Cut(kc, ":")
		c, err := loadKubeconfig(rd.own, first, o.Context, "$KUBECONFIG "+first)
		if err == nil {
			return c, notes, nil
		}
		notes = append(notes, err.Error())
	}
	for _, k := range kubelets {
		c, err := loadKubeconfig(k.read, k.path, "", k.what)
		switch {
		case err == nil:
			return c, notes, nil
		case errors.Is(err, os.ErrNotExist):
		default:
			notes = append(notes, err.Error())
		}
	}
	return nil, notes, errNoCredential
}

// serviceAccount is the pod's own token, CA and in-cluster address.
func serviceAccount(rd reader) (*credential, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	tok, err := rd.own(path.Join(ServiceAccountDir, "token"), 64<<10)
	if err != nil {
		return nil, err
	}
	if host == "" || port == "" {
		return nil, fmt.Errorf("a service-account token is at %s but KUBERNETES_SERVICE_HOST/PORT are not set: not in a pod", ServiceAccountDir)
	}
	ca, err := rd.own(path.Join(ServiceAccountDir, "ca.crt"), 4<<20)
	if err != nil {
		return nil, fmt.Errorf("the service-account token has no ca.crt beside it (%w): the API server's certificate cannot be verified, so the token is not sent", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/ca.crt holds no PEM certificate", ServiceAccountDir)
	}
	u := &url.URL{Scheme: "https", Host: joinHostPort(host, port)}
	t := strings.TrimSpace(string(tok))
	if t == "" {
		return nil, fmt.Errorf("%s/token is empty", ServiceAccountDir)
	}
	return &credential{server: u, roots: pool, token: t, source: "the pod's service-account token " + ServiceAccountDir + "/token",
		tlsHow: "verified against " + ServiceAccountDir + "/ca.crt"}, nil
}

func joinHostPort(h, p string) string {
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		h = "[" + h + "]"
	}
	return h + ":" + p
}

// kubeconfig is the part of a kubeconfig file the collector reads.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData string `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
			TLSServerName            string `json:"tls-server-name"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			Token                 string `json:"token"`
			TokenFile             string `json:"tokenFile"`
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData string `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         string `json:"client-key-data"`
			Exec                  *struct {
				Command string `json:"command"`
			} `json:"exec"`
			AuthProvider *struct {
				Name string `json:"name"`
			} `json:"auth-provider"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
}

// loadKubeconfig reads a kubeconfig with read (own or host files: the
// files it names are read the same way, relative to its directory).
func loadKubeconfig(read func(string, int64) ([]byte, error), p, ctxName, what string) (*credential, error) {
	return loadKubeconfigFor(read, p, ctxName, what, true)
}

// loadKubeconfigFor reads a kubeconfig; without needUser, only its server
// and CA (the user's credential is neither read nor required).
func loadKubeconfigFor(read func(string, int64) ([]byte, error), p, ctxName, what string, needUser bool) (*credential, error) {
	raw, err := read(p, 1<<20)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", what, os.ErrNotExist)
		}
		return nil, fmt.Errorf("%s cannot be read: %w", what, err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(raw, &kc); err != nil {
		return nil, fmt.Errorf("%s is not a kubeconfig: %w", what, err)
	}
	clear(raw)
	name := ctxName
	if name == "" {
		name = kc.CurrentContext
	}
	var clusterName, userName string
	for _, c := range kc.Contexts {
		if c.Name == name {
			clusterName, userName = c.Context.Cluster, c.Context.User
		}
	}
	if clusterName == "" && len(kc.Contexts) == 1 && ctxName == "" {
		clusterName, userName = kc.Contexts[0].Context.Cluster, kc.Contexts[0].Context.User
	}
	if clusterName == "" {
		return nil, fmt.Errorf("%s has no context %q", what, name)
	}
	rel := func(f string) string {
		if f == "" || path.IsAbs(f) {
			return f
		}
		return path.Join(path.Dir(p), f)
	}
	c := &credential{}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Name != clusterName {
			continue
		}
		found = true
		u, err := url.Parse(cl.Cluster.Server)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%s: cluster %s has no usable server address", what, clusterName)
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("%s: the server %s is not https: a credential is never sent in clear", what, u.Host)
		}
		u.User, u.RawQuery, u.Fragment = nil, "", ""
		u.Path = strings.TrimSuffix(u.Path, "/")
		c.server = u
		c.tlsName = cl.Cluster.TLSServerName
		var ca []byte
		switch {
		case cl.Cluster.CertificateAuthorityData != "":
			ca, err = base64.StdEncoding.DecodeString(cl.Cluster.CertificateAuthorityData)
			if err != nil {
				return nil, fmt.Errorf("%s: certificate-authority-data is not base64: %w", what, err)
			}
			c.tlsHow = "verified against the certificate-authority-data of " + what
		case cl.Cluster.CertificateAuthority != "":
			ca, err = read(rel(cl.Cluster.CertificateAuthority), 4<<20)
			if err != nil {
				return nil, fmt.Errorf("%s: its certificate-authority %s cannot be read: %w", what, cl.Cluster.CertificateAuthority, err)
			}
			c.tlsHow = "verified against " + rel(cl.Cluster.CertificateAuthority)
		case cl.Cluster.InsecureSkipTLSVerify:
			return nil, fmt.Errorf("%s says insecure-skip-tls-verify: nodesnap never sends a credential to a server it cannot verify; give it a kubeconfig with the cluster's CA", what)
		default:
			return nil, fmt.Errorf("%s names no certificate authority for %s: the server cannot be verified, so no credential is sent", what, u.Host)
		}
		c.roots = x509.NewCertPool()
		c.rootsPEM = ca
		if !c.roots.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%s: its certificate authority holds no PEM certificate", what)
		}
	}
	if !found {
		return nil, fmt.Errorf("%s has no cluster %q", what, clusterName)
	}
	if !needUser {
		c.source = what
		return c, nil
	}
	for _, us := range kc.Users {
		if us.Name != userName {
			continue
		}
		u := us.User
		switch {
		case u.Exec != nil || u.AuthProvider != nil:
			return nil, fmt.Errorf("%s authenticates through a plugin (exec or auth-provider), which nodesnap does not run; give it a kubeconfig with a token or client certificate", what)
		case u.Token != "":
			c.token = strings.TrimSpace(u.Token)
		case u.TokenFile != "":
			t, err := read(rel(u.TokenFile), 64<<10)
			if err != nil {
				return nil, fmt.Errorf("%s: its tokenFile cannot be read: %w", what, err)
			}
			c.token = strings.TrimSpace(string(t))
		}
		var certPEM, keyPEM []byte
		var err error
		switch {
		case u.ClientCertificateData != "":
			certPEM, err = base64.StdEncoding.DecodeString(u.ClientCertificateData)
		case u.ClientCertificate != "":
			certPEM, err = read(rel(u.ClientCertificate), 1<<20)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: its client certificate cannot be read: %w", what, err)
		}
		switch {
		case u.ClientKeyData != "":
			keyPEM, err = base64.StdEncoding.DecodeString(u.ClientKeyData)
		case u.ClientKey != "":
			keyPEM, err = read(rel(u.ClientKey), 1<<20)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: its client key cannot be read: %w", what, err)
		}
		if len(certPEM) > 0 {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			clear(keyPEM)
			if err != nil {
				return nil, fmt.Errorf("%s: its client certificate and key do not load: %w", what, err)
			}
			leaf, err := x509.ParseCertificate(cert.Certificate[0])
			if err != nil {
				return nil, fmt.Errorf("%s: its client certificate: %w", what, err)
			}
			if time.Now().After(leaf.NotAfter) {
				return nil, fmt.Errorf("%s: its client certificate expired on %s", what, leaf.NotAfter.UTC().Format(time.DateOnly))
			}
			c.cert = &cert
			c.identity = leaf.Subject.CommonName
		}
	}
	if c.token == "" && c.cert == nil {
		return nil, fmt.Errorf("%s: user %q has neither a token nor a client certificate", what, userName)
	}
	c.source = what
	if c.identity != "" {
		c.source += " (client certificate CN=" + c.identity + ")"
	} else {
		c.source += " (bearer token)"
	}
	return c, nil
}

// mergePools adds PEM certificates to a pool (both the service account's
// CA and the kubelet's kubeconfig's are the cluster's).
func mergePools(p *x509.CertPool, pem []byte) *x509.CertPool {
	if len(pem) > 0 {
		p.AppendCertsFromPEM(pem)
	}
	return p
}

// kubeletConfig is a kubelet kubeconfig to try: the running kubelet's
// (its --kubeconfig, read in its own mount namespace through
// /proc/<pid>/root), then the usual paths under --root.
type kubeletConfig struct {
	path, what string
	read       func(string, int64) ([]byte, error)
}

// kubeletKubeconfigs are the kubeconfigs to try, and notes on the
// processes calling themselves kubelet that were not trusted.
func kubeletKubeconfigs(ctx context.Context, env *collectors.Env, rd reader) ([]kubeletConfig, []string) {
	var out []kubeletConfig
	seen := map[string]bool{}
	running, refused := RunningKubeletKubeconfigs(ctx, env)
	for _, rk := range running {
		root := "/proc/" + rk.PID + "/root"
		out = append(out, kubeletConfig{path: rk.Path, what: "the running kubelet's --kubeconfig " + rk.Path + " (pid " + rk.PID + ")",
			read: func(p string, max int64) ([]byte, error) { return rd.host(root+p, max) }})
		seen[rk.Path] = true
	}
	for _, p := range KubeletKubeconfigs {
		if !seen[p] {
			out = append(out, kubeletConfig{path: p, what: "the kubelet's kubeconfig " + p, read: rd.host})
		}
	}
	return out, refused
}

// RunningKubeconfig is the --kubeconfig of a running kubelet.
type RunningKubeconfig struct {
	// PID is the kubelet's; Path its --kubeconfig as it names it (in its
	// own mount namespace: read it through /proc/<pid>/root).
	PID, Path string
	// Why says what vouched for the process.
	Why string
}

// RunningKubeletKubeconfigs reads the --kubeconfig of every running
// kubelet the kernel vouches for (package daemon: root in the node's user
// namespace, a root-owned executable; never a process's name alone), at
// most two. refused are notes naming each process that calls itself
// kubelet and failed a check: nothing it names is read, let alone sent.
func RunningKubeletKubeconfigs(ctx context.Context, env *collectors.Env) (found []RunningKubeconfig, refused []string) {
	kubelets, bad := daemon.Kubelets(ctx, env, 2)
	for _, r := range bad {
		refused = append(refused, r.String())
	}
	for _, k := range kubelets {
		ps := strconv.Itoa(k.PID)
		for _, fv := range nodeconfigFlags(k.Args, "--kubeconfig") {
			found = append(found, RunningKubeconfig{PID: ps, Path: fv, Why: k.Why})
		}
	}
	return found, refused
}

// nodeconfigFlags are the absolute values of flag in args ("--flag=v" or
// "--flag v"), cleaned.
func nodeconfigFlags(args []string, flag string) []string {
	var out []string
	for i := 1; i < len(args); i++ {
		v, ok := strings.CutPrefix(args[i], flag+"=")
		if !ok && args[i] == flag && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok && path.IsAbs(v) {
			out = append(out, path.Clean(v))
		}
	}
	return out
}
