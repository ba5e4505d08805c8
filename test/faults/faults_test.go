package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// node is a fixture host root: a kubelet tree with a pod volume, a CSI
// plugin registry, node configuration with a planted secret, and logs.
type node struct {
	root    string
	secrets []string
}

const podUID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{root: t.TempDir(), secrets: []string{"rel-kubeconfig-token-7c6b5a49382716", "RelLogPassw0rdPlanted"}}
	files := map[string]string{
		"etc/hostname":                fmt.Sprintf("reliability-node\n"),
		"var/lib/kubelet/kubeconfig":  "users:\n- name: x\n  user:\n    token: " + n.secrets[0] + "\n",
		"var/lib/kubelet/config.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n",
		"var/log/messages":            "2026-11-21T08:00:00+00:00 node kubelet[1]: E1121 mount failed: password=" + n.secrets[1] + "\n",
		"var/lib/kubelet/pods/" + podUID + "/volumes/kubernetes.io~csi/pvc-ok/vol_data.json": `{"driverName":"hostpath.csi.k8s.io","volumeHandle":"v1","specVolID":"pvc-ok"}` + "\n",
	}
	for rel, content := range files {
		p := filepath.Join(n.root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"var/lib/kubelet/plugins_registry", "var/lib/kubelet/pods/" + podUID + "/volumes/kubernetes.io~csi/pvc-ok/mount", "run"} {
		if err := os.MkdirAll(filepath.Join(n.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// deadline of every faulted run, and what a run may take past it.
const (
	runTimeout = 30 * time.Second
	slack      = 5 * time.Second
)

func (n *node) args(out string, extra ...string) []string {
	a := []string{"collect", "-q", "--output-dir", out, "--root", n.root, "--proc", "/proc", "--sys", "/sys",
		"--timeout", runTimeout.String(), "--probe-timeout", "2s",
		// Nothing listens on port 1: the kubelet collector fails fast
		// unless a fault gives it a stand-in.
		"--kubelet-url", "https://127.0.0.1:1", "--kubelet-readonly-url", "http://127.0.0.1:1",
		"--journal-timeout", "5s", "--runtime-command-timeout", "5s", "--runtime-request-timeout", "5s", "--kubelet-request-timeout", "5s"}
	return append(a, extra...)
}

// hangingPrograms puts journalctl, crictl, ctr and docker that never
// return first on PATH; returns the PATH to use.
func hangingPrograms(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"journalctl", "crictl", "ctr", "docker", "dmesg"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\necho started\nexec sleep 3600\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return "PATH=" + dir + ":" + os.Getenv("PATH")
}

// fault sets up one fault on a node and says what the bundle must name.
type fault struct {
	name  string
	setup func(t *testing.T, n *node) (env, args []string, check func(t *testing.T, m *bundle.Manifest, files map[string][]byte))
}

func hungMountNamed(t *testing.T, m *bundle.Manifest, mp string) {
	t.Helper()
	for _, h := range m.HungMounts {
		if strings.HasSuffix(h.Target, mp) || h.Target == mp {
			return
		}
	}
	var got []string
	for _, h := range m.HungMounts {
		got = append(got, h.Target)
	}
	t.Errorf("hung mount %s not named in the manifest (hung_mounts: %v)", mp, got)
}

func hungExecNamed(t *testing.T, m *bundle.Manifest, prog string) {
	t.Helper()
	for _, c := range m.Collectors {
		for _, h := range c.HungItems {
			if h.Op == "exec" && strings.Contains(h.Target, prog) {
				return
			}
		}
		if c.HangEvidence != nil && strings.Contains(fmt.Sprint(c.HangEvidence.String()), prog) {
			return
		}
	}
	t.Errorf("no collector names the hung %s", prog)
}

var faults = []fault{
	{"hung FUSE under the pods dir", func(t *testing.T, n *node) ([]string, []string, func(*testing.T, *bundle.Manifest, map[string][]byte)) {
		mp := filepath.Join(n.root, "var/lib/kubelet/pods", podUID, "volumes/kubernetes.io~csi/pvc-hung/mount")
		testkit.HungFUSE(t, mp, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))
		return nil, nil, func(t *testing.T, m *bundle.Manifest, _ map[string][]byte) { hungMountNamed(t, m, mp) }
	}},
	{"hung FUSE under /", func(t *testing.T, n *node) ([]string, []string, func(*testing.T, *bundle.Manifest, map[string][]byte)) {
		mp := fmt.Sprintf("/nodesnap-reliability-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
		testkit.HungFUSE(t, mp, testkit.FUSEStartHung())
		return nil, nil, func(t *testing.T, m *bundle.Manifest, _ map[string][]byte) { hungMountNamed(t, m, mp) }
	}},
	{"hung FUSE as a CSI plugin dir", func(t *testing.T, n *node) ([]string, []string, func(*testing.T, *bundle.Manifest, map[string][]byte)) {
		mp := filepath.Join(n.root, "var/lib/kubelet/plugins/hung.csi.example.com")
		testkit.HungFUSE(t, mp, testkit.FUSEStartHung())
		return nil, nil, func(t *testing.T, m *bundle.Manifest, _ map[string][]byte) { hungMountNamed(t, m, mp) }
	}},
	{"hung FUSE at a non-UTF-8 path", func(t *testing.T, n *node) ([]string, []string, func(*testing.T, *bundle.Manifest, map[string][]byte)) {
		// Paths reach workers byte for byte: this one used to arrive with
		// U+FFFD for \xe9, a path that does not exist, and the hung mount
		// was reported "unmounted during the run".
		mp := filepath.Join(n.root, "var/lib/kubelet/pods", podUID, "volumes/kubernetes.io~csi/pvc-caf\xe9-\xff/mount")
		testkit.HungFUSE(t, mp, testkit.FUSEStartHung())
		return nil, nil, func(t *testing.T, m *bundle.Manifest, _ map[string][]byte) {
			// The manifest is JSON: it shows the name with U+FFFD.
			hungMountNamed(t, m, strings.ToValidUTF8(mp, "\uFFFD"))
		}
	}},
	{"journalctl, crictl, ctr never return", func(t *testing.T, n *node) ([]string, []string, func(*testing.T, *bundle.Manifest, map[string][]byte)) {
		path := hangingPrograms(t)
		// Runtime sockets that exist, so the runtime collector runs its
		// commands; they accept and never answer.
		for _, s := range []string{"run/containerd/containerd.sock", "run/crio/crio.sock"} {
			p := filepath.Join(n.root, s)
			os.MkdirAll(filepath.Dir(p), 0o755)
			testkit.SilentListener(t, "unix", p)
		}
		// A journal file, so that journalctl is run at all (asked for:
		// the default reader reads the files itself).
		jdir := filepath.Join(n.root, "var/log/journal/0123456789abcdef0123456789abcdef")
		os.MkdirAll(jdir, 0o755)
		os.WriteFile(filepath.Join(jdir, "system.journal"), []byte("LPKSHHRH"), 0o640)
		return []string{path}, []string{"--journal-dir", filepath.Dir(jdir), "--journal-reader", "journalctl"}, func(t *testing.T, m *bundle.Manifest, _ map[string][]byte) {
			hungExecNamed(t, m, "journalctl")
			hungExecNamed(t, m, "crictl")
		}
	}},
	{"kubelet accepts and never answers", func(t *testing.T, n *node) ([]string, []string, func(*testing.T, *bundle.Manifest, map[string][]byte)) {
		l := testkit.SilentListener(t, "tcp", "127.0.0.1:0")
		r := testkit.SilentListener(t, "tcp", "127.0.0.1:0")
		return nil, []string{"--kubelet-url", "https://" + l.Addr().String(), "--kubelet-readonly-url", "http://" + r.Addr().String()},
			func(t *testing.T, m *bundle.Manifest, files map[string][]byte) {
				c := m.Collector("kubelet")
				if c == nil || c.Status == bundle.StatusOK {
					t.Errorf("kubelet collector %+v: want it to say the kubelet did not answer", c)
					return
				}
				req := strings.ToLower(string(files["kubelet/requests.json"]) + c.Error + strings.Join(c.Notes, " "))
				if !strings.Contains(req, "deadline") && !strings.Contains(req, "timeout") && !strings.Contains(req, "did not answer") {
					t.Errorf("kubelet collector does not say its requests timed out: %s", req)
				}
			}
	}},
}

// Each hang fault alone: the run ends within its deadline plus slack, the
// bundle validates, and it names what hung.
func TestHangFaults(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	list := faults
	if !full() {
		// The fast subset: every fault at once, one round (below).
		skip.Because(t, "one fault at a time runs with NODESNAP_RELIABILITY=full (make reliability); the fast subset runs all faults at once")
	}
	for _, f := range list {
		for i := 0; i < rounds(1, 3); i++ {
			t.Run(fmt.Sprintf("%s/%d", f.name, i), func(t *testing.T) {
				n := newNode(t)
				env, extra, check := f.setup(t, n)
				runFault(t, f.name, n, env, extra, []func(*testing.T, *bundle.Manifest, map[string][]byte){check})
			})
		}
	}
}

// Every hang fault at the same time.
func TestAllHangFaultsAtOnce(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	for i := 0; i < rounds(1, 3); i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			n := newNode(t)
			var env, args []string
			var checks []func(*testing.T, *bundle.Manifest, map[string][]byte)
			for _, f := range faults {
				e, a, c := f.setup(t, n)
				env, args = append(env, e...), append(args, a...)
				checks = append(checks, c)
			}
			runFault(t, "all hang faults at once", n, env, args, checks)
		})
	}
}

func runFault(t *testing.T, name string, n *node, env, extra []string, checks []func(*testing.T, *bundle.Manifest, map[string][]byte)) {
	t.Helper()
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, env, n.args(out, extra...)...)
	o := outcome{fault: name}
	if r.elapsed > runTimeout {
		o.overrun = r.elapsed - runTimeout
	}
	if r.elapsed > runTimeout+slack {
		t.Errorf("run took %s, deadline %s", r.elapsed, runTimeout)
		o.failed = true
	}
	if r.code != 0 && r.code != 3 {
		t.Errorf("exit %d\nstderr:\n%s", r.code, r.stderr)
		o.failed = true
	}
	c, co := checkOutput(t, out, false, n.secrets)
	o.valid, o.leaked = co.valid, co.leaked
	o.failed = o.failed || co.failed
	if c != nil {
		for _, check := range checks {
			check(t, c.Manifest, c.Files)
		}
	}
	if t.Failed() {
		o.failed = true
	}
	record(o)
}
