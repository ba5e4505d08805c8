// Package watch is `nodesnap watch`: a long-running watcher of cheap
// signals of a sick node (the kubelet's healthz, mounts that hang, tasks
// in D state, the kernel's log, the kubelet's and the runtime's journal,
// the kubelet's directories) that runs a collection when one of them
// fires, so that the bundle is taken during the incident, not hours later.
//
// The watcher never touches a host path or another process's /proc itself:
// every such read happens in an isolated worker process with a deadline
// (package isolate), as in a collection. A mount found hung is remembered
// and not probed again every round, and workers left stuck in the kernel
// are counted against a budget, so that the watcher's own cost stays flat
// on the very node it watches.
package watch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Trigger names.
const (
	TriggerKubeletUnhealthy = "kubelet-unhealthy"
	TriggerKubeletDown      = "kubelet-down"
	TriggerMountHung        = "mount-hung"
	TriggerDState           = "dstate"
	TriggerKernelLog        = "kernel-log"
	TriggerJournal          = "journal-signature"
	TriggerDeletingDirs     = "deleting-dirs"
	TriggerSubdirLimit      = "subdir-limit"
)

// TriggerNames lists every trigger, in the order they are documented.
var TriggerNames = []string{
	TriggerKubeletUnhealthy, TriggerKubeletDown, TriggerMountHung, TriggerDState,
	TriggerKernelLog, TriggerJournal, TriggerDeletingDirs, TriggerSubdirLimit,
}

// TriggerConfig is one trigger's threshold and cooldown.
type TriggerConfig struct {
	// Enabled turns the trigger (and the signal only it needs) off.
	Enabled *bool `yaml:"enabled"`
	// For is how long the condition must hold before the trigger fires.
	For time.Duration `yaml:"for"`
	// Threshold is the trigger's level: tasks in D state, log lines in
	// Window, .deleting~ directories.
	Threshold float64 `yaml:"threshold"`
	// Window is how far back log lines and directory counts are counted.
	Window time.Duration `yaml:"window"`
	// Cooldown is how long after firing the trigger stays quiet.
	Cooldown time.Duration `yaml:"cooldown"`
}

// On reports whether the trigger is enabled.
func (t TriggerConfig) On() bool { return t.Enabled == nil || *t.Enabled }

// Config is the watcher's configuration: the YAML file of --config,
// overridden by the flags given on the command line.
type Config struct {
	// Listen is the address of /metrics and /healthz; "" turns them off.
	Listen     string `yaml:"listen"`
	MaxPerHour int    `yaml:"max_per_hour"`
	// Root is the host's root filesystem (/host in a container).
	Root      string `yaml:"root"`
	OutputDir string `yaml:"output_dir"`
	Keep      int    `yaml:"keep"`
	// Upload is a URL, or s3://bucket/prefix/, every bundle is sent to (it reaches the collection
	// in its environment, never on a command line).
	Upload string `yaml:"upload"`
	// CollectArgs are further arguments of `nodesnap collect`.
	CollectArgs []string `yaml:"collect_args"`
	// CollectDeadline bounds one collection, its upload included: past
	// it the collection is killed.
	CollectDeadline time.Duration `yaml:"collect_deadline"`

	Kubelet KubeletConfig  `yaml:"kubelet"`
	Mounts  MountsConfig   `yaml:"mounts"`
	Tasks   IntervalConfig `yaml:"tasks"`
	Kernel  KernelConfig   `yaml:"kernel"`
	Journal JournalConfig  `yaml:"journal"`
	Dirs    DirsConfig     `yaml:"dirs"`
	// Triggers are read from the file's "triggers" map by Parse.
	Triggers map[string]TriggerConfig `yaml:"-"`
}

// IntervalConfig is a signal sampled every Interval.
type IntervalConfig struct {
	Interval time.Duration `yaml:"interval"`
}

// KubeletConfig is the kubelet signal.
type KubeletConfig struct {
	HealthzURL string        `yaml:"healthz_url"`
	Interval   time.Duration `yaml:"interval"`
	Timeout    time.Duration `yaml:"timeout"`
}

