package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// A small JSON client of the API server: GET only, one object or a list
// in pages (limit/continue), every request under its own deadline and the
// collector's. It links no Kubernetes client library: the node image is
// built without one.

type apiClient struct {
	base    *url.URL
	http    *http.Client
	token   string
	timeout time.Duration
	page    int

	mu       sync.Mutex
	requests []layout.ClusterRequest
}

func newAPIClient(c *credential, timeout time.Duration, page int) *apiClient {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.roots, ServerName: c.tlsName}
	if cfg.ServerName == "" {
		cfg.ServerName = c.server.Hostname()
	}
	if c.cert != nil {
		cfg.Certificates = []tls.Certificate{*c.cert}
	}
	d := &net.Dialer{Timeout: timeout}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSClientConfig:       cfg,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   4,
		ForceAttemptHTTP2:     true,
	}
	return &apiClient{
		base: c.server, token: c.token, timeout: timeout, page: page,
		http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

func (a *apiClient) close() {
	if t, ok := a.http.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
}

// apiError is an answer other than 200.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string {
	switch e.Status {
	case http.StatusForbidden:
		return "forbidden (403): " + e.Message
	case http.StatusUnauthorized:
		return "the credential was rejected (401)"
	case http.StatusNotFound:
		return "not found (404)"
	}
	return fmt.Sprintf("the API server answered %d: %s", e.Status, e.Message)
}

func isStatus(err error, code int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == code
}

// maxObjectBytes bounds one answer (a page of a list).
const maxObjectBytes = 16 << 20

// get decodes one answer of path with query q into v.
func (a *apiClient) get(ctx context.Context, p string, q url.Values, v any) error {
	rctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	u := *a.base
	u.Path = a.base.Path + p
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "nodesnap-cluster-collector")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return describe(err, a.base.Host, a.timeout)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxObjectBytes+1)
	if resp.StatusCode != http.StatusOK {
		var st struct {
			Message string `json:"message"`
		}
		b, _ := io.ReadAll(io.LimitReader(body, 4096))
		_ = json.Unmarshal(b, &st)
		return &apiError{Status: resp.StatusCode, Message: shorten(st.Message, 300)}
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return describe(err, a.base.Host, a.timeout)
	}
	if len(b) > maxObjectBytes {
		return fmt.Errorf("the answer is larger than %d bytes", maxObjectBytes)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("the answer is not the JSON expected: %w", err)
	}
	return nil
}

// getOne reads one object and records the request.
func (a *apiClient) getOne(ctx context.Context, resource, p string, v any) error {
	start := time.Now()
	err := a.get(ctx, p, nil, v)
	a.record(resource, p, nil, start, 1, boolInt(err == nil), false, err)
	return err
}

// list reads up to max items of a list, page by page; each page's items
// are handed to each. truncated: more were there.
func list[T any](ctx context.Context, a *apiClient, resource, p string, q url.Values, max int, each func(T) bool) (n int, truncated bool, err error) {
	start := time.Now()
	if q == nil {
		q = url.Values{}
	}
	pages := 0
	defer func() { a.record(resource, p, q, start, pages, n, truncated, err) }()
	cont := ""
	for {
		lim := min(a.page, max-n)
		q.Set("limit", strconv.Itoa(lim))
		if cont != "" {
			q.Set("continue", cont)
		} else {
			q.Del("continue")
		}
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []T `json:"items"`
		}
		if err := a.get(ctx, p, q, &page); err != nil {
			return n, truncated, err
		}
		pages++
		for _, it := range page.Items {
			if n >= max {
				return n, true, nil
			}
			if each(it) {
				n++
			}
		}
		cont = page.Metadata.Continue
		if cont == "" {
			return n, false, nil
		}
		if n >= max {
			return n, true, nil
		}
		if ctx.Err() != nil {
			return n, true, ctx.Err()
		}
	}
}

func (a *apiClient) record(resource, p string, q url.Values, start time.Time, pages, items int, truncated bool, err error) {
	rec := layout.ClusterRequest{Resource: resource, Path: p, Pages: pages, Items: items, Truncated: truncated,
		DurationSeconds: time.Since(start).Seconds()}
	if fs := q.Get("fieldSelector"); fs != "" {
		rec.Path += "?fieldSelector=" + fs
	}
	if err != nil {
		rec.Error = err.Error()
		var ae *apiError
		if errors.As(err, &ae) {
			rec.StatusCode = ae.Status
		}
	} else {
		rec.StatusCode = http.StatusOK
	}
	a.mu.Lock()
	a.requests = append(a.requests, rec)
	a.mu.Unlock()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// describe words a failed request for a customer.
func describe(err error, host string, timeout time.Duration) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ce *tls.CertificateVerificationError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("the API server's certificate at %s is not signed by the CA given (%v): nothing was sent", host, ce.Err)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Errorf("the API server at %s did not answer within %s: %w", host, timeout, context.DeadlineExceeded)
	case strings.Contains(err.Error(), "connection refused"):
		return fmt.Errorf("connection refused: nothing listens on %s", host)
	}
	return fmt.Errorf("reaching the API server at %s: %w", host, err)
}
