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