// MountsConfig is the mount probe signal.
type MountsConfig struct {
	Interval     time.Duration `yaml:"interval"`
	ProbeTimeout time.Duration `yaml:"probe_timeout"`
	// Budget is how many probe workers may sit stuck in the kernel at
	// once; past it no mount is probed until one of them is gone.
	Budget int `yaml:"budget"`
	// ReprobeHung is how often a mount found hung is probed again.
	ReprobeHung time.Duration `yaml:"reprobe_hung"`
	// Under limits the probes to mounts at or under these paths (as the
	// host sees them); empty means every mount.
	Under []string `yaml:"under"`
}

// KernelConfig is the kernel log signal.
type KernelConfig struct {
	Kmsg     string        `yaml:"kmsg"`
	Interval time.Duration `yaml:"interval"`
}

// JournalConfig is the journal signal.
type JournalConfig struct {
	// Dir is a journal directory (journalctl -D); "" is the system's.
	Dir      string        `yaml:"dir"`
	Interval time.Duration `yaml:"interval"`
	// Units are the systemd units and syslog identifiers whose lines are
	// read.
	Units []string `yaml:"units"`
}

// DirsConfig is the kubelet directory signal.
type DirsConfig struct {
	// KubeletRoot is the kubelet's root directory as the host sees it.
	KubeletRoot string        `yaml:"kubelet_root"`
	Interval    time.Duration `yaml:"interval"`
	// MaxEntries bounds one scan.
	MaxEntries int `yaml:"max_entries"`
}

// Default is the configuration without a file or flags.
func Default() Config {
	return Config{
		Listen: "127.0.0.1:9848", MaxPerHour: 4, Root: "/", OutputDir: "/var/lib/nodesnap", Keep: 8,
		CollectDeadline: 15 * time.Minute,
		Kubelet:         KubeletConfig{HealthzURL: "http://127.0.0.1:10248/healthz?verbose", Interval: 10 * time.Second, Timeout: 5 * time.Second},
		Mounts:          MountsConfig{Interval: 30 * time.Second, ProbeTimeout: 3 * time.Second, Budget: 4, ReprobeHung: 10 * time.Minute},
		Tasks:           IntervalConfig{Interval: 15 * time.Second},
		Kernel:          KernelConfig{Kmsg: "/dev/kmsg", Interval: 5 * time.Second},
		Journal:         JournalConfig{Interval: 15 * time.Second, Units: []string{"kubelet", "containerd", "crio", "docker"}},
		Dirs:            DirsConfig{KubeletRoot: "/var/lib/kubelet", Interval: 5 * time.Minute, MaxEntries: 50000},
		Triggers: map[string]TriggerConfig{
			TriggerKubeletUnhealthy: {For: time.Minute, Cooldown: 30 * time.Minute},
			TriggerKubeletDown:      {For: time.Minute, Cooldown: 30 * time.Minute},
			TriggerMountHung:        {Cooldown: 30 * time.Minute},
			TriggerDState:           {Threshold: 10, For: 2 * time.Minute, Cooldown: 30 * time.Minute},
			TriggerKernelLog:        {Threshold: 1, Window: 10 * time.Minute, Cooldown: 30 * time.Minute},
			TriggerJournal:          {Threshold: 5, Window: 10 * time.Minute, Cooldown: 30 * time.Minute},
			TriggerDeletingDirs:     {Threshold: 1, Window: time.Hour, Cooldown: 6 * time.Hour},
			TriggerSubdirLimit:      {Cooldown: 6 * time.Hour},
		},
	}
}

