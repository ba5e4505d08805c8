package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/features/objstore"
	"github.com/nodesnap/nodesnap/features/upload"
	"github.com/nodesnap/nodesnap/internal/human"
)

// UploadURLEnv names the environment variable read when no URL is given.
const UploadURLEnv = upload.URLEnv

// SHA256Header carries the bundle's sha256 (hex) with every upload.
const SHA256Header = upload.SHA256Header

// addUploadFlags declares the upload flags, shared by `collect --upload`
// (with an "upload-" prefix) and `upload`.
func addUploadFlags(u *upload.Options, f *pflag.FlagSet, prefix string) {
	f.StringVar(&u.Method, prefix+"method", "put", "put: the bundle is the request body (pre-signed object-store URLs); post: a multipart/form-data form")
	f.StringVar(&u.Field, prefix+"field", "file", "with post: the form field that carries the bundle")
	f.IntVar(&u.Retries, prefix+"retries", upload.DefaultRetries, "attempts after the first when the connection fails or the server answers 408, 429 or 5xx")
	f.DurationVar(&u.Timeout, prefix+"timeout", upload.DefaultTimeout, "deadline of the whole upload, retries and waits included")
	f.DurationVar(&u.StallTimeout, prefix+"stall-timeout", upload.DefaultStallTimeout, "an attempt that sends nothing and hears nothing for this long is abandoned and retried")
	f.DurationVar(&u.Backoff, prefix+"backoff", upload.DefaultBackoff, "wait before the first retry; doubled for each further one (at most 30s)")
	f.StringVar(&u.HeadersFile, prefix+"headers-file", "", "file of extra request headers, one 'Name: value' per line (# comments); never printed or recorded")
	f.StringVar(&u.CAFile, prefix+"ca-file", "", "PEM file of the CA certificates to trust besides the system's, for a server with a private CA (the system's are those of $SSL_CERT_FILE when set)")
}

// newUploader is upload.New with its option errors as usage errors, and
// a warning on stderr for a URL that would send the bundle in the clear.
func newUploader(o *upload.Options, prefix string, stderr io.Writer) (*upload.Uploader, error) {
	up, err := upload.New(o, prefix, "nodesnap/"+toolVersion())
	if errors.Is(err, upload.ErrOption) {
		return nil, &flagError{errors.New(strings.TrimPrefix(err.Error(), upload.ErrOption.Error()+": "))}
	}
	if err == nil && up.Plaintext() {
		fmt.Fprintf(stderr, "nodesnap: warning: %s is plain http: the bundle (and any credential in the URL or headers) crosses the network unencrypted; use https\n", up.Shown)
	}
	return up, err
}

