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

// kubeletTLSConfig decides how the secure port's certificate is checked.
// A credential goes only to a peer known to be the kubelet: one verified
// against --kubelet-ca-file, or, without it, one whose certificate is the
// kubelet's own serving certificate found under --root (or a kubelet
// certificate the cluster CA signed; see findKubeletTrust). Loopback is no
// proof: port 10250 needs no privilege, and nodesnap runs when the kubelet
// may be down. refusal, when not empty, says why the secure port is not
// used at all; notes are what the search for the kubelet's certificate
// could not use.
func kubeletTLSConfig(ctx context.Context, env *collectors.Env, u *url.URL, o Options, hasCred bool) (cfg *tls.Config, verified bool, how, refusal string, notes []string, err error) {
	if u.Scheme == "http" {
		// Plain HTTP proves nothing about the peer, on loopback neither.
		if hasCred && !o.Insecure {
			return nil, false, "plain HTTP", fmt.Sprintf("no credential was sent to %s: plain HTTP cannot tell the kubelet from whoever listens there; use https:// or --kubelet-insecure", u.Host), nil, nil
		}
		return nil, false, "plain HTTP (no TLS)", "", nil, nil
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	if o.CAFile != "" {
		var r isolate.ReadFileResult
		if err := env.Do(ctx, isolate.OpReadFile, o.CAFile, isolate.ReadFileRequest{Path: o.CAFile, Max: 4 << 20}, &r); err != nil {
			return nil, false, "", "", nil, fmt.Errorf("cannot read --kubelet-ca-file %s: %w", o.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(r.Data) {
			return nil, false, "", "", nil, fmt.Errorf("--kubelet-ca-file %s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
		return cfg, true, "verified against --kubelet-ca-file " + o.CAFile, "", nil, nil
	}
	if o.Insecure {
		cfg.InsecureSkipVerify = true
		return cfg, false, fmt.Sprintf("the kubelet's TLS certificate at %s was not verified, as --kubelet-insecure asked: the credential went to whoever answered", u.Host), "", nil, nil
	}
	if !hasCred {
		// Nothing to give away: what answers is recorded as unverified.
		cfg.InsecureSkipVerify = true
		return cfg, false, fmt.Sprintf("the TLS certificate at %s was not verified: no credential was sent", u.Host), "", nil, nil
	}
	trust, notes := findKubeletTrust(ctx, env)
	if trust.empty() {
		return nil, false, "not used: the kubelet's certificate could not be verified",
			fmt.Sprintf("no credential was sent to %s: nothing under the root says what the kubelet serves with "+
				"(looked through %s for its tlsCertFile, %s/%s, %s and the cluster CA), so whoever listens there cannot be told from the kubelet; "+
				"pass the CA or the certificate the kubelet serves with as --kubelet-ca-file, or --kubelet-insecure to send the credential unverified",
				u.Host, trust.where, kubeletDefaultCertDir, kubeletSelfSignedCert, kubeletServerCurrentCert), notes, nil
	}
	// The standard checks cannot apply (a self-signed certificate, a
	// loopback address it does not name): VerifyConnection does them all,
	// before the client sends its certificate or any request.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		_, err := trust.verify(cs)
		return err
	}
	return cfg, true, "verified: the peer must present " + trust.sources() + " (found through " + trust.where + ")", "", notes, nil
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
	case kubeletCertFailure(err):
		return fmt.Sprintf("the peer on %s is not the kubelet, no credential was sent: %v", host, err)
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Sprintf("no answer within %s (%v)", timeout, err)
	default:
		return err.Error()
	}
}
