package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// How nodesnap reaches the kubelet: its URLs, TLS, HTTP client and the words for a failed request.

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
func kubeletTLSConfig(ctx context.Context, env *collectors.Env, u *url.URL, o KubeletOptions) (cfg *tls.Config, verified bool, how, refusal string, err error) {
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
