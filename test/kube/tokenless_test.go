package kube_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Incident 003 on a real kubelet, collected on the node without any
// kubelet credential (no goroutine dump): the API's view through the
// least-privilege cluster role, and the kernel's view of the kubelet. The
// Pending pod's chain still starts with the hung mount as what stops the
// kubelet's sync loop, inferred from the kubelet thread's kernel stack and
// the orphaned pod UID.
func TestIncident003ExplainWithoutKubeletToken(t *testing.T) {
	c := requireCluster(t)
	kc, _, _, _ := c.saKubeconfig(t)
	uid := "3f0b6a2e-5c1d-4e8f-9a7b-0c3d2e1f0a43"
	podDir := filepath.Join("/var/lib/kubelet/pods", uid)
	mp := filepath.Join(podDir, "volumes/kubernetes.io~csi/pvc-0043/mount")
	t.Cleanup(func() { _ = os.RemoveAll(podDir) })
	f := testkit.HungFUSE(t, mp, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	c.waitKubeletBlocked(t, 60*time.Second)
	c.k(t, c.explainPod("tokenless-stuck"), "apply", "-f", "-")
	t.Cleanup(func() {
		exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "delete", "pod", "tokenless-stuck", "--force", "--grace-period=0", "--ignore-not-found").Run()
	})
	// Pending long enough to be in trouble.
	time.Sleep(2*time.Minute + 10*time.Second)

	r := collect(t, nil, "--timeout", "90s", "--kubeconfig", kc, "--node-name", c.node)
	if st := r.status(t, "cluster"); st.Status != "ok" {
		t.Errorf("cluster collector: %s %s %v", st.Status, st.Error, st.Notes)
	}
	for name := range r.b.Files {
		if strings.HasPrefix(name, "kubelet/goroutine-debug") {
			t.Fatalf("a goroutine dump (%s) without a kubelet credential: the test proves nothing", name)
		}
	}
	e, code, _ := explainRun(t, time.Minute, "pod/tokenless-stuck", "-n", "default", "--bundle", r.path)
	if e.Verdict != analyze.VerdictExplained || e.Details == nil || len(e.Details.Chain) == 0 || code != 3 {
		t.Fatalf("explain pod/tokenless-stuck: exit %d, %+v", code, e)
	}
	first := e.Details.Chain[0]
	t.Logf("tokenless-stuck: %s ← [%d] %s (%s)", e.Details.Symptom, first.Index, first.Summary, first.How)
	if first.Finding != "hung-mount" || !strings.Contains(first.Summary, mp) || !strings.Contains(first.How, "sync loop") ||
		!strings.Contains(first.Summary, "the kubelet's housekeeping is stuck on it (inferred from a kubelet thread's kernel stack and the orphaned pod "+uid+")") {
		t.Errorf("the stuck pod's chain starts with %s %q (%s), want the kubelet's housekeeping inferred on the hung mount %s", first.Finding, first.Summary, first.How, mp)
	}
	if err := f.Close(); err != nil {
		t.Errorf("releasing the hung mount: %v", err)
	}
}
