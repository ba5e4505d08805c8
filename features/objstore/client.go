package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/nodesnap/nodesnap/internal/cafile"
)

// ClientOptions configure NewClient. The zero value is the SDK's standard
// chain with nothing overridden.
type ClientOptions struct {
	// Region signs the requests; empty: the SDK's (AWS_REGION, the shared
	// config file), else us-east-1.
	Region string
	// Endpoint is an S3-compatible endpoint (https://minio.example:9000);
	// empty: the SDK's AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS.
	Endpoint string
	// CAFile is a PEM file of CA certificates to trust for the endpoint
	// (the SDK's AWS_CA_BUNDLE does the same).
	CAFile string
	// UserAgent is added to the SDK's (nodesnap/<version>).
	UserAgent string
	// HTTPClient replaces the transport (tests: a proxy in the path).
	HTTPClient *http.Client
}

// DefaultRegion signs requests when nothing names a region: S3-compatible
// stores accept any, and AWS answers a wrong one with the bucket's own
// region, which the error then names.
const DefaultRegion = "us-east-1"

// Client is one store, reached with one identity.
type Client struct {
	s3       *s3.Client
	presign  *s3.PresignClient
	endpoint string // "" for AWS itself
	region   string
	creds    aws.CredentialsProvider
}

// caFileTimeout bounds the read of a CA file a user names.
const caFileTimeout = 10 * time.Second

// NewClient loads the SDK's configuration (credentials, region, endpoint)
// and makes a client of the store. A custom endpoint is addressed
// path-style (http://host/bucket/key), which every S3-compatible store
// serves; AWS itself keeps virtual-hosted addressing.
func NewClient(ctx context.Context, o ClientOptions) (*Client, error) {
	var hc config.HTTPClient = o.HTTPClient
	if o.HTTPClient == nil {
		// Buildable, so that a CA bundle (CAFile, AWS_CA_BUNDLE) can
		// be added to it.
		hc = awshttp.NewBuildableClient().WithDialerOptions(func(d *net.Dialer) {
			d.Timeout = 15 * time.Second
			d.KeepAlive = 30 * time.Second
		}).WithTransportOptions(func(tr *http.Transport) {
			tr.Proxy = http.ProxyFromEnvironment
			tr.TLSHandshakeTimeout = 15 * time.Second
			tr.ResponseHeaderTimeout = 2 * time.Minute
			tr.ExpectContinueTimeout = 2 * time.Second
		})
	}
	loads := []func(*config.LoadOptions) error{config.WithHTTPClient(hc)}
	if o.Region != "" {
		loads = append(loads, config.WithRegion(o.Region))
	}
	if o.CAFile != "" {
		if o.HTTPClient != nil {
			return nil, errors.New("objstore: CAFile and HTTPClient are exclusive")
		}
		b, err := cafile.Read(o.CAFile, caFileTimeout)
		if err != nil {
			return nil, err
		}
		loads = append(loads, config.WithCustomCABundle(bytes.NewReader(b)))
	}
	if o.UserAgent != "" {
		loads = append(loads, config.WithAppID(sanitizeAppID(o.UserAgent)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("reading the AWS configuration (environment, ~/.aws/config and ~/.aws/credentials): %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	c := &Client{region: cfg.Region, creds: cfg.Credentials}
	c.s3 = s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		if so.BaseEndpoint != nil && *so.BaseEndpoint != "" {
			c.endpoint = strings.TrimSuffix(*so.BaseEndpoint, "/")
			so.UsePathStyle = true
		}
		// The checksums nodesnap asks for (SHA-256) are computed by
		// nodesnap itself, once; the SDK adds none of its own (CRC32
		// by default) when an operation does not require one.
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	c.presign = s3.NewPresignClient(c.s3)
	return c, nil
}

// sanitizeAppID keeps what the SDK accepts in its app id (letters,
// digits and a few marks, 50 at most).
func sanitizeAppID(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("!#$%&'*+-.^_`|~", r):
			return r
		}
		return '_'
	}, s)
	if len(s) > 50 {
		s = s[:50]
	}
	return s
}

// Endpoint is the custom endpoint the client uses ("" for AWS).
func (c *Client) Endpoint() string { return c.endpoint }

// Plaintext reports an http:// endpoint: bundles and signatures cross the
// network unencrypted.
func (c *Client) Plaintext() bool { return strings.HasPrefix(strings.ToLower(c.endpoint), "http://") }

// Object is one object of a listing.
type Object struct {
	// Key is the whole key; Name is what follows the location's prefix.
	Key, Name    string
	Size         int64
	LastModified time.Time
	ETag         string
}

// maxList bounds a listing: far more bundles than a case or a fleet run
// holds.
const maxList = 1_000_000

// List is every object under the location's prefix, by key.
func (c *Client) List(ctx context.Context, loc Location) ([]Object, error) {
	var out []Object
	p := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: aws.String(loc.Bucket), Prefix: aws.String(loc.Prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", loc, explain(err, loc))
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			out = append(out, Object{Key: k, Name: strings.TrimPrefix(k, loc.Prefix), Size: aws.ToInt64(o.Size), LastModified: aws.ToTime(o.LastModified), ETag: aws.ToString(o.ETag)})
		}
		if len(out) > maxList {
			return nil, fmt.Errorf("listing %s: more than %d objects; name a narrower prefix", loc, maxList)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Get reads the object name under the location. The caller closes it.
func (c *Client) Get(ctx context.Context, loc Location, name string) (io.ReadCloser, error) {
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key(name))})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", loc.URL(name), explain(err, loc))
	}
	return out.Body, nil
}

