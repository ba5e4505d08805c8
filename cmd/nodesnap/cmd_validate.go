package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/termsafe"
)

type validateOptions struct {
	output  string
	verbose bool
}

// validateResult is one bundle's line of --output json.
type validateResult struct {
	Bundle string `json:"bundle"`
	Valid  bool   `json:"valid"`
	// Status is the manifest's (complete, partial), when it was read.
	Status    string   `json:"status,omitempty"`
	Checked   int      `json:"files_checked"`
	Truncated bool     `json:"truncated,omitempty"`
	Error     string   `json:"error,omitempty"`
	Problems  []string `json:"problems,omitempty"`
}

func newValidateCommand() *cobra.Command {
	var o validateOptions
	cmd := &cobra.Command{
		Use:   "validate BUNDLE...",
		Short: "Check bundles: schema, every file's size and sha256, nothing missing or extra",
		Long: `Validate reads each bundle whole without extracting it: manifest.json must come first,
match the schema and its own checksum (manifest_sha256); every file it lists must be present
with the recorded size and sha256; nothing else may be present; no entry may be a link,
absolute, or leave the bundle; the compressed stream is read to its end and its checksum
checked. When BUNDLE.sha256 (written by collect) is beside it, the file must match it too.
A BUNDLE may also be a directory holding an extracted bundle.

It prints one line per bundle: valid, or the number of problems and the first; -v lists
every problem under its bundle; --output json prints one JSON object per bundle, a line
each.

` + exitHelp("0  every bundle is valid", "1  fatal: a bundle could not be read (missing, not a bundle, or unsafe)", exitLineUsage,
			"3  a bundle did not validate (truncated, a checksum or size differs, files missing or extra)"),
		Example: `  nodesnap validate nodesnap-node1-20261121T101500Z.tar.gz && echo intact
  nodesnap validate /var/tmp/nodesnap-*.tar.gz
  nodesnap validate -v ./nodesnap-node1-20261121T101500Z/     # an extracted bundle`,
		Args: argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output, "text", "json"); err != nil {
				return err
			}
			return runValidate(cmd, o, args)
		},
	}
	addOutputFlag(cmd, &o.output, "text", "json")
	addFormatAlias(cmd, &o.output, "json")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "list every problem of a bundle that does not validate")
	return cmd
}

// runValidate checks every bundle, then returns the worst outcome: an
// unreadable bundle (exit 1) before an invalid one (exit 3).
func runValidate(cmd *cobra.Command, o validateOptions, paths []string) error {
	// Text from the bundle (its problems name its entries) reaches the
	// terminal escaped; JSON is written as encoding/json escapes it.
	rawOut := cmd.OutOrStdout()
	stdout, stderr := termsafe.NewWriter(rawOut), termsafe.NewWriter(cmd.ErrOrStderr())
	var fatal, invalid error
	failed := 0
	for _, p := range paths {
		rep, err := bundle.Validate(cmd.Context(), p)
		res := validateResult{Bundle: p, Valid: err == nil}
		if rep != nil {
			res.Checked = rep.Checked
			res.Problems = rep.Problems
			res.Truncated = rep.Truncated != nil
			if rep.Manifest != nil {
				res.Status = rep.Manifest.Status
			}
		}
		if err != nil {
			failed++
			res.Error = err.Error()
			if errors.Is(err, bundle.ErrInvalid) && !errors.Is(err, bundle.ErrUnsafe) || res.Truncated {
				invalid = err
			} else {
				fatal = fmt.Errorf("%s: %w", p, err)
			}
		}
		if o.output == "json" {
			if err := json.NewEncoder(rawOut).Encode(res); err != nil {
				return err
			}
			continue
		}
		printValidateLine(stdout, stderr, res, o.verbose)
	}
	if err := cmd.Context().Err(); err != nil {
		return err
	}
	switch {
	case fatal != nil && len(paths) == 1:
		return fatal
	case fatal != nil:
		return fmt.Errorf("%d of %d bundles did not validate; the first that could not be read: %w", failed, len(paths), fatal)
	case invalid != nil && len(paths) == 1:
		return invalid
	case invalid != nil:
		return fmt.Errorf("%w: %d of %d bundles", bundle.ErrInvalid, failed, len(paths))
	}
	return nil
}

func printValidateLine(stdout, stderr io.Writer, r validateResult, verbose bool) {
	switch {
	case r.Valid:
		fmt.Fprintf(stdout, "%s: valid (%d files checked, status %s)\n", r.Bundle, r.Checked, r.Status)
		return
	case r.Truncated:
		fmt.Fprintf(stdout, "%s: TRUNCATED (%d files checked before the cut, %d problem(s))\n", r.Bundle, r.Checked, len(r.Problems))
	case len(r.Problems) > 0:
		fmt.Fprintf(stdout, "%s: INVALID (%d problem(s), first: %s)\n", r.Bundle, len(r.Problems), r.Problems[0])
	default:
		fmt.Fprintf(stdout, "%s: UNREADABLE (%s)\n", r.Bundle, r.Error)
		return
	}
	probs := r.Problems
	if !verbose && len(probs) > 5 {
		probs = probs[:5]
	}
	for _, p := range probs {
		fmt.Fprintln(stderr, "  "+p)
	}
	if len(probs) < len(r.Problems) {
		fmt.Fprintf(stderr, "  … and %d more (-v lists them all)\n", len(r.Problems)-len(probs))
	}
}