func newUploadCommand() *cobra.Command {
	o := &upload.Options{}
	st := &storeFlags{}
	var output string
	cmd := &cobra.Command{
		Use:   "upload BUNDLE [URL | s3://bucket/prefix/]",
		Short: "Upload a bundle made earlier to a ticket, an object-store URL or s3://bucket/prefix/",
		Long: `Upload sends a bundle to URL by HTTP PUT (the bundle is the body: what pre-signed
object-store URLs expect) or by multipart POST (--method post), with its sha256 in the
` + SHA256Header + ` header. A failed attempt (no connection, a stalled transfer, HTTP 408, 429
or 5xx) is retried with exponential backoff until --retries or --timeout runs out; any other
answer (an expired signature: 403) is final. Without URL, $` + UploadURLEnv + ` is used, which
keeps a pre-signed URL out of the process list. Only the URL's scheme, host and path are ever
printed; its query (the signature) and the headers from --headers-file never are.

To s3://bucket/prefix/ the bundle goes under its own name (host, UTC time, case: two bundles,
two objects), with its sha256 as <name>.sha256 beside it. Credentials, region and endpoint come
from the AWS SDK's standard chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the
shared files, web identity (IRSA), instance metadata; an S3-compatible store by
AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL), addressed path-style. Bundles of twice --part-size or
more go in parts; the store checks each part's x-amz-checksum-sha256, and a part a dropped
connection cut is sent again after asking the store which parts it holds (an interrupted run's
upload of the same bundle is continued too); --timeout then bounds each part, not the whole.
With --policy FILE (or $` + UploadPolicyEnv + `), a POST policy from 'nodesnap upload-policy', no
credential is needed at all: the bundle is posted under the policy's prefix.

` + exitHelp("0  the bundle was uploaded", "1  fatal: the bundle could not be read", exitLineUsage, "5  the upload failed (after its retries); the bundle is unchanged on disk"),
		Example: `  nodesnap upload /var/tmp/nodesnap-node1-20261121T101500Z.tar.gz \
      'https://bucket.s3.amazonaws.com/case-123/n1.tar.gz?X-Amz-Signature=...'
  NODESNAP_UPLOAD_URL='https://...' nodesnap upload nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap upload --method post --field attachment --headers-file /root/ticket-token bundle.tar.gz https://support.example.com/api/cases/123/files
  # under its own name in a bucket (credentials from the environment, a profile or the node's role)
  nodesnap upload s3://support-bundles/case-123/ /var/tmp/nodesnap-node1-20261121T101500Z.tar.gz
  # an S3-compatible store
  AWS_ENDPOINT_URL_S3=https://minio.example.com:9000 nodesnap upload s3://bundles/ nodesnap-node1-20261121T101500Z.tar.gz
  # with a POST policy, no credential on the node
  nodesnap upload --policy /etc/nodesnap/policy.json nodesnap-node1-20261121T101500Z.tar.gz`,
		Args: argsUsage(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			// s3://bucket/prefix/ BUNDLE reads as well as BUNDLE s3://...
			if len(args) == 2 && objstore.IsURL(args[0]) && !objstore.IsURL(args[1]) {
				args[0], args[1] = args[1], args[0]
			}
			if len(args) == 2 {
				o.URL = args[1]
			}
			return runUpload(cmd.Context(), o, st, args[0], output, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addUploadFlags(o, cmd.Flags(), "")
	addStoreFlags(st, cmd.Flags(), "")
	addOutputFlag(cmd, &output, "text", "json")
	return cmd
}

func runUpload(ctx context.Context, o *upload.Options, st *storeFlags, path, output string, stdout, stderr io.Writer) error {
	if output != "text" && output != "json" {
		return &flagError{fmt.Errorf("--output must be text or json, not %q", output)}
	}
	if o.URL == "" {
		o.URL = os.Getenv(UploadURLEnv)
	}
	up, err := newDestination(ctx, o, st, "", stderr)
	if err != nil {
		return err
	}
	if up == nil {
		return &flagError{fmt.Errorf("no URL: give it after the bundle or in $%s (or a POST policy with --policy)", UploadURLEnv)}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bundle %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	// A typo must not send some other file to a third party, nor a
	// damaged bundle make a second round trip with the customer: the
	// whole bundle is validated first (every file's size and sha256). An
	// encrypted bundle cannot be read here; it is sent as it is.
	if rep, err := bundle.Validate(ctx, path); errors.Is(err, bundle.ErrEncrypted) {
		if output == "text" {
			fmt.Fprintln(stderr, "nodesnap: the bundle is encrypted (age): sending it without validating it")
		}
	} else if err != nil {
		if rep != nil {
			for _, p := range rep.Problems {
				fmt.Fprintln(stderr, "  "+p)
			}
		}
		return fmt.Errorf("%s is not a nodesnap bundle that validates (nodesnap validate says more), not uploading it: %w", path, err)
	}
	size, sum, err := bundle.HashFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if output == "text" {
		up.Log = stderr
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	res := up.Upload(ctx, path, size, sum)
	stop()
	if output == "json" {
		out := struct {
			Path   string           `json:"path"`
			Size   int64            `json:"size"`
			SHA256 string           `json:"sha256"`
			Upload upload.Result    `json:"upload"`
			Object *objstore.Result `json:"object,omitempty"`
		}{path, size, sum, res, nil}
		if res.OK {
			out.Object = up.Object
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else if res.OK && up.Object != nil {
		fmt.Fprintf(stdout, "Uploaded %s (%s, sha256 %s) to %s\n", path, human.Bytes(size), sum, storeSummary(up.Object))
	} else if res.OK {
		fmt.Fprintf(stdout, "Uploaded %s (%s, sha256 %s) to %s: HTTP %d\n", path, human.Bytes(size), sum, res.URL, res.StatusCode)
	}
	if !res.OK {
		return &uploadError{url: res.URL, reason: res.Error, path: path}
	}
	return nil
}

// uploadError is a bundle that exists but did not reach the URL (exit 5).
type uploadError struct {
	url, reason, path string
	partial           bool // the bundle itself is partial (collect)
}

func (e *uploadError) Error() string {
	kind := "the bundle"
	if e.partial {
		kind = "the (partial) bundle"
	}
	return fmt.Sprintf("upload to %s failed: %s; %s is kept at %s", e.url, e.reason, kind, e.path)
}
