package faults

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestBenchFullNode is `make bench`'s whole-node comparison (issue 10): it
// builds a sick node on this machine — 2,000 tasks in 100 mount namespaces,
// a loop-backed ext4 held only in a private namespace, a kubelet pods tree
// with .deleting~ leaks and a 1,000,000-entry directory, a hung FUSE
// mount, an HTTPS kubelet stand-in serving real pprof, 200,000 kubelet log
// lines — then runs a full `nodesnap collect` and `sos report --batch`
// side by side and prints medians, the ratio, and what evidence each
// holds. It is a benchmark, not a test: it runs only when
// NODESNAP_BENCH_FULL=1, and writes its figures as JSON.
func TestBenchFullNode(t *testing.T) {
	if os.Getenv("NODESNAP_BENCH_FULL") != "1" {
		skip.Because(t, "a benchmark: run with NODESNAP_BENCH_FULL=1 (test/bench/full_node.sh, make bench)")
	}
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	testkit.RequireLoop(t)
	// The node's size; the smoke run (test/bench/smoke) makes it small.
	nss, entries, lines := envInt("FULL_NS", 100), envInt("FULL_ENTRIES", 1_000_000), envInt("FULL_LINES", 200_000)
	n := newNode(t)
	kubelet := filepath.Join(n.root, "var/lib/kubelet")

	// nss (100) mount namespaces of 20 tasks each.
	mountNamespaces(t, nss)
	// A loop ext4 mounted, held in a private namespace, unmounted on the host.
	loop := testkit.LoopExt4(t, 64)
	testkit.HoldInPrivateNamespace(t, loop.Mountpoint)
	if err := unix.Unmount(loop.Mountpoint, 0); err != nil {
		t.Fatal(err)
	}
	// The pods tree on a tmpfs: .deleting~ leaks and an entries-entry
	// (1,000,000) directory.
	pods := testkit.MountTmpfs(t, filepath.Join(kubelet, "pods"), "size=2g,nr_inodes=3m,mode=0755")
	vol := filepath.Join(pods, podUID, "volumes/kubernetes.io~csi")
	for i := 0; i < 40; i++ {
		os.MkdirAll(filepath.Join(vol, fmt.Sprintf("pvc-leak.deleting~%09d", 100000000+i)), 0o755)
	}
	big := filepath.Join(pods, podUID, "volumes/kubernetes.io~empty-dir/cache")
	os.MkdirAll(big, 0o755)
	t.Logf("creating %d entries in %s", entries, big)
	for i := 0; i < entries; i++ {
		fd, err := unix.Open(fmt.Sprintf("%s/f%07d", big, i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	}
	// A hung FUSE mount as a pod volume.
	testkit.HungFUSE(t, filepath.Join(pods, podUID, "volumes/kubernetes.io~csi/pvc-hung/mount"), testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))
	// The kubelet stand-in and the log lines (200,000 unless FULL_LINES says).
	kurl, token := kubeletStandIn(t, n.root)
	var logb strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&logb, "2026-11-21T08:%02d:%02d.%06d+00:00 node kubelet[4242]: I1121 08:00:00.000000    4242 reconciler.go:%d] \"operationExecutor.UnmountVolume started\" volumeName=\"kubernetes.io/csi/hostpath.csi.k8s.io^vol-%d\" podUID=\"%s\"\n", (i/60)%60, i%60, i, 100+i%50, i%400, podUID)
	}
	os.WriteFile(filepath.Join(n.root, "var/log/kubelet.log"), []byte(logb.String()), 0o600)

	bin := testkit.Binary(t)
	out := t.TempDir()
	args := []string{"collect", "-q", "--output-dir", out, "--root", n.root, "--proc", "/proc", "--sys", "/sys",
		"--kubelet-url", kurl, "--kubelet-token", token, "--kubelet-readonly-url", "http://127.0.0.1:1"}
	rounds := 3
	if v := os.Getenv("ROUNDS"); v != "" {
		fmt.Sscan(v, &rounds)
	}
	var ours []time.Duration
	var last string
	for i := 0; i < rounds; i++ {
		for _, e := range mustReadDir(out) {
			os.Remove(filepath.Join(out, e))
		}
		start := time.Now()
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		cmd.Run()
		ours = append(ours, time.Since(start))
		last = cmd.ProcessState.String()
	}
	// The bundle, without its .sha256 beside it.
	var bundles []string
	for _, e := range mustReadDir(out) {
		if !strings.HasSuffix(e, ".sha256") {
			bundles = append(bundles, e)
		}
	}
	if len(bundles) != 1 {
		t.Fatalf("nodesnap wrote %v (%s)", bundles, last)
	}
	c, err := bundle.ReadAll(t.Context(), filepath.Join(out, bundles[0]), 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(out, bundles[0]))

	// sos report on the same node, with its default plugins.
	// sos hangs in df on the hung FUSE mount; how long to give it.
	sosLimit := 10 * time.Minute
	if v, err := time.ParseDuration(os.Getenv("SOS_LIMIT")); err == nil {
		sosLimit = v
	}
	var sos []time.Duration
	sosNote := ""
	sosRounds := 1
	sosDir := t.TempDir()
	if _, err := exec.LookPath("sos"); err != nil {
		sosNote = "sos is not installed (apt-get install sosreport)"
	} else {
		for i := 0; i < sosRounds; i++ {
			start := time.Now()
			cmd := exec.Command("sos", "report", "--batch", "--quiet", "--tmp-dir", sosDir)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			cmd.Start()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(sosLimit):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				sosNote = fmt.Sprintf("sos report did not finish within %s (killed)", sosLimit)
			}
			sos = append(sos, time.Since(start))
		}
	}
	med := func(d []time.Duration) time.Duration {
		if len(d) == 0 {
			return 0
		}
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	mo, ms := med(ours), med(sos)
	ratio := 0.0
	if ms > 0 {
		ratio = float64(mo) / float64(ms)
	}
	m := c.Manifest
	var statuses []string
	for _, col := range m.Collectors {
		statuses = append(statuses, col.Name+"="+col.Status)
	}
	evidence := map[string]bool{
		"hung mount named":                       len(m.HungMounts) > 0,
		"mount held only in a private namespace": strings.Contains(string(c.Files["mounts/mounts.json"]), `"only_outside_host_namespace":true`),
		".deleting~ leaks grouped":               strings.Contains(string(c.Files["dirshape/shape.json"]), "deleting~"),
		"kubelet goroutine dump":                 strings.Contains(string(c.Files["kubelet/goroutine-debug2.txt"]), "cleanupOrphanedPodDirs"),
		"kubelet healthz":                        strings.Contains(string(c.Files["kubelet/healthz.txt"]), "syncloop failed"),
	}
	t.Logf("node: %d tasks; nodesnap collect median %s over %d rounds (bundle %d bytes; %s); sos report median %s over %d %s; ratio %.3f",
		countTasks(), mo.Round(time.Millisecond), rounds, st.Size(), strings.Join(statuses, " "), ms.Round(time.Millisecond), len(sos), sosNote, ratio)
	t.Logf("evidence in nodesnap's bundle: %v", evidence)
	t.Logf("peak RSS: supervisor %d KiB, largest child %d KiB", m.Resources.SupervisorMaxRSSKiB, m.Resources.LargestChildMaxRSSKiB)
	res := map[string]any{"name": "full collect vs sos report", "nodesnap_ms": mo.Milliseconds(), "sos_ms": ms.Milliseconds(), "ratio": ratio,
		"rounds": rounds, "sos_note": sosNote, "evidence": evidence, "supervisor_rss_kib": m.Resources.SupervisorMaxRSSKiB,
		"largest_child_rss_kib": m.Resources.LargestChildMaxRSSKiB, "statuses": statuses}
	if p := os.Getenv("RESULTS_JSONL"); p != "" {
		if f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			json.NewEncoder(f).Encode(res)
			f.Close()
		}
	}
	// The figures mean nothing if the bundle misses what the node shows.
	for what, found := range evidence {
		if !found {
			t.Errorf("nodesnap's bundle lacks the evidence: %s", what)
		}
	}
}

