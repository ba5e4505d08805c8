package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
)

func newInspectCommand() *cobra.Command {
	var files bool
	cmd := &cobra.Command{
		Use:   "inspect BUNDLE",
		Short: "Show a bundle's manifest at a glance: collectors, statuses, durations, sizes",
		Long: `Inspect prints who ran, how it ended, how long it took, what it wrote, what hung and what
was redacted. It first checks the whole bundle as 'nodesnap validate' does (schema, every
file's size and sha256, no links or paths leaving the bundle) and refuses what validate
refuses: a manifest alone says nothing about what the archive really holds.

` + exitStatusHelp,
		Example: `  nodesnap inspect nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap inspect --files nodesnap-node1-20261121T101500Z.tar.gz`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := bundle.Validate(cmd.Context(), args[0])
			if err != nil {
				if rep != nil {
					for _, p := range rep.Problems {
						fmt.Fprintln(cmd.ErrOrStderr(), "  "+p)
					}
				}
				return err
			}
			printManifest(cmd.OutOrStdout(), rep.Manifest, files)
			return nil
		},
	}
	cmd.Flags().BoolVar(&files, "files", false, "also list every file")
	return cmd
}

func printManifest(w io.Writer, m *bundle.Manifest, files bool) {
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
	for _, warn := range m.Warnings {
		fmt.Fprintf(w, "warning:   %s\n", warn)
	}
	fmt.Fprintln(w)
	sizes := map[string]int64{}
	for _, f := range m.Files {
		sizes[f.Collector] += f.Size
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COLLECTOR\tSTATUS\tDURATION\tFILES\tSIZE\tDETAIL")
	for _, c := range m.Collectors {
		detail := c.Error
		if c.HangEvidence != nil && c.HangEvidence.Phase != "interrupted" && c.HangEvidence.Phase != "cut" {
			detail = "hung: " + c.HangEvidence.String()
		}
		if detail == "" && len(c.HungItems) > 0 {
			detail = fmt.Sprintf("%d item(s) hung, first: %s %s", len(c.HungItems), c.HungItems[0].Op, c.HungItems[0].Target)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2fs\t%d\t%s\t%s\n", c.Name, c.Status, c.DurationSeconds, len(c.Files), humanBytes(sizes[c.Name]), truncate(firstLineOf(detail), 90))
	}
	tw.Flush()
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
		for _, r := range sortedKeys(m.Redaction.Rules) {
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
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", f.Path, f.Size, f.Kind, strings.Join(flags, ","))
		}
		tw.Flush()
	}
}

func firstLineOf(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func sortedKeys(m map[string]int) []string {
	k := make([]string, 0, len(m))
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
