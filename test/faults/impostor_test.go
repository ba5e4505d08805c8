package faults

// The attacks of round two on how nodesnap finds the kubelet, each through
// the real binary: an unprivileged user's program named kubelet whose
// --kubeconfig names the user's server and a root-only tokenFile, the same
// program naming root-only files as its --config and --kubeconfig, a fake
// root whose proc/<pid>/root leads to the real "/", and devices and FIFOs
// named as configuration files.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/inroot"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// nobody is the unprivileged user the attacks run as.
const nobody = 65534

// attackerDir is a directory the unprivileged user owns, as their home
// would be (t.TempDir is 0700 root, which nobody cannot enter).
func attackerDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "nodesnap-impostor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	return d
}

// rootOnly writes a file only root can read, in a directory only root can
// enter, and returns its path.
func rootOnly(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeKubelet starts, as nobody, a program whose command name is kubelet
// (a shell script so named: the kernel names the process after the
// script) with args, and returns its pid. It is killed when the test ends.
func fakeKubelet(t *testing.T, dir string, args ...string) int {
	t.Helper()
	script := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(script, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // its own group: the script and its sleep
		_ = cmd.Wait()
	})
	// Wait until the kernel names it kubelet (the exec has happened).
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == "kubelet" {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the fake kubelet (pid %d) never ran under that name", pid)
	return 0
}

// collectorNotes are the notes and error of one collector in a manifest.
func collectorNotes(m *bundle.Manifest, name string) string {
	for _, c := range m.Collectors {
		if c.Name == name {
			return c.Error + "\n" + strings.Join(c.Notes, "\n")
		}
	}
	return ""
}

// An unprivileged user's program named kubelet, whose --kubeconfig names
// the user's own server (with its CA, so that TLS verifies) and
// tokenFile: a root-only file, gets nothing: not a request, not a byte of
// the file. The cluster collector's notes name the pid and the check it
// failed.
func TestImpostorKubeletGetsNoCredential(t *testing.T) {
	testkit.RequireRoot(t)
	const secret = "root-only-token-impostor-4b1d9e"
	tokenFile := rootOnly(t, "token", secret+"\n")
	var mu sync.Mutex
	var requests []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}`)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := attackerDir(t)
	kc := filepath.Join(dir, "kubeconfig")
	kcText := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: u
  user:
    tokenFile: %s
contexts:
- name: c
  context: {cluster: k, user: u}
`, srv.URL, base64.StdEncoding.EncodeToString(ca), tokenFile)
	if err := os.WriteFile(kc, []byte(kcText), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := fakeKubelet(t, dir, "--kubeconfig", kc)

	n := newNode(t)
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, []string{"KUBECONFIG="}, n.args(out, "--only", "cluster")...)
	c, o := checkOutput(t, out, false, []string{secret})
	o.fault = "a user's program named kubelet names the credential's server"
	defer func() { o.failed = t.Failed(); record(o) }()
	mu.Lock()
	got := append([]string(nil), requests...)
	mu.Unlock()
	if len(got) > 0 {
		t.Errorf("the impostor's server was sent %d request(s), first %q", len(got), got[0])
	}
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	notes := collectorNotes(c.Manifest, "cluster")
	if !strings.Contains(notes, "pid "+strconv.Itoa(pid)) || !strings.Contains(notes, "uid 65534") {
		t.Errorf("the cluster collector does not say pid %d was refused as uid 65534:\n%s", pid, notes)
	}
}

// The same kind of program naming root-only files as its --config and
// --kubeconfig has neither copied into the bundle; the nodeconfig notes
// name the pid and the check it failed.
func TestImpostorKubeletFilesNotCollected(t *testing.T) {
	testkit.RequireRoot(t)
	const cfgSecret, kcSecret = "root-only-config-canary-77e2a1", "root-only-kubeconfig-canary-93c4f0"
	cfg := rootOnly(t, "config.yaml", "kind: KubeletConfiguration\n# "+cfgSecret+"\n")
	kc := rootOnly(t, "shadow", "root:"+kcSecret+":19000:0:99999:7:::\n")
	pid := fakeKubelet(t, attackerDir(t), "--config", cfg, "--kubeconfig", kc)

	n := newNode(t)
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "nodeconfig")...)
	c, o := checkOutput(t, out, false, []string{cfgSecret, kcSecret})
	o.fault = "a user's program named kubelet names root-only files"
	defer func() { o.failed = t.Failed(); record(o) }()
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	if fj := string(c.Files["nodeconfig/files.json"]); strings.Contains(fj, cfg) || strings.Contains(fj, kc) {
		t.Errorf("files.json lists the impostor's files:\n%s", fj)
	}
	notes := collectorNotes(c.Manifest, "nodeconfig")
	if !strings.Contains(notes, "pid "+strconv.Itoa(pid)) || !strings.Contains(notes, "uid 65534") {
		t.Errorf("the nodeconfig collector does not say pid %d was refused as uid 65534:\n%s", pid, notes)
	}
}

