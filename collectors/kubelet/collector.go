package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/cliflag"
	"github.com/nodesnap/nodesnap/redact"
)

// The kubelet collector asks the kubelet itself what it is doing: its
// health checks, goroutine dumps (incident 003: housekeeping stuck in
// cleanupOrphanedPodDirs), heap, metrics, configuration and pods. HTTP is
// network I/O, not filesystem I/O, so requests run in the collector's own
// process, each under its own deadline; a kubelet that accepts connections
// and never answers costs one deadline, not the collector.

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirKubelet,
		Description:    "the kubelet's healthz, goroutine dumps, heap (and optional CPU) profile, metrics, configz and pods, over its authenticated port",
		Requires:       "a credential for the kubelet's port 10250: a ServiceAccount token (--kubelet-token-file, $NODESNAP_KUBELET_TOKEN, the pod's own) or a client certificate (--kubelet-client-cert); healthz needs none",
		Prepare:        PrepareKubeletToken,
		DefaultEnabled: true,
		DefaultTimeout: 40 * time.Second,
		After:          []string{collectors.MountprobeName},
		Options:        &opts,
		Flags:          flags,
		Files:          files,
		Run:            collect,
	})
}

// KubeletTokenEnv is the environment variable the kubelet bearer token may
// come from.
const KubeletTokenEnv = "NODESNAP_KUBELET_TOKEN"

// ServiceAccountTokenPath is where a pod's own service-account token is
// projected. It is deliberately NOT mapped under --root: when nodesnap runs
// as a pod, the token belongs to nodesnap's pod and sits in the pod's own
// filesystem; the host's tree (under /host) has no such file, and a token
// found there would belong to someone else.
var ServiceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// Options are the kubelet collector's flags.
type Options struct {
	URL         string `json:"url"`
	ReadOnlyURL string `json:"readonly_url"`
	// Token reaches the collector's child as JSON on its stdin; it never
	// prints (see kubeletSecret) and is scrubbed from everything written.
	Token     kubeletSecret `json:"token,omitempty"`
	TokenFile string        `json:"token_file,omitempty"`
	// TokenFrom and TokenFileError are set by PrepareKubeletToken when
	// TokenFile names one of nodesnap's own descriptors (/dev/stdin,
	// /dev/fd/N): the token was read before collection, from there.
	TokenFrom      string `json:"token_from,omitempty"`
	TokenFileError string `json:"token_file_error,omitempty"`
	// ClientCert and ClientKey are a client certificate to authenticate
	// with, as nodesnap sees them (not under --root).
	ClientCert     string `json:"client_cert,omitempty"`
	ClientKey      string `json:"client_key,omitempty"`
	HealthzURL     string `json:"healthz_url"`
	CAFile         string `json:"ca_file,omitempty"`
	Insecure       bool   `json:"insecure,omitempty"`
	ProfileSeconds int    `json:"profile_seconds,omitempty"`
	// Pprof asks for the goroutine dumps and profiles, which the kubelet
	// authorizes as get nodes/proxy.
	Pprof          bool          `json:"pprof"`
	RequestTimeout time.Duration `json:"request_timeout"`
}

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{URL: "https://127.0.0.1:10250", ReadOnlyURL: "http://127.0.0.1:10255",
	HealthzURL: "http://127.0.0.1:10248", Pprof: true, RequestTimeout: 10 * time.Second}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	o := &opts
	fs.StringVar(&o.URL, "kubelet-url", o.URL, "kubelet: the kubelet's authenticated (secure) endpoint")
	fs.StringVar(&o.ReadOnlyURL, "kubelet-readonly-url", o.ReadOnlyURL, "kubelet: its read-only port, tried for healthz, metrics and pods when the secure port refuses (empty: never)")
	fs.StringVar(&o.HealthzURL, "kubelet-healthz-url", o.HealthzURL, "kubelet: its healthz port (plain HTTP, no authentication), asked for healthz when the secure port refuses (empty: never)")
	fs.Var(&o.Token, "kubelet-token", "kubelet: bearer token (default: $"+KubeletTokenEnv+", then --kubelet-token-file, then the pod's service-account token)")
	cliflag.MarkSecret(fs, "kubelet-token")
	fs.StringVar(&o.TokenFile, "kubelet-token-file", o.TokenFile, "kubelet: file holding the bearer token (a path as nodesnap sees it, not under --root); /dev/stdin and /dev/fd/N, as <(kubectl create token ...) gives, are read before collection starts")
	fs.StringVar(&o.ClientCert, "kubelet-client-cert", o.ClientCert, "kubelet: client certificate (PEM) to authenticate with, beside or instead of a token (a path as nodesnap sees it); with neither, a kubeadm control-plane node's <root>"+KubeadmKubeletClientCert+" is used")
	fs.StringVar(&o.ClientKey, "kubelet-client-key", o.ClientKey, "kubelet: the private key (PEM) of --kubelet-client-cert; it is never written anywhere")
	fs.StringVar(&o.CAFile, "kubelet-ca-file", o.CAFile, "kubelet: CA bundle that signed the kubelet's serving certificate, or that certificate itself (a path as nodesnap sees it); without it the peer must present the serving certificate the kubelet's configuration names under --root (tlsCertFile, <cert-dir>/kubelet.crt, kubelet-server-current.pem) or a kubelet certificate the cluster CA signed, else it is sent no credential")
	fs.BoolVar(&o.Insecure, "kubelet-insecure", o.Insecure, "kubelet: skip TLS verification of the kubelet, and allow a credential over a plain http:// URL (the credential is then sent to whoever answers, on loopback too: port 10250 needs no privilege)")
	fs.IntVar(&o.ProfileSeconds, "kubelet-profile-seconds", o.ProfileSeconds, "kubelet: also take a CPU profile for this many seconds (0: off)")
	fs.BoolVar(&o.Pprof, "kubelet-pprof", o.Pprof, "kubelet: ask for its goroutine dumps and heap (and CPU) profile; the kubelet authorizes /debug/pprof as get nodes/proxy, which also allows exec in every pod of the node, so the deploy manifests' least-privilege role lacks it and their pods pass false (docs/kubernetes.md)")
	fs.DurationVar(&o.RequestTimeout, "kubelet-request-timeout", o.RequestTimeout, "kubelet: deadline of each request")
}

