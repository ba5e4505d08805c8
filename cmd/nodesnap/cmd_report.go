package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/features/report"
	"github.com/nodesnap/nodesnap/internal/termsafe"
	"github.com/nodesnap/nodesnap/read/analyze"
)

func newReportCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report {BUNDLE | DIR} [--output-file report.html]",
		Short: "Write a bundle's analysis (or a fleet's) as one self-contained HTML page",
		Long: `Report analyses a bundle as 'nodesnap analyze' does and writes what it found as one HTML
file to open in any browser, offline: the node at a glance (host, kernel, how the collection
ended, which evidence is missing and why, and how to collect it next time); the findings by
severity, each with its evidence lines (linked to the bundle file they come from), the
explanation and the fix; a timeline of the findings' dated kubelet, runtime and kernel log
lines; hung mounts with the kernel stacks of the tasks blocked on them; who holds each device
an unmount on the host cannot free (device, mount namespace, process, pod); the largest
directories against ext4's subdirectory limit and .deleting~ leftovers; the kubelet's
goroutines by frame; and the collectors, with when each ran, how long it took and what it
wrote. BUNDLE may be an extracted bundle's directory.

Given a directory of bundle archives instead (one per node, as 'nodesnap fleet' writes them),
it analyses each as 'nodesnap fleet analyze' does (the bundles its fleet.json names, else every
archive) and writes one page for the fleet: how many nodes have each finding, a table of which
node has which, the nodes that differ from the rest, fleet.json's status and reason per node
(nodes without a bundle too), then each node's findings in short ('nodesnap report BUNDLE' has
the evidence). A bundle that cannot be read is listed on the page and makes the exit status 3.

The page is built from the bundle alone. It holds no script and loads nothing: styles and
charts (SVG) are inline, and its Content-Security-Policy forbids scripts and any network
access. Every text from the bundle is escaped. Long lists are cut, and the page says where,
so it stays small (well under 2 MiB); 'nodesnap analyze -o json' has everything.

Without --output-file the page is written to BUNDLE's name with .html in place of .tar.gz or
.tar.zst (DIR's name with .html for a fleet), in the current directory; '--output-file -' writes it to standard output. The file is written under a
temporary name and renamed into place, mode 0600: it quotes the bundle. The path written is
printed. Exit status 0 when the page is written, whatever it found ('nodesnap analyze
-o html' prints the same page and exits as analyze does).

` + exitHelp("0  the page was written, whatever it found", "1  fatal: the bundle could not be read or the page could not be written", exitLineUsage,
			"3  fleet: the page was written, but some bundles could not be read (the page lists them)"),
		Example: `  nodesnap report nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap report --output-file ticket-4711.html nodesnap-node1-20261121T101500Z.tar.gz
  nodesnap report --output-file fleet.html ./fleet-20261121/
  nodesnap analyze -o html nodesnap-node1-20261121T101500Z.tar.gz > report.html`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReport(cmd.Context(), cmd.OutOrStdout(), args[0], out)
		},
	}
	cmd.Flags().StringVar(&out, "output-file", "", "file to write (default: the bundle's name with .html, in the current directory; - for standard output)")
	addFileAlias(cmd, &out, "output-file")
	return cmd
}

// reportName is the default page name for a bundle: its base name with
// .html in place of the archive's extension.
func reportName(bundlePath string) string {
	base := filepath.Base(bundlePath)
	for _, ext := range []string{".tar.gz", ".tar.zst", ".tgz"} {
		if strings.HasSuffix(base, ext) && len(base) > len(ext) {
			return strings.TrimSuffix(base, ext) + ".html"
		}
	}
	return base + ".html"
}

func runReport(ctx context.Context, stdout io.Writer, bundlePath, out string) error {
	var page bytes.Buffer
	var partial error
	if report.HoldsBundles(bundlePath) {
		v, err := report.LoadFleet(ctx, bundlePath)
		if err != nil {
			return err
		}
		if err := report.WriteFleet(&page, v); err != nil {
			return err
		}
		bad := 0
		for _, n := range v.Nodes {
			if n.Report == nil {
				bad++
			}
		}
		if bad > 0 {
			partial = &partialError{fmt.Sprintf("%d of %d bundles could not be read; the page lists them and why", bad, len(v.Nodes))}
		}
		if out == "" {
			out = dirReportName(bundlePath)
		}
	} else {
		rep, m, err := report.Load(ctx, bundlePath)
		if err != nil {
			return err
		}
		if err := report.Write(&page, rep, m); err != nil {
			return err
		}
	}
	if err := writeReport(stdout, page.Bytes(), bundlePath, out); err != nil {
		return err
	}
	return partial
}

// dirReportName is the default page name for a directory of bundles.
func dirReportName(dir string) string {
	base := filepath.Base(filepath.Clean(dir))
	if abs, err := filepath.Abs(dir); err == nil {
		base = filepath.Base(abs)
	}
	if base == "/" || base == "." || base == "" {
		base = "fleet"
	}
	return base + ".html"
}

// writeReport writes page to out (- for stdout; "" for the bundle's
// name) and prints the path written.
func writeReport(stdout io.Writer, page []byte, bundlePath, out string) error {
	if out == "-" {
		_, err := stdout.Write(page)
		return err
	}
	if out == "" {
		out = reportName(bundlePath)
	}
	if err := writeFileAtomic(out, page); err != nil {
		return err
	}
	// The whole path: the page lands in the current directory by
	// default, which the user may not think of as where it went.
	if abs, err := filepath.Abs(out); err == nil {
		out = abs
	}
	_, err := fmt.Fprintln(stdout, termsafe.Field(out))
	return err
}

// writeFileAtomic writes data to a temporary file beside p and renames it
// into place, so a reader never sees half a page.
func writeFileAtomic(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".nodesnap-report-*.html")
	if err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp, p)
	}
	if werr != nil {
		_ = os.Remove(tmp) // best effort: the error below is what matters
		return fmt.Errorf("writing the report to %s: %w", p, werr)
	}
	return nil
}

// writeReportHTML is analyze --html: the report page of an analysis
// already made, with the bundle's manifest.
func writeReportHTML(ctx context.Context, w io.Writer, rep *analyze.Report, bundlePath string) error {
	m, _, err := bundle.ReadManifest(ctx, bundlePath)
	if err != nil {
		return err
	}
	return report.Write(w, rep, m)
}
