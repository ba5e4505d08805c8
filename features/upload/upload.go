// Package upload sends a bundle to a ticket system or an object store over
// HTTP: PUT (a pre-signed URL) or a multipart POST, with retries,
// exponential backoff, a stall watchdog and an overall deadline, and with
// every credential (the URL's query and user info, the headers file's
// values) kept out of whatever it prints or returns. collect --upload and
// nodesnap upload are thin flag layers over it.
package upload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodesnap/nodesnap/internal/cafile"
	"github.com/nodesnap/nodesnap/internal/cliflag"
)

// URLEnv names the environment variable read when no URL is given.
// An environment variable keeps a pre-signed URL (a credential until it
// expires) out of the process's argv, where ps, /proc/<pid>/cmdline and
// this very tool's processes collector would see it.
const URLEnv = "NODESNAP_UPLOAD_URL"

// ErrOption is wrapped by errors in the options: the user's to fix (a
// usage error).
var ErrOption = errors.New("bad upload option")

func optionError(err error) error { return fmt.Errorf("%w: %w", ErrOption, err) }

// SHA256Header carries the bundle's sha256 (hex) with every upload.
const SHA256Header = "X-Nodesnap-Sha256"

// Options are the upload flags, shared by `collect --upload` (with
// an "upload-" prefix) and `upload`.
type Options struct {
	URL          string
	Method       string
	Field        string
	Retries      int
	Timeout      time.Duration
	StallTimeout time.Duration
	Backoff      time.Duration
	HeadersFile  string
	// CAFile is a PEM file of CA certificates trusted besides the
	// system's (which $SSL_CERT_FILE and $SSL_CERT_DIR replace): a
	// server whose certificate a private CA signed.
	CAFile string
}

// Upload defaults.
const (
	DefaultRetries      = 3
	DefaultTimeout      = 5 * time.Minute
	DefaultStallTimeout = time.Minute
	DefaultBackoff      = time.Second
	maxBackoff          = 30 * time.Second
)

