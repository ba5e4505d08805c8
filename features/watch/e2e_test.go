package watch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/schema"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// End-to-end tests: the real binary watching real faults (a FUSE mount
// that hangs, tasks in D state on it, a kubelet stand-in whose healthz
// fails, lines in a journal and in the kernel's log). Each fault must give
// exactly one bundle naming its trigger. Collections are kept small
// (--only host): what is under test is the watcher, not collect.

// watcherProc is a running `nodesnap watch`.
type watcherProc struct {
	cmd  *exec.Cmd
	out  string
	log  *syncBuffer
	addr string
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// quickConfig is a configuration whose signals sample every second.
const quickConfig = `listen: 127.0.0.1:0
collect_args: [--only, host, --timeout, 30s]
kubelet: {interval: 1s, timeout: 1s}
mounts: {interval: 1s, probe_timeout: 1s}
tasks: {interval: 1s}
kernel: {interval: 1s}
journal: {interval: 1s}
dirs: {interval: 1s}
`

func startWatcher(t *testing.T, config string, args ...string) *watcherProc {
	t.Helper()
	return startWatcherEnv(t, nil, config, args...)
}

// startWatcherEnv is startWatcher with the watcher's environment changed
// by env (KEY=VALUE, later ones win).
func startWatcherEnv(t *testing.T, env []string, config string, args ...string) *watcherProc {
	t.Helper()
	return startWatcherPrepared(t, env, config, nil, args...)
}

// startWatcherPrepared is startWatcherEnv with prepare called on the
// output directory before the watcher starts.
func startWatcherPrepared(t *testing.T, env []string, config string, prepare func(out string), args ...string) *watcherProc {
	t.Helper()
	testkit.RequireRoot(t)
	bin := testkit.Binary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "watch.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &watcherProc{out: filepath.Join(dir, "out"), log: &syncBuffer{}, done: make(chan struct{})}
	if err := os.Mkdir(w.out, 0o700); err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(w.out)
	}
	w.cmd = exec.Command(bin, append([]string{"watch", "--config", cfg, "--output-dir", w.out, "--keep", "0"}, args...)...)
	w.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	w.cmd.Stdout, w.cmd.Stderr = w.log, io.MultiWriter(w.log, pw)
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = w.cmd.Wait()
		_ = pw.Close()
		close(w.done)
	}()
	t.Cleanup(func() { w.stop(t) })
	addrRE := regexp.MustCompile(`/metrics and /healthz on http://(\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case w.addr = <-found:
	case <-w.done:
		t.Fatalf("nodesnap watch exited at start:\n%s", w.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("nodesnap watch did not start listening within 30s:\n%s", w.log)
	}
	return w
}

// stop sends SIGTERM and waits for the watcher to end: it must, even with
// a mount it watches hung.
func (w *watcherProc) stop(t *testing.T) {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		if !strings.Contains(w.log.String(), "nodesnap watch: stopped") {
			t.Errorf("nodesnap watch ended without saying it stopped:\n%s", w.log)
		}
	case <-time.After(60 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
		t.Errorf("nodesnap watch did not stop within 60s of SIGTERM:\n%s", w.log)
	}
}

func (w *watcherProc) bundles(t *testing.T) []string {
	t.Helper()
	b, err := filepath.Glob(filepath.Join(w.out, "nodesnap-*.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitBundle waits for the first bundle, then watches a few more rounds of
// every signal so that a second one (a storm) would show.
func (w *watcherProc) waitBundle(t *testing.T, within time.Duration) *bundle.Manifest {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(w.bundles(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no bundle within %s; the watcher said:\n%s\nmetrics:\n%s", within, w.log, w.metrics(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	bs := w.bundles(t)
	if len(bs) != 1 {
		t.Fatalf("%d bundles, want exactly 1: %q\n%s", len(bs), bs, w.log)
	}
	m, raw, err := bundle.ReadManifest(context.Background(), bs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.ValidateManifest(raw); err != nil {
		t.Errorf("the manifest does not validate against bundle/schema: %v", err)
	}
	if m.Trigger == nil {
		t.Fatalf("the manifest names no trigger:\n%s", raw)
	}
	return m
}

func (w *watcherProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + w.addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (w *watcherProc) metrics(t *testing.T) string {
	_, s := w.get(t, "/metrics")
	return s
}

// metric is the value of one series of /metrics, -1 when absent.
func (w *watcherProc) metric(t *testing.T, series string) float64 {
	t.Helper()
	for _, l := range strings.Split(w.metrics(t), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	return -1
}

func wantEvidence(t *testing.T, m *bundle.Manifest, name, want string) {
	t.Helper()
	if m.Trigger.Name != name {
		t.Errorf("trigger %q, want %q (%s)", m.Trigger.Name, name, m.Trigger.Summary)
	}
	if !strings.Contains(m.Trigger.Summary+"\n"+strings.Join(m.Trigger.Evidence, "\n"), want) {
		t.Errorf("the trigger's summary and evidence do not mention %q: %s %q", want, m.Trigger.Summary, m.Trigger.Evidence)
	}
}

// A FUSE mount hangs while the watcher watches it: one bundle naming the
// mount; the watcher goes on (healthz, metrics, later rounds), probes the
// hung mount no more, and stops cleanly with it still hung.
func TestWatchMountHangs(t *testing.T) {
	base := t.TempDir()
	f := testkit.HungFUSE(t, filepath.Join(base, "vol"))
	w := startWatcher(t, quickConfig, "--triggers", TriggerMountHung, "--mounts-under", base)
	time.Sleep(2 * time.Second) // a round or two of a healthy mount
	if n := len(w.bundles(t)); n != 0 {
		t.Fatalf("%d bundles before the mount hung:\n%s", n, w.log)
	}
	f.Hang()
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerMountHung, f.Mountpoint())
	if code, body := w.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, "mount-hung: 1 mount(s) hung") {
		t.Errorf("/healthz with the mount hung: %d %q", code, body)
	}
	before := w.metric(t, `nodesnap_watch_signal_last_success_timestamp_seconds{signal="mounts"}`)
	time.Sleep(3 * time.Second)
	if after := w.metric(t, `nodesnap_watch_signal_last_success_timestamp_seconds{signal="mounts"}`); after <= before {
		t.Errorf("the mount signal stopped completing rounds with the mount hung (%v, then %v)", before, after)
	}
	if n := w.metric(t, "nodesnap_watch_mounts_hung"); n != 1 {
		t.Errorf("nodesnap_watch_mounts_hung = %v, want 1", n)
	}
	// Remembered, not probed again every round: one stuck worker, not
	// one a round.
	if n := w.metric(t, "nodesnap_watch_probe_workers_stuck"); n > 1 {
		t.Errorf("nodesnap_watch_probe_workers_stuck = %v: the hung mount was probed again", n)
	}
	if n := w.metric(t, `nodesnap_watch_collections_total{trigger="mount-hung",status="complete"}`); n != 1 {
		t.Errorf("collections_total{mount-hung,complete} = %v, want 1\n%s", n, w.log)
	}
}

// Tasks sit in D state on a hung mount: one bundle naming them. (The
// mount itself hanging is another trigger's, off here.)
func TestWatchDState(t *testing.T) {
	testkit.RequireTool(t, "stat")
	base := t.TempDir()
	var procs []*exec.Cmd
	// Registered before the mount, so run after it is aborted: only then
	// can the tasks die.
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	f := testkit.HungFUSE(t, filepath.Join(base, "vol"), testkit.FUSEStartHung())
	baseline := dStateTasks(t)
	w := startWatcher(t, quickConfig+"triggers: {dstate: {threshold: "+strconv.Itoa(baseline+3)+", for: 2s}}\n", "--triggers", TriggerDState)
	time.Sleep(2 * time.Second)
	if n := len(w.bundles(t)); n != 0 {
		t.Fatalf("%d bundles before any task was in D state:\n%s", n, w.log)
	}
	for i := 0; i < 3; i++ {
		p := exec.Command("stat", f.Mountpoint())
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	f.WaitBlocked(3, 10*time.Second)
	// A task waiting on FUSE sleeps interruptibly (S) until a signal
	// comes: then it waits on uninterruptibly, in D, as a kubelet thread
	// killed on a hung cephfs does.
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGKILL)
	}
	for _, p := range procs {
		deadline := time.Now().Add(10 * time.Second)
		for testkit.ProcState(p.Process.Pid) != "D" {
			if time.Now().After(deadline) {
				t.Fatalf("stat %d is in state %q, not D, 10s after SIGKILL on the hung mount", p.Process.Pid, testkit.ProcState(p.Process.Pid))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerDState, "task(s) in D state")
	ours := 0
	for _, p := range procs {
		if strings.Contains(strings.Join(m.Trigger.Evidence, "\n"), fmt.Sprintf("%d/%d stat", p.Process.Pid, p.Process.Pid)) {
			ours++
		}
	}
	if ours == 0 {
		t.Errorf("the evidence names none of the stat processes in D state: %q", m.Trigger.Evidence)
	}
}

// dStateTasks counts the tasks in D state now (other tests on this
// machine may have some): the test process reads /proc/*/task/*/stat,
// which never blocks on a hung mount.
func dStateTasks(t *testing.T) int {
	n := 0
	stats, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if st, err := ParseTaskStat(b); err == nil && st.State == 'D' {
			n++
		}
	}
	return n
}

// kubeletStandIn serves a kubelet's healthz, failing on demand.
func kubeletStandIn(t *testing.T, failing *atomic.Bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			rw.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(rw, "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n")
			return
		}
		_, _ = io.WriteString(rw, "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n")
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/healthz?verbose"
}

// The kubelet's healthz starts failing: one bundle naming the failed
// check, once it has failed for longer than 'for'.
func TestWatchKubeletUnhealthy(t *testing.T) {
	var failing atomic.Bool
	url := kubeletStandIn(t, &failing)
	w := startWatcher(t, quickConfig+"triggers: {kubelet-unhealthy: {for: 2s}}\n", "--triggers", TriggerKubeletUnhealthy, "--kubelet-healthz-url", url)
	time.Sleep(2 * time.Second)
	if n := len(w.bundles(t)); n != 0 || w.metric(t, "nodesnap_watch_kubelet_healthy") != 1 {
		t.Fatalf("%d bundles, kubelet_healthy %v with a healthy kubelet:\n%s", n, w.metric(t, "nodesnap_watch_kubelet_healthy"), w.log)
	}
	failing.Store(true)
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerKubeletUnhealthy, "[-]syncloop failed")
	if fired, started := m.Trigger.FiredAt, m.StartedAt; started.Before(fired) {
		t.Errorf("the collection started at %s, before its trigger fired at %s", started, fired)
	}
}

// A healthz that flaps every 300 ms for 10 s, with a trigger that fires at
// the first failure: one bundle, and the later episodes counted as
// suppressed by the cooldown, not collected.
func TestWatchFlappingIsNoStorm(t *testing.T) {
	var failing atomic.Bool
	url := kubeletStandIn(t, &failing)
	cfg := strings.Replace(quickConfig, "kubelet: {interval: 1s, timeout: 1s}", "kubelet: {interval: 200ms, timeout: 1s}", 1)
	w := startWatcher(t, cfg+"max_per_hour: 100\ntriggers: {kubelet-unhealthy: {for: 0s, cooldown: 1h}}\n", "--triggers", TriggerKubeletUnhealthy, "--kubelet-healthz-url", url)
	stop := time.Now().Add(10 * time.Second)
	for time.Now().Before(stop) {
		failing.Store(!failing.Load())
		time.Sleep(300 * time.Millisecond)
	}
	failing.Store(false)
	m := w.waitBundle(t, 30*time.Second)
	wantEvidence(t, m, TriggerKubeletUnhealthy, "syncloop")
	if n := w.metric(t, `nodesnap_watch_triggers_suppressed_total{trigger="kubelet-unhealthy",reason="cooldown"}`); n < 2 {
		t.Errorf("suppressed_total{cooldown} = %v: the flapping was not seen (want several episodes)\n%s", n, w.metrics(t))
	}
}

// Lines of analyze's catalogue, repeating in the kubelet's journal: one
// bundle naming the signature and the volume.
func TestWatchJournalSignature(t *testing.T) {
	j := testkit.StartJournald(t)
	w := startWatcher(t, quickConfig+"triggers: {journal-signature: {threshold: 3, window: 1m}}\n", "--triggers", TriggerJournal, "--journal-dir", j.Dir)
	time.Sleep(2 * time.Second)
	line := `E1123 operation_generator.go:904] UnmountVolume.TearDown failed for volume "data" (UniqueName: "kubernetes.io/csi/hostpath.csi.k8s.io^watch-e2e-vol") pod "p": unlinkat /var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/data/mount: device or resource busy`
	for i := 0; i < 3; i++ {
		j.Native(t, "kubelet", line)
	}
	j.WaitCount(t, "SYSLOG_IDENTIFIER=kubelet", 3)
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerJournal, "watch-e2e-vol")
}

// The same without journalctl, as in the DaemonSet's image: the watcher
// reads the journal files itself, and repeated lines still fire exactly
// one bundle.
func TestWatchJournalSignatureNoJournalctl(t *testing.T) {
	j := testkit.StartJournald(t)
	// A PATH holding nothing: no journalctl (nor anything else) to run.
	w := startWatcherEnv(t, []string{"PATH=" + t.TempDir()}, quickConfig+"triggers: {journal-signature: {threshold: 3, window: 1m}}\n", "--triggers", TriggerJournal, "--journal-dir", j.Dir)
	time.Sleep(2 * time.Second)
	line := `E1123 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/hostpath.csi.k8s.io^watch-native-vol podName: nodeName:}" failed. Error: an operation with the given Volume ID watch-native-vol already exists`
	for i := 0; i < 4; i++ {
		j.Native(t, "kubelet", line)
	}
	j.WaitCount(t, "SYSLOG_IDENTIFIER=kubelet", 4)
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerJournal, "watch-native-vol")
	if strings.Contains(w.log.String(), "signal journal:") {
		t.Errorf("the journal signal failed:\n%s", w.log)
	}
	// More of the same line within the cooldown: still one bundle.
	for i := 0; i < 4; i++ {
		j.Native(t, "kubelet", line)
	}
	j.WaitCount(t, "SYSLOG_IDENTIFIER=kubelet", 8)
	time.Sleep(3 * time.Second)
	if bs := w.bundles(t); len(bs) != 1 {
		t.Errorf("%d bundles after the line went on repeating, want 1: %q", len(bs), bs)
	}
}

