package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestDaemonSetWatch runs deploy/kubernetes/daemonset.yaml, whose watch
// container runs `nodesnap watch`; then a pod volume's FUSE mount stops
// answering. The watcher, in the pod, must collect once more on its own,
// with a manifest naming the mount-hung trigger and a bundle whose
// analysis names the hung mount. Like incident 003, the kubelet blocks on
// the mount until it is aborted, so this runs after the DaemonSet's pod
// has started and aborts the mount before deleting it.
func TestDaemonSetWatch(t *testing.T) {
	c := requireCluster(t)
	const hostDir = "/var/tmp/nodesnap"
	before := hostBundles(t, hostDir)
	// Only the kubelet's mounts: a mount some other test on this machine
	// left hung must not fire first (and put this one in its cooldown).
	ds := c.manifest(t, "daemonset.yaml")
	if !strings.Contains(ds, "            - --keep=3\n            - --listen=") {
		t.Fatal("the DaemonSet's watch arguments changed: update this test")
	}
	ds = strings.Replace(ds, "            - --keep=3\n            - --listen=", "            - --keep=3\n            - --mounts-under=/var/lib/kubelet\n            - --listen=", 1)
	c.k(t, ds, "apply", "-f", "-")
	t.Cleanup(func() {
		c.k(t, "", "-n", "nodesnap", "delete", "daemonset", "nodesnap", "--wait=true", "--timeout=2m", "--cascade=foreground")
		for p := range hostBundles(t, hostDir) {
			if !before[p] {
				_ = os.Remove(p)
				_ = os.Remove(p + ".sha256")
			}
		}
	})
	c.k(t, "", "-n", "nodesnap", "rollout", "status", "daemonset/nodesnap", "--timeout=4m")
	first := newBundle(t, hostDir, before, 60*time.Second)
	before[first] = true
	pod := c.podOf(t, "nodesnap", "app.kubernetes.io/name=nodesnap", time.Minute)
	// The watcher answers its liveness probe; give it a round of healthy
	// mounts first.
	time.Sleep(35 * time.Second)
	if logs := c.k(t, "", "-n", "nodesnap", "logs", pod, "-c", "watch"); !strings.Contains(logs, "nodesnap watch: watching") {
		t.Fatalf("the watch container is not watching:\n%s", logs)
	}

	uid := "5d1c7a3e-2b4f-4c6d-8e9a-0f1b2c3d4e21"
	podDir := filepath.Join("/var/lib/kubelet/pods", uid)
	mp := filepath.Join(podDir, "volumes/kubernetes.io~csi/pvc-watch/mount")
	t.Cleanup(func() { _ = os.RemoveAll(podDir) })
	f := testkit.HungFUSE(t, mp, testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	time.Sleep(2 * time.Second)
	f.Hang()

	// mounts every 30 s, a 3 s probe, then a collection of at most 2m.
	got := newBundle(t, hostDir, before, 4*time.Minute)
	m, _, err := bundle.ReadManifest(context.Background(), got)
	if err != nil {
		t.Fatal(err)
	}
	if m.Trigger == nil || m.Trigger.Name != "mount-hung" || !strings.Contains(strings.Join(m.Trigger.Evidence, "\n"), mp) {
		t.Errorf("the watcher's bundle names trigger %+v, want mount-hung with %s", m.Trigger, mp)
	}
	findings := analyzeIDs(t, got)
	named := false
	for _, fd := range findings {
		named = named || strings.HasPrefix(fd, "hung-mount") && strings.Contains(fd, mp)
	}
	if !named {
		t.Errorf("analyze of the watcher's bundle does not name the hung mount %s: %v", mp, findings)
	}
	if err := f.Close(); err != nil {
		t.Errorf("releasing the hung mount: %v", err)
	}
	logs := c.k(t, "", "-n", "nodesnap", "logs", pod, "-c", "watch")
	if n := strings.Count(logs, "mount-hung fired"); n != 1 {
		t.Errorf("mount-hung fired %d times, want once:\n%s", n, logs)
	}
}
