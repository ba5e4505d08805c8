package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/nodesnap/nodesnap/bundle"
)

// Put defaults.
const (
	// DefaultPartSize is the size of a part of a multipart upload.
	DefaultPartSize = 16 << 20
	// DefaultThreshold: a bundle this large or larger goes in parts.
	DefaultThreshold = 32 << 20
	// DefaultRetries is how many more rounds a multipart upload gets
	// after one in which some part failed.
	DefaultRetries = 5
	// DefaultConcurrency is how many parts are in flight at once.
	DefaultConcurrency = 4
	// DefaultStallTimeout abandons a part that sends and hears nothing.
	DefaultStallTimeout = time.Minute
	maxParts            = 10000
	maxBackoff          = 30 * time.Second
)

// minPartSize is S3's smallest part but the last. A var so that a test
// may lower it.
var minPartSize int64 = 5 << 20

// SSE names server-side encryption.
const (
	SSEAES256 = "AES256"  // keys the store manages (SSE-S3)
	SSEKMS    = "aws:kms" // a KMS key (KMSKeyID, or the account's default)
)

// PutOptions configure one Put. The zero value takes the defaults.
type PutOptions struct {
	PartSize    int64
	Threshold   int64
	Concurrency int
	// Retries: rounds after the first in which a part failed (each
	// round first asks the store which parts it holds); 0 takes
	// DefaultRetries, a negative number none.
	Retries int
	// Backoff is the wait before the first further round, doubled for
	// each next one (at most 30s); 0: one second.
	Backoff time.Duration
	// StallTimeout abandons a request that moves no byte for this long.
	StallTimeout time.Duration
	// PartTimeout bounds each request that carries bytes (a part, or the
	// single PUT); 0: none. The whole upload has no deadline of its own
	// but the caller's context.
	PartTimeout time.Duration
	// SSE is "", SSEAES256 or SSEKMS; KMSKeyID with SSEKMS.
	SSE      string
	KMSKeyID string
	// SHA256 is the file's sha256 (hex) when the caller knows it.
	SHA256 string
	// NoSumObject leaves out the <name>.sha256 object.
	NoSumObject bool
	// Log, when set, is told of each round and resumption.
	Log io.Writer
}

