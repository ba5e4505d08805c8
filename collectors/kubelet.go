package collectors

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/isolate"
	"github.com/nodesnap/nodesnap/redact"
)

// The kubelet collector asks the kubelet itself what it is doing: its
// health checks, goroutine dumps (incident 003: housekeeping stuck in
// cleanupOrphanedPodDirs), heap, metrics, configuration and pods. HTTP is
// network I/O, not filesystem I/O, so requests run in the collector's own
// process, each under its own deadline; a kubelet that accepts connections
// and never answers costs one deadline, not the collector.

func init() {
	Register(Spec{
		Name:           "kubelet",
		Description:    "the kubelet's healthz, goroutine dumps, heap (and optional CPU) profile, metrics, configz and pods, over its authenticated port",
		DefaultEnabled: true,
		DefaultTimeout: 40 * time.Second,
		Options:        &kubeletOpts,
		Flags:          kubeletFlags,
		Run:            collectKubelet,
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

// KubeletOptions are the kubelet collector's flags.
type KubeletOptions struct {
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
	ClientCert     string        `json:"client_cert,omitempty"`
	ClientKey      string        `json:"client_key,omitempty"`
	HealthzURL     string        `json:"healthz_url"`
	CAFile         string        `json:"ca_file,omitempty"`
	Insecure       bool          `json:"insecure,omitempty"`
	ProfileSeconds int           `json:"profile_seconds,omitempty"`
	RequestTimeout time.Duration `json:"request_timeout"`
}

var kubeletOpts KubeletOptions

func kubeletFlags(fs *pflag.FlagSet) {
	o := &kubeletOpts
	*o = KubeletOptions{}
	fs.StringVar(&o.URL, "kubelet-url", "https://127.0.0.1:10250", "kubelet: the kubelet's authenticated (secure) endpoint")
	fs.StringVar(&o.ReadOnlyURL, "kubelet-readonly-url", "http://127.0.0.1:10255", "kubelet: its read-only port, tried for healthz, metrics and pods when the secure port refuses (empty: never)")
	fs.StringVar(&o.HealthzURL, "kubelet-healthz-url", "http://127.0.0.1:10248", "kubelet: its healthz port (plain HTTP, no authentication), asked for healthz when the secure port refuses (empty: never)")
	fs.Var(&o.Token, "kubelet-token", "kubelet: bearer token (default: $"+KubeletTokenEnv+", then --kubelet-token-file, then the pod's service-account token)")
	fs.StringVar(&o.TokenFile, "kubelet-token-file", "", "kubelet: file holding the bearer token (a path as nodesnap sees it, not under --root); /dev/stdin and /dev/fd/N, as <(kubectl create token ...) gives, are read before collection starts")
	fs.StringVar(&o.ClientCert, "kubelet-client-cert", "", "kubelet: client certificate (PEM) to authenticate with, beside or instead of a token (a path as nodesnap sees it); with neither, a kubeadm control-plane node's <root>"+KubeadmKubeletClientCert+" is used")
	fs.StringVar(&o.ClientKey, "kubelet-client-key", "", "kubelet: the private key (PEM) of --kubelet-client-cert; it is never written anywhere")
	fs.StringVar(&o.CAFile, "kubelet-ca-file", "", "kubelet: CA bundle that signed the kubelet's serving certificate (a path as nodesnap sees it); without it a loopback kubelet's certificate is not verified and a non-loopback kubelet is refused unless --kubelet-insecure")
	fs.BoolVar(&o.Insecure, "kubelet-insecure", false, "kubelet: skip TLS verification of a non-loopback kubelet (the token is then sent to whoever answers)")
	fs.IntVar(&o.ProfileSeconds, "kubelet-profile-seconds", 0, "kubelet: also take a CPU profile for this many seconds (0: off)")
	fs.DurationVar(&o.RequestTimeout, "kubelet-request-timeout", 10*time.Second, "kubelet: deadline of each request")
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
	// json bodies are re-indented (one value per line redacts better than
	// a megabyte-long line) and pods have env values removed.
	json, pods bool
	// subresource is what the kubelet's authorizer checks for this path,
	// besides nodes/proxy.
	subresource string
	extra       time.Duration
}

const kubeletPprofReason = "pprof protobuf: cannot be redacted"

func kubeletEndpoints(profileSeconds int) []kubeletEndpoint {
	eps := []kubeletEndpoint{
		{name: "healthz", path: "/healthz?verbose", file: "healthz.txt", readOnly: true, anyStatus: true},
		{name: "goroutine-debug1", path: "/debug/pprof/goroutine?debug=1", file: "goroutine-debug1.txt"},
		{name: "goroutine-debug2", path: "/debug/pprof/goroutine?debug=2", file: "goroutine-debug2.txt"},
		{name: "heap", path: "/debug/pprof/heap", file: "heap.pb.gz", binary: true},
	}
	if profileSeconds > 0 {
		eps = append(eps, kubeletEndpoint{name: "cpu-profile", path: "/debug/pprof/profile?seconds=" + strconv.Itoa(profileSeconds),
			file: "cpu.pb.gz", binary: true, extra: time.Duration(profileSeconds) * time.Second})
	}
	return append(eps,
		kubeletEndpoint{name: "metrics", path: "/metrics", file: "metrics.txt", readOnly: true, subresource: "nodes/metrics"},
		kubeletEndpoint{name: "configz", path: "/configz", file: "configz.json", json: true},
		kubeletEndpoint{name: "pods", path: "/pods", file: "pods.json", readOnly: true, json: true, pods: true},
	)
}

// Messages for refusals, worded for whoever has to fix the token.
const (
	kubeletPermission = "needs get on nodes/proxy (and nodes/metrics, nodes/stats)"
	kubeletAllowed    = "allowed get on nodes/proxy (and nodes/metrics, nodes/stats)"
	kubelet401        = "the token was rejected (401): give nodesnap a valid bearer token (--kubelet-token, $" + KubeletTokenEnv + " or --kubelet-token-file) of an identity " + kubeletAllowed
	kubelet401NoToken = "the kubelet requires a credential (401) and none was given: pass a token with --kubelet-token, $" + KubeletTokenEnv + " or --kubelet-token-file, or a client certificate with --kubelet-client-cert and --kubelet-client-key, of an identity " + kubeletAllowed
	kubelet401Cert    = "the client certificate was rejected (401): the kubelet does not trust its CA (its clientCAFile), or it has expired; give nodesnap a token or a certificate of an identity " + kubeletAllowed
	kubelet403        = "the token's identity lacks permission: " + kubeletPermission + " (403)"
	kubelet403Cert    = "the client certificate's identity lacks permission: " + kubeletPermission + " (403)"
)

// kubeletRun holds one collection's state.
type kubeletRun struct {
	env      *Env
	opts     KubeletOptions
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

func collectKubelet(ctx context.Context, env *Env) error {
	var o KubeletOptions
	if err := env.Options(&o); err != nil {
		return err
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
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

	tlsCfg, verified, how, refusal, err := kubeletTLSConfig(ctx, env, base, o)
	if err != nil {
		return err
	}
	report.TLS = how
	k.verified = verified
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
				return fmt.Errorf("no kubelet on this node: nothing listens on %s and /var/lib/kubelet does not exist: %w", k.base.Host, ErrUnsupported)
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

func kubeletDirExists(ctx context.Context, env *Env) bool {
	p := env.HostPath("/var/lib/kubelet")
	if env.IsHung("/var/lib/kubelet") {
		return true
	}
	var st isolate.StatResult
	return env.Do(ctx, isolate.OpStat, p, isolate.StatRequest{Path: p, Follow: true}, &st) == nil
}

// fetch asks the secure port, then the read-only port where that serves
// the endpoint and the secure port refused.
func (k *kubeletRun) fetch(ctx context.Context, ep kubeletEndpoint) []KubeletRequest {
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
		return rec, kubeletConnRefused(err)
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
		if ep.subresource != "" {
			msg += "; " + strings.SplitN(ep.path, "?", 2)[0] + " is authorized as get " + ep.subresource
		}
		if ex := k.excerpt(resp.Body); ex != "" {
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

// excerpt returns the first bytes of an error answer, scrubbed.
func (k *kubeletRun) excerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	s := strings.Join(strings.Fields(string(b)), " ")
	return k.scrub(s)
}

// save writes an answer into the bundle; it returns how many bytes came,
// whether the answer was cut by a size cap, and whether a file was kept.
func (k *kubeletRun) save(ep kubeletEndpoint, body io.Reader) (n int64, truncated, kept bool, err error) {
	n, truncated, f, err := k.saveWithin(ep, body, k.maxBytes)
	return n, truncated, f != nil, err
}

// poolWriter takes each write's bytes from the pool: what the collector's
// cap leaves once its own record (requests.json, the notes) is set aside.
// Answers arriving at once share it as they write, first come first
// served; past it the rest of an answer is dropped and the answer marked
// cut, so a flooding kubelet fills the data, never the record.
type poolWriter struct {
	k   *kubeletRun
	w   io.Writer
	cut bool
}

func (p *poolWriter) Write(b []byte) (int, error) {
	take := int64(len(b))
	p.k.poolMu.Lock()
	if p.k.pool >= 0 {
		take = min(take, p.k.pool)
		p.k.pool -= take
	}
	p.k.poolMu.Unlock()
	if take < int64(len(b)) {
		p.cut = true
	}
	if take > 0 {
		if _, err := p.w.Write(b[:take]); err != nil {
			return 0, err
		}
	}
	// Dropped bytes are "written": the producer is not broken mid-stream.
	return len(b), nil
}

func (k *kubeletRun) saveWithin(ep kubeletEndpoint, body io.Reader, limit int64) (int64, bool, *File, error) {
	lr := &kubeletCountingReader{r: io.LimitReader(body, limit+1)}
	// JSON is re-indented (pods.json also redacted as a whole) in memory;
	// past kubeletJSONInMemory it is streamed as it came instead, so one
	// huge answer costs a bounded buffer, not its size several times.
	if ep.json {
		head, err := io.ReadAll(io.LimitReader(lr, kubeletJSONInMemory+1))
		if err != nil {
			return lr.n, false, nil, err
		}
		if int64(len(head)) > kubeletJSONInMemory {
			if ep.pods {
				return lr.n, true, nil, fmt.Errorf("the pods answer is over %d MiB; not kept, since its environment values can only be removed from a whole document", kubeletJSONInMemory>>20)
			}
			return k.stream(ep, io.MultiReader(bytes.NewReader(head), lr), lr, limit)
		}
		data := head
		out := data
		if ep.pods {
			red, n, perr := RedactPodSecrets(data)
			if perr != nil {
				// Not JSON (cut short, or an error page): env values cannot be
				// told apart, so it is not kept.
				return lr.n, false, nil, fmt.Errorf("pods answer is not JSON (%v); not kept, since environment values could not be removed", perr)
			}
			out = red
			if n > 0 {
				k.env.Notef("pods.json: %d environment variable values and last-applied-configuration annotations replaced by %s", n, redact.Marker)
			}
		} else {
			var buf bytes.Buffer
			if json.Indent(&buf, data, "", "  ") == nil {
				out = buf.Bytes()
			}
		}
		f, err := k.env.Create(ep.file, MaxBytes(limit))
		if err != nil {
			return lr.n, false, nil, err
		}
		pw := &poolWriter{k: k, w: f}
		sw := newKubeletScrubber(pw, k.token)
		_, werr := sw.Write(out)
		if cerr := sw.Close(); werr == nil {
			werr = cerr
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		return lr.n, f.Truncated() || pw.cut || lr.n > limit, f, werr
	}
	return k.stream(ep, lr, lr, limit)
}

// Bounds of the kubelet collector's own memory and record.
const (
	// kubeletJSONInMemory is the largest JSON answer re-indented (or, for
	// pods.json, redacted) in memory.
	kubeletJSONInMemory = 32 << 20
	// kubeletRecordReserve is kept of the collector's cap for
	// requests.json and the notes.
	kubeletRecordReserve = 1 << 20
)

// stream copies an answer into the bundle as it comes (redacted unless
// binary), within limit bytes.
func (k *kubeletRun) stream(ep kubeletEndpoint, src io.Reader, lr *kubeletCountingReader, limit int64) (int64, bool, *File, error) {
	opts := []FileOption{MaxBytes(limit)}
	if ep.binary {
		opts = append(opts, Binary(kubeletPprofReason))
	}
	f, err := k.env.Create(ep.file, opts...)
	if err != nil {
		return 0, false, nil, err
	}
	pw := &poolWriter{k: k, w: f}
	var w io.Writer = pw
	var sw *kubeletScrubber
	if !ep.binary {
		sw = newKubeletScrubber(pw, k.token)
		w = sw
	}
	var head *isolate.HeadBuffer
	if ep.name == "healthz" {
		head = &isolate.HeadBuffer{Max: 64 << 10}
		src = io.TeeReader(lr, head)
	}
	_, rerr := io.Copy(w, src)
	if head != nil {
		k.noteFailingChecks(head.String())
	}
	if sw != nil {
		if cerr := sw.Close(); rerr == nil {
			rerr = cerr
		}
	}
	if cerr := f.Close(); rerr == nil {
		rerr = cerr
	}
	return lr.n, f.Truncated() || pw.cut || lr.n > limit, f, rerr
}

// noteFailingChecks puts healthz's failing checks ("[-]syncloop failed")
// in the manifest, where a reader of `nodesnap inspect` sees them first.
func (k *kubeletRun) noteFailingChecks(body string) {
	var failing []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "[-]") && len(failing) < 20 {
			failing = append(failing, strings.TrimSpace(line))
		}
	}
	if len(failing) > 0 {
		k.env.Notef("kubelet healthz reports failing checks: %s", k.scrub(strings.Join(failing, "; ")))
	}
}

type kubeletCountingReader struct {
	r io.Reader
	n int64
}

func (c *kubeletCountingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// scrub removes the token from a string bound for the manifest. The
// redactor catches "Bearer <token>"; this catches the bare value, should a
// server or an error message ever echo it.
func (k *kubeletRun) scrub(s string) string {
	if k.token == "" {
		return s
	}
	return strings.ReplaceAll(s, k.token, redact.Marker)
}

func parseKubeletURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, fmt.Errorf("%q: want an https:// or http:// URL", s)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%q has no host", s)
	}
	// Userinfo would end up in requests.json; the token has its own flag.
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// kubeletIsLoopback reports whether a URL's host is this machine.
func kubeletIsLoopback(u *url.URL) bool {
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// kubeletTLSConfig decides how the secure port's certificate is checked.
// A kubelet's serving certificate is usually self-signed, so without a CA
// there is nothing to verify against: that is accepted for loopback (the
// token does not leave the host) and refused otherwise unless --insecure.
// refusal, when not empty, says why the secure port is not used at all.
func kubeletTLSConfig(ctx context.Context, env *Env, u *url.URL, o KubeletOptions) (cfg *tls.Config, verified bool, how, refusal string, err error) {
	loop := kubeletIsLoopback(u)
	if u.Scheme == "http" {
		if !loop && !o.Insecure {
			return nil, false, "plain HTTP", fmt.Sprintf("refusing to send the kubelet token over plain HTTP to %s: use https:// or --kubelet-insecure", u.Host), nil
		}
		return nil, false, "plain HTTP (no TLS)", "", nil
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	if o.CAFile != "" {
		var r isolate.ReadFileResult
		if err := env.Do(ctx, isolate.OpReadFile, o.CAFile, isolate.ReadFileRequest{Path: o.CAFile, Max: 4 << 20}, &r); err != nil {
			return nil, false, "", "", fmt.Errorf("cannot read --kubelet-ca-file %s: %w", o.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(r.Data) {
			return nil, false, "", "", fmt.Errorf("--kubelet-ca-file %s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
		return cfg, true, "verified against --kubelet-ca-file " + o.CAFile, "", nil
	}
	switch {
	case loop:
		cfg.InsecureSkipVerify = true
		return cfg, false, fmt.Sprintf("the kubelet's TLS certificate at %s was not verified: no --kubelet-ca-file was given and the address is loopback, so the token does not leave this host", u.Host), "", nil
	case o.Insecure:
		cfg.InsecureSkipVerify = true
		return cfg, false, fmt.Sprintf("the kubelet's TLS certificate at %s was not verified, as --kubelet-insecure asked: the token went to whoever answered", u.Host), "", nil
	default:
		return nil, false, "not used", fmt.Sprintf("refusing to send the kubelet token to %s without verifying its certificate: pass the CA that signed the kubelet's serving certificate with --kubelet-ca-file (for a self-signed kubelet, /var/lib/kubelet/pki/kubelet.crt), or --kubelet-insecure", u.Host), nil
	}
}

func newKubeletClient(tlsCfg *tls.Config, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout}
	tr := &http.Transport{
		// A node's proxy settings are for the outside world, never for its
		// own kubelet.
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSClientConfig:       tlsCfg,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		DisableKeepAlives:     true,
		DisableCompression:    true,
	}
	return &http.Client{
		Transport: tr,
		// A redirect could carry the request (and the token) elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func kubeletConnRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// kubeletDescribeError words a failed request for a customer.
func kubeletDescribeError(err error, host string, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ce *tls.CertificateVerificationError
	var ne net.Error
	switch {
	case kubeletConnRefused(err):
		return fmt.Sprintf("connection refused: nothing listens on %s", host)
	case errors.As(err, &ce):
		return fmt.Sprintf("the kubelet's TLS certificate is not trusted (%v): pass the CA that signed it with --kubelet-ca-file", ce.Err)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Sprintf("no answer within %s (%v)", timeout, err)
	default:
		return err.Error()
	}
}

// RedactPodSecrets removes environment variable values and the
// last-applied-configuration annotation (a copy of the whole spec, env
// included) from the kubelet's /pods answer and returns it indented.
// Names stay, so "which variables were set" survives; values do not.
func RedactPodSecrets(data []byte) ([]byte, int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, 0, err
	}
	if dec.More() {
		return nil, 0, errors.New("trailing data after the JSON value")
	}
	n := kubeletRedactPodValue(v, "")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, 0, err
	}
	return buf.Bytes(), n, nil
}

func kubeletRedactPodValue(v any, key string) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		if key == "annotations" {
			for ak := range t {
				if ak == "kubectl.kubernetes.io/last-applied-configuration" {
					t[ak] = redact.Marker
					n++
				}
			}
		}
		keys := make([]string, 0, len(t))
		for ck := range t {
			keys = append(keys, ck)
		}
		sort.Strings(keys)
		for _, ck := range keys {
			if key == "env" && ck == "value" {
				if s, ok := t[ck].(string); ok && s != "" {
					t[ck] = redact.Marker
					n++
				}
				continue
			}
			n += kubeletRedactPodValue(t[ck], ck)
		}
	case []any:
		for _, e := range t {
			// Elements of an "env" array are the {name, value} objects.
			n += kubeletRedactPodValue(e, key)
		}
	}
	return n
}

// kubeletScrubber replaces every occurrence of one secret in a stream,
// holding back at most len(secret)-1 bytes so that a secret split across
// writes is still found.
type kubeletScrubber struct {
	w       io.Writer
	needle  []byte
	pending []byte
	count   int
}

func newKubeletScrubber(w io.Writer, secret string) *kubeletScrubber {
	return &kubeletScrubber{w: w, needle: []byte(secret)}
}

func (s *kubeletScrubber) Write(p []byte) (int, error) {
	if len(s.needle) == 0 {
		return s.w.Write(p)
	}
	s.pending = append(s.pending, p...)
	for {
		i := bytes.Index(s.pending, s.needle)
		if i < 0 {
			break
		}
		if _, err := s.w.Write(s.pending[:i]); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(s.w, redact.Marker); err != nil {
			return 0, err
		}
		s.count++
		s.pending = s.pending[i+len(s.needle):]
	}
	if keep := len(s.needle) - 1; len(s.pending) > keep {
		cut := len(s.pending) - keep
		if _, err := s.w.Write(s.pending[:cut]); err != nil {
			return 0, err
		}
		s.pending = append(s.pending[:0], s.pending[cut:]...)
	}
	return len(p), nil
}

// Close writes what was held back.
func (s *kubeletScrubber) Close() error {
	if len(s.pending) == 0 {
		return nil
	}
	_, err := s.w.Write(s.pending)
	s.pending = nil
	return err
}
