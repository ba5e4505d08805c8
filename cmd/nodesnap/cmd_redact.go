package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/redact"
	"github.com/nodesnap/nodesnap/supervisor"
)

func newRedactCommand() *cobra.Command {
	var (
		rf       redactFlags
		out      string
		noBinary bool
		format   string
	)
	cmd := &cobra.Command{
		Use:   "redact BUNDLE",
		Short: "Re-redact an existing bundle with extra rules or obfuscation, into a new bundle",
		Long: `Redact reads a bundle once, passes every text file through the built-in rules plus
--redact-config's and the --obfuscate classes, and writes a new bundle with a new manifest
(sizes, digests and redaction counts of the new content). The original is left untouched.
Binary artifacts (pprof profiles) cannot be redacted: --no-binary drops them.
With --obfuscate, the token→value mapping is written beside the new bundle (mode 0600).

` + exitHelp("0  the redacted copy was written", "1  fatal: the bundle could not be read or the copy could not be written; nothing is left behind", exitLineUsage,
			"3  the bundle does not validate (a file missing from the archive or extra to the manifest; nodesnap validate lists every problem)"),
		Example: `  # before attaching to a public ticket: hide IPs and the node's name too
  nodesnap redact --obfuscate ip,hostname --no-binary nodesnap-node1-20261121T101500Z.tar.gz

  # with the customer's own rules
  nodesnap redact --redact-config acme-rules.yaml --output-file clean.tar.gz nodesnap-node1-20261121T101500Z.tar.gz`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := args[0]
			s, err := rf.settings()
			if err != nil {
				return err
			}
			if s == nil {
				s = &redact.Settings{}
			}
			if len(s.Options.Obfuscate) > 0 {
				if s.Options.Key, err = redact.NewKey(); err != nil {
					return err
				}
				if m, _, err := bundle.ReadManifest(cmd.Context(), in); err == nil && m.Host.Hostname != "" {
					s.Options.Hostnames = append(s.Options.Hostnames, m.Host.Hostname)
				}
			}
			red, err := s.Build()
			if err != nil {
				return &supervisor.UsageError{Msg: err.Error()}
			}
			if format != "" {
				if _, err := bundle.Format(format); err != nil {
					return &supervisor.UsageError{Msg: err.Error()}
				}
			}
			if out == "" {
				base := strings.TrimSuffix(strings.TrimSuffix(in, ".tar.gz"), ".tar.zst")
				ext := ".tar.gz"
				if strings.HasSuffix(in, ".tar.zst") || format == bundle.Zstd {
					ext = ".tar.zst"
				}
				out = base + ".redacted" + ext
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
			w, m, err := bundle.Reredact(cmd.Context(), in, out, red, bundle.RedactOptions{NoBinary: noBinary, Obfuscated: s.Options.Obfuscate, Format: format})
			if err != nil {
				return err
			}
			if maps := red.Mappings(); len(maps) > 0 {
				mf, err := supervisor.WriteMappings(w.Path, maps)
				if err != nil {
					return fmt.Errorf("the bundle was written to %s, but the obfuscation mapping was not: %w", w.Path, err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "obfuscation mapping (keep it, do not attach it): %s\n", mf)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\nsize: %s (%d bytes)\nsha256: %s\nredactions: %d\n", w.Path, humanBytes(w.Size), w.Size, w.SHA256, m.Redaction.Total)
			return nil
		},
	}
	f := cmd.Flags()
	rf.register(f)
	f.StringVar(&out, "output-file", "", "path of the new bundle (default: BUNDLE with .redacted before the extension)")
	addFileAlias(cmd, &out, "output-file")
	f.BoolVar(&noBinary, "no-binary", false, "drop binary artifacts, which cannot be redacted")
	f.StringVar(&format, "compression", "", "format of the new bundle: tar.gz or tar.zst (default: the input's)")
	return cmd
}

func mustAbs(p string) string {
	a, _ := filepath.Abs(p)
	return a
}
