package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/features/objstore"
	"github.com/nodesnap/nodesnap/features/upload"
	"github.com/nodesnap/nodesnap/internal/cliflag"
)

// UploadPolicyEnv names the environment variable read for --upload-policy.
const UploadPolicyEnv = objstore.PolicyEnv

// storeFlags are the flags of an object-store destination (s3://bucket/
// prefix/) and of a POST policy, shared by collect (with an "upload-"
// prefix) and upload.
type storeFlags struct {
	sse        string
	kmsKeyID   string
	partSize   cliflag.ByteSize
	policyFile string
}

func addStoreFlags(s *storeFlags, f *pflag.FlagSet, prefix string) {
	s.partSize = objstore.DefaultPartSize
	f.StringVar(&s.sse, prefix+"sse", "", "with s3://: server-side encryption of the objects, AES256 (keys the store manages) or aws:kms")
	f.StringVar(&s.kmsKeyID, prefix+"sse-kms-key-id", "", "with s3:// and --"+prefix+"sse aws:kms: the KMS key (id, ARN or alias) instead of the account's default")
	f.Var(&s.partSize, prefix+"part-size", "with s3://: bundles of twice this size or more go in parts of this size (at least 5MiB), each checked by the store and resumed after a dropped connection")
	f.StringVar(&s.policyFile, prefix+"policy", "", "a POST policy file made by 'nodesnap upload-policy': each bundle is posted under the policy's prefix by its own name, with no other credential (default $"+UploadPolicyEnv+")")
}

// destination is where a written bundle goes: an http(s) URL
// (features/upload), a place in an object store (s3://bucket/prefix/,
// each bundle under its own name), or a POST policy's prefix. Its Upload
// answers as features/upload's does, so that collect reports them alike.
type destination struct {
	url    *upload.Uploader
	store  *objstore.Client
	loc    objstore.Location
	policy *objstore.Policy
	o      upload.Options
	s      storeFlags
	prefix string
	// Shown is where the bundles go, as it may be printed.
	Shown string
	// Log, when set, is told of every attempt.
	Log io.Writer
	// Object is what the last Upload put in the store (nil for a URL).
	Object *objstore.Result
}

// newDestination reads the destination from o.URL (or $NODESNAP_UPLOAD_URL,
// read by the caller) and the policy flag (or $NODESNAP_UPLOAD_POLICY):
// nil when neither is given.
func newDestination(ctx context.Context, o *upload.Options, s *storeFlags, prefix string, stderr io.Writer) (*destination, error) {
	if s.policyFile == "" {
		s.policyFile = os.Getenv(UploadPolicyEnv)
	}
	if o.URL == "" && s.policyFile == "" {
		return nil, nil
	}
	d := &destination{o: *o, s: *s, prefix: prefix}
	storeOnly := func() error {
		if o.HeadersFile != "" || strings.ToLower(o.Method) != "put" || o.Field != "file" {
			return &flagError{fmt.Errorf("--%sheaders-file, --%smethod and --%sfield are for http(s) URLs, not s3:// places or POST policies", prefix, prefix, prefix)}
		}
		if s.partSize < 5<<20 || s.partSize > 5<<30 {
			return &flagError{fmt.Errorf("--%spart-size must be between 5MiB and 5GiB (S3's limits)", prefix)}
		}
		return nil
	}
	switch {
	case s.policyFile != "":
		if o.URL != "" {
			return nil, &flagError{fmt.Errorf("--%spolicy and --%s (or $%s) both say where to upload: give one", prefix, strings.TrimSuffix(prefix, "-"), UploadURLEnv)}
		}
		if err := storeOnly(); err != nil {
			return nil, err
		}
		p, err := objstore.LoadPolicy(s.policyFile)
		if err != nil {
			return nil, &flagError{fmt.Errorf("--%spolicy: %w", prefix, err)}
		}
		if time.Now().After(p.Expires) {
			return nil, fmt.Errorf("the POST policy %s expired at %s: mint a new one with nodesnap upload-policy", s.policyFile, p.Expires.UTC().Format(time.RFC3339))
		}
		d.policy, d.Shown = p, p.Location
		if strings.HasPrefix(strings.ToLower(p.URL), "http://") {
			fmt.Fprintf(stderr, "nodesnap: warning: the POST policy's store is plain http: the bundle crosses the network unencrypted; use https\n")
		}
		return d, nil
	case objstore.IsURL(o.URL):
		if err := storeOnly(); err != nil {
			return nil, err
		}
		loc, err := objstore.ParseURL(o.URL)
		if err != nil {
			return nil, &flagError{err}
		}
		c, err := objstore.NewClient(ctx, objstore.ClientOptions{CAFile: o.CAFile, UserAgent: "nodesnap/" + toolVersion()})
		if err != nil {
			return nil, err
		}
		d.store, d.loc, d.Shown = c, loc, loc.String()
		if c.Plaintext() {
			fmt.Fprintf(stderr, "nodesnap: warning: the store's endpoint %s is plain http: the bundle crosses the network unencrypted; use https\n", c.Endpoint())
		}
		return d, nil
	}
	up, err := newUploader(o, prefix, stderr)
	if err != nil {
		return nil, err
	}
	d.url, d.Shown = up, up.Shown
	return d, nil
}

