package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/owndesc"
)

// How the kubelet collector authenticates, and what it tells an operator
// when it cannot: a kubelet with webhook authentication and anonymous
// access off answers 401 to a request without a credential, and 403 to an
// identity the API server does not allow get on the Node subresource the
// kubelet checks (nodes/pods, nodes/healthz, nodes/configz, nodes/metrics,
// nodes/stats; nodes/proxy for pprof and for kubelets before 1.33).

// Where kubeadm keeps the API server's own client certificate for the
// kubelet: its identity is allowed everything the kubelet serves, which is
// what the API server's "kubectl logs/exec" path needs. On a control-plane
// node it is the credential meant for this path; read under --root.
const (
	KubeadmKubeletClientCert = "/etc/kubernetes/pki/apiserver-kubelet-client.crt"
	KubeadmKubeletClientKey  = "/etc/kubernetes/pki/apiserver-kubelet-client.key"
)

// kubeletCredential is what the kubelet is shown. It lives only in the
// collector's memory: neither the token nor the key is ever written.
type kubeletCredential struct {
	token       string
	tokenSource string // "none" without a token
	cert        *tls.Certificate
	certSource  string // e.g. "client certificate /x.crt (CN=..., O=...; valid until ...)"
}

func (c kubeletCredential) none() bool { return c.token == "" && c.cert == nil }

// describe is requests.json's credential_source.
func (c kubeletCredential) describe() string {
	var parts []string
	if c.token != "" {
		parts = append(parts, "bearer token ("+c.tokenSource+")")
	}
	if c.cert != nil {
		parts = append(parts, c.certSource)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " and ")
}

// resolveKubeletCredential finds what to show the kubelet: a token given
// (flag, environment, file) and a client certificate given, each used if
// given; with neither, the pod's own service-account token, then kubeadm's
// apiserver-kubelet-client certificate under --root. problems are what a
// customer should read in the manifest (a token file that could not be
// read, a certificate that does not load).
func resolveKubeletCredential(ctx context.Context, env *collectors.Env, o Options) (c kubeletCredential, problems []string) {
	c.tokenSource = "none"
	read := func(p string, max int64) ([]byte, error) {
		var r isolate.ReadFileResult
		if err := env.Do(ctx, isolate.OpReadFile, p, isolate.ReadFileRequest{Path: p, Max: max}, &r); err != nil {
			return nil, err
		}
		return r.Data, nil
	}
	readToken := func(p string) (string, error) {
		b, err := read(p, 64<<10)
		return strings.TrimSpace(string(b)), err
	}
	switch {
	case o.TokenFrom != "":
		// Read before collection by PrepareKubeletToken.
		c.tokenSource = "file " + o.TokenFrom
		if o.TokenFileError != "" {
			problems = append(problems, o.TokenFileError+"; requests are made without a token")
		} else {
			c.token = strings.TrimSpace(o.Token.reveal())
		}
	case strings.TrimSpace(o.Token.reveal()) != "":
		c.token, c.tokenSource = strings.TrimSpace(o.Token.reveal()), "flag --kubelet-token"
	case strings.TrimSpace(os.Getenv(KubeletTokenEnv)) != "":
		c.token, c.tokenSource = strings.TrimSpace(os.Getenv(KubeletTokenEnv)), "environment "+KubeletTokenEnv
	case o.TokenFile != "":
		c.tokenSource = "file " + o.TokenFile
		t, err := readToken(o.TokenFile)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("cannot read --kubelet-token-file %s: %v; requests are made without a token", o.TokenFile, err))
		case t == "":
			problems = append(problems, fmt.Sprintf("--kubelet-token-file %s is empty; requests are made without a token", o.TokenFile))
		default:
			c.token = t
		}
	}

	switch {
	case o.ClientCert != "" || o.ClientKey != "":
		if o.ClientCert == "" || o.ClientKey == "" {
			problems = append(problems, "--kubelet-client-cert and --kubelet-client-key go together; the client certificate is not used")
			break
		}
		cert, desc, err := loadKubeletCert(read, o.ClientCert, o.ClientKey)
		if err != nil {
			problems = append(problems, err.Error()+"; the client certificate is not used")
			break
		}
		c.cert, c.certSource = cert, "client certificate "+o.ClientCert+" ("+desc+")"
	case c.token == "" && o.TokenFrom == "" && o.TokenFile == "":
		if t, err := readToken(ServiceAccountTokenPath); err == nil && t != "" {
			c.token, c.tokenSource = t, "service-account "+ServiceAccountTokenPath
			break
		}
		crt, key := env.Host().Seen(KubeadmKubeletClientCert), env.Host().Seen(KubeadmKubeletClientKey)
		cert, desc, err := loadKubeletCert(read, crt, key)
		switch {
		case err == nil:
			c.cert, c.certSource = cert, "kubeadm apiserver-kubelet-client certificate "+KubeadmKubeletClientCert+" ("+desc+")"
		case errors.Is(err, os.ErrNotExist):
			// Not a kubeadm control-plane node: nothing to say.
		default:
			problems = append(problems, "kubeadm's "+err.Error()+"; it is not used")
		}
	}
	return c, problems
}

