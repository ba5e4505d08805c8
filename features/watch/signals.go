package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/signatures"
)

// signals samples the node. Each signal runs in its own goroutine on its
// own interval, and everything that touches the node goes through a pool
// of isolated workers with a deadline: a signal can be slow to answer, it
// can never block the watch loop.
type signals struct {
	w *Watcher
	// Two pools of one worker each: mount probes, and everything else
	// (the mount table, tasks, the kernel log, the journal, the kubelet's
	// directories), so that the watcher costs two processes. A probe
	// that hangs costs the probe worker; anything else that does costs
	// the other's (its /dev/kmsg is then reopened, see readKmsg), and
	// delays the other signals by its deadline at most.
	probe, scan *isolate.Pool
	http        *http.Client
	started     time.Time

	// Owned by the mounts goroutine.
	hung  map[string]*hungMount
	stuck []int
	// Owned by the kernel and journal goroutines.
	kmsgLast      uint64
	kernel        window
	journalCursor string
	journalSigs   map[string]*window
	// Owned by the dirs goroutine.
	deleting []countAt

	wg sync.WaitGroup
}

// scanTimeout bounds one scan of the tasks or the kubelet's directories,
// and one read of the journal.
const scanTimeout = 20 * time.Second

type hungMount struct {
	since, probed time.Time
	evidence      string
}

type countAt struct {
	at time.Time
	n  int
}

func newSignals(w *Watcher, cfg Config) *signals {
	return &signals{
		w:     w,
		probe: isolate.NewPool(1, cfg.Mounts.ProbeTimeout),
		scan:  isolate.NewPool(1, scanTimeout),
		// The kubelet's healthz is on loopback: no host path, no
		// other process's /proc, and a deadline on every request.
		http:        &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}},
		started:     time.Now(),
		hung:        map[string]*hungMount{},
		journalSigs: map[string]*window{},
	}
}

func (s *signals) close() {
	s.wg.Wait()
	for _, p := range []*isolate.Pool{s.probe, s.scan} {
		p.Close()
	}
}

func (s *signals) start(ctx context.Context) {
	type loop struct {
		name     string
		triggers []string
		interval func(Config) time.Duration
		round    func(context.Context, Config) error
	}
	for _, l := range []loop{
		{"kubelet", []string{TriggerKubeletUnhealthy, TriggerKubeletDown}, func(c Config) time.Duration { return c.Kubelet.Interval }, s.kubelet},
		{"mounts", []string{TriggerMountHung}, func(c Config) time.Duration { return c.Mounts.Interval }, s.mounts},
		{"tasks", []string{TriggerDState}, func(c Config) time.Duration { return c.Tasks.Interval }, s.tasks},
		{"kernel", []string{TriggerKernelLog}, func(c Config) time.Duration { return c.Kernel.Interval }, s.kernelLog},
		{"journal", []string{TriggerJournal}, func(c Config) time.Duration { return c.Journal.Interval }, s.journalLog},
		{"dirs", []string{TriggerDeletingDirs, TriggerSubdirLimit}, func(c Config) time.Duration { return c.Dirs.Interval }, s.dirs},
	} {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			failing := false
			for {
				cfg := s.w.Config()
				on := false
				for _, t := range l.triggers {
					on = on || cfg.Triggers[t].On()
				}
				if on {
					err := l.round(ctx, cfg)
					switch {
					case ctx.Err() != nil:
						return
					case err != nil:
						s.w.countSignal(l.name, err)
						if !failing {
							s.w.logf("nodesnap watch: signal %s: %v\n", l.name, err)
						}
						failing = true
					default:
						if failing {
							s.w.logf("nodesnap watch: signal %s answers again\n", l.name)
						}
						failing = false
						s.w.countSignal(l.name, nil)
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(l.interval(cfg)):
				}
			}
		}()
	}
}