// kubeletSecret is a string that never prints: fmt verbs, pflag's usage
// text and %+v of a struct holding it all show "[REDACTED]". It marshals
// to JSON as itself, because that is how options reach the collector's
// child (on its stdin, never on disk).
type kubeletSecret string

func (s kubeletSecret) String() string {
	if s == "" {
		return ""
	}
	return redact.Marker
}

func (s kubeletSecret) GoString() string { return strconv.Quote(s.String()) }

// Format makes every fmt verb print the redacted form.
func (s kubeletSecret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// Set implements pflag.Value.
func (s *kubeletSecret) Set(v string) error { *s = kubeletSecret(v); return nil }

// Type implements pflag.Value.
func (s *kubeletSecret) Type() string { return "string" }

// reveal returns the secret itself, for the one place that needs it.
func (s kubeletSecret) reveal() string { return string(s) }

// KubeletRequests is kubelet/requests.json: every request made, secure
// port and read-only fallback alike.
type KubeletRequests struct {
	URL         string `json:"url"`
	ReadOnlyURL string `json:"readonly_url,omitempty"`
	HealthzURL  string `json:"healthz_url,omitempty"`
	// TokenSource says where the token came from ("flag --kubelet-token",
	// "environment NODESNAP_KUBELET_TOKEN", "file <path>", "service-account
	// <path>", "none"), never what it is.
	TokenSource string `json:"token_source"`
	// CredentialSource says what the kubelet was shown: "bearer token
	// (<token source>)", "client certificate <path> (CN=..., O=...)",
	// "kubeadm apiserver-kubelet-client certificate <path> (...)", both
	// joined by " and ", or "none". Never the token or the key.
	CredentialSource string `json:"credential_source"`
	// TLS says how the secure port's certificate was checked.
	TLS      string           `json:"tls"`
	Requests []KubeletRequest `json:"requests"`
}

// KubeletRequest is one HTTP request to the kubelet.
type KubeletRequest struct {
	// Endpoint names what was asked for: healthz, goroutine-debug1,
	// goroutine-debug2, heap, cpu-profile, metrics, configz, pods.
	Endpoint string `json:"endpoint"`
	// Port is "secure", "read-only" or "healthz".
	Port string `json:"port"`
	// URL never holds the token (it travels in a header) nor userinfo.
	URL             string  `json:"url"`
	StatusCode      int     `json:"status_code,omitempty"`
	Error           string  `json:"error,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
	Bytes           int64   `json:"bytes"`
	TLSVerified     bool    `json:"tls_verified"`
	// File is the bundle file the answer went to, relative to kubelet/.
	File      string `json:"file,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// Skipped says why a request was deliberately not made (--no-binary).
	Skipped string `json:"skipped,omitempty"`
}

// kubeletEndpoint is one thing asked of the kubelet.
type kubeletEndpoint struct {
	name, path, file string
	// readOnly endpoints are also served by the read-only port.
	readOnly bool
	// anyStatus keeps the body whatever the status (healthz answers 500
	// with the failing checks: that body is the evidence).
	anyStatus bool
	binary    bool
	// pprof endpoints need nodes/proxy whatever the kubelet's version.
	pprof bool
	// json bodies are re-indented (one value per line redacts better than
	// a megabyte-long line) and pods have env values removed.
	json, pods bool
	// subresource is what the kubelet's authorizer checks for this path:
	// its own (KEP-2862's fine-grained ones from 1.33 on), then, for
	// /healthz, /configz and /pods, nodes/proxy.
	subresource string
	extra       time.Duration
}

const kubeletPprofReason = "pprof protobuf: cannot be redacted"

func kubeletEndpoints(profileSeconds int) []kubeletEndpoint {
	eps := []kubeletEndpoint{
		{name: "healthz", path: "/healthz?verbose", file: layout.KubeletHealthzFile, readOnly: true, anyStatus: true, subresource: "nodes/healthz"},
		{name: "goroutine-debug1", path: "/debug/pprof/goroutine?debug=1", file: layout.KubeletGoroutineDebug1File, pprof: true, subresource: "nodes/proxy"},
		{name: "goroutine-debug2", path: "/debug/pprof/goroutine?debug=2", file: layout.KubeletGoroutineDebug2File, pprof: true, subresource: "nodes/proxy"},
		{name: "heap", path: "/debug/pprof/heap", file: "heap.pb.gz", binary: true, pprof: true, subresource: "nodes/proxy"},
	}
	if profileSeconds > 0 {
		eps = append(eps, kubeletEndpoint{name: "cpu-profile", path: "/debug/pprof/profile?seconds=" + strconv.Itoa(profileSeconds),
			file: "cpu.pb.gz", binary: true, pprof: true, subresource: "nodes/proxy", extra: time.Duration(profileSeconds) * time.Second})
	}
	return append(eps,
		kubeletEndpoint{name: "metrics", path: "/metrics", file: layout.KubeletMetricsFile, readOnly: true, subresource: "nodes/metrics"},
		kubeletEndpoint{name: "configz", path: "/configz", file: "configz.json", json: true, subresource: "nodes/configz"},
		kubeletEndpoint{name: "pods", path: "/pods", file: layout.KubeletPodsFile, readOnly: true, json: true, pods: true, subresource: "nodes/pods"},
	)
}

// Messages for refusals, worded for whoever has to fix the token.
const (
	kubeletPermission = "needs get on nodes/pods, nodes/healthz, nodes/configz, nodes/metrics and nodes/stats (the role of 'nodesnap manifests rbac'), and nodes/proxy for the pprof dumps"
	kubeletAllowed    = "allowed get on nodes/pods, nodes/healthz, nodes/configz, nodes/metrics and nodes/stats (and nodes/proxy for the pprof dumps)"
	kubelet401        = "the token was rejected (401): give nodesnap a valid bearer token (--kubelet-token, $" + KubeletTokenEnv + " or --kubelet-token-file) of an identity " + kubeletAllowed
	kubelet401NoToken = "the kubelet requires a credential (401) and none was given: pass a token with --kubelet-token, $" + KubeletTokenEnv + " or --kubelet-token-file, or a client certificate with --kubelet-client-cert and --kubelet-client-key, of an identity " + kubeletAllowed
	kubelet401Cert    = "the client certificate was rejected (401): the kubelet does not trust its CA (its clientCAFile), or it has expired; give nodesnap a token or a certificate of an identity " + kubeletAllowed
	kubelet403        = "the token's identity lacks permission (403): it " + kubeletPermission
	kubelet403Cert    = "the client certificate's identity lacks permission (403): it " + kubeletPermission
	// kubeletProxyRisk is what granting nodes/proxy means.
	kubeletProxyRisk = "get on nodes/proxy also lets its holder exec into every pod of the node through the kubelet's WebSocket endpoints"
	kubeletPprofOff  = "not asked (--kubelet-pprof=false): the pprof endpoints need get on nodes/proxy, and " + kubeletProxyRisk
)

// kubeletNoFineGrained reports a kubelet's 403 that checked nodes/proxy
// alone for a path a fine-grained kubelet checks its own subresource for:
// a kubelet before 1.33, or with KubeletFineGrainedAuthz off.
func kubeletNoFineGrained(body string) bool {
	return strings.Contains(body, "subresource=proxy)") || strings.Contains(body, "subresource(s)=[proxy])")
}

// kubeletRun holds one collection's state.
type kubeletRun struct {
	env      *collectors.Env
	opts     Options
	token    string
	cred     kubeletCredential
	secure   *http.Client // nil when the secure port must not be used
	refusal  string       // why secure is nil
	verified bool
	readonly *http.Client
	base     *url.URL
	roBase   *url.URL
	hzBase   *url.URL
	maxBytes int64
	// pool is what the collector's cap leaves for answers once its own
	// record is set aside (-1: no cap); answers take from it as they are
	// written (poolWriter).
	poolMu sync.Mutex
	pool   int64

	mu sync.Mutex
	// forbiddenUser is the identity a 403 named ("user=..."), when it is
	// shaped like a Kubernetes user name (see KubeletForbiddenUser).
	forbiddenUser string
}

func collect(ctx context.Context, env *collectors.Env) error {
	o := defaults
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaults.RequestTimeout
	}
	k := &kubeletRun{env: env, opts: o, maxBytes: env.MaxFileBytes, pool: -1}
	if cc := env.MaxCollectorBytes; cc > 0 {
		k.pool = max(cc-kubeletRecordReserve, 0)
	}
	if k.maxBytes <= 0 {
		k.maxBytes = 64 << 20
	}
	report := KubeletRequests{}

	cred, problems := resolveKubeletCredential(ctx, env, o)
	k.cred, k.token = cred, cred.token
	report.TokenSource, report.CredentialSource = cred.tokenSource, cred.describe()
	for _, p := range problems {
		env.Partialf("%s", k.scrub(p))
	}
	if cred.certSource != "" {
		env.Notef("the kubelet is shown the %s", cred.certSource)
	}
	if !o.Pprof {
		env.Notef("goroutine dumps and heap profile %s", kubeletPprofOff)
	}

	base, err := parseKubeletURL(o.URL)
	if err != nil {
		return fmt.Errorf("--kubelet-url: %w", err)
	}
	k.base = base
	report.URL = base.String()
	if o.ReadOnlyURL != "" {
		ro, err := parseKubeletURL(o.ReadOnlyURL)
		if err != nil {
			return fmt.Errorf("--kubelet-readonly-url: %w", err)
		}
		k.roBase = ro
		report.ReadOnlyURL = ro.String()
		k.readonly = newKubeletClient(nil, o.RequestTimeout)
	}
	if o.HealthzURL != "" {
		hz, err := parseKubeletURL(o.HealthzURL)
		if err != nil {
			return fmt.Errorf("--kubelet-healthz-url: %w", err)
		}
		k.hzBase = hz
		report.HealthzURL = hz.String()
		if k.readonly == nil {
			k.readonly = newKubeletClient(nil, o.RequestTimeout)
		}
	}

	tlsCfg, verified, how, refusal, trustNotes, err := kubeletTLSConfig(ctx, env, base, o, !cred.none())
	if err != nil {
		return err
	}
	for _, n := range trustNotes {
		env.Notef("%s", k.scrub(n))
	}
	report.TLS = how
	k.verified = verified
	if refusal == "" && verified {
		// One handshake first: a peer that is not the kubelet is found
		// before any request, and never tried again.
		switch perr := kubeletPreflight(ctx, tlsCfg, base.Host, o.RequestTimeout); {
		case perr == nil:
		case kubeletCertFailure(perr):
			refusal = fmt.Sprintf("no credential was sent to %s: the peer there is not the kubelet (%v); it was not asked again", base.Host, perr)
			report.TLS = "refused: " + perr.Error()
		default:
			refusal = kubeletDescribeError(perr, base.Host, o.RequestTimeout) + " (a TLS handshake, before any request)"
		}
	}
	if refusal != "" {
		// Said once per endpoint in the notes, and in the error if nothing
		// else could be read.
		k.refusal = refusal
	} else {
		if cred.cert != nil {
			if tlsCfg == nil {
				env.Notef("the client certificate is not used: %s is plain HTTP", base.Host)
			} else {
				tlsCfg.Certificates = []tls.Certificate{*cred.cert}
			}
		}
		k.secure = newKubeletClient(tlsCfg, o.RequestTimeout)
		if base.Scheme == "https" && !verified {
			env.Notef("%s", how)
		}
	}

	profile := o.ProfileSeconds
	if profile > 0 {
		if dl, ok := ctx.Deadline(); ok {
			room := int(time.Until(dl).Seconds() - o.RequestTimeout.Seconds() - 2)
			if room < profile {
				if room < 1 {
					env.Notef("CPU profile skipped: %ds does not fit in the collector's deadline (raise --collector-timeout)", profile)
					profile = 0
				} else {
					env.Notef("CPU profile shortened from %ds to %ds to fit the collector's deadline", profile, room)
					profile = room
				}
			}
		}
	}
	eps := kubeletEndpoints(profile)

	// Every endpoint at once: a kubelet that never answers then costs one
	// request deadline in all, not one per endpoint.
	results := make([][]KubeletRequest, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = k.fetch(ctx, ep)
		}()
	}
	wg.Wait()
	for _, r := range results {
		report.Requests = append(report.Requests, r...)
	}
	if err := env.WriteJSON("requests.json", report); err != nil {
		return err
	}
	return k.verdict(ctx, eps, results)
}

