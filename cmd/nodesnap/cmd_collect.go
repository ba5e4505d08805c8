package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/features/objstore"
	"github.com/nodesnap/nodesnap/features/upload"
	"github.com/nodesnap/nodesnap/internal/cliflag"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/internal/termsafe"
)

type collectOptions struct {
	outputDir        string
	outputFile       string
	tmpDir           string
	caseID, label    string
	encryptTo        []string
	compression      string
	output           string
	timeout          time.Duration
	collectorTimeout time.Duration
	only, skip       []string
	concurrency      int
	since            time.Duration
	root, proc, sys  string
	maxFile          cliflag.ByteSize
	maxCollector     cliflag.ByteSize
	maxBundle        cliflag.ByteSize
	probeTimeout     time.Duration
	workers          int
	noBinary         bool
	quiet            bool
	keep             int
	lockWait         time.Duration
	minFree          cliflag.ByteSize
	minFreeSet       bool
	outputDirSet     bool
	upload           upload.Options
	store            storeFlags
	redaction        redactFlags
	// exitZeroIfWritten makes statuses 3 and 5 (a bundle was written)
	// exit 0, for a Kubernetes init container.
	exitZeroIfWritten bool
	// allowNonRoot lets a run go ahead without root, with the evidence
	// only root can read missing (and said so).
	allowNonRoot bool
	// hostOutputDir is the output directory as the host sees it, when
	// nodesnap runs in a container with a hostPath mounted at -o.
	hostOutputDir string
}

// AllowNonRootEnv, set to 1, is --allow-non-root.
const AllowNonRootEnv = "NODESNAP_ALLOW_NON_ROOT"

// Defaults of the unattended-run flags.
const (
	defaultLockWait = 10 * time.Second
	defaultMinFree  = 256 << 20
)

