package watch

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/termsafe"
)

// Collection is the outcome of one collection.
type Collection struct {
	// Path is the bundle written ("" when none was).
	Path string
	// Status is complete, partial, interrupted, locked (another run was
	// collecting into the output directory), upload-failed or failed.
	Status string
	Err    error
}

// Collector runs one collection for a trigger. It returns when the
// collection has ended; when ctx is cancelled (SIGTERM) it stops the
// collection, which still writes its interrupted bundle.
type Collector func(ctx context.Context, cfg Config, t bundle.Trigger) Collection

// Watcher watches the signals and runs collections.
type Watcher struct {
	collect Collector
	log     io.Writer

	mu       sync.Mutex
	cfg      Config
	triggers map[string]*trigger
	rate     rateLimit
	running  string // the trigger whose collection is running
	metrics  *metricSet
	beat     time.Time
	// hungPoints are the mounts found hung, which the directory scan
	// must not enter.
	hungPoints []string

	obs  chan Observation
	wg   sync.WaitGroup
	sigs *signals
	self int
}

// New returns a watcher of cfg that collects with collect and logs to log.
func New(cfg Config, collect Collector, log io.Writer) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Watcher{collect: collect, log: log, cfg: cfg, triggers: map[string]*trigger{},
		metrics: newMetricSet(), obs: make(chan Observation, 64), self: os.Getpid(), beat: time.Now()}
	for _, n := range TriggerNames {
		w.triggers[n] = &trigger{name: n, cfg: cfg.Triggers[n]}
	}
	w.metrics.set("nodesnap_watch_config_last_reload_successful", nil, 1)
	w.metrics.set("nodesnap_watch_config_last_reload_success_timestamp_seconds", nil, float64(time.Now().Unix()))
	return w, nil
}

// Config is the configuration in force.
func (w *Watcher) Config() Config {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cfg
}

// Reload replaces the configuration (SIGHUP). Triggers keep their state
// (an episode in progress, the cooldown); the listen address, the root
// and the pools' sizes need a restart, and a change to them is reported.
func (w *Watcher) Reload(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		w.ReloadFailed()
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cfg.Listen != w.cfg.Listen || cfg.Root != w.cfg.Root {
		w.logf("nodesnap watch: listen and root changed in the configuration: they take effect at the next start\n")
		cfg.Listen, cfg.Root = w.cfg.Listen, w.cfg.Root
	}
	w.cfg = cfg
	for _, n := range TriggerNames {
		w.triggers[n].cfg = cfg.Triggers[n]
	}
	w.metrics.set("nodesnap_watch_config_last_reload_successful", nil, 1)
	w.metrics.set("nodesnap_watch_config_last_reload_success_timestamp_seconds", nil, float64(time.Now().Unix()))
	return nil
}

// ReloadFailed records a configuration that could not be read at SIGHUP:
// the previous one stays in force.
func (w *Watcher) ReloadFailed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.metrics.set("nodesnap_watch_config_last_reload_successful", nil, 0)
}

// Run watches until ctx is cancelled, then stops the collection running
// (which writes its interrupted bundle) and returns once it has ended.
func (w *Watcher) Run(ctx context.Context) error {
	isolate.TuneGC()
	cfg := w.Config()
	w.sigs = newSignals(w, cfg)
	defer w.sigs.close()
	sctx, stopSignals := context.WithCancel(ctx)
	defer stopSignals()
	w.sigs.start(sctx)
	// Its own worker, not the scan pool's: the output directory is the
	// watcher's own, not a path under --root.
	seeder := isolate.NewPool(1, seedTimeout)
	var seeded rateLimit
	err := seeded.seed(ctx, seeder, cfg.OutputDir, time.Now())
	seeder.Close()
	w.mu.Lock()
	w.rate.starts = append(w.rate.starts, seeded.starts...)
	sort.Slice(w.rate.starts, func(i, j int) bool { return w.rate.starts[i].Before(w.rate.starts[j]) })
	w.mu.Unlock()
	if err != nil {
		// Counted from now only: said, not fatal.
		w.logf("nodesnap watch: %v; the hour's count starts at 0\n", err)
	}
	w.logf("nodesnap watch: watching (triggers: %s; at most %d collections an hour, into %s)\n",
		strings.Join(w.enabled(), ", "), cfg.MaxPerHour, cfg.OutputDir)
	beat := time.NewTicker(time.Second)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			stopSignals()
			w.wg.Wait() // the collection running, interrupted
			w.logf("nodesnap watch: stopped\n")
			return nil
		case o := <-w.obs:
			w.handle(ctx, o)
		case now := <-beat.C:
			w.mu.Lock()
			w.beat = now
			w.mu.Unlock()
		}
	}
}

