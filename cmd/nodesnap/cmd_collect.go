package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/supervisor"
)

type collectOptions struct {
	outputDir        string
	outputFile       string
	compression      string
	output           string
	timeout          time.Duration
	collectorTimeout time.Duration
	only, skip       []string
	concurrency      int
	since            time.Duration
	root, proc, sys  string
	maxFile          byteSize
	maxCollector     byteSize
	maxBundle        byteSize
	probeTimeout     time.Duration
	workers          int
	noBinary         bool
	quiet            bool
}

func newCollectCommand() *cobra.Command {
	o := &collectOptions{
		maxFile: supervisor.DefaultMaxFileBytes, maxCollector: supervisor.DefaultMaxCollector,
		maxBundle: supervisor.DefaultMaxBundleBytes,
	}
	cmd := &cobra.Command{
		Use:   "collect",
		Short: "Collect a redacted diagnostic bundle from this node",
		Long: `Collect runs every enabled collector, each in its own child process with a deadline,
and writes one redacted bundle: nodesnap-<host>-<UTC time>.tar.gz in the output directory.
It finishes within --timeout whatever state the node is in: a collector that hangs (on a
stale mount, say) is killed, and the manifest records where it hung. The last lines
printed are the bundle's path, size and sha256: that file is what to attach to the ticket.

The first SIGINT/SIGTERM stops collection and still writes a bundle of what was gathered
(marked interrupted); a second one abandons the run and leaves nothing behind.

` + exitStatusHelp,
		Example: `  # what a support engineer asks a customer to run
  sudo nodesnap collect

  # into another directory, with a shorter deadline, logs of the last 2 hours
  sudo nodesnap collect -o /root --timeout 60s --since 2h

  # only some collectors
  sudo nodesnap collect --only host,processes,mounts

  # in a privileged pod with the host's root at /host
  nodesnap collect --root /host -o /host/var/tmp`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCollect(cmd.Context(), o, os.Args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.outputDir, "output-dir", "o", supervisor.DefaultOutputDir, "directory to write the bundle to")
	f.StringVar(&o.outputFile, "output-file", "", "exact path of the bundle (overrides --output-dir and the default name)")
	f.StringVar(&o.compression, "compression", bundle.Gzip, "bundle format: tar.gz or tar.zst")
	f.StringVar(&o.output, "output", "text", "how to report the result: text or json")
	f.DurationVar(&o.timeout, "timeout", supervisor.DefaultTimeout, "global deadline: the bundle is written within it")
	f.DurationVar(&o.collectorTimeout, "collector-timeout", 0, "deadline of every collector (default: each collector's own, see 'nodesnap collectors')")
	f.StringSliceVar(&o.only, "only", nil, "run only these collectors (comma-separated)")
	f.StringSliceVar(&o.skip, "skip", nil, "do not run these collectors (comma-separated)")
	f.IntVar(&o.concurrency, "concurrency", supervisor.DefaultConcurrency, "collectors run at once")
	f.DurationVar(&o.since, "since", 24*time.Hour, "how far back logs go")
	f.StringVar(&o.root, "root", "/", "the host's root filesystem (/host when running in a container with the host mounted)")
	f.StringVar(&o.proc, "proc", "", "the host's /proc (default <root>/proc)")
	f.StringVar(&o.sys, "sys", "", "the host's /sys (default <root>/sys)")
	f.Var(&o.maxFile, "max-file-size", "cap on one file in the bundle; longer files are truncated and say so")
	f.Var(&o.maxCollector, "max-collector-size", "cap on everything one collector writes")
	f.Var(&o.maxBundle, "max-bundle-size", "cap on the bundle's content; files past it are left out and listed")
	f.DurationVar(&o.probeTimeout, "probe-timeout", supervisor.DefaultProbeTimeout, "deadline of one risky operation (a stat of one mount, say)")
	f.IntVar(&o.workers, "workers", supervisor.DefaultWorkers, "isolated worker processes per collector for risky operations")
	f.BoolVar(&o.noBinary, "no-binary", false, "leave out artifacts that cannot be redacted (pprof protobufs)")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the final result")
	for _, s := range collectors.All() {
		if s.Flags != nil {
			s.Flags(f)
		}
	}
	return cmd
}

// collectResult is the --output json report.
type collectResult struct {
	Path       string            `json:"path"`
	Size       int64             `json:"size"`
	SHA256     string            `json:"sha256"`
	Status     string            `json:"status"`
	Collectors map[string]string `json:"collectors"`
}

func runCollect(ctx context.Context, o *collectOptions, argv []string, stdout, stderr io.Writer) error {
	if o.output != "text" && o.output != "json" {
		return &supervisor.UsageError{Msg: fmt.Sprintf("--output must be text or json, not %q", o.output)}
	}
	if o.root != "/" && (o.outputDir == supervisor.DefaultOutputDir) && o.outputFile == "" {
		// Inside a container /var/tmp is the container's; say where it went.
		fmt.Fprintln(stderr, "nodesnap: note: the bundle is written to "+o.outputDir+" as this process sees it; use -o to put it on the host")
	}
	sopts := supervisor.Options{
		OutputDir: o.outputDir, OutputFile: o.outputFile, Format: o.compression,
		Timeout: o.timeout, CollectorTimeout: o.collectorTimeout,
		Only: o.only, Skip: o.skip, Concurrency: o.concurrency, MaxBundleBytes: int64(o.maxBundle),
		Common: collectors.Common{
			Root: o.root, Proc: o.proc, Sys: o.sys, Since: o.since,
			MaxFileBytes: int64(o.maxFile), MaxCollectorBytes: int64(o.maxCollector),
			ProbeTimeout: o.probeTimeout, Workers: o.workers, NoBinary: o.noBinary,
		},
		CommandLine:   redactArgs(argv),
		Version:       toolVersion(),
		HandleSignals: true,
	}
	if !o.quiet && o.output == "text" {
		sopts.Progress = plainProgress(stderr)
	}
	res, err := supervisor.Run(ctx, sopts)
	if err != nil {
		if errors.Is(err, bundle.ErrNoSpace) {
			return fmt.Errorf("%w (free some space in the output directory or choose another with -o)", err)
		}
		return err
	}
	status := res.Manifest.Status
	if res.Manifest.Interrupted != nil {
		status = "interrupted"
	}
	if o.output == "json" {
		cr := collectResult{Path: res.Bundle.Path, Size: res.Bundle.Size, SHA256: res.Bundle.SHA256, Status: status, Collectors: map[string]string{}}
		for _, c := range res.Manifest.Collectors {
			cr.Collectors[c.Name] = c.Status
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(cr); err != nil {
			return err
		}
	} else {
		if !o.quiet {
			var problems []string
			for _, c := range res.Manifest.Collectors {
				switch c.Status {
				case bundle.StatusTimeout, bundle.StatusError, bundle.StatusPartial:
					problems = append(problems, c.Name+" ("+c.Status+")")
				}
			}
			if len(problems) > 0 {
				fmt.Fprintf(stderr, "nodesnap: bundle is partial: %s; the manifest says why\n", strings.Join(problems, ", "))
			}
			if res.Manifest.Interrupted != nil {
				fmt.Fprintf(stderr, "nodesnap: collection was interrupted by %s; the bundle holds what was gathered\n", res.Manifest.Interrupted.Signal)
			}
			fmt.Fprintln(stdout, "Attach this file to the ticket:")
		}
		fmt.Fprintf(stdout, "%s\nsize: %s (%d bytes)\nsha256: %s\n", res.Bundle.Path, humanBytes(res.Bundle.Size), res.Bundle.Size, res.Bundle.SHA256)
	}
	if res.Partial {
		return &partialError{}
	}
	return nil
}

func plainProgress(w io.Writer) func(supervisor.Progress) {
	return func(p supervisor.Progress) {
		switch p.Phase {
		case "done":
			line := fmt.Sprintf("%-12s %-11s %6.1fs", p.Collector, p.Status, p.Elapsed.Seconds())
			if p.Error != "" && p.Status != bundle.StatusOK {
				line += "  " + truncate(p.Error, 100)
			}
			fmt.Fprintln(w, line)
		case "writing":
			fmt.Fprintln(w, "writing the bundle…")
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// secretFlags are flags whose values never appear in the manifest.
var secretFlags = []string{"--kubelet-token", "--token", "--password", "--upload-headers-value"}

// redactArgs records the command line with the values of secret flags
// removed.
func redactArgs(argv []string) []string {
	out := make([]string, 0, len(argv))
	redactNext := false
	for _, a := range argv {
		if redactNext {
			out = append(out, "[REDACTED]")
			redactNext = false
			continue
		}
		done := false
		for _, f := range secretFlags {
			if a == f {
				redactNext = true
			} else if strings.HasPrefix(a, f+"=") {
				out = append(out, f+"=[REDACTED]")
				done = true
			}
		}
		if !done {
			out = append(out, a)
		}
	}
	return out
}