// Result is what Put did, for --output json.
type Result struct {
	// URL is s3://bucket/key.
	URL    string `json:"url"`
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Parts is 0 for a single PUT.
	Parts int `json:"parts,omitempty"`
	// PartsReused are parts already in the store (an earlier round's or
	// an interrupted run's), not sent again.
	PartsReused int `json:"parts_reused,omitempty"`
	// Rounds is how many rounds of part uploads it took (1 when none
	// failed).
	Rounds int `json:"rounds,omitempty"`
	// Resumed: the multipart upload an interrupted run left was
	// continued.
	Resumed bool `json:"resumed,omitempty"`
	// StoreChecksum is the x-amz-checksum-sha256 the store computed and
	// checked: the whole object's, or the composite of the parts' ("-N").
	StoreChecksum string `json:"store_checksum_sha256,omitempty"`
	// SumKey is the key of the .sha256 object.
	SumKey          string  `json:"sum_key,omitempty"`
	BytesSent       int64   `json:"bytes_sent"`
	SSE             string  `json:"sse,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
}

func (o *PutOptions) fill() error {
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Retries == 0 {
		o.Retries = DefaultRetries
	} else if o.Retries < 0 {
		o.Retries = 0
	}
	if o.Backoff == 0 {
		o.Backoff = time.Second
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	if o.PartSize < minPartSize {
		return fmt.Errorf("a part is at least %d MiB (S3's minimum), not %d bytes", minPartSize>>20, o.PartSize)
	}
	if o.PartSize > 5<<30 {
		return errors.New("a part is at most 5 GiB (S3's maximum)")
	}
	switch o.SSE {
	case "", SSEAES256, SSEKMS:
	default:
		return fmt.Errorf("server-side encryption is %s or %s, not %q", SSEAES256, SSEKMS, o.SSE)
	}
	if o.KMSKeyID != "" && o.SSE != SSEKMS {
		return fmt.Errorf("a KMS key is used with server-side encryption %s only", SSEKMS)
	}
	return nil
}

// Put uploads the file at path as the object name under loc, and its
// sha256 as name.sha256 beside it (one sha256sum line, as collect writes
// it). Below the threshold in one PUT; above it in parts, each checked by
// the store against its x-amz-checksum-sha256. A part that fails (a
// dropped connection, a part damaged on the way and refused) is sent
// again in a later round, after the store was asked which parts it already
// holds: what arrived is not sent twice, and an upload an interrupted run
// left for the same key is continued. When the last round fails, the
// multipart upload is aborted so that no orphaned parts are billed.
func (c *Client) Put(ctx context.Context, loc Location, name, path string, o PutOptions) (res Result, err error) {
	start := time.Now()
	key := loc.Key(name)
	res = Result{URL: loc.URL(name), Bucket: loc.Bucket, Key: key, SSE: o.SSE}
	defer func() { res.DurationSeconds = time.Since(start).Seconds() }()
	if err := o.fill(); err != nil {
		return res, err
	}
	f, err := os.Open(path)
	if err != nil {
		return res, fmt.Errorf("opening the bundle: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return res, fmt.Errorf("reading the bundle: %w", err)
	}
	if !st.Mode().IsRegular() {
		return res, fmt.Errorf("%s is not a regular file", path)
	}
	res.Size = st.Size()
	sum := strings.ToLower(o.SHA256)
	if sum == "" {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, 0, res.Size)); err != nil {
			return res, fmt.Errorf("reading the bundle: %w", err)
		}
		sum = hex.EncodeToString(h.Sum(nil))
	}
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != sha256.Size {
		return res, fmt.Errorf("the bundle's sha256 %q is not 64 hex digits", o.SHA256)
	}
	res.SHA256 = sum
	if res.Size < o.Threshold {
		err = c.putSingle(ctx, loc, key, f, res.Size, base64.StdEncoding.EncodeToString(raw), &o, &res)
	} else {
		err = c.putMultipart(ctx, loc, key, f, res.Size, &o, &res)
	}
	if err != nil {
		return res, err
	}
	if !o.NoSumObject {
		line := sum + "  " + filepath.Base(name) + "\n"
		lsum := sha256.Sum256([]byte(line))
		in := &s3.PutObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(key + bundle.SumSuffix), Body: strings.NewReader(line),
			ContentLength: aws.Int64(int64(len(line))), ContentType: aws.String("text/plain"),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(lsum[:]))}
		o.sse(in)
		if _, err := c.s3.PutObject(ctx, in); err != nil {
			return res, fmt.Errorf("the bundle is in the store at %s, but its checksum object %s could not be written: %w", res.URL, bundle.SumSuffix, explain(err, loc))
		}
		res.SumKey = key + bundle.SumSuffix
	}
	return res, nil
}

func (o *PutOptions) sse(in *s3.PutObjectInput) {
	if o.SSE != "" {
		in.ServerSideEncryption = types.ServerSideEncryption(o.SSE)
	}
	if o.KMSKeyID != "" {
		in.SSEKMSKeyId = aws.String(o.KMSKeyID)
	}
}

func (o *PutOptions) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "nodesnap: "+format+"\n", args...)
	}
}

// unsignedPayload: the body is not hashed a second time for the
// signature; its integrity is the x-amz-checksum-sha256 the store checks
// (over TLS the SDK sends S3 requests this way anyway).
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// noRetry: a part is retried by Put's rounds, which first ask the store
// what it holds, not resent blindly by the SDK.
func noRetry(o *s3.Options) { o.RetryMaxAttempts = 1 }

func (c *Client) putSingle(ctx context.Context, loc Location, key string, f *os.File, size int64, sum64 string, o *PutOptions, res *Result) error {
	var out *s3.PutObjectOutput
	err := c.rounds(ctx, o, res, func(ctx context.Context) error {
		body := &progressReader{r: io.NewSectionReader(f, 0, size)}
		in := &s3.PutObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(key), Body: body, ContentLength: aws.Int64(size),
			ContentType: aws.String(contentType(key)), ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: aws.String(sum64)}
		o.sse(in)
		var err error
		stallCtx, stop := stallWatch(ctx, body, o.StallTimeout, o.PartTimeout)
		out, err = c.s3.PutObject(stallCtx, in, unsignedPayload, noRetry)
		stop()
		res.BytesSent += body.n.Load()
		return err
	})
	if err != nil {
		return fmt.Errorf("uploading to %s: %w", res.URL, explain(err, loc))
	}
	res.StoreChecksum = aws.ToString(out.ChecksumSHA256)
	if res.StoreChecksum != "" && res.StoreChecksum != sum64 {
		return fmt.Errorf("the store at %s says the object's sha256 is %s, not the bundle's %s", res.URL, res.StoreChecksum, sum64)
	}
	return nil
}

// contentType is what a bundle is served as.
func contentType(key string) string {
	switch {
	case strings.HasSuffix(key, ".tar.gz"):
		return "application/gzip"
	case strings.HasSuffix(key, ".tar.zst"):
		return "application/zstd"
	}
	return "application/octet-stream"
}

// rounds runs one attempt, and more while the error is one a further
// attempt can cure, with exponential backoff and jitter.
func (c *Client) rounds(ctx context.Context, o *PutOptions, res *Result, attempt func(context.Context) error) error {
	wait := o.Backoff
	for i := 1; ; i++ {
		res.Rounds = i
		err := attempt(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (interrupted: %w)", err, context.Cause(ctx))
		}
		if i > o.Retries || !retryable(err) {
			if i > 1 {
				return fmt.Errorf("%w (gave up after %d rounds)", err, i)
			}
			return err
		}
		d := wait + time.Duration((rand.Float64()*0.4-0.2)*float64(wait))
		wait = min(2*wait, maxBackoff)
		o.logf("upload round %d of %d failed: %v; the next round in %s", i, o.Retries+1, explain(err, Location{}), d.Round(10*time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (stopped while waiting to retry: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// retryable: an answer a further round can change. A part damaged on
// the way (BadDigest) is; a refusal of the credentials or the bucket is
// not.
func retryable(err error) bool {
	switch apiCode(err) {
	case "":
		return true // no answer: a transport error, a stall
	case "BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest", "RequestTimeout", "RequestTimeTooSkewed",
		"SlowDown", "ServiceUnavailable", "InternalError", "Throttling", "ThrottlingException", "TooManyRequests":
		return true
	}
	var se interface{ HTTPStatusCode() int }
	if errors.As(err, &se) {
		if s := se.HTTPStatusCode(); s >= 500 || s == 408 || s == 429 {
			return true
		}
	}
	return false
}

// part is one part of a multipart upload.
type part struct {
	num      int32
	off, len int64
	sum64    string // base64 sha256, computed once
	etag     string
}

// plan splits size into parts of partSize (raised so that no more than
// 10,000 parts are needed).
func plan(size, partSize int64) []*part {
	if n := (size + partSize - 1) / partSize; n > maxParts {
		partSize = (size + maxParts - 1) / maxParts
		partSize = (partSize + (1<<20 - 1)) &^ (1<<20 - 1)
	}
	var ps []*part
	for off, n := int64(0), int32(1); off < size || n == 1; n++ {
		l := min(partSize, size-off)
		ps = append(ps, &part{num: n, off: off, len: l})
		off += l
		if l == 0 {
			break
		}
	}
	return ps
}

func hashPart(f *os.File, p *part) error {
	if p.sum64 != "" {
		return nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, p.off, p.len)); err != nil {
		return fmt.Errorf("reading the bundle: %w", err)
	}
	p.sum64 = base64.StdEncoding.EncodeToString(h.Sum(nil))
	return nil
}

// compositeSum is the checksum S3 gives a multipart object: the sha256 of
// the parts' sha256 digests, "-N".
func compositeSum(ps []*part) string {
	h := sha256.New()
	for _, p := range ps {
		b, _ := base64.StdEncoding.DecodeString(p.sum64)
		h.Write(b)
	}
	return fmt.Sprintf("%s-%d", base64.StdEncoding.EncodeToString(h.Sum(nil)), len(ps))
}