func (w *Watcher) enabled() []string {
	var out []string
	for _, n := range TriggerNames {
		if w.cfg.Triggers[n].On() {
			out = append(out, n)
		}
	}
	return out
}

// observe hands an observation to the loop; a signal never blocks on it
// for long.
func (w *Watcher) observe(ctx context.Context, o Observation) {
	if o.At.IsZero() {
		o.At = time.Now()
	}
	select {
	case w.obs <- o:
	case <-ctx.Done():
	}
}

func (w *Watcher) handle(ctx context.Context, o Observation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.triggers[o.Trigger]
	if t == nil || !t.cfg.On() {
		return
	}
	d := t.observe(o)
	w.metrics.set("nodesnap_watch_trigger_active", []string{"trigger", o.Trigger}, b2f(o.Active))
	switch d {
	case coolingDown:
		w.suppress(t, "cooldown")
		return
	case fire:
	default:
		return
	}
	if w.running != "" {
		w.suppress(t, "busy")
		return
	}
	if !w.rate.allow(o.At, w.cfg.MaxPerHour) {
		w.suppress(t, "max_per_hour")
		return
	}
	t.markFired(o.At)
	w.rate.add(o.At)
	w.running = o.Trigger
	w.metrics.add("nodesnap_watch_triggers_fired_total", []string{"trigger", o.Trigger}, 1)
	w.metrics.set("nodesnap_watch_collection_running", nil, 1)
	tr := bundle.Trigger{Name: o.Trigger, FiredAt: o.At.UTC(), Summary: o.Summary, Evidence: o.Evidence}
	cfg := w.cfg
	w.logf("nodesnap watch: %s fired: %s; collecting\n", o.Trigger, o.Summary)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		start := time.Now()
		c := w.collect(ctx, cfg, tr)
		w.finished(tr.Name, c, start)
	}()
}

func (w *Watcher) suppress(t *trigger, reason string) {
	if t.markSuppressed(reason) {
		w.metrics.add("nodesnap_watch_triggers_suppressed_total", []string{"trigger", t.name, "reason", reason}, 1)
		w.logf("nodesnap watch: %s holds (%s) but no collection starts: %s\n", t.name, t.last.Summary, suppressWhy(reason))
	}
}

func suppressWhy(reason string) string {
	switch reason {
	case "cooldown":
		return "its cooldown since the last collection it started is not over"
	case "busy":
		return "a collection is running; it is tried again when that one ends"
	default:
		return "--max-per-hour collections were already started in the last hour"
	}
}

func (w *Watcher) finished(name string, c Collection, start time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running = ""
	now := time.Now()
	w.metrics.set("nodesnap_watch_collection_running", nil, 0)
	w.metrics.add("nodesnap_watch_collections_total", []string{"trigger", name, "status", c.Status}, 1)
	w.metrics.set("nodesnap_watch_last_collection_timestamp_seconds", nil, float64(now.Unix()))
	w.metrics.set("nodesnap_watch_last_collection_duration_seconds", nil, now.Sub(start).Seconds())
	ok := c.Status == bundle.BundleComplete || c.Status == bundle.BundlePartial
	w.metrics.set("nodesnap_watch_last_collection_success", nil, b2f(ok))
	switch {
	case c.Err != nil:
		w.logf("nodesnap watch: the collection for %s ended %s: %v\n", name, c.Status, c.Err)
	default:
		w.logf("nodesnap watch: the collection for %s ended %s: %s\n", name, c.Status, c.Path)
	}
}

// Healthy reports whether the watch loop is alive: it has ticked within
// the last ten seconds.
func (w *Watcher) Healthy() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if age := time.Since(w.beat); age > 10*time.Second {
		return false, fmt.Sprintf("the watch loop has not ticked for %s", age.Round(time.Second))
	}
	return true, "ok"
}

// States lists each enabled trigger and whether it holds, for /healthz.
func (w *Watcher) States() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range TriggerNames {
		t := w.triggers[n]
		if !t.cfg.On() {
			continue
		}
		s := n + ": ok"
		if t.active {
			s = n + ": " + t.last.Summary
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// logf writes one line of the watcher's log (stderr: the journal, the
// pod's log); a log that cannot be written is nothing to stop for.
// logf writes one log message; what it quotes (a kernel or journal line,
// a mount point) is the node's, so it is shown escaped, never obeyed by a
// terminal or a log viewer.
func (w *Watcher) logf(format string, args ...any) {
	_, _ = io.WriteString(w.log, termsafe.Text(fmt.Sprintf(format, args...)))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
