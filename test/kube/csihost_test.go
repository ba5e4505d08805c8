package kube_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestIncident004HostProcessDriverLog runs the e2e CSI driver as a host
// process (not in a pod) writing its log to a file, registered with the
// real kubelet through plugins_registry. A pod's volume is published, its
// target unmounted by hand, and the pod deleted: the real kubelet calls
// NodeUnpublishVolume and the driver logs "is not published at …, nothing
// to do" to its file, where no /var/log/pods file has it. nodesnap finds
// the driver through its socket, keeps that file, and analyze names the
// line.
func TestIncident004HostProcessDriverLog(t *testing.T) {
	c := requireCluster(t)
	const (
		name   = "hostproc.csi.nodesnap.test"
		handle = "vol-hostproc"
	)
	logFile := filepath.Join(t.TempDir(), "driver.log")
	drv := c.startHostDriver(t, name, logFile, "--data-dir="+t.TempDir())
	plugDir, stop, waitLog := drv.plugDir, drv.stop, drv.waitLog
	waitLog("registered with the kubelet", time.Minute)

	objects := strings.Replace(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: DRIVER}
spec: {attachRequired: false, volumeLifecycleModes: [Persistent]}
---
`, "DRIVER", name, 1) + c.csiVolumeUser(name, handle, "e2e-vol-hostproc", "data-hostproc", "hostproc-user")
	t.Cleanup(func() {
		c.k(t, "", "-n", "e2e", "delete", "pod", "hostproc-user", "--ignore-not-found", "--wait=true", "--timeout=2m")
		c.k(t, "", "-n", "e2e", "delete", "pvc", "data-hostproc", "--ignore-not-found", "--wait=true", "--timeout=1m")
		c.k(t, "", "delete", "pv", "e2e-vol-hostproc", "--ignore-not-found", "--wait=true", "--timeout=1m")
		c.k(t, "", "delete", "csidriver", name, "--ignore-not-found")
		stop()
	})
	c.k(t, objects, "apply", "-f", "-")
	c.k(t, "", "-n", "e2e", "wait", "--for=condition=Ready", "pod/hostproc-user", "--timeout=2m")
	uid := strings.TrimSpace(c.k(t, "", "-n", "e2e", "get", "pod", "hostproc-user", "-o", "jsonpath={.metadata.uid}"))
	target := "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/e2e-vol-hostproc/mount"
	// The driver loses the publish (here: the target is unmounted behind
	// its back), and the kubelet's unpublish meets an unpublished target.
	if out, err := exec.Command("umount", target).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v %s", target, err, out)
	}
	c.k(t, "", "-n", "e2e", "delete", "pod", "hostproc-user", "--wait=true", "--timeout=2m")
	waitLog(`Volume "`+handle+`" is not published at "`+target+`", nothing to do.`, time.Minute)

	r := collect(t, nil)
	var inv layout.CSIInventory
	if err := json.Unmarshal(r.file(t, layout.CSIInventoryPath), &inv); err != nil {
		t.Fatal(err)
	}
	var d *layout.CSIHostDriver
	for i := range inv.HostDrivers {
		if inv.HostDrivers[i].PID == drv.cmd.Process.Pid {
			d = &inv.HostDrivers[i]
		}
	}
	if d == nil {
		t.Fatalf("the host driver (pid %d) is not in csi/inventory.json: %+v (errors %v)", drv.cmd.Process.Pid, inv.HostDrivers, inv.Errors)
	}
	if d.Driver != name || d.LogFrom != "file" || d.LogSource != logFile || !strings.Contains(d.Cmdline, "--log-file="+logFile) {
		t.Errorf("host driver %+v: want %s logging to the file %s", *d, name, logFile)
	}
	if len(d.Sockets) != 2 || d.Sockets[0] != plugDir+"/csi.sock" {
		t.Errorf("sockets %v, want its csi.sock and its registration socket", d.Sockets)
	}
	if got := string(r.file(t, layout.DirCSI+"/"+d.File)); !strings.Contains(got, "is not published at") {
		t.Errorf("csi/%s lacks the driver's \"not published\" line:\n%s", d.File, got)
	}
	found := false
	for _, id := range analyzeIDs(t, r.path) {
		found = found || strings.HasPrefix(id, "csi-driver-not-published: ") && strings.Contains(id, handle)
	}
	if !found {
		t.Errorf("analyze does not name the driver's \"not published\" for %s: %v", handle, analyzeIDs(t, r.path))
	}
	t.Logf("host driver %s pid %s: %s → csi/%s", d.Driver, strconv.Itoa(d.PID), d.LogSource, d.File)
}

// hostDriver is the e2e CSI driver run as a host process.
type hostDriver struct {
	cmd     *exec.Cmd
	plugDir string
	stop    func()
	waitLog func(what string, within time.Duration)
}

// startHostDriver starts the e2e CSI driver as a host process named name,
// logging to logFile, with extra flags; it is stopped (by its pid) when
// the test ends, or by stop.
func (c *cluster) startHostDriver(t *testing.T, name, logFile string, extra ...string) *hostDriver {
	t.Helper()
	bin := filepath.Join(filepath.Dir(c.kubectl), "csidriver")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the e2e CSI driver beside kubectl: %v (cluster.sh up builds it)", err)
	}
	d := &hostDriver{plugDir: "/var/lib/kubelet/plugins/" + name}
	d.cmd = exec.Command(bin, append([]string{"--driver-name=" + name, "--node-id=" + c.node, "--endpoint=" + d.plugDir + "/csi.sock",
		"--log-file=" + logFile}, extra...)...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	d.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
		}
		_ = os.RemoveAll(d.plugDir)
	}
	t.Cleanup(d.stop)
	// waitLog waits for the log to hold what, as many times as it has
	// been waited for (a restarted driver says it again).
	seen := map[string]int{}
	d.waitLog = func(what string, within time.Duration) {
		t.Helper()
		seen[what]++
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if b, _ := os.ReadFile(logFile); strings.Count(string(b), what) >= seen[what] {
				return
			}
		}
		b, _ := os.ReadFile(logFile)
		t.Fatalf("the driver's log has no %q after %s:\n%s", what, within, b)
	}
	return d
}

// TestIncident004ExplainTerminatingPod reproduces incident 004 as its user
// met it: a CSI driver that keeps its state in csi-driver-host-path's
// state.json restarts and comes back with "Published": null for a volume
// a pod still has mounted (csi-driver-host-path#457). The pod is deleted;
// the real kubelet's NodeUnpublishVolume gets "not published, nothing to
// do" and success, the target stays mounted (a block-backed volume: the
// kubelet sees it mounted), and the pod stays Terminating. explain names
// the driver's lost state as the cause, from a host run and through the
// cluster; a healthy pod of the same bundle has nothing wrong.
func TestIncident004ExplainTerminatingPod(t *testing.T) {
	c := requireCluster(t)
	testkit.RequireTool(t, "mkfs.ext4")
	const (
		name   = "statefile.csi.nodesnap.test"
		handle = "vol-004-state"
		// Where csi-driver-host-path keeps its state, which the csi
		// collector reads by default.
		stateFile = "/var/lib/csi-hostpath-data/state.json"
	)
	if _, err := os.Stat(stateFile); err == nil {
		t.Fatalf("%s exists: another driver keeps its state there", stateFile)
	}
	t.Cleanup(func() { _ = os.Remove(stateFile); _ = os.Remove(stateFile + ".tmp") })
	dataDir := t.TempDir()
	img := filepath.Join(dataDir, handle+".img")
	if out, err := exec.Command("truncate", "-s", "64M", img).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	logFile := filepath.Join(t.TempDir(), "driver.log")
	args := []string{"--data-dir=" + dataDir, "--state-file=" + stateFile}
	drv := c.startHostDriver(t, name, logFile, args...)
	drv.waitLog("registered with the kubelet", time.Minute)

	objects := strings.Replace(`apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: DRIVER}