func (w *Watcher) countSignal(name string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.metrics.add("nodesnap_watch_signal_errors_total", []string{"signal", name}, 1)
		return
	}
	w.metrics.set("nodesnap_watch_signal_last_success_timestamp_seconds", []string{"signal", name}, float64(time.Now().Unix()))
}

func (w *Watcher) gauge(name string, v float64, labels ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.metrics.set(name, labels, v)
}

func (w *Watcher) counter(name string, v float64, labels ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.metrics.add(name, labels, v)
}

// kubelet asks the kubelet's healthz.
func (s *signals) kubelet(ctx context.Context, cfg Config) error {
	rctx, cancel := context.WithTimeout(ctx, cfg.Kubelet.Timeout)
	defer cancel()
	now := time.Now()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, cfg.Kubelet.HealthzURL, nil)
	if err != nil {
		return fmt.Errorf("kubelet.healthz_url: %w", err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		s.w.gauge("nodesnap_watch_kubelet_answering", 0)
		s.w.gauge("nodesnap_watch_kubelet_healthy", 0)
		s.w.observe(ctx, Observation{Trigger: TriggerKubeletDown, At: now, Active: true,
			Summary:  "the kubelet does not answer its healthz",
			Evidence: []string{fmt.Sprintf("GET %s: %v", cfg.Kubelet.HealthzURL, err)}})
		s.w.observe(ctx, Observation{Trigger: TriggerKubeletUnhealthy, At: now})
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	s.w.gauge("nodesnap_watch_kubelet_answering", 1)
	s.w.gauge("nodesnap_watch_kubelet_healthy", b2f(resp.StatusCode == http.StatusOK))
	s.w.observe(ctx, Observation{Trigger: TriggerKubeletDown, At: now})
	o := Observation{Trigger: TriggerKubeletUnhealthy, At: now, Active: resp.StatusCode != http.StatusOK}
	if o.Active {
		failed := FailedChecks(body, 10)
		o.Summary = fmt.Sprintf("the kubelet's healthz answers HTTP %d", resp.StatusCode)
		if len(failed) > 0 {
			o.Summary += ": " + strings.Join(failed, ", ")
		}
		o.Evidence = append([]string{fmt.Sprintf("GET %s: HTTP %d", cfg.Kubelet.HealthzURL, resp.StatusCode)}, failed...)
	}
	s.w.observe(ctx, o)
	return nil
}

// Filesystems whose statfs answers from memory: never probed.
var unprobed = map[string]bool{
	"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true, "mqueue": true,
	"securityfs": true, "debugfs": true, "tracefs": true, "bpf": true, "pstore": true, "configfs": true,
	"fusectl": true, "binfmt_misc": true, "hugetlbfs": true, "nsfs": true, "rpc_pipefs": true,
	"tmpfs": true, "devtmpfs": true, "ramfs": true, "autofs": true, "efivarfs": true, "selinuxfs": true,
}

// mounts probes every mount with statfs, each in the probe worker under
// the probe deadline. A mount found hung is remembered: it and the mounts
// under it are not probed again until mounts.reprobe_hung has passed, and
// no mount is probed while mounts.budget workers sit stuck in the kernel.
func (s *signals) mounts(ctx context.Context, cfg Config) error {
	var mi isolate.ReadFileResult
	if err := s.scan.DoTimeout(ctx, 10*time.Second, isolate.OpReadFile, isolate.ReadFileRequest{Path: filepath.Join(procDir(cfg), "1", "mountinfo"), Max: 64 << 20}, &mi); err != nil {
		return fmt.Errorf("reading the host's mount table: %w", err)
	}
	all := ParseMountinfo(mi.Data)
	now := time.Now()
	present := map[string]bool{}
	probed := 0
	exhausted := false
	s.pruneStuck()
	for _, m := range probeOrder(all) {
		if ctx.Err() != nil {
			return nil
		}
		present[m.Point] = true
		if unprobed[m.FSType] || !under(m.Point, cfg.Mounts.Under) || s.belowHung(m.Point) {
			continue
		}
		h := s.hung[m.Point]
		if h != nil && now.Sub(h.probed) < cfg.Mounts.ReprobeHung {
			continue
		}
		if len(s.stuck) >= cfg.Mounts.Budget {
			exhausted = true
			break
		}
		probed++
		err := s.probe.DoTimeout(ctx, cfg.Mounts.ProbeTimeout, isolate.OpStatfs, isolate.PathRequest{Path: hostPath(cfg, m.Point)}, nil)
		var he *isolate.HungError
		switch {
		case errors.As(err, &he):
			if ctx.Err() != nil {
				return nil
			}
			if he.Evidence != nil && he.Evidence.Unreaped {
				s.stuck = append(s.stuck, he.Evidence.PID)
			}
			if h == nil {
				h = &hungMount{since: now}
				s.hung[m.Point] = h
			}
			h.probed = now
			h.evidence = fmt.Sprintf("%s (%s from %s): statfs did not answer within %s", m.Point, m.FSType, m.Source, cfg.Mounts.ProbeTimeout)
			if he.Evidence != nil && he.Evidence.Blocked != nil && he.Evidence.Blocked.Wchan != "" {
				h.evidence += ", blocked in " + he.Evidence.Blocked.Wchan
			}
		default:
			// Answered (or failed at once: ENOTCONN of a dead FUSE
			// daemon is not a hang): not hung, or hung no more.
			delete(s.hung, m.Point)
		}
	}
	for p := range s.hung {
		if !present[p] {
			delete(s.hung, p) // unmounted
		}
	}
	s.w.gauge("nodesnap_watch_mounts", float64(len(all)))
	s.w.gauge("nodesnap_watch_mounts_probed", float64(probed))
	s.w.gauge("nodesnap_watch_mounts_hung", float64(len(s.hung)))
	s.w.gauge("nodesnap_watch_probe_workers_stuck", float64(len(s.stuck)))
	s.w.gauge("nodesnap_watch_probe_budget_exhausted", b2f(exhausted))
	points := make([]string, 0, len(s.hung))
	for p := range s.hung {
		points = append(points, p)
	}
	sort.Strings(points)
	s.w.mu.Lock()
	s.w.hungPoints = points
	s.w.mu.Unlock()
	o := Observation{Trigger: TriggerMountHung, At: now, Active: len(s.hung) > 0}
	if o.Active {
		o.Key = strings.Join(points, "\x00")
		o.Summary = fmt.Sprintf("%d mount(s) hung: %s", len(points), clip(strings.Join(points, ", "), 300))
		for _, p := range points {
			if len(o.Evidence) < 20 {
				o.Evidence = append(o.Evidence, s.hung[p].evidence)
			}
		}
	}
	s.w.observe(ctx, o)
	return nil
}

// pruneStuck forgets the stuck workers that are gone (the mount was
// aborted or answered at last). They are the watcher's own children:
// kill(pid, 0) touches nothing else.
func (s *signals) pruneStuck() {
	kept := s.stuck[:0]
	for _, pid := range s.stuck {
		if unix.Kill(pid, 0) == nil {
			kept = append(kept, pid)
		}
	}
	s.stuck = kept
}

func (s *signals) belowHung(p string) bool {
	for h := range s.hung {
		if h != p && (h == "/" || strings.HasPrefix(p, h+"/")) {
			return true
		}
	}
	return false
}

// probeOrder puts network, FUSE and block-backed mounts first, as a
// collection's mountprobe does: they are the ones that hang.
func probeOrder(ms []Mount) []Mount {
	rank := func(m Mount) int {
		switch {
		case strings.HasPrefix(m.FSType, "fuse"), strings.HasPrefix(m.FSType, "nfs"), m.FSType == "ceph", m.FSType == "cifs", m.FSType == "smb3", m.FSType == "glusterfs":
			return 0
		case strings.HasPrefix(m.Source, "/dev/"):
			return 1
		}
		return 2
	}
	out := append([]Mount(nil), ms...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

func under(p string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, pre := range prefixes {
		pre = strings.TrimSuffix(pre, "/")
		if p == pre || strings.HasPrefix(p, pre+"/") || pre == "" {
			return true
		}
	}
	return false
}

func procDir(cfg Config) string { return filepath.Join(cfg.Root, "proc") }

// hostPath is a path of the host as this process reaches it.
func hostPath(cfg Config, p string) string { return filepath.Join(cfg.Root, p) }

// tasks counts the tasks in D state.
func (s *signals) tasks(ctx context.Context, cfg Config) error {
	var r TasksResult
	if err := s.scan.Do(ctx, opTasks, TasksRequest{Proc: procDir(cfg), Self: s.w.self, Max: 10}, &r); err != nil {
		return fmt.Errorf("reading the tasks' states: %w", err)
	}
	s.w.gauge("nodesnap_watch_dstate_tasks", float64(r.D))
	tc := cfg.Triggers[TriggerDState]
	o := Observation{Trigger: TriggerDState, Active: r.D > 0 && float64(r.D) >= tc.Threshold}
	if o.Active {
		o.Summary = fmt.Sprintf("%d task(s) in D state (threshold %g)", r.D, tc.Threshold)
		o.Evidence = r.Examples
	}
	s.w.observe(ctx, o)
	return nil
}

// Kernel signatures of the kernel-log trigger.
var kernelSigs = map[string]bool{"kernel-hung-task": true, "nfs-not-responding": true, "libceph-session-lost": true,
	"filesystem-error": true, "iscsi-connection-error": true}

// kernelLog reads the kernel log on from where it stopped.
func (s *signals) kernelLog(ctx context.Context, cfg Config) error {
	var r KmsgResult
	if err := s.scan.DoTimeout(ctx, 5*time.Second, opKmsg, KmsgRequest{Path: cfg.Kernel.Kmsg, After: s.kmsgLast, Max: 1000}, &r); err != nil {
		return fmt.Errorf("reading the kernel log: %w", err)
	}
	s.kmsgLast = r.Last
	now := time.Now()
	for _, l := range r.Lines {
		for _, m := range signatures.MatchLine([]byte(l)) {
			if kernelSigs[m.ID] {
				s.w.counter("nodesnap_watch_log_lines_total", 1, "source", "kernel", "signature", m.ID)
				s.kernel.add(now, l)
			}
		}
	}
	if r.Lost > 0 {
		s.w.counter("nodesnap_watch_kernel_records_lost_total", float64(r.Lost))
	}
	tc := cfg.Triggers[TriggerKernelLog]
	n := s.kernel.count(now, tc.Window)
	o := Observation{Trigger: TriggerKernelLog, At: now, Active: n > 0 && float64(n) >= tc.Threshold}
	if o.Active {
		o.Summary = fmt.Sprintf("%d kernel line(s) of hung tasks, lost storage servers or filesystem errors in %s: %s", n, tc.Window, clip(s.kernel.lines[len(s.kernel.lines)-1], 200))
		o.Evidence = append([]string(nil), s.kernel.lines...)
	}
	s.w.observe(ctx, o)
	return nil
}

// journalLog reads the kubelet's and the runtime's journal on from where
// it stopped, and counts the catalogue's signatures (package signatures,
// the one analyze reads logs with).
func (s *signals) journalLog(ctx context.Context, cfg Config) error {
	var r JournalResult
	rq := JournalRequest{Dir: cfg.Journal.Dir, Root: cfg.Root, Units: cfg.Journal.Units, After: s.journalCursor, Since: s.started, Max: 5000, Timeout: scanTimeout - 5*time.Second}
	if err := s.scan.Do(ctx, opJournal, rq, &r); err != nil {
		return fmt.Errorf("reading the journal: %w", err)
	}
	s.journalCursor = r.Cursor
	now := time.Now()
	for _, e := range r.Entries {
		for _, line := range strings.Split(e.Message, "\n") {
			for _, m := range signatures.MatchLine([]byte(line)) {
				// Ordinary lines that are evidence only (a TearDown that
				// succeeded, a server that answered again) trigger nothing.
				if c := signatures.ByID(m.ID); kernelSigs[m.ID] || c == nil || c.EvidenceOnly || c.Independent {
					continue
				}
				key := m.ID
				if m.Key != "" {
					key += " " + m.Key
				}
				w := s.journalSigs[key]
				if w == nil {
					if len(s.journalSigs) >= 200 {
						continue // bounded: the 200 first keys
					}
					w = &window{}
					s.journalSigs[key] = w
				}
				w.add(now, e.Identifier+": "+line)
				s.w.counter("nodesnap_watch_log_lines_total", 1, "source", "journal", "signature", m.ID)
			}
		}
	}
	tc := cfg.Triggers[TriggerJournal]
	best, bestN := "", 0
	for k, w := range s.journalSigs {
		n := w.count(now, tc.Window)
		if n == 0 {
			delete(s.journalSigs, k)
			continue
		}
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	o := Observation{Trigger: TriggerJournal, At: now, Active: bestN > 0 && float64(bestN) >= tc.Threshold}
	if o.Active {
		o.Key = best
		o.Summary = fmt.Sprintf("journal signature %s repeated %d times in %s", best, bestN, tc.Window)
		o.Evidence = append([]string(nil), s.journalSigs[best].lines...)
	}
	s.w.observe(ctx, o)
	return nil
}

// dirs scans the kubelet's pod directories.
func (s *signals) dirs(ctx context.Context, cfg Config) error {
	skip := make([]string, 0, len(s.hungSnapshot()))
	for _, p := range s.hungSnapshot() {
		skip = append(skip, hostPath(cfg, p))
	}
	var r DirsResult
	if err := s.scan.Do(ctx, opDirs, DirsRequest{Root: hostPath(cfg, cfg.Dirs.KubeletRoot), Max: cfg.Dirs.MaxEntries, Skip: skip}, &r); err != nil {
		return fmt.Errorf("scanning the kubelet's directories: %w", err)
	}
	now := time.Now()
	s.w.gauge("nodesnap_watch_deleting_dirs", float64(r.DeletingCount))
	s.w.gauge("nodesnap_watch_dirs_over_subdir_limit", float64(len(r.OverLimit)))
	tc := cfg.Triggers[TriggerDeletingDirs]
	cut := now.Add(-tc.Window)
	kept := s.deleting[:0]
	least := r.DeletingCount
	for _, c := range s.deleting {
		if c.at.After(cut) {
			kept = append(kept, c)
			least = min(least, c.n)
		}
	}
	kept = append(kept, countAt{now, r.DeletingCount})
	s.deleting = kept
	grew := r.DeletingCount > least
	o := Observation{Trigger: TriggerDeletingDirs, At: now, Active: grew && float64(r.DeletingCount) >= tc.Threshold}
	if o.Active {
		o.Summary = fmt.Sprintf(".deleting~ directories under the kubelet's pods grew from %d to %d in %s", least, r.DeletingCount, tc.Window)
		o.Evidence = r.Deleting
	}
	s.w.observe(ctx, o)
	ol := Observation{Trigger: TriggerSubdirLimit, At: now, Active: len(r.OverLimit) > 0}
	if ol.Active {
		ol.Key = strings.Join(r.OverLimit, "\x00")
		ol.Summary = fmt.Sprintf("%d directory(ies) past ext4's 64,998-subdirectory link limit: %s", len(r.OverLimit), clip(strings.Join(r.OverLimit, ", "), 300))
		ol.Evidence = r.OverLimit
	}
	s.w.observe(ctx, ol)
	return nil
}

// hungSnapshot is the mounts found hung; safe from any goroutine.
func (s *signals) hungSnapshot() []string {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	return append([]string(nil), s.w.hungPoints...)
}
