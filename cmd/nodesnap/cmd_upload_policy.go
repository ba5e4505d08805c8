package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/features/objstore"
	"github.com/nodesnap/nodesnap/internal/cliflag"
)

// defaultPolicyTTL is how long a POST policy lasts unless --expires says.
const defaultPolicyTTL = 7 * 24 * time.Hour

func newUploadPolicyCommand() *cobra.Command {
	var (
		file    string
		expires time.Duration
		maxSize = cliflag.ByteSize(objstore.DefaultPolicyMaxSize)
		sse     string
	)
	cmd := &cobra.Command{
		Use:   "upload-policy s3://bucket/prefix/ --output-file FILE",
		Short: "Sign a POST policy that lets a node upload its bundles under a prefix, with no credential of its own",
		Long: `Upload-policy signs a pre-signed POST policy for s3://bucket/prefix/ with the credentials
of the AWS SDK's standard chain (as 'nodesnap upload s3://...' reads them), and writes it to
--output-file (mode 0600; "-" for stdout). With that file, 'collect --upload-policy FILE' (or
$` + UploadPolicyEnv + `=FILE) posts each bundle under the prefix by its own name, with its .sha256
beside it, until --expires: one file serves every run of a timer, and the node holds no
long-lived key. The store refuses any key outside the prefix, any object over --max-size, and
every request after the expiry.

The file is a credential until it expires: keep it as you would a key. A policy signed with
temporary credentials (a role, IRSA, SSO) stops working when they expire, whatever --expires
says: sign it with the key of a user that may only write under the prefix.

` + exitHelp(exitLineOK, "1  fatal: the policy could not be signed or written", exitLineUsage),
		Example: `  # a month of uploads for this node's timer
  nodesnap upload-policy s3://support-bundles/nodes/node1/ --expires 720h --output-file /etc/nodesnap/policy.json
  # then, on the node
  nodesnap collect -q --upload-policy /etc/nodesnap/policy.json`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUploadPolicy(cmd.Context(), args[0], file, expires, int64(maxSize), sse, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "output-file", "", `where to write the policy (mode 0600; "-" for stdout); an existing file is never overwritten`)
	f.DurationVar(&expires, "expires", defaultPolicyTTL, "how long the policy lets bundles in (at most 366 days)")
	f.Var(&maxSize, "max-size", "the largest object the policy lets in")
	f.StringVar(&sse, "sse", "", "server-side encryption every object must get: AES256 or aws:kms")
	return cmd
}

func runUploadPolicy(ctx context.Context, where, file string, expires time.Duration, maxSize int64, sse string, stdout, stderr io.Writer) error {
	if file == "" {
		return &flagError{fmt.Errorf("--output-file is required (\"-\" for stdout): the policy is a credential, written 0600")}
	}
	loc, err := objstore.ParseURL(where)
	if err != nil {
		return &flagError{err}
	}
	if loc.Prefix == "" {
		fmt.Fprintf(stderr, "nodesnap: warning: the policy lets its holder write anywhere in the bucket %s; a prefix (s3://%s/nodes/NAME/) keeps each node to its own\n", loc.Bucket, loc.Bucket)
	}
	if file != "-" {
		if _, err := os.Lstat(file); err == nil {
			return &flagError{fmt.Errorf("%s exists: not overwriting it", file)}
		}
	}
	c, err := objstore.NewClient(ctx, objstore.ClientOptions{UserAgent: "nodesnap/" + toolVersion()})
	if err != nil {
		return err
	}
	p, err := c.PresignPost(ctx, loc, expires, maxSize, sse)
	if err != nil {
		return err
	}
	if p.Warning != "" {
		fmt.Fprintln(stderr, "nodesnap: warning: "+p.Warning)
	}
	if file == "-" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	if err := objstore.WritePolicy(file, p); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Wrote %s: bundles may be posted under %s until %s\n", file, loc, p.Expires.Format(time.RFC3339))
	return nil
}
