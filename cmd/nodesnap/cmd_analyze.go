package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/analyze"
)

type analyzeOptions struct {
	json bool
	html bool
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
operator applies. The table comes first, then each finding in detail; --json prints the
same for machines. Archives that are unsafe (entries leaving the bundle, links, absurd
sizes) are refused.

` + exitStatusHelp,
		Example: `  nodesnap analyze nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap analyze --json nodesnap-node1-20261121T101500Z.tar.gz | jq '.findings[].id'`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.json && o.html {
				return &flagError{errors.New("--json and --html cannot be used together")}
			}
			return runAnalyze(cmd.Context(), cmd.OutOrStdout(), o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&o.html, "html", false, "print the report as one self-contained HTML page (as 'nodesnap report' writes it)")
	return cmd
}

// runAnalyze prints the report; a finding at warning or above makes it
// return a partialError (exit status 3) with nothing more to say.
func runAnalyze(ctx context.Context, w io.Writer, o analyzeOptions, bundlePath string) error {
	// The page draws the facts analyze gathers on request; the text and
	// JSON reports stay as they are.
	rep, err := analyze.AnalyzeFile(ctx, bundlePath, analyze.Options{Facts: o.html})
	if err != nil {
		return err
	}
	switch {
	case o.json:
		err = analyze.WriteJSON(w, rep)
	case o.html:
		err = writeReportHTML(ctx, w, rep, bundlePath)
	default:
		err = analyze.WriteText(w, rep)
	}
	if err != nil {
		return err
	}
	if rep.AtLeast(analyze.Warning) {
		return &partialError{}
	}
	return nil
}