spec: {attachRequired: false, volumeLifecycleModes: [Persistent]}
---
`, "DRIVER", name, 1) + c.csiVolumeUser(name, handle, "e2e-vol-004", "data-004", "state-user")
	target := ""
	t.Cleanup(func() {
		// The fix the finding gives: unmount the target by hand; the
		// kubelet's next retry finishes the pod.
		if target != "" {
			_ = exec.Command("umount", target).Run()
		}
		exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "-n", "e2e", "delete", "pod", "state-user", "--force", "--grace-period=0", "--ignore-not-found").Run()
		c.k(t, "", "-n", "e2e", "delete", "pvc", "data-004", "--ignore-not-found", "--wait=true", "--timeout=1m")
		c.k(t, "", "delete", "pv", "e2e-vol-004", "--ignore-not-found", "--wait=true", "--timeout=1m")
		c.k(t, "", "delete", "csidriver", name, "--ignore-not-found")
		// The kubelet unstages the volume with the driver still there.
		for end := time.Now().Add(time.Minute); time.Now().Before(end) && loopBackedBy(t, img) != ""; time.Sleep(time.Second) {
		}
		drv.stop()
	})
	c.k(t, objects, "apply", "-f", "-")
	c.k(t, "", "-n", "e2e", "wait", "--for=condition=Ready", "pod/state-user", "--timeout=2m")
	uid := strings.TrimSpace(c.k(t, "", "-n", "e2e", "get", "pod", "state-user", "-o", "jsonpath={.metadata.uid}"))
	target = "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/e2e-vol-004/mount"
	if b, _ := os.ReadFile(stateFile); !strings.Contains(string(b), target) {
		t.Fatalf("the driver's state does not list the publish at %s:\n%s", target, b)
	}

	// The restart that loses the publish: the driver stops, its state
	// comes back with "Published": null, it starts again.
	drv.stop()
	var st map[string]any
	b, err := os.ReadFile(stateFile)
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil {
		t.Fatalf("the driver's state: %v", err)
	}
	vols, _ := st["Volumes"].([]any)
	for _, v := range vols {
		if m, ok := v.(map[string]any); ok && m["VolID"] == handle {
			m["Published"] = nil
		}
	}
	if b, err = json.MarshalIndent(st, "", "  "); err == nil {
		err = os.WriteFile(stateFile, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	drv = c.startHostDriver(t, name, logFile, args...)
	drv.waitLog("registered with the kubelet", time.Minute)
	drv.waitLog("registered with the kubelet", time.Minute) // the restarted one's

	c.k(t, "", "-n", "e2e", "delete", "pod", "state-user", "--wait=false")
	drv.waitLog(`Volume "`+handle+`" is not published at "`+target+`", nothing to do.`, 2*time.Minute)
	c.waitInTrouble(t, "e2e", "state-user")
	if ts := c.k(t, "", "-n", "e2e", "get", "pod", "state-user", "-o", "jsonpath={.metadata.deletionTimestamp}"); ts == "" {
		t.Fatal("the pod is not Terminating")
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); !strings.Contains(string(mi), " "+target+" ") {
		t.Fatalf("the target %s is no longer mounted: the driver unmounted it", target)
	}

	kc, _, _, _ := c.saKubeconfig(t)
	r := collect(t, []string{"NODESNAP_KUBELET_TOKEN=" + c.token(t)}, "--kubelet-pprof=false", "--kubeconfig", kc, "--node-name", c.node)
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect exited %d\n%s", r.code, r.stderr)
	}
	c.explainHostAndFleet(t, r, "e2e", "state-user", "volume-user", func(where string, first analyze.ChainLink) {
		if first.Finding != "csi-published-state-lost" || !strings.Contains(first.Summary, target) || !strings.Contains(first.How, "cannot finish terminating") {
			t.Errorf("%s: the chain starts with %s %q (%s), want the driver's lost publish of %s", where, first.Finding, first.Summary, first.How, target)
		}
	})
}
