package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/features/watch"
)

// Flags given on the command line win over the configuration file, which
// wins over the defaults; arguments after -- reach collect.
func TestWatchConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "watch.yaml")
	if err := os.WriteFile(file, []byte("max_per_hour: 2\nkeep: 5\nmounts: {probe_timeout: 7s}\ncollect_args: [--since, 2h]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, o := newWatchCommandOptions()
	if err := cmd.ParseFlags([]string{"--config", file, "--keep", "1", "--triggers", "mount-hung,dstate"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := watchConfig(o, cmd.Flags(), []string{"--timeout", "3m"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxPerHour != 2 || cfg.Keep != 1 || cfg.Mounts.ProbeTimeout != 7*time.Second || cfg.Listen != watch.Default().Listen {
		t.Errorf("config: max_per_hour %d (file 2), keep %d (flag 1), probe_timeout %s (file 7s), listen %q (default)", cfg.MaxPerHour, cfg.Keep, cfg.Mounts.ProbeTimeout, cfg.Listen)
	}
	if got := strings.Join(cfg.CollectArgs, " "); got != "--since 2h --timeout 3m" {
		t.Errorf("collect args %q, want the file's then the command line's", got)
	}
	for _, n := range watch.TriggerNames {
		if on := cfg.Triggers[n].On(); on != (n == watch.TriggerMountHung || n == watch.TriggerDState) {
			t.Errorf("trigger %s enabled = %v with --triggers mount-hung,dstate", n, on)
		}
	}
}

// Mistakes are usage errors (exit 2) found at start, not at the first
// incident: a trigger, a setting, collect's own flags after --, the file.
func TestWatchUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "--allow-non-root", "--triggers", "kubelet-slow"}, `unknown trigger "kubelet-slow"`},
		{[]string{"watch", "--allow-non-root", "--max-per-hour", "0"}, "max_per_hour must be 1 or more"},
		{[]string{"watch", "--allow-non-root", "--", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"watch", "--allow-non-root", "--", "--output-dir", "/x"}, "--output-dir is set by watch itself"},
		{[]string{"watch", "--allow-non-root", "--", "stray"}, "collect takes no arguments"},
		{[]string{"watch", "--allow-non-root", "--config", "/nonexistent/watch.yaml"}, "reading the watch configuration"},
	} {
		var stderr bytes.Buffer
		root := newRootCommand()
		root.SetArgs(tc.args)
		root.SetErr(&stderr)
		root.SetOut(&stderr)
		err := root.ExecuteContext(context.Background())
		if code := exitCode(&stderr, err); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("nodesnap %s: exit %d, %q; want exit 2 and %q", strings.Join(tc.args, " "), code, stderr.String(), tc.want)
		}
	}
}
