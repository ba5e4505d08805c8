package objstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/cafile"
)

// PolicyEnv names the environment variable that gives collect and upload
// a POST policy file.
const PolicyEnv = "NODESNAP_UPLOAD_POLICY"

// Policy is a pre-signed POST policy: one URL and the form fields that let
// whoever holds them POST objects whose key starts with KeyPrefix, up to
// MaxSize bytes each, until Expires; no other credential is needed. The
// fields are a credential until then: the file is written 0600 and its
// values are never printed.
type Policy struct {
	// Version is 1.
	Version int `json:"version"`
	// Location is s3://bucket/prefix/, for messages.
	Location string `json:"location"`
	// URL is where the form is posted (the bucket's URL: no query).
	URL       string            `json:"url"`
	KeyPrefix string            `json:"key_prefix"`
	Fields    map[string]string `json:"fields"`
	Expires   time.Time         `json:"expires"`
	MaxSize   int64             `json:"max_size"`
	// Warning says why the policy may stop working before Expires (it was
	// signed with temporary credentials). Not written to the file.
	Warning string `json:"-"`
}

// DefaultPolicyMaxSize is the largest object a policy lets through: S3's
// limit on a single POST.
const DefaultPolicyMaxSize = 5 << 30

// maxPolicyTTL bounds a policy's life.
const maxPolicyTTL = 366 * 24 * time.Hour

// checksumField carries the object's sha256 in a POST: the store checks it.
const checksumField = "x-amz-checksum-sha256"

// PresignPost signs a POST policy for loc's prefix, valid for ttl, for
// objects up to maxSize bytes (0: 5 GiB), with server-side encryption sse
// ("" for none) fixed in it.
func (c *Client) PresignPost(ctx context.Context, loc Location, ttl time.Duration, maxSize int64, sse string) (*Policy, error) {
	if ttl <= 0 || ttl > maxPolicyTTL {
		return nil, fmt.Errorf("a POST policy lasts more than 0 and at most %s, not %s", maxPolicyTTL, ttl)
	}
	if maxSize <= 0 {
		maxSize = DefaultPolicyMaxSize
	}
	switch sse {
	case "", SSEAES256, SSEKMS:
	default:
		return nil, fmt.Errorf("server-side encryption is %s or %s, not %q", SSEAES256, SSEKMS, sse)
	}
	expires := time.Now().Add(ttl).UTC().Truncate(time.Second)
	conds := []any{
		[]any{"starts-with", "$key", loc.Prefix},
		[]any{"content-length-range", 0, maxSize},
		[]any{"starts-with", "$" + checksumField, ""},
	}
	if sse != "" {
		conds = append(conds, map[string]string{"x-amz-server-side-encryption": sse})
	}
	req, err := c.presign.PresignPostObject(ctx, &s3.PutObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Prefix + "${filename}")},
		func(po *s3.PresignPostOptions) {
			po.Expires = ttl
			po.Conditions = conds
		})
	if err != nil {
		return nil, fmt.Errorf("signing a POST policy for %s: %w", loc, explain(err, loc))
	}
	u, err := url.Parse(req.URL)
	if err != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("signing a POST policy for %s: the SDK gave a URL with a query", loc)
	}
	p := &Policy{Version: 1, Location: loc.String(), URL: req.URL, KeyPrefix: loc.Prefix, Fields: map[string]string{}, Expires: expires, MaxSize: maxSize}
	for k, v := range req.Values {
		if k != "key" {
			p.Fields[k] = v
		}
	}
	if sse != "" {
		p.Fields["x-amz-server-side-encryption"] = sse
	}
	if creds, err := c.creds.Retrieve(ctx); err == nil && creds.CanExpire && creds.Expires.Before(expires) {
		p.Warning = fmt.Sprintf("the credentials that signed this policy are temporary and expire at %s: the policy stops working then, before its own expiry; sign it with the long-lived key of a user that may only write under %s", creds.Expires.UTC().Format(time.RFC3339), loc)
	}
	return p, nil
}

// maxPolicyFile bounds a policy file.
const maxPolicyFile = 64 << 10