// verdict turns the requests into the collector's status and notes.
func (k *kubeletRun) verdict(ctx context.Context, eps []kubeletEndpoint, results [][]KubeletRequest) error {
	got, cutN, refusedAll := 0, 0, true
	byErr := map[string][]string{}
	var errOrder []string
	for i, rs := range results {
		ok, cut := false, false
		for _, r := range rs {
			// An answer that started but was cut (by its deadline, or by a
			// size cap) is kept, and is not a whole answer.
			switch {
			case r.Skipped != "" || (r.File != "" && r.Error == "" && !r.Truncated):
				ok = true
			case r.File != "":
				cut = true
			}
			if r.Skipped == "" && !strings.Contains(r.Error, "connection refused") {
				refusedAll = false
			}
			if r.Error != "" {
				key := r.Error
				if _, seen := byErr[key]; !seen {
					errOrder = append(errOrder, key)
				}
				byErr[key] = append(byErr[key], r.Port+" "+eps[i].path)
			}
		}
		if ok {
			got++
		} else if cut {
			cutN++
		}
	}
	for _, e := range errOrder {
		k.env.Notef("%s — %s", e, strings.Join(byErr[e], ", "))
	}
	fixable := k.remedy(eps, results)
	if got == len(eps) {
		return nil
	}
	if got == 0 && cutN == 0 {
		if refusedAll && len(errOrder) > 0 {
			if !kubeletDirExists(ctx, k.env) {
				return fmt.Errorf("no kubelet on this node: nothing listens on %s and /var/lib/kubelet does not exist: %w", k.base.Host, collectors.ErrUnsupported)
			}
			return fmt.Errorf("the kubelet is not listening on %s (connection refused) although /var/lib/kubelet exists: is the kubelet running?", k.base.Host)
		}
		first := "no answer"
		if len(errOrder) > 0 {
			first = errOrder[0]
		}
		return errors.New(k.scrub("no kubelet endpoint could be read: " + first))
	}
	var missed []string
	for i, rs := range results {
		ok, cut := false, ""
		for _, r := range rs {
			switch {
			case r.Skipped != "" || (r.File != "" && r.Error == "" && !r.Truncated):
				ok = true
			case r.File != "" && r.Truncated:
				cut = " (cut at the size cap)"
			case r.File != "":
				cut = " (cut short: " + r.Error + ")"
			}
		}
		if !ok {
			missed = append(missed, eps[i].name+cut)
		}
	}
	why := "kubelet/requests.json and the notes say why"
	if fixable {
		why = "the manifest's remedies (printed at the end of the run) say what gets them"
	}
	k.env.Partialf("%d of %d kubelet endpoints could not be read whole (%s); %s", len(missed), len(eps), strings.Join(missed, ", "), why)
	return nil
}