// Upload sends the bundle at path (size bytes, sha256 sum). For a store,
// its key is the bundle's own name under the prefix: host, UTC time and
// case are in it, so two runs leave two objects.
func (d *destination) Upload(ctx context.Context, path string, size int64, sum string) upload.Result {
	if d.url != nil {
		d.url.Log = d.Log
		return d.url.Upload(ctx, path, size, sum)
	}
	name := filepath.Base(path)
	var (
		r   objstore.Result
		err error
	)
	res := upload.Result{}
	if d.policy != nil {
		res.Method = "POST"
		r, err = objstore.PostFile(ctx, d.policy, name, path, objstore.PostOptions{Retries: d.o.Retries, Backoff: d.o.Backoff, Timeout: d.o.Timeout,
			CAFile: d.o.CAFile, UserAgent: "nodesnap/" + toolVersion(), SHA256: sum, Log: d.Log})
	} else {
		res.Method = "PUT"
		retries := d.o.Retries
		if retries == 0 {
			retries = -1 // --upload-retries 0: none
		}
		po := objstore.PutOptions{PartSize: int64(d.s.partSize), Threshold: 2 * int64(d.s.partSize), Retries: retries, Backoff: d.o.Backoff,
			StallTimeout: d.o.StallTimeout, PartTimeout: d.o.Timeout, SSE: d.s.sse, KMSKeyID: d.s.kmsKeyID, SHA256: sum, Log: d.Log}
		r, err = d.store.Put(ctx, d.loc, name, path, po)
		if r.Parts > 0 {
			res.Method = "MULTIPART"
		}
	}
	d.Object = &r
	res.URL, res.Attempts, res.DurationSeconds = r.URL, max(r.Rounds, 1), r.DurationSeconds
	if err != nil {
		// "upload to URL failed: ..." is said by the caller.
		res.Error = strings.TrimPrefix(strings.TrimPrefix(err.Error(), "uploading to "+r.URL+": "), "posting to "+r.URL+": ")
		var se *objstore.StoreError
		if errors.As(err, &se) {
			res.StatusCode = se.Status
		}
		return res
	}
	res.OK, res.StatusCode = true, 200
	return res
}

// storeSummary is one line on what the store holds, after an upload.
func storeSummary(r *objstore.Result) string {
	s := fmt.Sprintf("%s and %s", r.URL, filepath.Base(r.SumKey))
	if r.Parts > 0 {
		s += fmt.Sprintf(" (%d parts", r.Parts)
		if r.PartsReused > 0 {
			s += fmt.Sprintf(", %d already in the store", r.PartsReused)
		}
		s += ")"
	}
	if r.StoreChecksum != "" {
		s += "; the store checked the sha256"
	}
	return s
}

// storeSecrets are the AWS credentials in nodesnap's own environment (for
// an s3:// upload): masked wherever a collector finds them again.
func storeSecrets() []string {
	var out []string
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		if v := os.Getenv(k); len(v) >= 8 {
			out = append(out, v)
		}
	}
	return out
}