// A fake root whose proc tree describes a kubelet (pid 4242, root, its
// executable root-owned) with --config /etc/shadow, and whose
// proc/4242/root leads to the real "/": with the default --proc (the
// root's own proc), the file read is the root's /etc/shadow, never the
// machine's.
func TestFakeProcRootIsNoDoor(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(map[bool]string{false: "openat2", true: "walk"}[walk], func(t *testing.T) { fakeProcRoot(t, walk) })
	}
}

func fakeProcRoot(t *testing.T, walk bool) {
	testkit.RequireRoot(t)
	realShadow, err := os.ReadFile("/etc/shadow")
	if err != nil || len(realShadow) < 8 {
		skip.Missing(t, "no /etc/shadow to compare with: %v", err)
	}
	n := newNode(t)
	mk := func(p, s string, mode os.FileMode) {
		full := filepath.Join(n.root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, to string) {
		full := filepath.Join(n.root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, full); err != nil {
			t.Fatal(err)
		}
	}
	mk("etc/shadow", "inside-the-root shadow\n", 0o600)
	mk("usr/bin/kubelet", "#!/bin/true\n", 0o755)
	mk("proc/4242/stat", "4242 (kubelet) S 1 4242 4242 0 -1 4194560 1 0 0 0 1 1 0 0 20 0 2 0 100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", 0o444)
	mk("proc/4242/cmdline", "/usr/bin/kubelet\x00--config\x00/etc/shadow\x00", 0o444)
	mk("proc/4242/status", "Name:\tkubelet\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4242\nPPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n", 0o444)
	link("proc/4242/root", "/")
	link("proc/4242/cwd", "/")
	link("proc/4242/exe", "/usr/bin/kubelet")
	link("proc/4242/ns/user", "user:[4026531837]")
	link("proc/1/ns/user", "user:[4026531837]")
	env := []string{}
	if walk {
		env = append(env, inroot.WalkEnv+"=1")
	}
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, env, "collect", "-q", "--output-dir", out, "--root", n.root,
		"--timeout", runTimeout.String(), "--probe-timeout", "2s", "--only", "nodeconfig")
	c, o := checkOutput(t, out, false, nil)
	o.fault = "a fake root's proc/<pid>/root leads to the real /"
	defer func() { o.failed = t.Failed(); record(o) }()
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	for name, b := range c.Files {
		if bytes.Contains(b, realShadow[:min(len(realShadow), 64)]) {
			t.Errorf("%s holds the machine's real /etc/shadow", name)
		}
	}
	var files []struct {
		Path, From, File string
		Collected        bool
	}
	if err := json.Unmarshal(c.Files["nodeconfig/files.json"], &files); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range files {
		if f.Path == "/etc/shadow" && strings.Contains(f.From, "pid 4242") && f.Collected {
			found = true
			if got := string(c.Files["nodeconfig/"+f.File]); !strings.Contains(got, "inside-the-root shadow") {
				t.Errorf("the fake kubelet's --config read %q, want the root's own /etc/shadow", got)
			}
		}
	}
	if !found {
		t.Errorf("the fake kubelet's --config is not in files.json (it is the root's own file: reading it is what --root asks):\n%s", c.Files["nodeconfig/files.json"])
	}
}

// A character device and a FIFO named as configuration files are refused
// with a note, never read: the device gave 4 MiB of its bytes, the FIFO
// waited for a writer until the item's deadline.
func TestDeviceNamedAsConfig(t *testing.T) {
	testkit.RequireRoot(t)
	n := newNode(t)
	zero := filepath.Join(n.root, "etc/zero.conf")
	if err := os.MkdirAll(filepath.Dir(zero), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(zero, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))); err != nil {
		skip.Missing(t, "cannot make a character device: %v", err)
	}
	if err := unix.Mkfifo(filepath.Join(n.root, "etc/fifo.conf"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "nodeconfig",
		"--config-file", "/etc/zero.conf", "--config-file", "/etc/fifo.conf")...)
	c, o := checkOutput(t, out, false, nil)
	o.fault = "a device and a FIFO named as config files"
	defer func() { o.failed = t.Failed(); record(o) }()
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	for name, b := range c.Files {
		if strings.HasPrefix(name, "nodeconfig/files/etc/zero.conf") || strings.HasPrefix(name, "nodeconfig/files/etc/fifo.conf") {
			t.Errorf("%s was collected (%d bytes)", name, len(b))
		}
	}
	fj := string(c.Files["nodeconfig/files.json"])
	for _, want := range []string{"character device", "FIFO"} {
		if !strings.Contains(fj, want) {
			t.Errorf("files.json does not say a %s was refused:\n%s", want, fj)
		}
	}
	for _, s := range c.Manifest.Collectors {
		if s.Name == "nodeconfig" && len(s.HungItems) > 0 {
			t.Errorf("an item hung: %+v (the FIFO was opened for reading)", s.HungItems)
		}
	}
}