func kubeletDirExists(ctx context.Context, env *collectors.Env) bool {
	_, err := env.Host().Stat(ctx, "/var/lib/kubelet")
	// A kubelet directory on a hung mount is there.
	return err == nil || errors.Is(err, hostfs.ErrHung)
}

// fetch asks the secure port, then the read-only port where that serves
// the endpoint and the secure port refused.
func (k *kubeletRun) fetch(ctx context.Context, ep kubeletEndpoint) []KubeletRequest {
	if ep.pprof && !k.opts.Pprof {
		return []KubeletRequest{{Endpoint: ep.name, Port: "secure", URL: k.endpointURL(k.base, ep), Skipped: kubeletPprofOff}}
	}
	if ep.binary && k.env.NoBinary {
		return []KubeletRequest{{Endpoint: ep.name, Port: "secure", URL: k.endpointURL(k.base, ep), Skipped: "--no-binary leaves out pprof protobufs"}}
	}
	var out []KubeletRequest
	fallback := false
	if k.secure == nil {
		out = append(out, KubeletRequest{Endpoint: ep.name, Port: "secure", URL: k.endpointURL(k.base, ep), Error: "not attempted: " + k.refusal})
		fallback = true
	} else {
		r, refused := k.attempt(ctx, ep, portSecure)
		out = append(out, r)
		fallback = refused
	}
	if fallback && ep.readOnly && k.roBase != nil && ctx.Err() == nil {
		r, refused := k.attempt(ctx, ep, portReadOnly)
		out = append(out, r)
		fallback = refused || r.File == ""
	}
	// The healthz port (10248, on by default and bound to loopback) needs
	// no credential: where nothing else answered, healthz still comes.
	if fallback && ep.name == "healthz" && k.hzBase != nil && ctx.Err() == nil {
		r, _ := k.attempt(ctx, ep, portHealthz)
		out = append(out, r)
	}
	return out
}

