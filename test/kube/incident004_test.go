package kube_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// It runs after the healthy-node tests of e2e_test.go (files run in name
// order): the kubelet's journal keeps this volume's failed unstages for
// the cluster's life.

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
	uid := ""
	t.Cleanup(func() {
		// The fix the finding gives: unmount the target by hand; the
		// kubelet's next retry finishes the pod. Then the staging mount
		// (the kubelet's unstage retries are backed off by now; it finds
		// nothing to do), which frees the loop device, and the pod
		// directory with the vol_data.json the kubelet leaves of a volume
		// it saw torn down.
		if uid == "" {
			return
		}
		podDir := "/var/lib/kubelet/pods/" + uid
		_ = exec.Command("umount", podDir+"/volumes/kubernetes.io~csi/e2e-vol-004/mount").Run()
		_ = exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "-n", "e2e", "delete", "pod", "state-user", "--force", "--grace-period=0", "--ignore-not-found").Run()
		c.k(t, "", "-n", "e2e", "delete", "pvc", "data-004", "--ignore-not-found", "--wait=true", "--timeout=1m")
		c.k(t, "", "delete", "pv", "e2e-vol-004", "--ignore-not-found", "--wait=true", "--timeout=1m")
		c.k(t, "", "delete", "csidriver", name, "--ignore-not-found")
		if dev := loopBackedBy(t, img); dev != "" {
			mi, _ := os.ReadFile("/proc/self/mountinfo")
			for _, l := range strings.Split(string(mi), "\n") {
				if f := strings.Fields(l); len(f) > 4 && f[2] == dev {
					_ = exec.Command("umount", f[4]).Run()
				}
			}
		}
		for end := time.Now().Add(30 * time.Second); loopBackedBy(t, img) != "" && time.Now().Before(end); time.Sleep(time.Second) {
		}
		if dev := loopBackedBy(t, img); dev != "" {
			t.Errorf("the loop device %s of %s is still attached", dev, img)
		}
		if mi, _ := os.ReadFile("/proc/self/mountinfo"); !strings.Contains(string(mi), podDir) {
			_ = os.RemoveAll(podDir)
		} else {
			t.Errorf("%s still has mounts", podDir)
		}
		// The kubelet's backed-off unstage retry now succeeds: wait for it
		// with the driver still there, so that nothing is left retrying.
		for end := time.Now().Add(150 * time.Second); time.Now().Before(end); time.Sleep(3 * time.Second) {
			out, err := exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "get", "node", c.node, "-o", "jsonpath={.status.volumesInUse}").Output()
			if err == nil && !strings.Contains(string(out), name) {
				break
			}
		}
		drv.stop()
	})
	c.k(t, objects, "apply", "-f", "-")
	c.k(t, "", "-n", "e2e", "wait", "--for=condition=Ready", "pod/state-user", "--timeout=2m")
	uid = strings.TrimSpace(c.k(t, "", "-n", "e2e", "get", "pod", "state-user", "-o", "jsonpath={.metadata.uid}"))
	target := "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/e2e-vol-004/mount"
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
