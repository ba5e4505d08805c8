package watch

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	c, err := Parse([]byte(`
listen: 127.0.0.1:9999
max_per_hour: 2
collect_args: ["--timeout", "1m"]
mounts:
  probe_timeout: 1s
  under: [/var/lib/kubelet]
triggers:
  dstate: {threshold: 3}
  kernel-log: {enabled: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.Listen != "127.0.0.1:9999" || c.MaxPerHour != 2 || c.Mounts.ProbeTimeout != time.Second || c.Mounts.Interval != d.Mounts.Interval {
		t.Errorf("config = %+v", c)
	}
	if got := c.Triggers[TriggerDState]; got.Threshold != 3 || got.For != d.Triggers[TriggerDState].For || got.Cooldown != d.Triggers[TriggerDState].Cooldown {
		t.Errorf("dstate = %+v: a trigger named in part keeps its other defaults", got)
	}
	if c.Triggers[TriggerKernelLog].On() || !c.Triggers[TriggerMountHung].On() {
		t.Errorf("enabled: kernel-log %v, mount-hung %v", c.Triggers[TriggerKernelLog].On(), c.Triggers[TriggerMountHung].On())
	}
	if strings.Join(c.CollectArgs, " ") != "--timeout 1m" || strings.Join(c.Mounts.Under, ",") != "/var/lib/kubelet" {
		t.Errorf("collect_args %q, under %q", c.CollectArgs, c.Mounts.Under)
	}
	if e, err := Parse(nil); err != nil || e.MaxPerHour != d.MaxPerHour {
		t.Errorf("an empty file: %v, %+v", err, e)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"listne: x", "line 1: field listne not found"},
		{"triggers:\n  kubelet-slow: {for: 1s}", `line 2: unknown trigger "kubelet-slow"`},
		{"triggers:\n  dstate: {treshold: 1}", "trigger dstate: line 2"},
		{"max_per_hour: 0", "max_per_hour must be 1 or more"},
		{"listen: 9848", "is not host:port"},
		{"mounts: {interval: 0s}", "mounts.interval must be a positive duration"},
		{"mounts: {budget: 0}", "mounts.budget must be 1 or more"},
		{"triggers: {dstate: {cooldown: -1s}}", "must not be negative"},
		{"triggers: {kernel-log: {window: 0s}}", "kernel-log: window must be a positive duration"},
		{"kubelet: {interval: soon}", "soon"},
		{"[1, 2", "reading the watch configuration"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.yaml, err, tc.want)
		}
	}
}

func TestOnly(t *testing.T) {
	c := Default()
	if err := c.Only([]string{TriggerMountHung}); err != nil {
		t.Fatal(err)
	}
	for _, n := range TriggerNames {
		if c.Triggers[n].On() != (n == TriggerMountHung) {
			t.Errorf("%s enabled = %v", n, c.Triggers[n].On())
		}
	}
	if err := c.Only([]string{"nope"}); err == nil || !strings.Contains(err.Error(), `unknown trigger "nope"`) {
		t.Errorf("Only(nope) = %v", err)
	}
}

func TestTriggerFromEnv(t *testing.T) {
	t.Setenv(TriggerEnv, "")
	if tr, err := TriggerFromEnv(); tr != nil || err != nil {
		t.Errorf("unset: %+v, %v", tr, err)
	}
	t.Setenv(TriggerEnv, `{"name":"mount-hung","fired_at":"2026-11-23T10:00:00Z","summary":"s","evidence":["/mnt/x"]}`)
	if tr, err := TriggerFromEnv(); err != nil || tr.Name != TriggerMountHung || len(tr.Evidence) != 1 {
		t.Errorf("a trigger: %+v, %v", tr, err)
	}
	for _, bad := range []string{`{`, `{"summary":"no name"}`} {
		t.Setenv(TriggerEnv, bad)
		if _, err := TriggerFromEnv(); err == nil || !strings.Contains(err.Error(), TriggerEnv) {
			t.Errorf("%s: %v, want an error naming $%s", bad, err, TriggerEnv)
		}
	}
}
