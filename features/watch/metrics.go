package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The /metrics endpoint, in Prometheus's text exposition format written
// by hand: a few dozen series of one process do not need a client
// library (docs/decisions/features.md). Names follow node_exporter's conventions:
// nodesnap_watch_ prefix, _total counters, _seconds and _timestamp_seconds
// units, labels for the trigger and the signal.

var metricHelp = map[string][2]string{
	"nodesnap_watch_build_info":                                   {"gauge", "nodesnap watch's version, as a label; always 1."},
	"nodesnap_watch_config_last_reload_successful":                {"gauge", "Whether the last configuration (re)load succeeded."},
	"nodesnap_watch_config_last_reload_success_timestamp_seconds": {"gauge", "When the configuration was last loaded successfully."},
	"nodesnap_watch_kubelet_answering":                            {"gauge", "Whether the kubelet answered its healthz in the last round."},
	"nodesnap_watch_kubelet_healthy":                              {"gauge", "Whether the kubelet's healthz answered HTTP 200 in the last round."},
	"nodesnap_watch_mounts":                                       {"gauge", "Mounts in the host's mount table."},
	"nodesnap_watch_mounts_probed":                                {"gauge", "Mounts probed with statfs in the last round."},
	"nodesnap_watch_mounts_hung":                                  {"gauge", "Mounts whose statfs did not answer within the probe deadline."},
	"nodesnap_watch_probe_workers_stuck":                          {"gauge", "Probe workers left stuck in the kernel by a hung mount."},
	"nodesnap_watch_probe_budget_exhausted":                       {"gauge", "Whether the last round stopped probing because mounts.budget workers are stuck."},
	"nodesnap_watch_dstate_tasks":                                 {"gauge", "Tasks in uninterruptible sleep (D state), the watcher's own excepted."},
	"nodesnap_watch_log_lines_total":                              {"counter", "Log lines matching a signature of nodesnap analyze's catalogue."},
	"nodesnap_watch_kernel_records_lost_total":                    {"counter", "Kernel log records overwritten before they were read, or past a round's cap."},
	"nodesnap_watch_deleting_dirs":                                {"gauge", ".deleting~ directories under the kubelet's pod volumes."},
	"nodesnap_watch_dirs_over_subdir_limit":                       {"gauge", "Directories under the kubelet's root past ext4's subdirectory link limit."},
	"nodesnap_watch_signal_errors_total":                          {"counter", "Rounds of a signal that failed (a worker that missed its deadline, say)."},
	"nodesnap_watch_signal_last_success_timestamp_seconds":        {"gauge", "When a signal last completed a round."},
	"nodesnap_watch_trigger_active":                               {"gauge", "Whether a trigger's condition holds."},
	"nodesnap_watch_triggers_fired_total":                         {"counter", "Collections a trigger started."},
	"nodesnap_watch_triggers_suppressed_total":                    {"counter", "Episodes of a trigger that started no collection, by reason (cooldown, busy, max_per_hour)."},
	"nodesnap_watch_collections_total":                            {"counter", "Collections that ended, by trigger and status."},
	"nodesnap_watch_collection_running":                           {"gauge", "Whether a collection is running."},
	"nodesnap_watch_last_collection_timestamp_seconds":            {"gauge", "When the last collection ended."},
	"nodesnap_watch_last_collection_duration_seconds":             {"gauge", "How long the last collection took."},
	"nodesnap_watch_last_collection_success":                      {"gauge", "Whether the last collection wrote a bundle (complete or partial)."},
}

// metricSet holds every series; the Watcher's mutex guards it.
type metricSet struct {
	series map[string]map[string]float64 // name → labels → value
}

func newMetricSet() *metricSet { return &metricSet{series: map[string]map[string]float64{}} }

func labelString(kv []string) string {
	if len(kv) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i] + `="` + escapeLabel(kv[i+1]) + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func (m *metricSet) set(name string, labels []string, v float64) {
	m.named(name)[labelString(labels)] = v
}

func (m *metricSet) add(name string, labels []string, v float64) {
	m.named(name)[labelString(labels)] += v
}

// named is the series of a metric, created when first used.
func (m *metricSet) named(name string) map[string]float64 {
	s := m.series[name]
	if s == nil {
		s = map[string]float64{}
		m.series[name] = s
	}
	return s
}

// write renders the text exposition format, sorted.
func (m *metricSet) write(w io.Writer) error {
	names := make([]string, 0, len(m.series))
	for n := range m.series {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if h, ok := metricHelp[n]; ok {
			fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", n, h[1], n, h[0])
		}
		ls := make([]string, 0, len(m.series[n]))
		for l := range m.series[n] {
			ls = append(ls, l)
		}
		sort.Strings(ls)
		for _, l := range ls {
			b.WriteString(n + l + " " + strconv.FormatFloat(m.series[n][l], 'f', -1, 64) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Handler serves /metrics and /healthz.
func (w *Watcher) Handler(version string) http.Handler {
	w.mu.Lock()
	w.metrics.set("nodesnap_watch_build_info", []string{"version", version}, 1)
	w.mu.Unlock()
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.mu.Lock()
		defer w.mu.Unlock()
		_ = w.metrics.write(rw)
	})
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		ok, why := w.Healthy()
		if !ok {
			http.Error(rw, why, http.StatusServiceUnavailable)
			return
		}
		// A client that went away is nothing to report.
		_, _ = io.WriteString(rw, "ok\n"+strings.Join(append(w.States(), ""), "\n"))
	})
	return mux
}

// Serve listens on addr until ctx is cancelled. The listener is opened
// before Serve returns its first error, so that a taken port is reported
// at start.
func (w *Watcher) Serve(ctx context.Context, addr, version string) (net.Addr, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s for /metrics and /healthz: %w", addr, err)
	}
	// Keep-alive connections left idle are closed, a request's header
	// must come within metricsHeaderTimeout, and at most maxMetricsConns
	// are open at once: a scraper is one or two, and whatever opens more
	// (any local user can) loses its waiting connections first
	// (limitListener).
	srv := &http.Server{Handler: markAnswering(w.Handler(version)), ReadHeaderTimeout: metricsHeaderTimeout, WriteTimeout: 10 * time.Second,
		IdleTimeout: metricsIdleTimeout, ConnContext: connContext}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(newLimitListener(ln, maxMetricsConns))
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr(), done, nil
}