// The fast readers of /proc (status, stat, wchan, cgroup of every task)
// meet a fake root's links too: on a proc tree that is not the kernel's
// they open inside the root, so a wchan linked to a file outside it puts
// nothing of that file in the bundle.
func TestFakeProcFilesStayInRoot(t *testing.T) {
	testkit.RequireRoot(t)
	const canary = "outside-the-root-canary-5e0c77"
	outside := rootOnly(t, "secret", canary+"\n")
	n := newNode(t)
	pdir := filepath.Join(n.root, "proc", "4242")
	tdir := filepath.Join(pdir, "task", "4242")
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := "4242 (victim) S 1 4242 4242 0 -1 4194560 1 0 0 0 1 1 0 0 20 0 1 0 100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	for p, s := range map[string]string{pdir + "/stat": stat, tdir + "/stat": stat} {
		if err := os.WriteFile(p, []byte(s), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range []string{pdir + "/status", pdir + "/cgroup", tdir + "/wchan"} {
		if err := os.Symlink(outside, l); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, "collect", "-q", "--output-dir", out, "--root", n.root,
		"--timeout", runTimeout.String(), "--probe-timeout", "2s", "--only", "processes")
	c, o := checkOutput(t, out, false, []string{canary})
	o.fault = "a fake root's proc files link outside it"
	defer func() { o.failed = t.Failed(); record(o) }()
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	if tj := string(c.Files["processes/tasks.json"]); !strings.Contains(tj, `"victim"`) {
		t.Errorf("the fake process is not in tasks.json at all (the test proves nothing):\n%.600s", tj)
	}
}

// A user's program named kubelet, executable but not readable by its
// user (the kernel may then make it not dumpable, which makes
// /proc/<pid> root's: the kubelet collector once took that owner for the
// process's), names a --config whose tlsCertFile is the user's own
// certificate, served on a loopback port: the kubelet token is not sent
// there, and the kubelet collector's notes name the pid and its uid.
func TestImpostorKubeletServingCertNotPinned(t *testing.T) {
	testkit.RequireRoot(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		skip.Missing(t, "no sh: %v", err)
	}
	const token = "kubelet-token-for-the-impostor-1c9a"
	var mu sync.Mutex
	var auth []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	dir := attackerDir(t)
	cert := filepath.Join(dir, "serving.crt")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("kind: KubeletConfiguration\ntlsCertFile: "+cert+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A copy of sh called kubelet, executable but not readable by its
	// owner: the kernel makes such a process not dumpable.
	bin := copyAs(t, sh, filepath.Join(dir, "kubelet"))
	if err := os.Chown(bin, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o111); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", "sleep 3600; :", "--config", cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { _ = syscall.Kill(-pid, syscall.SIGKILL); _ = cmd.Wait() }()
	for i := 0; i < 500; i++ {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(b, []byte(cfg)) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d", pid), &st); err == nil {
		t.Logf("/proc/%d is owned by uid %d (the process runs as %d)", pid, st.Uid, nobody)
	}
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, []string{"NODESNAP_KUBELET_TOKEN=" + token}, "collect", "-q", "--output-dir", out,
		"--timeout", runTimeout.String(), "--only", "kubelet", "--kubelet-url", srv.URL,
		"--kubelet-readonly-url", "", "--kubelet-healthz-url", "", "--kubelet-profile-seconds", "0", "--kubelet-request-timeout", "5s")
	c, o := checkOutput(t, out, false, []string{token})
	o.fault = "a user's non-dumpable kubelet names its own serving certificate"
	defer func() { o.failed = t.Failed(); record(o) }()
	mu.Lock()
	got := append([]string(nil), auth...)
	mu.Unlock()
	for _, a := range got {
		if strings.Contains(a, token) {
			t.Errorf("the kubelet token was sent to the impostor's port")
			break
		}
	}
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	notes := collectorNotes(c.Manifest, "kubelet")
	if !strings.Contains(notes, "pid "+strconv.Itoa(pid)) || !strings.Contains(notes, "uid 65534") {
		t.Errorf("the kubelet collector does not say pid %d was refused as uid 65534:\n%s", pid, notes)
	}
}