var fieldName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`) })

// ReadPolicy reads and checks a policy file. Errors never quote a field's
// value: they are credentials.
func ReadPolicy(r io.Reader) (*Policy, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPolicyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPolicyFile {
		return nil, fmt.Errorf("larger than %d KiB: not a nodesnap POST policy", maxPolicyFile>>10)
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&p); err != nil {
		return nil, errors.New("not a nodesnap POST policy (JSON with url, key_prefix, fields, expires)")
	}
	if p.Version != 1 {
		return nil, fmt.Errorf("a POST policy of version %d; this nodesnap reads version 1", p.Version)
	}
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, errors.New("the policy's url is not an http(s) URL without a query")
	}
	if len(p.Fields) == 0 || len(p.Fields) > 32 {
		return nil, errors.New("the policy has no fields (or too many)")
	}
	for k, v := range p.Fields {
		if !fieldName().MatchString(k) || strings.EqualFold(k, "key") || strings.EqualFold(k, "file") || strings.EqualFold(k, checksumField) {
			return nil, errors.New("the policy holds a field name a POST form cannot carry")
		}
		if strings.ContainsAny(v, "\r\n\x00") || len(v) > 16<<10 {
			return nil, fmt.Errorf("the policy's field %s is damaged", k)
		}
	}
	for _, k := range []string{"policy", "X-Amz-Signature"} {
		if p.Fields[k] == "" {
			return nil, fmt.Errorf("the policy has no %s field", k)
		}
	}
	if strings.ContainsAny(p.KeyPrefix, "\r\n\x00") || len(p.KeyPrefix) > maxKey-200 || strings.HasPrefix(p.KeyPrefix, "/") {
		return nil, errors.New("the policy's key_prefix is not a key prefix")
	}
	if p.MaxSize <= 0 {
		p.MaxSize = DefaultPolicyMaxSize
	}
	if p.Location == "" || !IsURL(p.Location) {
		p.Location = Scheme + u.Host + "/" + p.KeyPrefix
	}
	return &p, nil
}

// LoadPolicy reads the policy file at path; it must not be readable by
// others (it is a credential until it expires).
func LoadPolicy(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the POST policy file: %w", err)
	}
	defer f.Close()
	p, err := ReadPolicy(f)
	if err != nil {
		return nil, fmt.Errorf("the POST policy file %s: %w", path, err)
	}
	return p, nil
}

// PostOptions configure PostFile.
type PostOptions struct {
	Retries int
	Backoff time.Duration
	// Timeout bounds each attempt (0: 30 minutes).
	Timeout time.Duration
	// CAFile: PEM certificates to trust besides the system's.
	CAFile    string
	UserAgent string
	// SHA256 is the file's sha256 (hex) when the caller knows it.
	SHA256 string
	Log    io.Writer
	// HTTPClient replaces the transport (tests).
	HTTPClient *http.Client
}

// PostFile sends the file at path as the object KeyPrefix+name with the
// policy's form, its sha256 in x-amz-checksum-sha256 for the store to
// check, then name.sha256 beside it. Transport errors and 5xx answers are
// retried; a refusal (an expired policy, a key outside the prefix: 403) is
// final.
func PostFile(ctx context.Context, p *Policy, name, path string, o PostOptions) (res Result, err error) {
	start := time.Now()
	key := p.KeyPrefix + name
	bucket, _, _ := strings.Cut(strings.TrimPrefix(p.Location, Scheme), "/")
	res = Result{URL: Scheme + bucket + "/" + key, Bucket: bucket, Key: key, SSE: p.Fields["x-amz-server-side-encryption"]}
	defer func() { res.DurationSeconds = time.Since(start).Seconds() }()
	if time.Now().After(p.Expires) {
		return res, fmt.Errorf("the POST policy for %s expired at %s: mint a new one (nodesnap upload-policy)", p.Location, p.Expires.UTC().Format(time.RFC3339))
	}
	hc, err := postClient(o)
	if err != nil {
		return res, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return res, fmt.Errorf("the bundle: %w", err)
	}
	if !st.Mode().IsRegular() {
		return res, fmt.Errorf("%s is not a regular file", path)
	}
	res.Size = st.Size()
	if res.Size > p.MaxSize {
		return res, fmt.Errorf("the bundle is %d bytes, more than the POST policy allows (%d)", res.Size, p.MaxSize)
	}
	sum, md5hex, err := hashFile(path, o.SHA256)
	if err != nil {
		return res, err
	}
	res.SHA256 = sum
	raw, _ := hex.DecodeString(sum)
	res.StoreChecksum = base64.StdEncoding.EncodeToString(raw)
	if o.Backoff == 0 {
		o.Backoff = time.Second
	}
	send := func(key string, open func() (io.ReadCloser, int64, error), sum64, md5hex string) error {
		wait := o.Backoff
		for i := 1; ; i++ {
			res.Rounds = i
			n, err := postOnce(ctx, hc, p, key, open, sum64, md5hex, o)
			res.BytesSent += n
			if err == nil {
				return nil
			}
			var fe *finalError
			if errors.As(err, &fe) || i > o.Retries || ctx.Err() != nil {
				return err
			}
			d := wait + time.Duration((rand.Float64()*0.4-0.2)*float64(wait))
			wait = min(2*wait, maxBackoff)
			if o.Log != nil {
				fmt.Fprintf(o.Log, "nodesnap: upload attempt %d of %d failed: %v; retrying in %s\n", i, o.Retries+1, err, d.Round(10*time.Millisecond))
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(d):
			}
		}
	}
	openFile := func() (io.ReadCloser, int64, error) {
		f, err := os.Open(path)
		return f, res.Size, err
	}
	if err := send(key, openFile, res.StoreChecksum, md5hex); err != nil {
		return res, fmt.Errorf("posting to %s: %w", res.URL, err)
	}
	line := sum + "  " + filepath.Base(name) + "\n"
	ls := sha256.Sum256([]byte(line))
	lm := md5.Sum([]byte(line))
	openLine := func() (io.ReadCloser, int64, error) {
		return io.NopCloser(strings.NewReader(line)), int64(len(line)), nil
	}
	if err := send(key+bundle.SumSuffix, openLine, base64.StdEncoding.EncodeToString(ls[:]), hex.EncodeToString(lm[:])); err != nil {
		return res, fmt.Errorf("the bundle is in the store at %s, but its checksum object could not be posted: %w", res.URL, err)
	}
	res.SumKey = key + bundle.SumSuffix
	return res, nil
}

// finalError is an answer a retry will not change.
type finalError struct{ msg string }

func (e *finalError) Error() string { return e.msg }

func hashFile(path, known string) (sum, md5hex string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("the bundle: %w", err)
	}
	defer f.Close()
	hs, hm := sha256.New(), md5.New()
	if _, err := io.Copy(io.MultiWriter(hs, hm), f); err != nil {
		return "", "", fmt.Errorf("reading the bundle: %w", err)
	}
	sum = hex.EncodeToString(hs.Sum(nil))
	if known != "" && !strings.EqualFold(known, sum) {
		return "", "", fmt.Errorf("the bundle's sha256 is %s, not %s as said: it changed after it was written", sum, known)
	}
	return sum, hex.EncodeToString(hm.Sum(nil)), nil
}

func postClient(o PostOptions) (*http.Client, error) {
	if o.HTTPClient != nil {
		return o.HTTPClient, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyFromEnvironment
	tr.DialContext = (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 15 * time.Second
	tr.ResponseHeaderTimeout = 2 * time.Minute
	if o.CAFile != "" {
		b, err := cafile.Read(o.CAFile, caFileTimeout)
		if err != nil {
			return nil, err
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(b)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

// postOnce sends one form: the policy's fields (sorted, for a stable
// request), key, the checksum, then the file, its length known in advance.
func postOnce(ctx context.Context, hc *http.Client, p *Policy, key string, open func() (io.ReadCloser, int64, error), sum64, md5hex string, o PostOptions) (int64, error) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	names := make([]string, 0, len(p.Fields))
	for k := range p.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := mw.WriteField(k, p.Fields[k]); err != nil {
			return 0, err
		}
	}
	_ = mw.WriteField("key", key)
	_ = mw.WriteField(checksumField, sum64)
	if _, err := mw.CreateFormFile("file", filepath.Base(key)); err != nil {
		return 0, err
	}
	headBytes := append([]byte(nil), head.Bytes()...)
	head.Reset()
	_ = mw.Close()
	tail := append([]byte(nil), head.Bytes()...)
	body, size, err := open()
	if err != nil {
		return 0, &finalError{fmt.Sprintf("reopening the bundle: %v", err)}
	}
	defer body.Close()
	counted := &progressReader{r: io.MultiReader(bytes.NewReader(headBytes), io.LimitReader(body, size), bytes.NewReader(tail))}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, p.URL, counted)
	if err != nil {
		return 0, &finalError{"the policy's URL cannot be posted to"}
	}
	req.ContentLength = int64(len(headBytes)) + size + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if o.UserAgent != "" {
		req.Header.Set("User-Agent", o.UserAgent)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL holds no secret, but say only what failed
		}
		return counted.n.Load(), fmt.Errorf("no answer from %s: %w", req.URL.Host, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// A single-part object's ETag is the MD5 of its bytes (unless a
		// KMS key encrypted it): a second witness of what arrived.
		if et := strings.Trim(resp.Header.Get("ETag"), `"`); len(et) == 32 && p.Fields["x-amz-server-side-encryption"] != SSEKMS && !strings.EqualFold(et, md5hex) {
			return counted.n.Load(), fmt.Errorf("the store's ETag %s is not the MD5 of what was sent (%s)", et, md5hex)
		}
		return counted.n.Load(), nil
	}
	words := fmt.Sprintf("the store answered %s", resp.Status)
	if d := storeDetail(msg); d != "" {
		words += ": " + d
	}
	if resp.StatusCode >= 500 || resp.StatusCode == 408 || resp.StatusCode == 429 || strings.Contains(string(msg), "<Code>BadDigest</Code>") {
		return counted.n.Load(), errors.New(words)
	}
	if resp.StatusCode == http.StatusForbidden {
		words += fmt.Sprintf(" (the POST policy does not allow %s, or it expired or was revoked)", key)
	}
	return counted.n.Load(), &finalError{words}
}

// Compiled on first use, as the other expressions of this package: every
// process of the binary (each collector and isolation worker) runs this
// package's init, and these two, with their counted repetitions, cost
// about 3 ms of CPU there.
var (
	xmlCode    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<Code>([^<]{1,100})</Code>`) })
	xmlMessage = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<Message>([^<]{1,300})</Message>`) })
)

// storeDetail is the Code and Message of an S3 error answer, printable.
func storeDetail(b []byte) string {
	m := xmlCode().FindSubmatch(b)
	if m == nil {
		return ""
	}
	s := string(m[1])
	if mm := xmlMessage().FindSubmatch(b); mm != nil {
		s += " (" + string(mm[1]) + ")"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// WritePolicy writes the policy to path, readable by its owner only.
func WritePolicy(path string, p *Policy) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("writing the policy: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing the policy: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the policy: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the policy: %w", err)
	}
	return nil
}
