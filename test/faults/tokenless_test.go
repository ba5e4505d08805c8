package faults

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors/cluster"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// orphanUID is a pod UID no pod list knows: the volume directory of a
// deleted pod, which the kubelet's housekeeping (cleanupOrphanedPodDirs)
// stat()s.
const orphanUID = "7a6b5c4d-3e2f-4a1b-9c8d-e7f6a5b4c3d2"

// Incident 003 collected without any kubelet credential and without API
// access: a hung FUSE mount in the volume directory of a pod nobody knows
// any more, and a process of the kubelet's name blocked stat()ing it. The
// bundle holds no goroutine dump; analyze must still name the kubelet's
// housekeeping stopped on that mount, inferred from the thread's kernel
// stack and the orphaned pod UID, and say the goroutine dump would
// confirm it. The cluster collector says what it lacks.
func TestTokenlessKubeletHousekeepingStuck(t *testing.T) {
	testkit.RequireFUSE(t)
	cases := []struct {
		name string
		uid  string // the pod whose volume hangs
		// what the hung-mount finding must say, and whether it stops the
		// kubelet's sync loop
		want     []string
		syncLoop bool
	}{
		{"orphaned pod: the housekeeping", orphanUID, []string{"cleanupOrphanedPodDirs", "kernel stack", orphanUID, "which no pod list of this bundle knows", "goroutine dump"}, true},
		{"live pod: its own volume work", podUID, []string{"kubelet thread", "default/web-0", "still lists", "goroutine dump"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tokenless(t, tc.uid, tc.want, tc.syncLoop)
		})
	}
}

func tokenless(t *testing.T, uid string, want []string, syncLoop bool) {
	n := newNode(t)
	// No kubelet kubeconfig under the root: no API access at all.
	if err := os.Remove(filepath.Join(n.root, "var/lib/kubelet/kubeconfig")); err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(n.root, "var/lib/kubelet/pods", uid, "volumes/kubernetes.io~csi/pvc-gone/mount")
	// The kubelet's read-only port, as a token-less run finds it: its pod
	// list (one live pod), no pprof.
	mux := http.NewServeMux()
	mux.HandleFunc("/pods", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"web-0","namespace":"default","uid":"`+podUID+`"},"spec":{"nodeName":"reliability-node"},"status":{"phase":"Running"}}]}`)
	})
	ro := httptest.NewServer(mux)
	t.Cleanup(ro.Close)

	// Reaped last: a thread stuck in a FUSE request the daemon has read
	// exits only once the connection is aborted (the FUSE cleanup).
	exited := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Errorf("the kubelet stand-in did not exit after its mount was aborted")
		}
	})
	f := testkit.HungFUSE(t, mp, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))

	// The kubelet stand-in: a stat(1) whose command name is "kubelet",
	// stat()ing the orphaned volume's mount as housekeeping does.
	kubelet := copyAs(t, "stat", filepath.Join(t.TempDir(), "kubelet"))
	cmd := exec.Command(kubelet, f.Mountpoint())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) })
	f.WaitBlocked(1, 10*time.Second)

	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, []string{"KUBECONFIG="}, n.args(out, "--kubelet-readonly-url", ro.URL)...)
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	c, o := checkOutput(t, out, false, n.secrets)
	if o.failed || c == nil {
		t.FailNow()
	}
	hungMountNamed(t, c.Manifest, mp)

	// What a token-less bundle holds of the kubelet's thread.
	var tasks []struct {
		PID   int      `json:"pid"`
		TID   int      `json:"tid"`
		Comm  string   `json:"comm"`
		State string   `json:"state"`
		Wchan string   `json:"wchan"`
		Stack []string `json:"stack"`
	}
	if err := json.Unmarshal(c.Files["processes/tasks.json"], &tasks); err != nil {
		t.Fatalf("processes/tasks.json: %v", err)
	}
	found := false
	for _, tk := range tasks {
		if tk.PID == cmd.Process.Pid {
			found = true
			t.Logf("kubelet stand-in in tasks.json: comm %s state %s wchan %s stack %v", tk.Comm, tk.State, tk.Wchan, tk.Stack)
		}
	}
	if !found {
		t.Errorf("the kubelet stand-in (pid %d) is not in processes/tasks.json", cmd.Process.Pid)
	}
	if _, ok := c.Files["kubelet/goroutine-debug2.txt"]; ok {
		t.Errorf("a goroutine dump without a kubelet credential")
	}

	// The cluster collector: unsupported, and says what it lacks.
	cl := c.Manifest.Collector("cluster")
	if cl == nil {
		t.Fatalf("no cluster collector in the manifest")
	}
	t.Logf("cluster collector: %s: %s %v", cl.Status, cl.Error, cl.Notes)
	if kc := hostKubeletKubeconfig(); kc != "" {
		// A kubelet of this machine (a test cluster up beside these
		// tests) gives the collection API access: the collector is right
		// to use it, and what it says without one cannot be seen here.
		t.Logf("this machine has a kubelet kubeconfig (%s): not checking what the cluster collector says without API access", kc)
	} else if cl.Status != bundle.StatusUnsupported || !strings.Contains(cl.Error, "no credential for the API server") {
		t.Errorf("cluster collector %s %q: want unsupported saying it has no credential for the API server", cl.Status, cl.Error)
	}

	// analyze names the housekeeping, from the stack and the pod UID.
	var bundlePath string
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tar.gz") || strings.HasSuffix(e.Name(), ".tar.zst") {
			bundlePath = filepath.Join(out, e.Name())
		}
	}
	a := nodesnap(t, time.Minute, nil, "analyze", "--json", bundlePath)
	if a.code != 0 && a.code != 3 && a.code != 4 {
		t.Fatalf("analyze: exit %d\n%s", a.code, a.stderr)
	}
	var rep struct {
		Findings []struct {
			ID          string `json:"id"`
			Severity    string `json:"severity"`
			Summary     string `json:"summary"`
			Explanation string `json:"explanation"`
			Impact      string `json:"impact"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(a.stdout), &rep); err != nil {
		t.Fatalf("analyze --json: %v\n%s", err, a.stdout)
	}
	hit := false
	for _, fd := range rep.Findings {
		t.Logf("%s %s [%s]: %s", fd.Severity, fd.ID, fd.Impact, fd.Summary)
		if fd.ID != "hung-mount" || !strings.Contains(fd.Summary, uid) {
			continue
		}
		hit = true
		t.Logf("explanation: %s", fd.Explanation)
		for _, w := range want {
			if !strings.Contains(fd.Explanation, w) {
				t.Errorf("hung-mount explanation lacks %q: %s", w, fd.Explanation)
			}
		}
		if got := fd.Impact == "kubelet-sync-loop"; got != syncLoop {
			t.Errorf("hung-mount impact %q: sync loop %v, want %v", fd.Impact, got, syncLoop)
		}
		if !syncLoop && strings.Contains(fd.Explanation, "cleanupOrphanedPodDirs") {
			t.Errorf("a live pod's volume named as the housekeeping of deleted pods: %s", fd.Explanation)
		}
	}
	if !hit {
		t.Errorf("no hung-mount finding names the pod %s", uid)
	}
}