// Result is the "upload" object of --output json.
type Result struct {
	// URL is the target without its query or user info (those carry
	// credentials).
	URL             string  `json:"url"`
	Method          string  `json:"method"`
	OK              bool    `json:"ok"`
	Attempts        int     `json:"attempts"`
	StatusCode      int     `json:"status_code,omitempty"`
	Error           string  `json:"error,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// Uploader sends bundles to one URL with one set of options (New).
type Uploader struct {
	o      Options
	target *url.URL
	// Shown is the URL as it may be printed (no query, no user info).
	Shown   string
	headers http.Header
	secrets []string // header values and query values: scrubbed from anything printed
	client  *http.Client
	agent   string
	prefix  string // how the flags are spelled: "upload-" under collect
	// Log, when set, is told of every attempt.
	Log io.Writer
}

// New checks the options and reads the headers file. prefix is
// how the flags are spelled in errors ("upload-" under collect).
func New(o *Options, prefix, agent string) (*Uploader, error) {
	u := &Uploader{o: *o, headers: http.Header{}, agent: agent, prefix: prefix}
	u.o.Method = strings.ToLower(u.o.Method)
	if u.o.Method != "put" && u.o.Method != "post" {
		return nil, optionError(fmt.Errorf("--%smethod must be put or post, not %q", prefix, o.Method))
	}
	if u.o.Method == "post" && u.o.Field == "" {
		return nil, optionError(fmt.Errorf("--%sfield must not be empty", prefix))
	}
	if u.o.Retries < 0 || u.o.Timeout <= 0 || u.o.StallTimeout <= 0 || u.o.Backoff < 0 {
		return nil, optionError(fmt.Errorf("--%sretries must be 0 or more and --%stimeout and --%sstall-timeout positive", prefix, prefix, prefix))
	}
	t, err := url.Parse(o.URL)
	if err != nil || (t.Scheme != "http" && t.Scheme != "https") || t.Host == "" {
		// Never echo the URL: it may be a credential.
		return nil, optionError(fmt.Errorf("the upload URL is not an http:// or https:// URL"))
	}
	u.target = t
	u.Shown = cliflag.SafeURL(t)
	for _, vs := range t.Query() {
		u.secrets = append(u.secrets, vs...)
	}
	if t.User != nil {
		if p, ok := t.User.Password(); ok {
			u.secrets = append(u.secrets, p)
		}
	}
	if o.HeadersFile != "" {
		h, vals, err := readHeadersFileBounded(o.HeadersFile, headersFileTimeout)
		if err != nil {
			return nil, optionError(fmt.Errorf("--%sheaders-file: %w", prefix, err))
		}
		u.headers = h
		u.secrets = append(u.secrets, vals...)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pool, err := caPoolBounded(o.CAFile, headersFileTimeout)
		if err != nil {
			return nil, optionError(fmt.Errorf("--%sca-file: %w", prefix, err))
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	tr.Proxy = http.ProxyFromEnvironment
	tr.DialContext = (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 15 * time.Second
	tr.ExpectContinueTimeout = 2 * time.Second
	u.client = &http.Client{Transport: tr, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		// An https upload stays https: a redirect to http would send
		// the bundle (and a pre-signed URL's signature) in clear, while
		// the report said https.
		if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("the server redirected an https upload to %s://%s; not sending the bundle unencrypted", req.URL.Scheme, req.URL.Host)
		}
		// Headers from the file are the user's credentials for one
		// host; Go would forward them to wherever a redirect points.
		if len(u.headers) > 0 && req.URL.Host != via[0].URL.Host {
			return fmt.Errorf("the server redirected to another host (%s); not following it with the headers of --%sheaders-file", req.URL.Host, prefix)
		}
		return nil
	}}
	return u, nil
}

// Plaintext tells whether the URL is plain http: the bundle, and any
// credential in the URL or the headers, would cross the network
// unencrypted.
func (u *Uploader) Plaintext() bool { return u.target.Scheme == "http" }

// refuseHeaders are set by nodesnap itself: a headers file may not
// replace them.
var refuseHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Expect": true, textproto.CanonicalMIMEHeaderKey(SHA256Header): true,
}

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// headersFileTimeout bounds the read of --upload-headers-file.
const headersFileTimeout = 30 * time.Second

// readHeadersFileBounded is readHeadersFile given up after timeout: collect
// reads the file in the collecting process (see bounded).
func readHeadersFileBounded(p string, timeout time.Duration) (http.Header, []string, error) {
	type read struct {
		h    http.Header
		vals []string
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), timeout, fmt.Errorf("%s could not be read within %s", p, timeout))
	defer cancel()
	r, err := bounded(ctx, func() (read, error) {
		h, vals, err := readHeadersFile(p)
		return read{h, vals}, err
	}, nil)
	return r.h, r.vals, err
}

// bounded returns what fn returns, or the cause of ctx's end if that comes
// first. The upload runs in the collecting process, which never waits on
// a path that may stop answering (a headers file, or an output directory,
// on a filesystem that hung after the bundle was written): a call stuck
// there is left to its goroutine, and release, if given, frees what it
// returns should the kernel ever let it go.
func bounded[T any](ctx context.Context, fn func() (T, error), release func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if release != nil {
			go func() {
				if r := <-ch; r.err == nil {
					release(r.v)
				}
			}()
		}
		var zero T
		return zero, context.Cause(ctx)
	}
}

// readHeadersFile reads 'Name: value' lines. Errors name the line number,
// never its content: the file holds credentials.
func readHeadersFile(p string) (http.Header, []string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	h := http.Header{}
	var vals []string
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !headerName.MatchString(name) {
			return nil, nil, fmt.Errorf("%s line %d is not 'Name: value'", p, n)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, nil, fmt.Errorf("%s line %d: the value has a control character", p, n)
		}
		if refuseHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
			return nil, nil, fmt.Errorf("%s line %d: nodesnap sets %s itself", p, n, textproto.CanonicalMIMEHeaderKey(name))
		}
		h.Add(name, value)
		if value != "" {
			vals = append(vals, value)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return h, vals, nil
}

// scrub removes every secret (header values, URL query values) from text
// about to be shown.
func (u *Uploader) scrub(s string) string {
	for _, v := range u.secrets {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}

func (u *Uploader) logf(format string, args ...any) {
	if u.Log != nil {
		fmt.Fprintf(u.Log, "nodesnap: "+format+"\n", args...)
	}
}

// upload sends the file at path, retrying what a retry can cure, within
// the total timeout. It never returns without a verdict in the result.
func (u *Uploader) Upload(ctx context.Context, path string, size int64, sum string) (res Result) {
	res = Result{URL: u.Shown, Method: strings.ToUpper(u.o.Method)}
	start := time.Now()
	defer func() { res.DurationSeconds = time.Since(start).Seconds() }()
	ctx, cancel := context.WithTimeout(ctx, u.o.Timeout)
	defer cancel()
	attempts := 1 + u.o.Retries
	wait := u.o.Backoff
	for i := 1; ; i++ {
		res.Attempts = i
		code, retryAfter, err := u.attempt(ctx, path, size, sum)
		res.StatusCode = code
		if err == nil {
			res.OK, res.Error = true, ""
			u.logf("uploaded to %s (HTTP %d, attempt %d)", u.Shown, code, i)
			return res
		}
		res.Error = u.scrub(err.Error())
		var pe *permanentError
		switch {
		case errors.As(err, &pe):
			return res
		case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
			res.Error = "interrupted: " + res.Error
			return res
		case ctx.Err() != nil:
			res.Error = fmt.Sprintf("no success within %s (--%stimeout)", u.o.Timeout, u.prefix)
			if i > 1 {
				res.Error += fmt.Sprintf(", %d attempts", i)
			}
			if !errors.Is(err, errDeadline) {
				res.Error += "; last: " + u.scrub(err.Error())
			}
			return res
		case i >= attempts:
			res.Error += fmt.Sprintf(" (gave up after %d attempts, --%sretries %d)", i, u.prefix, u.o.Retries)
			return res
		}
		// ±20% so that a fleet that failed together does not retry
		// together.
		d := wait + time.Duration((rand.Float64()*0.4-0.2)*float64(wait))
		if retryAfter > d {
			d = min(retryAfter, 2*maxBackoff)
		}
		wait = min(2*wait, maxBackoff)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			res.Error += fmt.Sprintf("; the next attempt would start after the upload deadline (%s, --%stimeout)", u.o.Timeout, u.prefix)
			return res
		}
		u.logf("upload attempt %d of %d failed: %s; retrying in %s", i, attempts, res.Error, d.Round(100*time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			res.Error = "stopped while waiting to retry: " + res.Error
			return res
		case <-t.C:
		}
	}
}

// tlsRefused reports an error that says the server's certificate was not
// accepted.
func tlsRefused(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// permanentError is an answer a retry will not change (403, 404...).
type permanentError struct{ msg string }

func (p *permanentError) Error() string { return p.msg }

var (
	errStalled  = errors.New("stalled")
	errDeadline = errors.New("the upload deadline passed during the transfer")
)

// attempt makes one request. It returns the HTTP status (0 if none came),
// how long the server asked us to wait, and an error for anything but 2xx.
func (u *Uploader) attempt(ctx context.Context, path string, size int64, sum string) (int, time.Duration, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &stallWatch{last: time.Now()}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(min(u.o.StallTimeout/4, time.Second))
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if w.idle() > u.o.StallTimeout {
					cancel(errStalled)
					return
				}
			}
		}
	}()

	req, err := u.request(actx, path, size, sum, w)
	if err != nil {
		return 0, 0, &permanentError{err.Error()}
	}
	resp, err := u.client.Do(req)
	if err != nil {
		if errors.Is(context.Cause(actx), errStalled) {
			return 0, 0, fmt.Errorf("nothing sent or received for %s (--%sstall-timeout)", u.o.StallTimeout, u.prefix)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			// url.Error prints the whole URL, signature included.
			err = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return 0, 0, errDeadline
		}
		if strings.Contains(err.Error(), "redirect") {
			return 0, 0, &permanentError{err.Error()}
		}
		if tlsRefused(err) {
			// The server's certificate will not change between attempts:
			// asking again only repeats the handshake with a peer already
			// found untrustworthy.
			return 0, 0, &permanentError{u.untrusted(err)}
		}
		return 0, 0, err
	}
	defer resp.Body.Close()
	w.touch()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, 0, nil
	}
	msg := fmt.Sprintf("the server answered %s", resp.Status)
	if detail := serverDetail(body); detail != "" {
		msg += ": " + detail
	}
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooEarly,
		resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), errors.New(msg)
	}
	return resp.StatusCode, 0, &permanentError{msg}
}

// openBounded opens path, giving up when ctx ends (the upload's deadline,
// its stall watchdog or an interrupt): see bounded.
func openBounded(ctx context.Context, path string) (*os.File, error) {
	return bounded(ctx, func() (*os.File, error) { return os.Open(path) }, func(f *os.File) { _ = f.Close() }) // read-only: nothing to lose
}

// request builds one attempt's request, its body read afresh from the file.
func (u *Uploader) request(ctx context.Context, path string, size int64, sum string, w *stallWatch) (*http.Request, error) {
	var (
		body   func() (io.ReadCloser, error)
		length int64
		ctype  string
	)
	open := func() (*os.File, error) {
		f, err := openBounded(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("reopening the bundle: %w", err)
		}
		return f, nil
	}
	switch u.o.Method {
	case "put":
		length = size
		body = func() (io.ReadCloser, error) {
			f, err := open()
			if err != nil {
				return nil, err
			}
			return &watchedBody{r: io.LimitReader(f, size), c: f, w: w}, nil
		}
	case "post":
		// The form is built around the file so that its length is
		// known: some servers and proxies refuse chunked uploads.
		var head bytes.Buffer
		mw := multipart.NewWriter(&head)
		if _, err := mw.CreateFormFile(u.o.Field, filepath.Base(path)); err != nil {
			return nil, err
		}
		headBytes := append([]byte(nil), head.Bytes()...)
		head.Reset()
		if err := mw.Close(); err != nil {
			return nil, err
		}
		tail := append([]byte(nil), head.Bytes()...) // "\r\n--boundary--\r\n"
		length = int64(len(headBytes)) + size + int64(len(tail))
		ctype = mw.FormDataContentType()
		body = func() (io.ReadCloser, error) {
			f, err := open()
			if err != nil {
				return nil, err
			}
			r := io.MultiReader(bytes.NewReader(headBytes), io.LimitReader(f, size), bytes.NewReader(tail))
			return &watchedBody{r: r, c: f, w: w}, nil
		}
	}
	b, err := body()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(u.o.Method), u.target.String(), b)
	if err != nil {
		b.Close()
		return nil, errors.New("building the request failed")
	}
	req.ContentLength = length
	req.GetBody = body
	for k, vs := range u.headers {
		req.Header[k] = append([]string(nil), vs...)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", u.agent)
	}
	req.Header.Set(SHA256Header, sum)
	if length > 1<<20 {
		// Lets the server refuse (an expired signature) before a
		// large body is sent.
		req.Header.Set("Expect", "100-continue")
	}
	return req, nil
}

// stallWatch records when the transfer last made progress.
type stallWatch struct {
	mu   sync.Mutex
	last time.Time
}

func (s *stallWatch) touch() {
	s.mu.Lock()
	s.last = time.Now()
	s.mu.Unlock()
}

func (s *stallWatch) idle() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.last)
}

// watchedBody is a request body that tells the stall watch of progress.
// Reads stop when the socket's buffer is full and the peer reads nothing,
// so a silent peer shows as no progress.
type watchedBody struct {
	r io.Reader
	c io.Closer
	w *stallWatch
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		b.w.touch()
	}
	return n, err
}

func (b *watchedBody) Close() error { return b.c.Close() }

// The patterns of an error answer, compiled on the first one: their
// bounded repetitions make programs of 200 KB that every process of the
// binary would build at start.
var xmlError = sync.OnceValues(func() (code, message *regexp.Regexp) {
	return regexp.MustCompile(`<Code>([^<]{1,100})</Code>`), regexp.MustCompile(`<Message>([^<]{1,300})</Message>`)
})

// serverDetail is what an error answer says, briefly. Object stores answer
// XML whose other elements (StringToSign, CanonicalRequest) echo signed
// request details, so only Code and Message are taken from it.
func serverDetail(body []byte) string {
	xmlCode, xmlMessage := xmlError()
	if m := xmlCode.FindSubmatch(body); m != nil {
		s := string(m[1])
		if mm := xmlMessage.FindSubmatch(body); mm != nil {
			s += " (" + string(mm[1]) + ")"
		}
		return s
	}
	s := strings.TrimSpace(string(body))
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// retryAfter reads a Retry-After header (seconds or an HTTP date).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// caPoolBounded is the system's CA pool and the certificates of the PEM
// file p, read within timeout.
func caPoolBounded(p string, timeout time.Duration) (*x509.CertPool, error) {
	b, err := cafile.Read(p, timeout)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", p)
	}
	return pool, nil
}

// untrusted says that the server's certificate was refused, and the way
// to trust a private CA: the CA file option, or $SSL_CERT_FILE.
func (u *Uploader) untrusted(err error) string {
	msg := "the server's TLS certificate is not trusted: " + err.Error()
	if u.o.CAFile != "" {
		return msg + "; not by the system's CAs nor by --" + u.prefix + "ca-file " + u.o.CAFile + ": is that the CA that signed the server's certificate?"
	}
	return msg + "; if a private CA signed it, give that CA's certificate (PEM) with --" + u.prefix + "ca-file FILE, or in $SSL_CERT_FILE"
}