// Parse reads a YAML configuration over the defaults. Unknown keys and
// unknown trigger names are errors (with their line), so that a typo is
// not silently a default.
func Parse(data []byte) (Config, error) {
	c := Default()
	// The defaults of a trigger the file names only in part survive:
	// decode triggers separately and merge field by field.
	var raw struct {
		Config   `yaml:",inline"`
		Triggers map[string]yaml.Node `yaml:"triggers"`
	}
	raw.Config = c
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("reading the watch configuration: %w", err)
	}
	out := raw.Config
	out.Triggers = c.Triggers
	names := make([]string, 0, len(raw.Triggers))
	for n := range raw.Triggers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		node := raw.Triggers[name]
		t, ok := out.Triggers[name]
		if !ok {
			return Config{}, fmt.Errorf("reading the watch configuration: line %d: unknown trigger %q (known: %s)", node.Line, name, strings.Join(TriggerNames, ", "))
		}
		if err := decodeStrict(&node, &t); err != nil {
			return Config{}, fmt.Errorf("reading the watch configuration: trigger %s: %w", name, err)
		}
		out.Triggers[name] = t
	}
	return out, out.Validate()
}

func decodeStrict(node *yaml.Node, v any) error {
	b, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("line %d: %w", node.Line, err)
	}
	return nil
}

// Load reads the file at path over the defaults.
func Load(path string) (Config, error) {
	// The configuration file is the operator's, on the root filesystem
	// (/etc/nodesnap): read once at start and at SIGHUP, as any daemon
	// reads its own configuration.
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading the watch configuration: %w", err)
	}
	return Parse(data)
}

// Validate reports the first setting that cannot work, worded for the
// operator.
func (c *Config) Validate() error {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return fmt.Errorf("listen: %q is not host:port (127.0.0.1:9848, say): %w", c.Listen, err)
		}
	}
	if c.MaxPerHour < 1 {
		return fmt.Errorf("max_per_hour must be 1 or more, not %d", c.MaxPerHour)
	}
	if c.Keep < 0 {
		return fmt.Errorf("keep must be 0 (keep all) or more, not %d", c.Keep)
	}
	if c.OutputDir == "" || c.Root == "" {
		return errors.New("output_dir and root must not be empty")
	}
	for name, d := range map[string]time.Duration{
		"kubelet.interval": c.Kubelet.Interval, "kubelet.timeout": c.Kubelet.Timeout,
		"mounts.interval": c.Mounts.Interval, "mounts.probe_timeout": c.Mounts.ProbeTimeout,
		"mounts.reprobe_hung": c.Mounts.ReprobeHung, "tasks.interval": c.Tasks.Interval,
		"kernel.interval": c.Kernel.Interval, "journal.interval": c.Journal.Interval,
		"dirs.interval": c.Dirs.Interval, "collect_deadline": c.CollectDeadline,
	} {
		if d <= 0 {
			return fmt.Errorf("%s must be a positive duration (10s, 5m), not %s", name, d)
		}
	}
	if c.Mounts.Budget < 1 {
		return fmt.Errorf("mounts.budget must be 1 or more, not %d", c.Mounts.Budget)
	}
	if c.Dirs.MaxEntries < 1 {
		return fmt.Errorf("dirs.max_entries must be 1 or more, not %d", c.Dirs.MaxEntries)
	}
	for _, name := range TriggerNames {
		t := c.Triggers[name]
		if t.For < 0 || t.Window < 0 || t.Cooldown < 0 || t.Threshold < 0 {
			return fmt.Errorf("trigger %s: for, window, cooldown and threshold must not be negative", name)
		}
	}
	for _, name := range []string{TriggerKernelLog, TriggerJournal, TriggerDeletingDirs} {
		if t := c.Triggers[name]; t.On() && t.Window <= 0 {
			return fmt.Errorf("trigger %s: window must be a positive duration", name)
		}
	}
	return nil
}

// Only enables the named triggers and disables every other; an unknown
// name is an error.
func (c *Config) Only(names []string) error {
	want := map[string]bool{}
	for _, n := range names {
		if _, ok := c.Triggers[n]; !ok {
			return fmt.Errorf("unknown trigger %q (known: %s)", n, strings.Join(TriggerNames, ", "))
		}
		want[n] = true
	}
	for _, n := range TriggerNames {
		t := c.Triggers[n]
		on := want[n]
		t.Enabled = &on
		c.Triggers[n] = t
	}
	return nil
}
