package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/redact"
	"github.com/nodesnap/nodesnap/redact/rebundle"
)

// redactOptions are the flags of nodesnap redact.
type redactOptions struct {
	rf       redactFlags
	out      string
	noBinary bool
	format   string
}

func newRedactCommand() *cobra.Command {
	o := &redactOptions{}
	cmd := &cobra.Command{
		Use:   "redact BUNDLE",
		Short: "Re-redact an existing bundle with extra rules or obfuscation, into a new bundle",
		Long: `Redact reads a bundle once, passes every text file through the built-in rules plus
--redact-config's and the --obfuscate classes, and writes a new bundle with a new manifest
(sizes, digests and redaction counts of the new content). The original is left untouched.
Binary artifacts (pprof profiles) cannot be redacted: --no-binary drops them.
With --obfuscate, the token→value mapping is written beside the new bundle (mode 0600);
with --obfuscate hostname, the new bundle's name carries the node's token too, not its name.

` + exitHelp("0  the redacted copy was written", "1  fatal: the bundle could not be read or the copy could not be written; nothing is left behind", exitLineUsage,
			"3  the bundle does not validate (a file missing from the archive or extra to the manifest; nodesnap validate lists every problem)"),
		Example: `  # before attaching to a public ticket: hide IPs and the node's name too
  nodesnap redact --obfuscate ip,hostname --no-binary nodesnap-node1-20261121T101500Z.tar.gz

  # with the customer's own rules
  nodesnap redact --redact-config acme-rules.yaml --output-file clean.tar.gz nodesnap-node1-20261121T101500Z.tar.gz`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRedact(cmd.Context(), o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.rf.register(f)
	f.StringVar(&o.out, "output-file", "", "path of the new bundle (default: BUNDLE with .redacted before the extension, and the node's token for its name with --obfuscate hostname)")
	addFileAlias(cmd, &o.out, "output-file")
	f.BoolVar(&o.noBinary, "no-binary", false, "drop binary artifacts, which cannot be redacted")
	f.StringVar(&o.format, "compression", "", "format of the new bundle: tar.gz or tar.zst (default: the input's)")
	return cmd
}

func runRedact(ctx context.Context, o *redactOptions, in string, stdout, stderr io.Writer) error {
	s, err := o.rf.settings()
	if err != nil {
		return err
	}
	if s == nil {
		s = &redact.Settings{}
	}
	var host string
	if len(s.Options.Obfuscate) > 0 {
		if s.Options.Key, err = redact.NewKey(); err != nil {
			return err
		}
		if m, _, err := bundle.ReadManifest(ctx, in); err == nil && m.Host.Hostname != "" {
			host = m.Host.Hostname
			s.Options.Hostnames = append(s.Options.Hostnames, host)
		}
	}
	red, err := s.Build()
	if err != nil {
		return &supervisor.UsageError{Msg: err.Error()}
	}
	if o.format != "" {
		if _, err := bundle.Format(o.format); err != nil {
			return &supervisor.UsageError{Msg: err.Error()}
		}
	}
	out := o.out
	if out == "" {
		out = redactedName(in, o.format, host, red)
	}
	if abs, _ := filepath.Abs(out); abs == mustAbs(in) {
		return &supervisor.UsageError{Msg: "the output must not be the input bundle"}
	}
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("%s already exists; choose another with --output-file", out)
	}
	if err := unix.Access(filepath.Dir(out), unix.W_OK); err != nil {
		return fmt.Errorf("cannot write to %s: %w", filepath.Dir(out), err)
	}
	w, m, err := rebundle.Reredact(ctx, in, out, red, rebundle.Options{NoBinary: o.noBinary, Obfuscated: s.Options.Obfuscate, Format: o.format})
	if err != nil {
		return err
	}
	if maps := red.Mappings(); len(maps) > 0 {
		mf, err := outputdir.WriteMappings(w.Path, maps)
		if err != nil {
			return fmt.Errorf("the bundle was written to %s, but the obfuscation mapping was not: %w", w.Path, err)
		}
		fmt.Fprintf(stderr, "obfuscation mapping (keep it, do not attach it): %s\n", mf)
	}
	// The copy gets its checksum file too, as every bundle collect writes:
	// it is what travels to the ticket.
	sum, err := outputdir.WriteSum(w)
	if err != nil {
		return fmt.Errorf("the bundle was written to %s, but its checksum file was not: %w", w.Path, err)
	}
	fmt.Fprintf(stdout, "%s\nsize: %s (%d bytes)\nsha256: %s\nchecksum file: %s\nredactions: %d\n", w.Path, human.Bytes(w.Size), w.Size, w.SHA256, sum, m.Redaction.Total)
	return nil
}

// redactedName is the default name of the redacted copy of in: .redacted
// before the extension and, when the node's name is obfuscated, its token
// in place of the name, which would otherwise give away what the content
// hides.
func redactedName(in, format, host string, red *redact.Redactor) string {
	dir, base := filepath.Split(in)
	ext := ".tar.gz"
	if strings.HasSuffix(base, ".tar.zst") || format == bundle.Zstd {
		ext = ".tar.zst"
	}
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".tar.gz"), ".tar.zst")
	if host != "" {
		if tok, _ := red.String(host); tok != host {
			// The name holds the host as naming.SafeHost wrote it;
			// the token is made file-name safe the same way.
			base = strings.ReplaceAll(base, naming.SafeHost(host), naming.SafeHost(tok))
		}
	}
	return dir + base + ".redacted" + ext
}

func mustAbs(p string) string {
	a, _ := filepath.Abs(p)
	return a
}