// The kubelet's ports, as requests.json names them.
const (
	portSecure   = "secure"
	portReadOnly = "read-only"
	portHealthz  = "healthz"
)

func (k *kubeletRun) endpointURL(base *url.URL, ep kubeletEndpoint) string {
	return strings.TrimSuffix(base.String(), "/") + ep.path
}

// attempt makes one request. refused reports an answer that the other
// port may not give: connection refused, 401, 403.
func (k *kubeletRun) attempt(ctx context.Context, ep kubeletEndpoint, port string) (rec KubeletRequest, refused bool) {
	base, client := k.base, k.secure
	readOnly := port != portSecure
	switch port {
	case portReadOnly:
		base, client = k.roBase, k.readonly
	case portHealthz:
		base, client = k.hzBase, k.readonly
	}
	u := k.endpointURL(base, ep)
	rec = KubeletRequest{Endpoint: ep.name, Port: port, URL: u, TLSVerified: !readOnly && base.Scheme == "https" && k.verified}
	timeout := k.opts.RequestTimeout + ep.extra
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	defer func() { rec.DurationSeconds = time.Since(start).Seconds() }()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		rec.Error = k.scrub(err.Error())
		return rec, false
	}
	// The read-only and healthz ports are plain HTTP without
	// authentication: the token never goes there.
	if !readOnly && k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		rec.Error = k.scrub(kubeletDescribeError(err, base.Host, timeout))
		// A peer whose certificate is refused is not asked again here;
		// the ports without a credential may still answer.
		return rec, kubeletConnRefused(err) || kubeletCertFailure(err)
	}
	defer resp.Body.Close()
	rec.StatusCode = resp.StatusCode
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		switch {
		case readOnly || k.cred.none():
			rec.Error = kubelet401NoToken
		case k.token == "":
			rec.Error = kubelet401Cert
		default:
			rec.Error = kubelet401
		}
		return rec, true
	case resp.StatusCode == http.StatusForbidden:
		msg := kubelet403
		if k.token == "" {
			msg = kubelet403Cert
		}
		ex := k.excerpt(resp.Body)
		path := strings.SplitN(ep.path, "?", 2)[0]
		switch {
		case ep.pprof:
			msg += "; " + path + " is authorized as get nodes/proxy only, and " + kubeletProxyRisk +
				": grant it knowingly (nodesnap manifests rbac-pprof), or leave the dumps out with --kubelet-pprof=false"
		case ep.subresource == "nodes/metrics":
			msg += "; " + path + " is authorized as get " + ep.subresource
		case kubeletNoFineGrained(ex):
			msg += "; this kubelet authorizes " + path + " as get nodes/proxy only: it has no fine-grained authorization (before Kubernetes 1.33, or the KubeletFineGrainedAuthz feature gate off), so " +
				ep.subresource + " does not do; enable the gate, or grant nodes/proxy knowingly (" + kubeletProxyRisk + ")"
		default:
			msg += "; " + path + " is authorized as get " + ep.subresource + " (or nodes/proxy)"
		}
		if ex != "" {
			msg += "; the kubelet said: " + ex
			if u := KubeletForbiddenUser(ex); u != "" {
				k.mu.Lock()
				k.forbiddenUser = u
				k.mu.Unlock()
			}
		}
		rec.Error = msg
		return rec, true
	case resp.StatusCode/100 == 2 || ep.anyStatus:
		n, truncated, kept, werr := k.save(ep, resp.Body)
		rec.Bytes, rec.Truncated = n, truncated
		if werr != nil {
			rec.Error = k.scrub(kubeletDescribeError(werr, base.Host, timeout))
		}
		if !kept {
			return rec, false
		}
		rec.File = ep.file
		return rec, false
	case resp.StatusCode == http.StatusNotFound && !ep.readOnly:
		rec.Error = fmt.Sprintf("the kubelet answered %s: its debugging handlers are off (enableDebuggingHandlers: false in its configuration)", resp.Status)
		return rec, false
	default:
		rec.Error = fmt.Sprintf("the kubelet answered %s", resp.Status)
		if ex := k.excerpt(resp.Body); ex != "" {
			rec.Error += ": " + ex
		}
		return rec, false
	}
}