// envInt is the integer in the environment variable name, or def.
// mountNamespaces starts n mount namespaces of 20 tasks each.
func mountNamespaces(t *testing.T, n int) {
	t.Helper()
	var holders []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range holders {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			_ = c.Wait()
		}
	})
	for i := 0; i < n; i++ {
		c := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", "for i in $(seq 19); do sleep 3600 & done; wait")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, c)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func mustReadDir(d string) []string {
	ents, _ := os.ReadDir(d)
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

func countTasks() int {
	m, _ := filepath.Glob("/proc/[0-9]*/task/[0-9]*")
	return len(m)
}

// kubeletStandIn serves, over TLS with bearer auth, this process's real
// pprof handlers (with a goroutine parked in cleanupOrphanedPodDirs), an
// unhealthy healthz, metrics, configz and pods.
func kubeletStandIn(t *testing.T, root string) (url, token string) {
	token = "bench-kubelet-token-5d4c3b2a"
	mux := testkit.KubeletMux(t)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		io.WriteString(w, "[+]ping ok\n[-]syncloop failed: reason withheld\n")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "kubelet_running_pods 2\n") })
	mux.HandleFunc("/configz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"kubeletconfig":{}}`) })
	mux.HandleFunc("/pods", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"kind":"PodList","items":[]}`) })
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", 401)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	// It is the root's kubelet: its certificate is where a self-signed
	// kubelet keeps its own, so the token goes to it.
	pki := filepath.Join(root, "var/lib/kubelet/pki")
	if err := os.MkdirAll(pki, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pki, "kubelet.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL, token
}
