package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/internal/textfit"
	"github.com/nodesnap/nodesnap/read/analyze"
)

type analyzeOptions struct {
	output  string
	verbose bool
}

func newAnalyzeCommand() *cobra.Command {
	var o analyzeOptions
	cmd := &cobra.Command{
		Use:   "analyze BUNDLE",
		Short: "Name the cause of a node's storage trouble from a bundle alone",
		Long: `Analyze reads a bundle (.tar.gz or .tar.zst) in one streaming pass, without extracting it
and without access to the node, and reports findings: mounts held in another mount namespace,
hung mounts and the tasks stuck on them, a kubelet whose sync loop is stuck, CSI state that
disagrees with the mount table, leaked .deleting~ directories, huge directories, and the
kubelet, runtime and kernel log lines that go with them (byte-array command output decoded).

Each finding has an id, a severity (info, warning, critical), a one-line summary, the
explanation, the evidence (bundle paths with the exact lines or records) and the fix an
operator applies. The table comes first, then each finding in detail, fitted to the
terminal's width (80 columns when the output is not a terminal): long lines are elided
with "…"; -v keeps every text whole, wrapped; --output json prints everything for
machines. BUNDLE may also be a directory holding an extracted bundle.

A truncated bundle (a half-uploaded attachment) is read as far as it goes: the findings of
every file before the cut, and a bundle-truncated finding saying where it ends and which
files are missing. Archives that are unsafe (entries leaving the bundle, links, absurd
sizes) are refused.

Every finding ID, with what it means, its evidence and its fix: docs/findings.md
(https://github.com/nodesnap/nodesnap/blob/main/docs/findings.md). What the bundle
holds: docs/bundle.md; how it was redacted: docs/redaction.md.

` + exitHelp("0  no finding of severity warning or critical", exitLineReadFail, exitLineUsage,
			"3  a finding of severity warning or critical (a truncated bundle is one)"),
		Example: `  nodesnap analyze nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap analyze -v nodesnap-node1-20261121T101500Z.tar.gz | less
  nodesnap analyze -o json nodesnap-node1-20261121T101500Z.tar.gz | jq '.findings[].id'
  nodesnap analyze ./nodesnap-node1-20261121T101500Z/     # an extracted bundle`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output, "text", "json", "html"); err != nil {
				return err
			}
			if n := changed(cmd, "output", "json", "html"); n > 1 {
				return &flagError{errors.New("--output, --json and --html each choose the format: give one")}
			}
			return runAnalyze(cmd.Context(), cmd.OutOrStdout(), o, args[0])
		},
	}
	addOutputFlag(cmd, &o.output, "text", "json", "html")
	addFormatAlias(cmd, &o.output, "json")
	addFormatAlias(cmd, &o.output, "html")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "keep every text whole (log lines, records), wrapped to the width instead of elided")
	return cmd
}

// runAnalyze prints the report; a finding at warning or above makes it
// return a partialError (exit status 3) with nothing more to say.
func runAnalyze(ctx context.Context, w io.Writer, o analyzeOptions, bundlePath string) error {
	// The page draws the facts analyze gathers on request; the text and
	// JSON reports stay as they are.
	rep, err := analyze.AnalyzeFile(ctx, bundlePath, analyze.Options{Facts: o.output == "html"})
	if err != nil {
		return err
	}
	switch o.output {
	case "json":
		err = analyze.WriteJSON(w, rep)
	case "html":
		err = writeReportHTML(ctx, w, rep, bundlePath)
	default:
		err = analyze.WriteTextOptions(w, rep, analyze.TextOptions{Width: textfit.Width(w), Full: o.verbose})
	}
	if err != nil {
		return err
	}
	if rep.AtLeast(analyze.Warning) {
		return &partialError{}
	}
	return nil
}
