package nodeconfig_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/nodeconfig"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// fakeProcess describes a process in a root's own proc tree (a tree that
// is not the kernel's: what it says is read inside the root).
func fakeProcess(t *testing.T, root string, pid, uid int, comm, exe string, args ...string) {
	t.Helper()
	dir := filepath.Join(root, "proc", strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Join(dir, "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	u := strconv.Itoa(uid)
	files := map[string]string{
		"stat":    strconv.Itoa(pid) + " (" + comm + ") S 1 " + strconv.Itoa(pid) + " 0 0 -1 4194560 1 0 0 0 1 1 0 0 20 0 1 0 100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		"status":  "Name:\t" + comm + "\nPid:\t" + strconv.Itoa(pid) + "\nUid:\t" + u + "\t" + u + "\t" + u + "\t" + u + "\n",
		"cmdline": strings.Join(append([]string{exe}, args...), "\x00") + "\x00",
		"cgroup":  "0::/system.slice/" + comm + ".service\n",
	}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	for name, to := range map[string]string{"exe": exe, "ns/user": "user:[4026531837]", "root": "/", "cwd": "/"} {
		if err := os.Symlink(to, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, root, p, s string, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
}

// Kubelets inside wrappers are found when the kernel's facts vouch for
// them: k0s's kubelet binary under /var/lib/k0s/bin, microk8s's kubelite
// with its flags in --kubelet-args-file (snap paths expanded); a user's
// process called kubelet is refused with its pid and uid, and hyperkube
// running another component is not a kubelet.
func TestRunningKubeletsInWrappers(t *testing.T) {
	testkit.RequireRoot(t) // the executables must be root's, as on a node
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc", "1", "ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("user:[4026531837]", filepath.Join(root, "proc", "1", "ns", "user")); err != nil {
		t.Fatal(err)
	}
	for _, exe := range []string{"/var/lib/k0s/bin/kubelet", "/snap/microk8s/7234/kubelite", "/usr/local/bin/hyperkube"} {
		writeFile(t, root, exe, "#!/bin/true\n", 0o755)
	}
	writeFile(t, root, "home/user/kubelet", "#!/bin/true\n", 0o755)
	if err := os.Chown(filepath.Join(root, "home/user/kubelet"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "var/lib/k0s/kubelet.conf", "k0s kubeconfig\n", 0o600)
	writeFile(t, root, "var/lib/k0s/kubelet-config.yaml", "kind: KubeletConfiguration\n", 0o600)
	writeFile(t, root, "var/snap/microk8s/7234/args/kubelet", "--kubeconfig=${SNAP_DATA}/credentials/kubelet.config\n--v=2\n", 0o644)
	writeFile(t, root, "var/snap/microk8s/7234/credentials/kubelet.config", "microk8s kubeconfig\n", 0o600)
	writeFile(t, root, "etc/secret.conf", "root-only-canary-d41f\n", 0o600)
	writeFile(t, root, "etc/apiserver.conf", "apiserver\n", 0o600)
	fakeProcess(t, root, 100, 0, "kubelite", "/snap/microk8s/7234/kubelite", "--kubelet-args-file=/var/snap/microk8s/7234/args/kubelet")
	fakeProcess(t, root, 200, 0, "kubelet", "/var/lib/k0s/bin/kubelet", "--kubeconfig=/var/lib/k0s/kubelet.conf", "--config=/var/lib/k0s/kubelet-config.yaml")
	fakeProcess(t, root, 300, 1000, "kubelet", "/home/user/kubelet", "--config", "/etc/secret.conf")
	fakeProcess(t, root, 400, 0, "hyperkube", "/usr/local/bin/hyperkube", "kube-apiserver", "--kubeconfig=/etc/apiserver.conf")

	b := supervisortest.Collect(t, "nodeconfig", collectors.Common{Root: root})
	var files []nodeconfig.NodeConfigFile
	if err := json.Unmarshal(b.File(t, "nodeconfig/files.json"), &files); err != nil {
		t.Fatal(err)
	}
	from := map[string]string{}
	for _, f := range files {
		from[f.Path] = f.From
	}
	for p, want := range map[string]string{
		"/var/lib/k0s/kubelet.conf":                          "kubelet --kubeconfig (pid 200)",
		"/var/lib/k0s/kubelet-config.yaml":                   "kubelet --config (pid 200)",
		"/var/snap/microk8s/7234/credentials/kubelet.config": "kubelite --kubeconfig (pid 100)",
	} {
		if from[p] != want {
			t.Errorf("%s: from %q, want %q (files.json %+v)", p, from[p], want, files)
		}
	}
	for _, p := range []string{"/etc/secret.conf", "/etc/apiserver.conf"} {
		if _, ok := from[p]; ok {
			t.Errorf("%s was taken from a process that is not a trusted kubelet", p)
		}
	}
	notes := strings.Join(b.Res.Notes, "\n")
	if !strings.Contains(notes, "pid 300 (kubelet)") || !strings.Contains(notes, "uid 1000") {
		t.Errorf("the user's kubelet is not said to be refused:\n%s", notes)
	}
}