func newCollectCommand() *cobra.Command {
	o := &collectOptions{
		maxFile: supervisor.DefaultMaxFileBytes, maxCollector: supervisor.DefaultMaxCollector,
		maxBundle: supervisor.DefaultMaxBundleBytes, minFree: defaultMinFree,
	}
	cmd := &cobra.Command{
		Use:   "collect",
		Short: "Collect a redacted diagnostic bundle from this node",
		Long: `Collect runs every enabled collector, each in its own child process with a deadline,
and writes one redacted bundle: nodesnap-<host>-<UTC time>.tar.gz in the output directory
(made, mode 0700, if missing), with its checksum beside it in <bundle>.sha256 (sha256sum -c).
--case-id and --label go into the name; every entry sits in one directory named like the file.
It finishes within --timeout whatever state the node is in: a collector that hangs (on a
stale mount, say) is killed, and the manifest records where it hung. The last lines
printed are the bundle's path, size and sha256: that file is what to attach to the ticket.

The first SIGINT/SIGTERM stops collection and still writes a bundle of what was gathered
(marked interrupted); a second one abandons the run and leaves nothing behind.

On a terminal, stderr shows a live line per collector; elsewhere (cron, a pod's log) one
plain line per collector as it ends. --quiet prints only the bundle's path; --output json
prints one JSON object (path, size, sha256, status, every collector's status, upload).

For cron, systemd timers and incident hooks: only one run collects into an output directory
at a time (the next waits --lock-wait, then exits with status 4); a run refuses to start when
the output filesystem has less than --min-free available; --keep N removes this host's oldest
bundles once the new one is written (never the newest complete one). --upload URL then sends
the bundle (see 'nodesnap upload --help'); a failed upload keeps it on disk and exits with
status 5.

In a Kubernetes init container, where only status 0 lets the pod go on, --exit-zero-if-written
exits 0 whenever a bundle was written (partial, or not uploaded: the output still says which),
and --host-output-dir names the hostPath mounted at --output-dir, so that the last line printed
is the bundle's path on the node.

` + exitHelp("0  the bundle is complete", "1  fatal: no bundle was written",
			"2  usage error: bad flags or arguments; or not run as root (see --allow-non-root)",
			"3  the bundle was written but is partial (a collector timed out or failed, --timeout cut collectors, --max-bundle-size left files out, the run was interrupted or ran without root)",
			"4  another nodesnap run is collecting into the same output directory; nothing was collected (try again later, or use another --output-dir)",
			"5  the bundle was written but could not be uploaded; it is kept on disk at the printed path (the output says whether it is partial)"),
		Example: `  # what a support engineer asks a customer to run
  sudo nodesnap collect

  # into another directory, with a shorter deadline, logs of the last 2 hours
  sudo nodesnap collect --output-dir /root --timeout 60s --since 2h

  # only some collectors
  sudo nodesnap collect --only host,processes,mounts

  # for support case 01234567, encrypted to the support engineer's age (or SSH) key
  sudo nodesnap collect --case-id 01234567 --encrypt-to age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p

  # a small /var/tmp: stage the collected files on another filesystem
  sudo nodesnap collect --tmp-dir /mnt/scratch

  # in a privileged pod with the host's root at /host
  nodesnap collect --root /host --output-dir /host/var/tmp

  # by hand, where the kubelet wants a credential: a short-lived token of the
  # nodesnap ServiceAccount (deploy/kubernetes/rbac.yaml), kept out of shell history
  NODESNAP_KUBELET_TOKEN=$(kubectl -n nodesnap create token nodesnap --duration=10m) nodesnap collect
  kubectl -n nodesnap create token nodesnap --duration=10m | sudo nodesnap collect --kubelet-token-file /dev/stdin

  # the init container of deploy/kubernetes/job.yaml (/output is the node's /var/tmp/nodesnap)
  nodesnap collect --root /host --output-dir /output --host-output-dir /var/tmp/nodesnap --exit-zero-if-written

  # from cron or a systemd timer: quiet, the newest 4 bundles kept
  nodesnap collect -q --output-dir /var/lib/nodesnap --keep 4

  # as root, straight to a pre-signed object-store URL (an environment
  # variable keeps it out of the process list)
  NODESNAP_UPLOAD_URL='https://bucket.s3.amazonaws.com/case-123/n1.tar.gz?...' \
      nodesnap collect`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.minFreeSet = cmd.Flags().Changed("min-free")
			o.outputDirSet = cmd.Flags().Changed("output-dir")
			return runCollect(cmd.Context(), o, cmd.Flags(), os.Args, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.outputDir, "output-dir", supervisor.DefaultOutputDir, "directory to write the bundle to (made, mode 0700, if missing)")
	f.StringVar(&o.outputFile, "output-file", "", "exact path of the bundle (overrides --output-dir and the default name); an existing file is never overwritten")
	f.StringVar(&o.caseID, "case-id", "", "support case number, put into the bundle's name (letters, digits, '-', '_')")
	f.StringVar(&o.label, "label", "", "a word of your own put into the bundle's name (letters, digits, '-', '_')")
	f.StringVar(&o.tmpDir, "tmp-dir", "", "directory for the files collected before they are archived (default: the output directory); for an output directory too small to hold them and the bundle")
	f.StringArrayVar(&o.encryptTo, "encrypt-to", nil, "encrypt the bundle with age to this public key (age1… or an SSH ssh-ed25519/ssh-rsa key; repeat for several): writes <bundle>.age, and no unencrypted bundle is left on disk")
	f.StringVar(&o.compression, "compression", bundle.Gzip, "bundle format: tar.gz or tar.zst")
	addOutputFlag(cmd, &o.output, "text", "json")
	f.DurationVar(&o.timeout, "timeout", supervisor.DefaultTimeout, "global deadline: the bundle is written within it")
	f.DurationVar(&o.collectorTimeout, "collector-timeout", 0, "deadline of every collector (default: each collector's own, see 'nodesnap collectors')")
	f.StringSliceVar(&o.only, "only", nil, "run only these collectors (comma-separated)")
	f.StringSliceVar(&o.skip, "skip", nil, "do not run these collectors (comma-separated)")
	f.IntVar(&o.concurrency, "concurrency", supervisor.DefaultConcurrency, "collectors run at once")
	o.since = 24 * time.Hour
	f.Var(sinceValue{&o.since}, "since", "how far back logs go: a duration (12h, 90m) or days (7d)")
	f.StringVar(&o.root, "root", "/", "the host's root filesystem (/host when running in a container with the host mounted)")
	f.StringVar(&o.proc, "proc", "", "the host's /proc (default <root>/proc)")
	f.StringVar(&o.sys, "sys", "", "the host's /sys (default <root>/sys)")
	f.Var(&o.maxFile, "max-file-size", "cap on one file in the bundle; longer files are truncated and say so")
	f.Var(&o.maxCollector, "max-collector-size", "cap on everything one collector writes")
	f.Var(&o.maxBundle, "max-bundle-size", "cap on the bundle's content; files past it are left out and listed")
	f.DurationVar(&o.probeTimeout, "probe-timeout", supervisor.DefaultProbeTimeout, "deadline of one risky operation (a stat of one mount, say)")
	f.IntVar(&o.workers, "workers", supervisor.DefaultWorkers, "isolated worker processes per collector for risky operations")
	f.BoolVar(&o.noBinary, "no-binary", false, "leave out artifacts that cannot be redacted (pprof protobufs)")
	inSection(f, "General", "timeout", "collector-timeout", "only", "skip", "concurrency", "since", "root", "proc", "sys",
		"probe-timeout", "workers", "no-binary")
	inSection(f, "Output", "output-dir", "output-file", "case-id", "label", "tmp-dir", "encrypt-to", "compression", "output", "max-file-size", "max-collector-size", "max-bundle-size")
	o.redaction.register(f)
	sectionOfNew(f, "Redaction")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the bundle's path (and errors, and what the bundle is missing)")
	f.BoolVar(&o.allowNonRoot, "allow-non-root", os.Getenv(AllowNonRootEnv) == "1", "collect even when not running as root (by default such a run is refused: much evidence needs root); the bundle is partial and says so (or $"+AllowNonRootEnv+"=1)")
	f.IntVar(&o.keep, "keep", 0, "once the bundle is written, keep only the newest N bundles of this host in the output directory, and the newest complete one when those are all partial (0: keep all)")
	f.DurationVar(&o.lockWait, "lock-wait", defaultLockWait, "how long to wait for another run collecting into the same output directory before giving up (exit status 4)")
	f.Var(&o.minFree, "min-free", "refuse to start when the output filesystem has less than this available (0: no check; unless given, never more than --max-bundle-size)")
	f.BoolVar(&o.exitZeroIfWritten, "exit-zero-if-written", false, "exit with status 0 whenever a bundle was written, also when it is partial (3) or its upload failed (5); the output still says which (for a Kubernetes init container, where only 0 lets the pod go on)")
	f.StringVar(&o.hostOutputDir, "host-output-dir", "", "the output directory as the host sees it, when nodesnap runs in a container with a host directory mounted at --output-dir: the last line printed names the bundle's path on the host")
	inSection(f, "General", "allow-non-root")
	inSection(f, "Unattended runs (cron, systemd, Kubernetes)", "quiet", "keep", "lock-wait", "min-free", "exit-zero-if-written", "host-output-dir")
	f.StringVar(&o.upload.URL, "upload", "", "after writing the bundle, upload it to this http(s) URL, or under its own name to s3://bucket/prefix/ (default $"+UploadURLEnv+")")
	cliflag.MarkURL(f, "upload")
	addUploadFlags(&o.upload, f, "upload-")
	addStoreFlags(&o.store, f, "upload-")
	sectionOfNew(f, "Upload")
	for _, s := range collectors.All() {
		if s.Flags != nil {
			s.Flags(f)
			sectionOfNew(f, "Collector "+s.Name)
		}
	}
	completeCollectorFlags(cmd)
	return cmd
}

// collectResult is the --output json report.
type collectResult struct {
	Path string `json:"path"`
	// HostPath is Path as the host sees it (--host-output-dir, or under
	// --root).
	HostPath string `json:"host_path,omitempty"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	// SHA256File is the <bundle>.sha256 beside it (sha256sum -c).
	SHA256File string `json:"sha256_file,omitempty"`
	// Encrypted says the bundle is encrypted to --encrypt-to's keys.
	Encrypted  bool              `json:"encrypted,omitempty"`
	Status     string            `json:"status"` // complete, partial or interrupted
	Collectors map[string]string `json:"collectors"`
	// Missing says, a line each, what the bundle lacks and why (the
	// lines collect prints at its end).
	Missing []string `json:"missing,omitempty"`
	// Remedies are what collectors left out for want of a credential, and
	// the commands that get it.
	Remedies []collectRemedy `json:"remedies,omitempty"`
	// Removed lists the old bundles --keep removed.
	Removed []string       `json:"removed,omitempty"`
	Upload  *upload.Result `json:"upload,omitempty"`
	// Object is what an s3:// or POST-policy upload put in the store.
	Object *objstore.Result `json:"object,omitempty"`
	// ExitStatus is the status nodesnap exits with (see --help).
	ExitStatus int `json:"exit_status"`
}

// collectRemedy is one collector's remedy.
type collectRemedy struct {
	Collector string `json:"collector"`
	bundle.Remedy
}

func manifestRemedies(m *bundle.Manifest) []collectRemedy {
	var out []collectRemedy
	for _, c := range m.Collectors {
		for _, r := range c.Remedies {
			out = append(out, collectRemedy{Collector: c.Name, Remedy: r})
		}
	}
	return out
}

// printRemedies says, at the end of a run, which evidence is missing and
// what to run to get it. It goes to stderr even with --quiet: stdout keeps
// its one line, and a run by hand must not end silently without its
// kubelet evidence.
func printRemedies(w io.Writer, rs []collectRemedy) {
	for _, r := range rs {
		fmt.Fprintf(w, "nodesnap: %s: missing %s: %s. To collect them (add this run's other options to nodesnap collect):\n", r.Collector, strings.Join(r.Missing, ", "), r.Reason)
		for _, f := range r.Fix {
			fmt.Fprintf(w, "    %s\n", f)
		}
	}
}

// lossLines says what a bundle lacks and why, a line each: the collectors
// that did not finish, an interrupt, and the run-wide warnings (size cap,
// --timeout, not root). Empty for a complete bundle.
func lossLines(m *bundle.Manifest) []string {
	var out, problems []string
	for _, c := range m.Collectors {
		switch {
		case c.Status == bundle.StatusTimeout, c.Status == bundle.StatusError, c.Status == bundle.StatusPartial,
			c.Status == bundle.StatusSkipped && strings.HasPrefix(c.Error, "cut by --timeout"):
			problems = append(problems, c.Name+" ("+c.Status+")")
		}
	}
	if len(problems) > 0 {
		out = append(out, fmt.Sprintf("bundle is partial: %s; the manifest says why (nodesnap inspect shows it)", strings.Join(problems, ", ")))
	}
	if m.Interrupted != nil {
		out = append(out, fmt.Sprintf("collection was interrupted by %s; the bundle holds what was gathered", m.Interrupted.Signal))
	}
	for _, w := range m.Warnings {
		out = append(out, "warning: "+w)
	}
	return out
}

// lockedError is a run that found another collecting into its output
// directory (exit status 4).
type lockedError struct{ err error }

func (l *lockedError) Error() string { return l.err.Error() }
func (l *lockedError) Unwrap() error { return l.err }

// runCollect collects one bundle. flags are collect's, whose marks
// (cliflag.MarkSecret) say which values argv's record in the manifest
// must hide.
func runCollect(ctx context.Context, o *collectOptions, flags *pflag.FlagSet, argv []string, stdout, stderr io.Writer) error {
	if o.output != "text" && o.output != "json" {
		// -o DIR was the output directory's flag, and documented: it
		// still is, with a word on the spelling to use. A value that is
		// no path is a mistaken format, not a directory to create.
		if !strings.Contains(o.output, "/") && o.output != "." && o.output != ".." {
			return &supervisor.UsageError{Msg: fmt.Sprintf("--output (-o) is the output format, text or json, not %q; the output directory is --output-dir", o.output)}
		}
		if o.outputDirSet {
			return &supervisor.UsageError{Msg: "-o " + o.output + " and --output-dir both name the output directory: keep --output-dir"}
		}
		_, _ = fmt.Fprintf(stderr, "nodesnap: -o DIR for the output directory is deprecated: use --output-dir %s (-o is the output format, text or json, in every command)\n", o.output)
		o.outputDir, o.output = o.output, "text"
	}
	if o.concurrency < 1 {
		return &supervisor.UsageError{Msg: fmt.Sprintf("--concurrency must be at least 1 (collectors run at once), not %d", o.concurrency)}
	}
	if o.workers < 1 {
		return &supervisor.UsageError{Msg: fmt.Sprintf("--workers must be at least 1 (worker processes per collector), not %d", o.workers)}
	}
	if o.keep < 0 {
		return &supervisor.UsageError{Msg: "--keep must be 0 (keep all) or more"}
	}
	if o.keep > 0 && o.outputFile != "" {
		return &supervisor.UsageError{Msg: "--keep works with --output-dir, whose bundles are named by host and time; not with --output-file"}
	}
	if o.hostOutputDir != "" && (!filepath.IsAbs(o.hostOutputDir) || o.outputFile != "") {
		return &supervisor.UsageError{Msg: "--host-output-dir must be an absolute path, and goes with --output-dir (not --output-file)"}
	}
	if o.lockWait < 0 {
		return &supervisor.UsageError{Msg: "--lock-wait must not be negative"}
	}
	if uid := os.Geteuid(); uid != 0 && !o.allowNonRoot {
		return &supervisor.UsageError{Msg: fmt.Sprintf("nodesnap collect needs root (running as uid %d): without it, other users' process files, kernel stacks, "+
			"mount namespaces and root-only logs cannot be read. Run it with sudo, or add --allow-non-root to collect what this user can read (the bundle is then partial and says so)", uid)}
	}
	if o.timeout <= 0 {
		// 0 would mean the default to the supervisor.
		return &supervisor.UsageError{Msg: "--timeout must be positive"}
	}
	if o.upload.URL == "" {
		o.upload.URL = os.Getenv(UploadURLEnv)
	}
	up, err := newDestination(ctx, &o.upload, &o.store, "upload-", stderr)
	if err != nil {
		return err
	}
	specs, err := supervisor.Select(o.only, o.skip)
	if err != nil {
		return err
	}
	// A mistake in the redaction config is reported, with its line, before
	// anything is collected.
	redaction, err := o.redaction.isolatedSettings()
	if err != nil {
		return err
	}
	// nodesnap never carries its own secrets: what the command line (or
	// the environment) gave it, the processes collector would find again
	// in its own /proc/<pid>/cmdline, and an error might quote.
	redaction = withOwnSecrets(redaction, append(append(cliflag.HiddenValues(flags, argv), cliflag.URLSecrets(o.upload.URL)...), storeSecrets()...))
	outDir := o.outputDir
	if o.outputFile != "" {
		outDir = filepath.Dir(o.outputFile)
	}
	if o.root != "/" && (o.outputDir == supervisor.DefaultOutputDir) && o.outputFile == "" && o.hostOutputDir == "" {
		// Inside a container /var/tmp is the container's; say where it went.
		fmt.Fprintln(stderr, "nodesnap: note: the bundle is written to "+o.outputDir+" as this process sees it; use --output-dir to put it on the host")
	}

	for _, s := range specs {
		if s.Prepare != nil {
			// What only this process can read (a token on one of its
			// descriptors: <(kubectl ...), a pipe), read before it opens
			// descriptors of its own (the lock), so that a /dev/fd/N the
			// shell did not pass is reported, not read from nodesnap's.
			s.Prepare(ctx)
		}
	}

	// From here until we return, SIGINT and SIGTERM never kill the
	// process outright: it holds the output directory's lock, which it
	// must release. Before collection starts a signal ends the run; during
	// it the supervisor handles them (a bundle of what was gathered);
	// during the upload it ends the upload.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	preCtx, cancelPre := context.WithCancel(ctx)
	defer cancelPre()
	go func() {
		select {
		case <-sigs:
			cancelPre()
		case <-preCtx.Done():
		}
	}()

	// One run at a time per output directory: two would double the load
	// on a sick node, and retention of one could remove what the other
	// is about to upload.
	// The directory is checked, locked and kept in a worker process under
	// deadlines (outputdir.Output): a hung mount there ends the run with
	// an error instead of freezing it.
	minFree := int64(o.minFree)
	if !o.minFreeSet {
		minFree = min(minFree, int64(o.maxBundle))
	}
	// The options, checked before the output directory is locked or
	// touched, the way the supervisor checks them (once, in Validate).
	trigger, err := watchTriggerFromEnv()
	if err != nil {
		return err
	}
	sopts := supervisor.Options{
		Trigger:   trigger,
		OutputDir: o.outputDir, OutputFile: o.outputFile, Format: o.compression,
		CaseID: o.caseID, Label: o.label, EncryptTo: o.encryptTo,
		Timeout: o.timeout, CollectorTimeout: o.collectorTimeout,
		Only: o.only, Skip: o.skip, Concurrency: o.concurrency, MaxBundleBytes: int64(o.maxBundle),
		Common: collectors.Common{
			Root: o.root, Proc: o.proc, Sys: o.sys, Since: o.since,
			MaxFileBytes: int64(o.maxFile), MaxCollectorBytes: int64(o.maxCollector),
			ProbeTimeout: o.probeTimeout, Workers: o.workers, NoBinary: o.noBinary,
		},
		CommandLine:   cliflag.RecordArgs(flags, argv),
		Version:       toolVersion(),
		HandleSignals: true,
		Redaction:     redaction,
	}
	if err := sopts.Validate(); err != nil {
		return err
	}
	// Who nodesnap itself is (its pid, namespaces, pod), found while the
	// output directory is checked and locked: each may start a worker,
	// and their process starts overlap.
	self := make(chan *bundle.Self, 1)
	go func() { self <- collectors.IdentifySelf() }()
	// The first collectors' processes start now too, each with its first
	// worker: a run's fixed cost is process starts, and these overlap.
	pre := supervisor.Prestart(sopts)
	defer pre.Discard()
	sopts.Prestarted = pre
	out, err := outputdir.Open(preCtx, outputdir.Options{Dir: outDir, File: o.outputFile, Create: o.outputFile == "", TmpDir: o.tmpDir,
		Lock: true, LockWait: o.lockWait, MinFree: uint64(max(minFree, 0))})
	if err != nil {
		if errors.Is(err, outputdir.ErrLocked) {
			return &lockedError{err}
		}
		return err
	}
	defer out.Close()
	if preCtx.Err() != nil && ctx.Err() == nil {
		return errors.New("interrupted before collection started; nothing was written")
	}
	cancelPre()

	var disp progressDisplay
	if !o.quiet && o.output == "text" {
		names := make([]string, 0, len(specs))
		for _, s := range specs {
			names = append(names, s.Name)
		}
		disp = newProgress(stderr, names, o.timeout)
		sopts.Progress = disp.update
	}
	sopts.Output = out
	sopts.Common.Self = <-self
	isolate.TuneGC()
	res, err := supervisor.Run(ctx, sopts)
	if err != nil {
		if disp != nil {
			disp.finish(nil)
		}
		if errors.Is(err, bundle.ErrNoSpace) {
			return fmt.Errorf("%w (free some space in the output directory or choose another with --output-dir)", err)
		}
		return err
	}
	if disp != nil {
		disp.finish(res.Manifest)
	}
	status := res.Manifest.Status
	if res.Manifest.Interrupted != nil {
		status = "interrupted"
	}
	chatty := !o.quiet && o.output == "text"
	if res.Bundle.SumError != "" {
		fmt.Fprintln(stderr, "nodesnap: warning: the bundle is whole, but its checksum file is missing: "+res.Bundle.SumError)
	}

	// Retention only now: the new bundle is complete and in place.
	var removed []string
	if o.keep > 0 {
		var rerr error
		removed, rerr = out.Retain(ctx, res.Manifest.Host.Hostname, o.keep, res.Bundle.Path)
		if rerr != nil {
			fmt.Fprintln(stderr, "nodesnap: warning: "+rerr.Error())
		}
		if chatty && len(removed) > 0 {
			fmt.Fprintf(stderr, "nodesnap: removed %d older bundle(s) of this host (--keep %d)\n", len(removed), o.keep)
		}
	}

	var ur *upload.Result
	if up != nil {
		if chatty {
			up.Log = stderr
			fmt.Fprintf(stderr, "nodesnap: uploading %s to %s\n", human.Bytes(res.Bundle.Size), up.Shown)
		}
		// Ctrl-C during the upload ends it, not the process: the
		// customer still learns where the bundle is.
		uctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
		r := up.Upload(uctx, res.Bundle.Path, res.Bundle.Size, res.Bundle.SHA256)
		stop()
		ur = &r
	}
	exit := exitOK
	switch {
	case ur != nil && !ur.OK:
		exit = exitUploadFailed
	case res.Partial:
		exit = exitPartial
	}
	// wouldExit is the status without --exit-zero-if-written.
	wouldExit := exit
	if o.exitZeroIfWritten {
		exit = exitOK
	}

	hostPath, onHost := bundleHostPath(o, res.Bundle.Path)
	switch {
	case o.output == "json":
		cr := collectResult{Path: res.Bundle.Path, HostPath: hostPath, Size: res.Bundle.Size, SHA256: res.Bundle.SHA256,
			SHA256File: res.Bundle.SumFile, Encrypted: len(o.encryptTo) > 0, Status: status,
			Collectors: map[string]string{}, Missing: lossLines(res.Manifest), Remedies: manifestRemedies(res.Manifest), Removed: removed, Upload: ur, ExitStatus: exit}
		if up != nil && ur.OK {
			cr.Object = up.Object
		}
		for _, c := range res.Manifest.Collectors {
			cr.Collectors[c.Name] = c.Status
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(cr); err != nil {
			return err
		}
	case o.quiet:
		// What the bundle lacks is said even with --quiet: on stderr,
		// so that stdout keeps its one line.
		for _, l := range lossLines(res.Manifest) {
			fmt.Fprintln(stderr, "nodesnap: "+l)
		}
		printRemedies(stderr, manifestRemedies(res.Manifest))
		// One line, so that scripts can take it as it is.
		fmt.Fprintln(stdout, res.Bundle.Path)
	default:
		for _, l := range lossLines(res.Manifest) {
			fmt.Fprintln(stderr, "nodesnap: "+l)
		}
		printRemedies(stderr, manifestRemedies(res.Manifest))
		if len(o.encryptTo) > 0 {
			fmt.Fprintf(stderr, "nodesnap: the bundle is encrypted to %d key(s) with age; its recipient reads it after: age -d -i KEY -o %s %s\n",
				len(o.encryptTo), strings.TrimSuffix(filepath.Base(res.Bundle.Path), ".age"), filepath.Base(res.Bundle.Path))
		}
		if res.MappingFile != "" {
			fmt.Fprintf(stderr, "nodesnap: obfuscation mapping (keep it; do not attach it): %s\n", res.MappingFile)
		}
		if wouldExit != exit {
			// The bundle is on disk; the lines above say what is
			// missing from it.
			fmt.Fprintf(stderr, "nodesnap: exit status 0, not %d (--exit-zero-if-written): a bundle was written\n", wouldExit)
		}
		switch {
		case ur == nil:
			fmt.Fprintln(stdout, "Attach this file to the ticket:")
		case ur.OK && up.Object != nil:
			fmt.Fprintf(stdout, "Uploaded to %s: nothing more to attach. A copy is kept here:\n", storeSummary(up.Object))
		case ur.OK:
			fmt.Fprintf(stdout, "Uploaded to %s (HTTP %d): nothing more to attach. A copy is kept here:\n", ur.URL, ur.StatusCode)
		default:
			fmt.Fprintf(stdout, "The upload to %s failed: %s.\nAttach this file to the ticket instead:\n", ur.URL, ur.Error)
		}
		fmt.Fprintln(stdout, res.Bundle.Path)
		fmt.Fprintf(stdout, "size: %s (%d bytes)\nsha256: %s\n", human.Bytes(res.Bundle.Size), res.Bundle.Size, res.Bundle.SHA256)
		if onHost {
			// Last, so that a pod's log ends with where the bundle
			// is on the node.
			fmt.Fprintf(stdout, "on the node: %s\n", hostPath)
		}
	}
	switch exit {
	case exitUploadFailed:
		return &uploadError{url: ur.URL, reason: ur.Error, path: res.Bundle.Path, partial: res.Partial}
	case exitPartial:
		return &partialError{}
	}
	return nil
}

// bundleHostPath is the bundle's path as the host sees it: in
// --host-output-dir when given, else under --root when the bundle was
// written there.
func bundleHostPath(o *collectOptions, p string) (string, bool) {
	if o.hostOutputDir != "" {
		return filepath.Join(o.hostOutputDir, filepath.Base(p)), true
	}
	return hostView(o.root, p)
}

// hostView is p as the host sees it, when p lies under the host's root
// mounted at root (nodesnap in a container).
func hostView(root, p string) (string, bool) {
	if root == "" || root == "/" {
		return "", false
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return "/" + rel, true
}

func plainProgress(w io.Writer) func(supervisor.Progress) {
	return func(p supervisor.Progress) {
		switch p.Phase {
		case "done":
			line := fmt.Sprintf("%-12s %-11s %6.1fs", p.Collector, p.Status, p.Elapsed.Seconds())
			if p.Error != "" && p.Status != bundle.StatusOK {
				// Whole: this is what a cron mail or a ticket shows.
				line += "  " + termsafe.Field(strings.Join(strings.Fields(p.Error), " "))
			}
			fmt.Fprintln(w, line)
		case "writing":
			fmt.Fprintln(w, "writing the bundle…")
		}
	}
}
