package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/features/watch"
)

type watchOptions struct {
	config       string
	listen       string
	maxPerHour   int
	root         string
	outputDir    string
	keep         int
	upload       string
	triggers     []string
	healthzURL   string
	journalDir   string
	mountsUnder  []string
	probeTimeout time.Duration
	allowNonRoot bool
}

func newWatchCommand() *cobra.Command {
	cmd, _ := newWatchCommandOptions()
	return cmd
}

// newWatchCommandOptions is the command and the options its flags fill.
func newWatchCommandOptions() (*cobra.Command, *watchOptions) {
	o := &watchOptions{}
	d := watch.Default()
	cmd := &cobra.Command{
		Use:   "watch [flags] [-- collect flags]",
		Short: "Watch this node and collect a bundle when an incident starts",
		Long: `Watch runs until stopped (as a systemd service, or as the DaemonSet of
deploy/kubernetes), watches cheap signals of a sick node, and runs a collection, the same
as 'nodesnap collect', when one of them fires. The manifest of that bundle names the
trigger and its evidence ('nodesnap inspect' shows it).

Triggers (each with a threshold and a cooldown, set in the --config file):
  kubelet-unhealthy  the kubelet's healthz fails (syncloop, PLEG) for longer than 'for'
  kubelet-down       the kubelet does not answer its healthz for longer than 'for'
  mount-hung         a mount's statfs does not answer within the probe deadline
  dstate             'threshold' tasks or more in D state for longer than 'for'
  kernel-log         kernel lines of hung tasks, 'nfs: server ... not responding' or
                     'libceph ... session lost' (read from /dev/kmsg as they come)
  journal-signature  a kubelet or runtime line of analyze's catalogue repeating
                     'threshold' times in 'window' (TearDown EBUSY loops, 'an operation
                     with the given Volume ID ... already exists'); read with
                     journalctl, or from the journal files where there is none
  deleting-dirs      .deleting~ directories under the kubelet's pods growing
  subdir-limit       a directory under the kubelet's root past ext4's subdirectory limit

Every read of the node happens in an isolated worker process with a deadline, as in a
collection: a hung mount costs one probe, is remembered and not probed again every round,
and at most mounts.budget workers may sit stuck in the kernel, so the watcher survives the
very mount it is watching. One collection runs at a time, at most --max-per-hour an hour;
an episode of a trigger fires once, and not again within its cooldown, so a flapping
signal does not cause a storm of bundles.

/metrics (Prometheus text format) and /healthz are served on --listen (loopback by
default; "" turns them off). SIGHUP re-reads --config (flags given on the command line
still win); SIGTERM or SIGINT stops the watcher, and a collection running then ends with
its bundle of what it gathered, marked interrupted. docs/watch.md has the configuration
file's every key.

Arguments after -- are passed to each 'nodesnap collect' (e.g. -- --timeout 3m --since 2h).

` + exitHelp("0  stopped by SIGTERM or SIGINT (a collection running then was ended and kept)",
			"1  fatal: the watcher could not start (its endpoint, its configuration file, its workers)",
			exitLineUsage),
		Example: `  # on a node, as root: defaults (bundles in /var/lib/nodesnap, the newest 8 kept)
  sudo nodesnap watch

  # with a configuration file; edit it, then: systemctl reload nodesnap-watch
  sudo nodesnap watch --config /etc/nodesnap/watch.yaml

  # in the DaemonSet (deploy/kubernetes/daemonset.yaml): the host's root at /host
  nodesnap watch --root /host --output-dir /output --keep 3 --listen 127.0.0.1:9848

  # only hung mounts and the kernel log, each collection with a 3-minute deadline
  sudo nodesnap watch --triggers mount-hung,kernel-log -- --timeout 3m

  # what it sees
  curl -s 127.0.0.1:9848/metrics | grep ^nodesnap_watch_`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWatch(cmd.Context(), o, cmd.Flags(), args, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "YAML configuration file (docs/watch.md); re-read on SIGHUP")
	f.StringVar(&o.listen, "listen", d.Listen, `address of /metrics and /healthz ("" turns them off)`)
	f.IntVar(&o.maxPerHour, "max-per-hour", d.MaxPerHour, "at most this many collections in any hour")
	f.StringVar(&o.root, "root", d.Root, "the host's root filesystem (/host when running in a container with the host mounted)")
	f.StringVar(&o.outputDir, "output-dir", d.OutputDir, "directory the bundles are written to")
	f.IntVar(&o.keep, "keep", d.Keep, "keep only the newest N bundles of this host in the output directory (0: keep all)")
	f.StringVar(&o.upload, "upload", "", "upload every bundle to this http(s) URL (default $"+UploadURLEnv+"; see 'nodesnap upload --help')")
	f.StringSliceVar(&o.triggers, "triggers", nil, "enable only these triggers (comma-separated; default: those enabled in --config, else all)")
	f.StringVar(&o.healthzURL, "kubelet-healthz-url", d.Kubelet.HealthzURL, "the kubelet's healthz (its healthzBindAddress)")
	f.StringVar(&o.journalDir, "journal-dir", "", "a journal directory to read instead of the system journal")
	f.StringSliceVar(&o.mountsUnder, "mounts-under", nil, "probe only the mounts at or under these paths (default: every mount)")
	f.DurationVar(&o.probeTimeout, "probe-timeout", d.Mounts.ProbeTimeout, "deadline of one mount's probe: a mount that does not answer within it is hung")
	f.BoolVar(&o.allowNonRoot, "allow-non-root", os.Getenv(AllowNonRootEnv) == "1", "watch even when not running as root (collections are then partial); or $"+AllowNonRootEnv+"=1")
	return cmd, o
}

// watchConfig is the configuration file (or the defaults) with the flags
// given on the command line over it.
func watchConfig(o *watchOptions, flags *pflag.FlagSet, collectArgs []string) (watch.Config, error) {
	cfg := watch.Default()
	if o.config != "" {
		var err error
		if cfg, err = watch.Load(o.config); err != nil {
			return watch.Config{}, err
		}
	}
	set := func(name string, apply func()) {
		if flags.Changed(name) {
			apply()
		}
	}
	set("listen", func() { cfg.Listen = o.listen })
	set("max-per-hour", func() { cfg.MaxPerHour = o.maxPerHour })
	set("root", func() { cfg.Root = o.root })
	set("output-dir", func() { cfg.OutputDir = o.outputDir })
	set("keep", func() { cfg.Keep = o.keep })
	set("kubelet-healthz-url", func() { cfg.Kubelet.HealthzURL = o.healthzURL })
	set("journal-dir", func() { cfg.Journal.Dir = o.journalDir })
	set("mounts-under", func() { cfg.Mounts.Under = o.mountsUnder })
	set("probe-timeout", func() { cfg.Mounts.ProbeTimeout = o.probeTimeout })
	if o.upload != "" {
		cfg.Upload = o.upload
	} else if u := os.Getenv(UploadURLEnv); u != "" && cfg.Upload == "" {
		cfg.Upload = u
	}
	if flags.Changed("triggers") {
		if err := cfg.Only(o.triggers); err != nil {
			return watch.Config{}, err
		}
	}
	if o.allowNonRoot {
		collectArgs = append([]string{"--allow-non-root"}, collectArgs...)
	}
	cfg.CollectArgs = append(append([]string(nil), cfg.CollectArgs...), collectArgs...)
	return cfg, cfg.Validate()
}

func runWatch(ctx context.Context, o *watchOptions, flags *pflag.FlagSet, collectArgs []string, stderr io.Writer) error {
	if uid := os.Geteuid(); uid != 0 && !o.allowNonRoot {
		return &supervisor.UsageError{Msg: fmt.Sprintf("nodesnap watch needs root (running as uid %d): its collections and its signals read other users' processes, "+
			"mounts and the kernel log. Run it as root, or add --allow-non-root", uid)}
	}
	cfg, err := watchConfig(o, flags, collectArgs)
	if err != nil {
		return &supervisor.UsageError{Msg: err.Error()}
	}
	// Collection flags are checked now, not at the first incident.
	if err := checkCollectArgs(cfg.CollectArgs); err != nil {
		return &supervisor.UsageError{Msg: "arguments for collect after --: " + err.Error()}
	}
	w, err := watch.New(cfg, watch.ChildCollector(stderr), stderr)
	if err != nil {
		return &supervisor.UsageError{Msg: err.Error()}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cfg.Listen != "" {
		addr, _, err := w.Serve(ctx, cfg.Listen, toolVersion())
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "nodesnap watch: /metrics and /healthz on http://%s\n", addr)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				ncfg, err := watchConfig(o, flags, collectArgs)
				if err == nil {
					err = checkCollectArgs(ncfg.CollectArgs)
				}
				if err == nil {
					err = w.Reload(ncfg)
				}
				if err != nil {
					w.ReloadFailed()
					fmt.Fprintf(stderr, "nodesnap watch: SIGHUP: the configuration was not reloaded, the previous one stays in force: %v\n", err)
					continue
				}
				fmt.Fprintln(stderr, "nodesnap watch: SIGHUP: configuration reloaded")
			}
		}
	}()
	return w.Run(ctx)
}

// checkCollectArgs parses the collect arguments with collect's own flags,
// so that a typo is reported at start.
func checkCollectArgs(args []string) error {
	c := newCollectCommand()
	c.SetArgs(args)
	if err := c.ParseFlags(args); err != nil {
		return err
	}
	if c.Flags().NArg() > 0 {
		return fmt.Errorf("collect takes no arguments, got %q", c.Flags().Args())
	}
	for _, reserved := range []string{"output", "output-dir", "output-file", "root", "keep", "quiet"} {
		if c.Flags().Changed(reserved) {
			return fmt.Errorf("--%s is set by watch itself; use watch's own flag or configuration", reserved)
		}
	}
	return nil
}

// watchTriggerFromEnv is the trigger of the watcher that started this
// collection (none for a collection by hand).
func watchTriggerFromEnv() (*bundle.Trigger, error) { return watch.TriggerFromEnv() }
