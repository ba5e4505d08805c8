// Package objstore puts bundles in an S3-compatible object store, a place
// (s3://bucket/prefix/) rather than one pre-signed key: each bundle under
// its own key, in one PUT below a threshold and in parts above it, every
// part and the whole checked by the store itself (x-amz-checksum-sha256),
// the bundle's .sha256 object beside it, server-side encryption on request,
// and a multipart upload cut by a dropped connection continued where the
// store says it stopped (ListParts) rather than restarted. It also mints
// pre-signed PUT URLs and POST policies (one URL, many keys under a prefix,
// no long-lived key on the node) and reads objects back (fleet analyze).
//
// Credentials come from the AWS SDK's standard chain (environment, shared
// config and credentials files, web identity/IRSA, instance metadata); an
// S3-compatible endpoint from the SDK's own AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, addressed path-style. Nothing it prints or returns
// carries a credential or a URL's query.
package objstore

import (
	"errors"
	"fmt"
	"strings"
)

// Scheme is how a destination in the store is written: s3://bucket/prefix/.
const Scheme = "s3://"

// IsURL reports whether s names a place in an object store (s3://...)
// rather than an http(s) URL.
func IsURL(s string) bool {
	return len(s) >= len(Scheme) && strings.EqualFold(s[:len(Scheme)], Scheme)
}

// Location is a place in a store: a bucket and a key prefix, empty or
// ending in "/".
type Location struct {
	Bucket string
	Prefix string
}

// String is the location as s3://bucket/prefix/.
func (l Location) String() string { return Scheme + l.Bucket + "/" + l.Prefix }

// Key is the object key of name under the location's prefix.
func (l Location) Key(name string) string { return l.Prefix + name }

// URL is s3://bucket/key of name under the location.
func (l Location) URL(name string) string { return Scheme + l.Bucket + "/" + l.Key(name) }

// ErrLocation is wrapped by every error of ParseURL.
var ErrLocation = errors.New("not an s3://bucket/prefix/ location")

// maxKey is S3's limit on a key's length, in bytes; a prefix leaves room
// for a bundle's name (about 80 bytes) and its .sha256.
const maxKey = 1024

// ParseURL reads s3://bucket/prefix/. The prefix is a folder: "s3://b/x"
// means the same as "s3://b/x/", since a bundle is put under it by its own
// name. A query, a fragment, a control character, an empty, "." or ".."
// path segment are refused, and so is a bucket name S3 would refuse.
func ParseURL(s string) (Location, error) {
	if !IsURL(s) {
		return Location{}, fmt.Errorf("%w: it does not start with s3://", ErrLocation)
	}
	rest := s[len(Scheme):]
	if strings.ContainsAny(rest, "?#") {
		return Location{}, fmt.Errorf("%w: it has a query or a fragment (an s3:// location names a bucket and a prefix only)", ErrLocation)
	}
	for _, r := range rest {
		if r < 0x20 || r == 0x7f {
			return Location{}, fmt.Errorf("%w: it holds a control character", ErrLocation)
		}
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if err := checkBucket(bucket); err != nil {
		return Location{}, fmt.Errorf("%w: %w", ErrLocation, err)
	}
	if prefix != "" {
		prefix = strings.TrimSuffix(prefix, "/")
		for _, seg := range strings.Split(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return Location{}, fmt.Errorf("%w: the prefix %q has an empty, \".\" or \"..\" segment", ErrLocation, prefix)
			}
		}
		prefix += "/"
		if len(prefix) > maxKey-200 {
			return Location{}, fmt.Errorf("%w: the prefix is %d bytes long; S3 keys end at %d", ErrLocation, len(prefix), maxKey)
		}
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

// checkBucket applies S3's bucket naming rules: 3 to 63 lower-case
// letters, digits, dots and hyphens, starting and ending with a letter or
// digit.
func checkBucket(b string) error {
	if b == "" {
		return errors.New("no bucket name")
	}
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("the bucket name %q is not 3 to 63 characters long", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-'
		if !ok {
			return fmt.Errorf("the bucket name %q holds %q: bucket names are lower-case letters, digits, dots and hyphens", b, string(c))
		}
	}
	if !alnum(b[0]) || !alnum(b[len(b)-1]) {
		return fmt.Errorf("the bucket name %q must start and end with a letter or a digit", b)
	}
	if strings.Contains(b, "..") {
		return fmt.Errorf("the bucket name %q has two dots in a row", b)
	}
	return nil
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