// loadKubeletCert reads a PEM certificate and key (each through an
// isolated read) and describes the certificate's identity, as the kubelet
// will see it: CN is the user, O the groups.
func loadKubeletCert(read func(string, int64) ([]byte, error), certPath, keyPath string) (*tls.Certificate, string, error) {
	certPEM, err := read(certPath, 1<<20)
	if err != nil {
		return nil, "", fmt.Errorf("client certificate %s cannot be read: %w", certPath, err)
	}
	keyPEM, err := read(keyPath, 1<<20)
	if err != nil {
		return nil, "", fmt.Errorf("client key %s cannot be read: %w", keyPath, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	clear(keyPEM)
	if err != nil {
		return nil, "", fmt.Errorf("client certificate %s and key %s do not load: %w", certPath, keyPath, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, "", fmt.Errorf("client certificate %s: %w", certPath, err)
	}
	now := time.Now()
	if now.After(leaf.NotAfter) {
		return nil, "", fmt.Errorf("client certificate %s expired on %s", certPath, leaf.NotAfter.UTC().Format(time.DateOnly))
	}
	if now.Before(leaf.NotBefore) {
		return nil, "", fmt.Errorf("client certificate %s is not valid before %s (is this node's clock right?)", certPath, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	desc := "CN=" + leaf.Subject.CommonName
	if len(leaf.Subject.Organization) > 0 {
		desc += ", O=" + strings.Join(leaf.Subject.Organization, ",")
	}
	desc += "; valid until " + leaf.NotAfter.UTC().Format(time.DateOnly)
	return &cert, desc, nil
}

// KubeletForbiddenUser returns the identity a kubelet's 403 names, as in
// "Forbidden (user=system:node:n1, verb=get, resource=nodes,
// subresource=proxy)", or "" when there is none or it is not shaped like a
// Kubernetes user name (the value ends up in a command line shown to an
// operator).
func KubeletForbiddenUser(msg string) string {
	_, rest, ok := strings.Cut(msg, "(user=")
	if !ok {
		return ""
	}
	user, _, ok := strings.Cut(rest, ", verb=")
	if !ok || user == "" || len(user) > 253 {
		return ""
	}
	for _, r := range user {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case strings.ContainsRune("._:@-", r):
		default:
			return ""
		}
	}
	return user
}

// Commands shown to an operator. deploy/kubernetes/rbac.yaml creates the
// namespace nodesnap, its ServiceAccount nodesnap and the ClusterRole
// nodesnap (get on nodes/pods, nodes/healthz, nodes/configz, nodes/metrics,
// nodes/stats) bound to it; rbac-pprof.yaml the ServiceAccount
// nodesnap-pprof, bound to that role and to nodesnap-pprof (nodes/proxy).
const (
	kubeletTokenCmd      = "kubectl -n nodesnap create token nodesnap --duration=10m"
	kubeletRBACCmd       = "nodesnap manifests rbac | kubectl apply -f -"
	kubeletPprofTokenCmd = "kubectl -n nodesnap create token nodesnap-pprof --duration=10m"
	kubeletPprofRBACCmd  = "nodesnap manifests rbac rbac-pprof | kubectl apply -f -"
)

// kubeletTokenFixes are the ways to give nodesnap a short-lived token
// without it landing in shell history or in the process list.
var kubeletTokenFixes = []string{
	"NODESNAP_KUBELET_TOKEN=$(" + kubeletTokenCmd + ") nodesnap collect   # as root: history keeps the command, not the token",
	kubeletTokenCmd + " | sudo nodesnap collect --kubelet-token-file /dev/stdin   # with sudo, which drops the environment and closes <(...) descriptors",
	"read -rs NODESNAP_KUBELET_TOKEN && export NODESNAP_KUBELET_TOKEN && nodesnap collect   # no kubectl on this node: run " + kubeletTokenCmd + " elsewhere and paste",
}

// remedy records, when endpoints were refused for want of a credential or
// of a permission, what is missing and the commands that fix it.
// It reports whether it recorded one.
func (k *kubeletRun) remedy(eps []kubeletEndpoint, results [][]KubeletRequest) bool {
	var missing []string
	seen := map[string]bool{}
	var n401, n403 int
	var refused []string // the subresources the kubelet answered 403 for
	pprofOnly := true
	for i, rs := range results {
		got, code := false, 0
		for _, r := range rs {
			got = got || r.File != "" || r.Skipped != ""
			if r.Port == portSecure && (r.StatusCode == 401 || r.StatusCode == 403) {
				code = r.StatusCode
			}
		}
		if got || code == 0 {
			continue
		}
		if code == 401 {
			n401++
		} else {
			n403++
			pprofOnly = pprofOnly && eps[i].pprof
			if sr := eps[i].subresource; sr != "" && !slices.Contains(refused, sr) {
				refused = append(refused, sr)
			}
		}
		if name := kubeletEvidenceName(eps[i].name); !seen[name] {
			seen[name] = true
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return false
	}
	if n401 > 0 {
		reason := "the kubelet requires a credential (401) and none was given"
		if !k.cred.none() {
			reason = "the kubelet rejected the " + k.cred.describe() + " (401): an expired token, or a credential of another cluster"
		}
		fix := append([]string{kubeletRBACCmd + "   # once per cluster, if the nodesnap ServiceAccount does not exist yet"}, kubeletTokenFixes...)
		fix = append(fix, "nodesnap collect --kubelet-client-cert CERT --kubelet-client-key KEY   # or a client certificate the kubelet trusts, of an identity "+kubeletAllowed)
		k.env.Remedy(missing, reason, fix)
		return true
	}
	k.mu.Lock()
	user := k.forbiddenUser
	k.mu.Unlock()
	who := "the credential's identity"
	if user != "" {
		if u := k.env.Redact(user); u == user {
			who = user
		} else {
			user = "" // obfuscated or redacted: not something to paste
		}
	}
	if pprofOnly {
		// Everything but the pprof dumps came: the identity has the
		// least-privilege role and not the opt-in.
		k.env.Remedy(missing, who+" may not get nodes/proxy (403), which the pprof dumps need and the role of 'nodesnap manifests rbac' leaves out on purpose: "+kubeletProxyRisk,
			[]string{
				kubeletPprofRBACCmd + "   # the opt-in: ServiceAccount nodesnap-pprof, with nodes/proxy",
				"NODESNAP_KUBELET_TOKEN=$(" + kubeletPprofTokenCmd + ") nodesnap collect",
				"nodesnap collect --kubelet-pprof=false   # or leave the dumps out and the bundle is complete",
			})
		return true
	}
	// Name what the kubelet refused, not what it might have: a token that
	// may read pods but not metrics is missing nodes/metrics alone.
	what := "the kubelet's subresources"
	if len(refused) > 0 {
		what = strings.Join(refused, ", ")
	}
	reason := who + " may not get " + what + " (403): the kubelet asks the API server, whose RBAC must allow get on nodes/pods, nodes/healthz, nodes/configz, nodes/metrics and nodes/stats (nodes/proxy instead of the first three on kubelets before 1.33)"
	var fix []string
	switch {
	case strings.HasPrefix(user, "system:node:"):
		fix = append(fix, "# a node's own credential is not granted the kubelet's subresources by the Node authorizer; use the nodesnap ServiceAccount's token:")
		fix = append(fix, kubeletTokenFixes...)
	case user == "system:serviceaccount:nodesnap:nodesnap" || user == "":
		fix = append(fix, kubeletRBACCmd+"   # the ClusterRole nodesnap and its binding to the ServiceAccount nodesnap/nodesnap")
		if user == "" {
			fix = append(fix, kubeletRBACCmd+" && kubectl create clusterrolebinding nodesnap-USER --clusterrole=nodesnap --user=USER   # for another identity")
		}
		fix = append(fix, kubeletTokenFixes[0])
	case strings.HasPrefix(user, "system:serviceaccount:"):
		sa := strings.TrimPrefix(user, "system:serviceaccount:")
		fix = append(fix, kubeletRBACCmd+" && kubectl create clusterrolebinding "+kubeletBindingName(sa)+" --clusterrole=nodesnap --serviceaccount="+sa)
		fix = append(fix, kubeletTokenFixes[0]+"   # or the nodesnap ServiceAccount's token instead")
	default:
		fix = append(fix, kubeletRBACCmd+" && kubectl create clusterrolebinding "+kubeletBindingName(user)+" --clusterrole=nodesnap --user="+user)
		fix = append(fix, kubeletTokenFixes[0]+"   # or the nodesnap ServiceAccount's token instead")
	}
	k.env.Remedy(missing, reason, fix)
	return true
}

// kubeletBindingName makes an object name of "nodesnap-" and an identity.
func kubeletBindingName(id string) string {
	b := []byte("nodesnap-" + strings.ToLower(id))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	return strings.TrimRight(string(b[:min(len(b), 63)]), "-.")
}

// kubeletEvidenceName words an endpoint as the evidence it gives.
func kubeletEvidenceName(endpoint string) string {
	switch endpoint {
	case "goroutine-debug1", "goroutine-debug2":
		return "goroutine dumps"
	case "heap":
		return "heap profile"
	case "cpu-profile":
		return "CPU profile"
	case "configz":
		return "configz (the kubelet's running configuration)"
	case "pods":
		return "pods (the kubelet's own pod list)"
	}
	return endpoint
}

// PrepareKubeletToken reads --kubelet-token-file in the supervisor when it
// names one of nodesnap's own descriptors. A collector's isolated worker
// opening /dev/fd/63 would open its own descriptor 63 (whatever, if
// anything, it inherited: sudo and other launchers close them), and its
// /dev/stdin is its request pipe. The descriptor is the user's, not a host
// path: a pipe or terminal is read here, with a deadline; a file redirected
// onto it (3<file) is resolved to its path and read in a worker as usual.
// Failures are recorded for the collector to report, not fatal.
func PrepareKubeletToken(ctx context.Context) {
	o := &opts
	if o.TokenFile == "" || o.Token != "" || os.Getenv(KubeletTokenEnv) != "" {
		return
	}
	fd, ok := owndesc.Parse(o.TokenFile)
	if !ok {
		return
	}
	timeout := o.RequestTimeout
	if timeout <= 0 {
		timeout = defaults.RequestTimeout
	}
	from := o.TokenFile
	target, err := owndesc.FilePath(fd)
	if err != nil {
		o.TokenFrom = from
		o.TokenFileError = fmt.Sprintf("cannot read --kubelet-token-file %s: descriptor %d is not open in nodesnap (sudo closes descriptors other than 0-2: pipe the token into --kubelet-token-file /dev/stdin instead)", from, fd)
		return
	}
	if target != "" {
		// A file: read where every path is read, in an isolated worker.
		o.TokenFile = target
		return
	}
	o.TokenFrom = from
	data, err := owndesc.Read(ctx, fd, timeout, 64<<10)
	if err != nil {
		o.TokenFileError = fmt.Sprintf("cannot read --kubelet-token-file %s: %v", from, err)
		return
	}
	t := strings.TrimSpace(string(data))
	clear(data)
	if t == "" {
		o.TokenFileError = fmt.Sprintf("--kubelet-token-file %s is empty (did the command that writes it fail?)", from)
		return
	}
	o.Token = kubeletSecret(t)
}
