package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/internal/termsafe"
	"github.com/nodesnap/nodesnap/internal/textfit"
)

type inspectOptions struct {
	files   bool
	verbose bool
	output  string
}

// inspectResult is inspect's --output json: the validation's outcome and
// the manifest as it is.
type inspectResult struct {
	Bundle string `json:"bundle"`
	Valid  bool   `json:"valid"`
	// Truncated says where the archive ends early, when it does.
	Truncated *bundle.TruncatedError `json:"truncated,omitempty"`
	Problems  []string               `json:"problems"`
	// Collectors sums each collector's files and bytes, as the table does.
	Collectors []inspectCollector `json:"collectors"`
	// Trigger is the signal of `nodesnap watch` that started the
	// collection (the manifest's), absent for a collection run by hand.
	Trigger  *bundle.Trigger  `json:"trigger,omitempty"`
	Manifest *bundle.Manifest `json:"manifest"`
}

type inspectCollector struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
}

func newInspectCommand() *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect BUNDLE",
		Short: "Show a bundle's manifest at a glance: collectors, statuses, durations, sizes",
		Long: `Inspect prints who ran, how it ended, how long it took, what it wrote, what hung and what
was redacted, and for a bundle 'nodesnap watch' collected, the trigger that fired (its
name, when and what it saw; -v adds its evidence). It first checks the whole bundle as 'nodesnap validate' does (schema, every
file's size and sha256, no links or paths leaving the bundle) and refuses what validate
refuses: a manifest alone says nothing about what the archive really holds. A truncated
bundle (a half-uploaded attachment) is shown, with where it ends and what is missing, and
exits with status 3. BUNDLE may also be a directory holding an extracted bundle.

The table fits the terminal's width (80 columns when the output is not a terminal): error
texts are cut with "…"; -v prints them whole under the table; --output json prints the
manifest itself, with the validation's outcome.

` + exitHelp("0  the bundle is valid", exitLineReadFail, exitLineUsage,
			"3  the bundle did not validate: truncated (what it holds is still shown), a checksum or size differs from the manifest, files missing or extra"),
		Example: `  nodesnap inspect nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap inspect -v --files nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap inspect -o json nodesnap-node1-20261121T101500Z.tar.gz | jq '.manifest.collectors[] | {name, status, error}'`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.output, "text", "json"); err != nil {
				return err
			}
			return runInspect(cmd, o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.files, "files", false, "also list every file")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "print every collector's error text whole, and every problem")
	addOutputFlag(cmd, &o.output, "text", "json")
	addFormatAlias(cmd, &o.output, "json")
	return cmd
}

func runInspect(cmd *cobra.Command, o inspectOptions, p string) error {
	// Text from the bundle reaches the terminal escaped; JSON is
	// written as encoding/json escapes it.
	rawOut := cmd.OutOrStdout()
	stdout, stderr := termsafe.NewWriter(rawOut), termsafe.NewWriter(cmd.ErrOrStderr())
	rep, err := bundle.Validate(cmd.Context(), p)
	if rep == nil || rep.Manifest == nil {
		// Nothing to show: the archive is unsafe or no bundle.
		if rep != nil {
			for _, p := range rep.Problems {
				fmt.Fprintln(stderr, "  "+p)
			}
		}
		return err
	}
	if o.output == "json" {
		res := inspectResult{Bundle: p, Valid: err == nil, Truncated: rep.Truncated, Problems: rep.Problems, Trigger: rep.Manifest.Trigger, Manifest: rep.Manifest}
		if res.Problems == nil {
			res.Problems = []string{}
		}
		sizes := map[string]int64{}
		for _, f := range rep.Manifest.Files {
			sizes[f.Collector] += f.Size
		}
		for _, c := range rep.Manifest.Collectors {
			res.Collectors = append(res.Collectors, inspectCollector{Name: c.Name, Status: c.Status, Files: len(c.Files), Bytes: sizes[c.Name]})
		}
		enc := json.NewEncoder(rawOut)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if werr := enc.Encode(res); werr != nil {
			return werr
		}
		return err
	}
	if err != nil && rep.Truncated == nil {
		// A bundle that does not match its manifest: the problems, not
		// a manifest that cannot be trusted.
		printProblems(stderr, rep.Problems, o.verbose)
		return err
	}
	width := textfit.Width(stdout)
	fw := textfit.NewWriter(stdout, width, true)
	if te := rep.Truncated; te != nil {
		missing := 0
		for _, pr := range rep.Problems {
			if strings.HasSuffix(pr, "missing from the archive") {
				missing++
			}
		}
		fmt.Fprintf(fw, "TRUNCATED: %s; %d more file(s) the manifest lists are missing (listed on stderr). Below is what the manifest says.\n\n", te.Error(), missing)
	}
	if werr := printManifest(stdout, width, rep.Manifest, o.files, o.verbose); werr != nil {
		return werr
	}
	if rep.Truncated != nil {
		printProblems(stderr, rep.Problems, o.verbose)
	}
	return err
}

func printProblems(w io.Writer, probs []string, all bool) {
	shown := probs
	if !all && len(shown) > 10 {
		shown = shown[:10]
	}
	for _, p := range shown {
		fmt.Fprintln(w, "  "+p)
	}
	if len(shown) < len(probs) {
		fmt.Fprintf(w, "  … and %d more (-v lists them all)\n", len(probs)-len(shown))
	}
}

