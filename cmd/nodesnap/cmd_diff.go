package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/features/report"
	"github.com/nodesnap/nodesnap/read/diff"
)

type diffOptions struct {
	output string
	width  int
	latest string
}

func newDiffCommand() *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff {OLD NEW | --latest DIR}",
		Short: "Say what changed on a node between two bundles",
		Long: `Diff compares two bundles of the same node, OLD first, and reports what changed:
analyze's findings (new, gone, severity changed), hung mounts, devices mounted only outside
the host's mount namespace, the host's mount table (mountpoints added or removed, by
filesystem type), tasks in D state, the kubelet's pods (added, removed, phase changed; the
runtime's pod sandboxes when the kubelet's list is missing), CRI containers restarted,
dirshape's largest directories that grew and .deleting~ counts, analyze's log signature
counts, the kubelet's goroutines by first frame outside Go's standard library, collector
statuses and bundle completeness, and kernel, kubelet and runtime versions. Bundles of two
different hosts are compared too, with a warning first.

Both bundles are read in bounded streaming passes and refused when validate refuses them
(unsafe entries, a truncated archive, another schema version, a file whose checksum
differs from the manifest's): exit status 1. The text report fits --width columns (100 by
default); --output json prints every change; --output html prints one self-contained HTML
page in the style of 'nodesnap report' (no script, nothing fetched; counts drawn before and
after), to save and attach to a ticket. OLD and NEW may also be directories holding
extracted bundles.
--latest DIR compares the two newest bundles in DIR (a --keep directory of snapshots) of
the host of the newest one, ordered by the time in their names.

Exit status 3 means a finding of severity warning or critical appeared in NEW, or a
finding rose to one; 0 that none did (other changes are printed either way).

` + exitHelp("0  no warning or critical finding appeared in NEW", "1  fatal: a bundle could not be read, is unsafe or does not validate", exitLineUsage,
			"3  a finding of severity warning or critical appeared in NEW, or a finding rose to one"),
		Example: `  nodesnap diff nodesnap-node1-20261120T101500Z.tar.gz nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap diff -o json yesterday.tar.gz today.tar.gz | jq '.findings_new[].id'
  nodesnap diff -o html yesterday.tar.gz today.tar.gz > what-changed.html
  nodesnap diff --latest /var/tmp`,
		Args: argsUsage(func(cmd *cobra.Command, args []string) error {
			if o.latest != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(2)(cmd, args)
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n := changed(cmd, "output", "json", "html"); n > 1 {
				return &flagError{errors.New("--output, --json and --html each choose the format: give one")}
			}
			if o.latest != "" {
				older, newer, err := diff.Latest(o.latest)
				if err != nil {
					return err
				}
				args = []string{older, newer}
			}
			return runDiff(cmd.Context(), cmd.OutOrStdout(), o, args[0], args[1])
		},
	}
	cmd.Flags().StringVar(&o.latest, "latest", "", "compare the two newest bundles in this directory, instead of OLD and NEW")
	addOutputFlag(cmd, &o.output, "text", "json", "html")
	addFormatAlias(cmd, &o.output, "json")
	addFormatAlias(cmd, &o.output, "html")
	cmd.Flags().IntVar(&o.width, "width", diff.Width, "the text report's line width (at least 40)")
	return cmd
}

// runDiff prints what changed; a new warning or critical finding makes it
// return a partialError (exit status 3) with nothing more to say.
func runDiff(ctx context.Context, w io.Writer, o diffOptions, oldPath, newPath string) error {
	if err := checkOutput(o.output, "text", "json", "html"); err != nil {
		return err
	}
	if o.width < 40 {
		return &flagError{errWidth}
	}
	a, err := diff.Load(ctx, oldPath)
	if err != nil {
		return fatalForDiff(err)
	}
	b, err := diff.Load(ctx, newPath)
	if err != nil {
		return fatalForDiff(err)
	}
	d := diff.Compare(a, b)
	switch o.output {
	case "json":
		err = diff.WriteJSON(w, d)
	case "html":
		err = report.WriteDiff(w, d)
	default:
		err = diff.WriteText(w, d, o.width)
	}
	if err != nil {
		return err
	}
	if d.Worse {
		return &partialError{}
	}
	return nil
}

// fatalForDiff keeps a bundle diff cannot read at exit status 1: a
// truncated one wraps bundle.ErrInvalid, whose status 3 means "worse"
// here.
func fatalForDiff(err error) error {
	if errors.Is(err, bundle.ErrInvalid) {
		return errors.New(err.Error())
	}
	return err
}

var errWidth = usageText("--width must be at least 40 columns")

type usageText string

func (u usageText) Error() string { return string(u) }