// A line of a lost NFS server in the kernel's log: one bundle naming the
// server. The log is a private stand-in read as the device is: a test
// never writes into the machine's real kernel log.
func TestWatchKernelLog(t *testing.T) {
	kmsg := testkit.StartKmsg(t)
	cfg := strings.Replace(quickConfig, "kernel: {interval: 1s}", fmt.Sprintf("kernel: {interval: 1s, kmsg: %q}", kmsg.Path), 1)
	w := startWatcher(t, cfg, "--triggers", TriggerKernelLog)
	time.Sleep(2 * time.Second)
	server := fmt.Sprintf("watch-e2e-%d.invalid", os.Getpid())
	kmsg.Write(t, 4, "nfs: server "+server+" not responding, still trying")
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerKernelLog, server)
}

// SIGTERM during a collection: the collection ends with its bundle of
// what it gathered, marked interrupted and naming its trigger, and the
// watcher exits.
func TestWatchSIGTERMMidCollection(t *testing.T) {
	base := t.TempDir()
	testkit.HungFUSE(t, filepath.Join(base, "vol"), testkit.FUSEStartHung())
	// The collection's mount probe waits 60 s on the hung mount: long
	// enough to be interrupted.
	cfg := strings.Replace(quickConfig, "collect_args: [--only, host, --timeout, 30s]", `collect_args: [--only, "host,mountprobe", --timeout, 2m, --probe-timeout, 60s]`, 1)
	w := startWatcher(t, cfg+"triggers: {kubelet-down: {for: 0s}}\n", "--triggers", TriggerKubeletDown, "--kubelet-healthz-url", "http://127.0.0.1:1/healthz")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(w.log.String(), "kubelet-down fired") {
		if time.Now().After(deadline) {
			t.Fatalf("kubelet-down did not fire:\n%s", w.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // into the mount probe's wait
	start := time.Now()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(40 * time.Second):
		t.Fatalf("the watcher did not exit within 40s of SIGTERM:\n%s", w.log)
	}
	t.Logf("exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	bs := w.bundles(t)
	if len(bs) != 1 {
		t.Fatalf("%d bundles after SIGTERM mid-collection, want 1 (interrupted):\n%s", len(bs), w.log)
	}
	m, _, err := bundle.ReadManifest(context.Background(), bs[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.Interrupted == nil || m.Trigger == nil || m.Trigger.Name != TriggerKubeletDown {
		t.Errorf("manifest: interrupted %+v, trigger %+v; want interrupted by SIGTERM, trigger kubelet-down", m.Interrupted, m.Trigger)
	}
	if tmp, _ := filepath.Glob(filepath.Join(w.out, ".*")); len(tmp) != 0 {
		t.Errorf("left behind in the output directory: %q", tmp)
	}
}

// SIGHUP re-reads the configuration: a trigger enabled in the file starts
// firing; a broken file is refused and the previous one stays.
func TestWatchSIGHUPReload(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	url := kubeletStandIn(t, &failing)
	off := quickConfig + "triggers:\n"
	for _, n := range TriggerNames {
		off += "  " + n + ": {enabled: false}\n"
	}
	w := startWatcher(t, off, "--kubelet-healthz-url", url)
	cfgPath := w.cmd.Args[3]
	time.Sleep(3 * time.Second)
	if n := len(w.bundles(t)); n != 0 {
		t.Fatalf("%d bundles with every trigger off", n)
	}
	if err := os.WriteFile(cfgPath, []byte(quickConfig+"triggers: {nonsense: {}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = w.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for w.metric(t, "nodesnap_watch_config_last_reload_successful") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a broken configuration was not reported:\n%s", w.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(w.log.String(), `unknown trigger "nonsense"`) {
		t.Errorf("the watcher did not say what is wrong with the file:\n%s", w.log)
	}
	on := strings.Replace(off, "kubelet-unhealthy: {enabled: false}", "kubelet-unhealthy: {enabled: true, for: 0s}", 1)
	if err := os.WriteFile(cfgPath, []byte(on), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = w.cmd.Process.Signal(syscall.SIGHUP)
	m := w.waitBundle(t, 60*time.Second)
	wantEvidence(t, m, TriggerKubeletUnhealthy, "syncloop")
	if v := w.metric(t, "nodesnap_watch_config_last_reload_successful"); v != 1 {
		t.Errorf("config_last_reload_successful = %v after a good reload", v)
	}
}