// printManifest writes the manifest at a glance in lines of at most
// width runes: the tables' rows are cut ("…"), every other text wrapped.
func printManifest(out io.Writer, width int, m *bundle.Manifest, files, verbose bool) error {
	w := textfit.NewWriter(out, width, true)
	// A table row is cut at the width on a terminal, and wrapped (whole)
	// off one or with -v: a pipe or a ticket loses nothing.
	rows := textfit.NewWriter(out, width, verbose || !textfit.IsTerminal(out))
	fmt.Fprintf(w, "host:      %s (kernel %s)\n", m.Host.Hostname, m.Host.Kernel)
	fmt.Fprintf(w, "collected: %s, %.1fs, by nodesnap %s\n", m.StartedAt.Format("2006-01-02 15:04:05Z07:00"), m.DurationSeconds, m.Tool.Version)
	status := m.Status
	if m.Interrupted != nil {
		status += fmt.Sprintf(" (interrupted by %s)", m.Interrupted.Signal)
	}
	fmt.Fprintf(w, "status:    %s\n", status)
	if s := m.Self; s != nil {
		// Who nodesnap was: its own namespace and pod are never
		// evidence (the mounts collector's notes say what was left out).
		line := fmt.Sprintf("pid %d", s.PID)
		if s.MountNamespace != 0 {
			line += fmt.Sprintf(", mount namespace %d", s.MountNamespace)
		}
		if p := s.Pod; p != nil {
			line += ", pod " + p.UID
			if p.Name != "" {
				line += " (" + p.Namespace + "/" + p.Name + ")"
			}
		}
		fmt.Fprintf(w, "nodesnap:  %s\n", line)
	}
	if tr := m.Trigger; tr != nil {
		// Why `nodesnap watch` collected: the signal, when, what it saw.
		fmt.Fprintf(w, "trigger:   %s, fired %s: %s\n", tr.Name, tr.FiredAt.Format("2006-01-02 15:04:05Z07:00"), tr.Summary)
		switch {
		case verbose:
			for i, e := range tr.Evidence {
				label := "           "
				if i == 0 {
					label = "evidence:  "
				}
				fmt.Fprintln(w, textfit.Fill(e, width, label, "             "))
			}
		case len(tr.Evidence) > 0:
			fmt.Fprintf(w, "evidence:  %d line(s) (-v shows them)\n", len(tr.Evidence))
		}
	}
	for _, warn := range m.Warnings {
		fmt.Fprintf(w, "warning:   %s\n", warn)
	}
	fmt.Fprintln(w)
	sizes := map[string]int64{}
	for _, f := range m.Files {
		sizes[f.Collector] += f.Size
	}
	tw := tabwriter.NewWriter(rows, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLLECTOR\tSTATUS\tDURATION\tFILES\tSIZE\tDETAIL")
	var details []string // -v: every detail whole, after the table
	for _, c := range m.Collectors {
		detail := c.Error
		if c.HangEvidence != nil && c.HangEvidence.Phase != "interrupted" && c.HangEvidence.Phase != "cut" {
			detail = "hung: " + c.HangEvidence.String()
		}
		if detail == "" && len(c.HungItems) > 0 {
			detail = fmt.Sprintf("%d item(s) hung, first: %s %s", len(c.HungItems), c.HungItems[0].Op, c.HungItems[0].Target)
		}
		// The table's line is cut at the width by w; the whole text
		// follows the table with -v.
		// Cells escaped before the table is laid out: a hostile name
		// is shown, aligned, never obeyed.
		fmt.Fprintf(tw, "%s\t%s\t%.2fs\t%d\t%s\t%s\n", termsafe.Field(c.Name), termsafe.Field(c.Status), c.DurationSeconds, len(c.Files), human.Bytes(sizes[c.Name]), termsafe.Field(human.FirstLine(detail)))
		if verbose && detail != "" {
			details = append(details, c.Name+": "+detail)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(details) > 0 {
		fmt.Fprintln(w, "\ndetails:")
		for _, d := range details {
			for i, l := range strings.Split(d, "\n") {
				indent := "  "
				if i > 0 {
					indent = "      "
				}
				fmt.Fprintln(w, textfit.Fill(l, width, indent, "      "))
			}
		}
	}
	if len(m.HungMounts) > 0 {
		fmt.Fprintf(w, "\nhung mounts (%d):\n", len(m.HungMounts))
		for _, h := range m.HungMounts {
			fmt.Fprintf(w, "  %s  (found by %s)\n", h.Target, h.Collector)
		}
	}
	if rs := manifestRemedies(m); len(rs) > 0 {
		fmt.Fprintln(w)
		printRemedies(w, rs)
	}
	fmt.Fprintf(w, "\nredactions: %d", m.Redaction.Total)
	if m.Redaction.Total > 0 {
		var parts []string
		for _, r := range slices.Sorted(maps.Keys(m.Redaction.Rules)) {
			parts = append(parts, fmt.Sprintf("%s=%d", r, m.Redaction.Rules[r]))
		}
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	if len(m.Omitted) > 0 {
		fmt.Fprintf(w, "omitted: %d file(s), first: %s (%s)\n", len(m.Omitted), m.Omitted[0].Path, m.Omitted[0].Reason)
	}
	if files {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(rows, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tSIZE\tKIND\tFLAGS")
		for _, f := range m.Files {
			var flags []string
			if f.Truncated {
				flags = append(flags, "truncated")
			}
			if f.Incomplete {
				flags = append(flags, "incomplete")
			}
			if n := sumCounts(f.Redactions); n > 0 {
				flags = append(flags, fmt.Sprintf("redacted:%d", n))
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", termsafe.Field(f.Path), f.Size, termsafe.Field(f.Kind), strings.Join(flags, ","))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return rows.Flush()
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
