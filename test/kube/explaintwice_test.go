package kube_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// TestExplainTwiceInARow: a support engineer explains several pods in a
// row. Each explain through the cluster makes the collection namespace
// when it is missing and deletes it at the end; the next one, seconds
// later, finds it still being deleted, where nothing can be created. It
// waits for it to go and answers, as the first did.
func TestExplainTwiceInARow(t *testing.T) {
	c := requireCluster(t)
	const ns = "nodesnap-twice" // not the manifests' namespace: explain makes it and deletes it
	if out, err := exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "get", "namespace", ns, "--ignore-not-found", "-o", "name").Output(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("namespace %s exists before the test (%v): explain would not make it", ns, err)
	}
	pods := []string{"explain-twice-a", "explain-twice-b"}
	for _, p := range pods {
		c.k(t, c.explainPod(p), "apply", "-f", "-")
	}
	t.Cleanup(func() {
		_ = exec.Command(c.kubectl, append([]string{"--kubeconfig", c.kubeconfig, "delete", "pod", "--force", "--grace-period=0", "--ignore-not-found"}, pods...)...).Run()
		_ = exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "delete", "namespace", ns, "--ignore-not-found", "--wait=false").Run()
	})
	c.k(t, "", "wait", "--for=condition=Ready", "pod/"+pods[0], "pod/"+pods[1], "--timeout=2m")
	for i, p := range pods {
		start := time.Now()
		e, code, stderr := explainRun(t, 7*time.Minute, "pod/"+p, "-n", "default", "--kubeconfig", c.kubeconfig,
			"--collect-namespace", ns, "--image", c.image(t), "--node-timeout", "4m", "--output-dir", t.TempDir())
		if code == 1 || e.Verdict == analyze.VerdictNotCollected || strings.Contains(stderr, "being terminated") {
			t.Fatalf("explain %d of 2 (pod/%s): exit %d, verdict %s\n%s", i+1, p, code, e.Verdict, stderr)
		}
		t.Logf("explain %d of 2 (pod/%s): exit %d, verdict %s, in %s", i+1, p, code, e.Verdict, time.Since(start).Round(time.Second))
	}
}