// PresignPut is a URL that lets whoever holds it PUT the object name under
// the location until ttl passes, with no other credential (collect
// --upload URL on a node, a fleet pod). The URL is a credential: never
// print it.
func (c *Client) PresignPut(ctx context.Context, loc Location, name string, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > 7*24*time.Hour {
		return "", fmt.Errorf("a pre-signed URL lasts more than 0 and at most 7 days (SigV4's limit), not %s", ttl)
	}
	req, err := c.presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key(name))}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("signing a PUT URL for %s: %w", loc.URL(name), explain(err, loc))
	}
	return req.URL, nil
}

// StoreError is an answer of the store, in words: the code it gave
// (AccessDenied, NoSuchBucket...) and what it means here. It wraps the
// SDK's error (errors.As finds smithy.APIError in it).
type StoreError struct {
	Code   string
	Status int
	Words  string
	err    error
}

func (e *StoreError) Error() string {
	s := e.Words
	if e.Code != "" {
		s += " (" + e.Code
		if e.Status != 0 {
			s += fmt.Sprintf(", HTTP %d", e.Status)
		}
		s += ")"
	}
	return s
}

func (e *StoreError) Unwrap() error { return e.err }

// explain turns an SDK error into what a customer can act on. The SDK's
// own message names the operation and the request id, never a credential;
// a bare transport error is kept as it is.
func explain(err error, loc Location) error {
	if err == nil {
		return nil
	}
	var ae smithy.APIError
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	if !errors.As(err, &ae) {
		if strings.Contains(err.Error(), "failed to refresh cached credentials") || strings.Contains(err.Error(), "no EC2 IMDS role found") {
			return &StoreError{Words: "no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with a role (IRSA, instance profile)", err: err}
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			// The SDK's message quotes the whole request URL, query
			// included: say what failed, and where, without it.
			host := ""
			if u, perr := url.Parse(ue.URL); perr == nil {
				host = u.Host
			}
			return &scrubbed{msg: fmt.Sprintf("the connection to the store (%s) failed: %s", host, withoutQueries(ue.Err.Error())), err: err}
		}
		return &scrubbed{msg: withoutQueries(err.Error()), err: err}
	}
	code := ae.ErrorCode()
	words := ae.ErrorMessage()
	switch code {
	case "NoSuchBucket":
		words = fmt.Sprintf("the bucket %s does not exist", loc.Bucket)
	case "AccessDenied", "Forbidden":
		words = fmt.Sprintf("the store refused these credentials access to %s", loc)
	case "InvalidAccessKeyId":
		words = "the store does not know this access key (AWS_ACCESS_KEY_ID or the profile's)"
	case "SignatureDoesNotMatch":
		words = "the store says the request's signature is wrong: the secret key does not belong to the access key"
	case "ExpiredToken", "TokenRefreshRequired":
		words = "the session token has expired: renew the credentials"
	case "BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest":
		words = "the store received bytes whose checksum is not the one sent: they were damaged on the way"
	case "PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException":
		words = fmt.Sprintf("the bucket %s is in another region than the one signed for: set AWS_REGION to the bucket's region", loc.Bucket)
	case "NoSuchUpload":
		words = "the store no longer has this multipart upload (aborted or expired)"
	case "EntityTooSmall":
		words = "the store refused a part smaller than its minimum (5 MiB on S3)"
	case "KMS.NotFoundException", "KMSKeyNotFound", "InvalidArgument":
		if words == "" {
			words = "the store refused an argument"
		}
	}
	if words == "" {
		words = "the store refused the request"
	}
	return &StoreError{Code: code, Status: status, Words: words, err: err}
}

// scrubbed is an error whose message was rid of URL queries; it still
// wraps the SDK's error.
type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

var urlQuery = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(https?://[^\s"'?]*)\?[^\s"']*`) })

// withoutQueries cuts the query off every URL in s.
func withoutQueries(s string) string { return urlQuery().ReplaceAllString(s, "$1?…") }

// apiCode is the store's error code in err, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