// hostKubeletKubeconfig is the first kubelet kubeconfig the cluster
// collector would find on this machine, or "".
func hostKubeletKubeconfig() string {
	for _, p := range cluster.KubeletKubeconfigs {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// copyAs copies the program name (from PATH) to dst, so that a process
// started from dst has dst's base name as its command name.
func copyAs(t *testing.T, name, dst string) string {
	t.Helper()
	src, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(o, in); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A token-less collection whose only word on the sync loop is old kubelet
// log lines (2 h before the run): analyze says they may be history,
// measured from the bundle's own collection time, and says what it lacks
// to tell. The run collects the journal only: with the process list, a
// machine without a kubelet (this one) sets the lines aside as an earlier
// kubelet's before any rule sees them.
func TestTokenlessOldSyncLoopLinesMayBeHistory(t *testing.T) {
	testkit.RequireRoot(t)
	n := newNode(t)
	if err := os.Remove(filepath.Join(n.root, "var/lib/kubelet/kubeconfig")); err != nil {
		t.Fatal(err)
	}
	var logb strings.Builder
	for i := 0; i < 3; i++ {
		at := time.Now().Add(-2*time.Hour + time.Duration(i)*time.Minute).UTC()
		logb.WriteString(at.Format("2006-01-02T15:04:05.000000-07:00") + " reliability-node kubelet[4242]: E" + at.Format("0102 15:04:05.000000") +
			`    4242 kubelet.go:2513] "Housekeeping took longer than expected" err="sync Loop took longer than expected" expected="1s" actual="14.2s"` + "\n")
	}
	if err := os.WriteFile(filepath.Join(n.root, "var/log/kubelet.log"), []byte(logb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, []string{"KUBECONFIG="}, n.args(out, "--only", "journal")...)
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	c, o := checkOutput(t, out, false, n.secrets)
	if o.failed || c == nil {
		t.FailNow()
	}
	if !strings.Contains(string(c.Files["journal/files/kubelet.log"]), "sync Loop took longer than expected") {
		var names []string
		for name := range c.Files {
			if strings.HasPrefix(name, "journal/") {
				names = append(names, name)
			}
		}
		t.Fatalf("the kubelet's log lines are not in the bundle's journal/files/kubelet.log (journal files: %v)", names)
	}
	var bundlePath string
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tar.gz") || strings.HasSuffix(e.Name(), ".tar.zst") {
			bundlePath = filepath.Join(out, e.Name())
		}
	}
	a := nodesnap(t, time.Minute, nil, "analyze", "--json", bundlePath)
	var rep struct {
		Findings []struct {
			ID, Severity, Summary, Explanation string
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(a.stdout), &rep); err != nil {
		t.Fatalf("analyze --json (exit %d): %v\n%s", a.code, err, a.stderr)
	}
	for _, f := range rep.Findings {
		if f.ID != "kubelet-syncloop-unhealthy" {
			continue
		}
		t.Logf("%s: %s", f.Severity, f.Summary)
		if f.Severity != "info" || !strings.Contains(f.Summary, "may be history") || !strings.Contains(f.Summary, "last 1h5") {
			t.Errorf("old sync-loop lines: %s %q, want info saying they may be history, last 1h58m before the collection", f.Severity, f.Summary)
		}
		for _, w := range []string{"no healthz was collected", "no goroutine dump was collected", "no process list was collected"} {
			if !strings.Contains(f.Explanation, w) {
				t.Errorf("explanation lacks %q: %s", w, f.Explanation)
			}
		}
		return
	}
	t.Errorf("no kubelet-syncloop-unhealthy finding for the old lines")
}
