package runtime_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/runtime"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

const registryPassword = "registry-password-0b1c2d3e"

// testContainerd is a containerd started by a test with its own root,
// state, sockets and debug address, all in a temporary directory.
type testContainerd struct {
	dir, config, sock, debugSock string
}

// startContainerd starts the Debian package's containerd, with its CRI
// plugin when cri is set. It is killed by its pid (and process group) when
// the test ends.
func startContainerd(t *testing.T, cri bool) *testContainerd {
	t.Helper()
	testkit.RequireRoot(t)
	testkit.RequireTool(t, "containerd")
	testkit.RequireTool(t, "ctr")
	dir, err := os.MkdirTemp("", "nsctd-") // short: unix socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &testContainerd{dir: dir, config: filepath.Join(dir, "config.toml"),
		sock: filepath.Join(dir, "c.sock"), debugSock: filepath.Join(dir, "debug.sock")}
	// Without cri, the CRI plugin is off, as in dockerd's own containerd:
	// containerd's own API and debug socket are what is tested. With it,
	// the plugin runs without a network (no CNI: pods use the host's) and,
	// as in a container, without raising OOM scores. A
	// registry credential is in the file to prove it is not copied: the
	// CRI plugin also reports it in its verbose status.
	plugins := `disabled_plugins = ["io.containerd.grpc.v1.cri"]`
	criOpts := ""
	if cri {
		plugins = ""
		// The native snapshotter copies layers: no overlay mount needed.
		// runc keeps its state under the test's directory, not /run.
		criOpts = "restrict_oom_score_adj = true\n    sandbox_image = \"" + testImage + "\"\n    stream_server_address = \"127.0.0.1\"\n    stream_server_port = \"0\"\n" +
			"  [plugins.\"io.containerd.grpc.v1.cri\".containerd]\n    snapshotter = \"native\"\n" +
			"  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n    runtime_type = \"io.containerd.runc.v2\"\n" +
			"  [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n    Root = \"" + filepath.Join(dir, "runc") + "\""
	}
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
`+plugins+`

[grpc]
  address = %q # the API socket

[ttrpc]
  address = %q

[debug]
  address = '%s'
  level = "info"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %q
  [plugins."io.containerd.grpc.v1.cri"]
    `+criOpts+`
  [plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
    username = "robot"
    password = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock, c.sock+".ttrpc", c.debugSock, filepath.Join(dir, "opt"), registryPassword)
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", c.config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting containerd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		// By pid: its process group is the one this test made.
		syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, e1 := os.Stat(c.sock)
		_, e2 := os.Stat(c.debugSock)
		if e1 == nil && e2 == nil {
			break
		}
		select {
		case err := <-done:
			log, _ := os.ReadFile(logf.Name())
			cannotStart(t, "containerd exited at start (%v):\n%s", err, tail(log, 3000))
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			cannotStart(t, "containerd did not create its sockets within 20s:\n%s", tail(log, 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// cannotStart skips (fails in CI) when this machine cannot run containerd,
// saying exactly why.
func cannotStart(t *testing.T, format string, args ...any) {
	t.Helper()
	skip.Missing(t, format, args...)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (c *testContainerd) ctr(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"-a", c.sock}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %q: %v\n%s", args, err, out)
	}
	return string(out)
}

func runtimeSummary(t *testing.T, b *supervisortest.Bundle) map[string]layout.RuntimeStatus {
	t.Helper()
	var s layout.RuntimeSummary
	if err := json.Unmarshal(b.File(t, "runtime/summary.json"), &s); err != nil {
		t.Fatalf("runtime/summary.json: %v", err)
	}
	out := map[string]layout.RuntimeStatus{}
	for _, r := range s.Runtimes {
		out[r.Name] = r
	}
	return out
}

// A real containerd: its goroutine dump over the debug socket and the ctr
// listings are collected, with the socket addresses read from its config;
// without the ctr client the dump still comes back.
func TestRuntimeContainerd(t *testing.T) {
	c := startContainerd(t, false)
	c.ctr(t, "namespaces", "create", "k8s.io")
	c.ctr(t, "namespaces", "create", "nodesnap-test", "incident=001")
	none := t.TempDir()
	supervisortest.Flags(t, "runtime", "--containerd-config", c.config,
		"--crio-socket", filepath.Join(none, "crio.sock"), "--docker-socket", filepath.Join(none, "docker.sock"))
	b := supervisortest.Collect(t, "runtime", collectors.Common{})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	dump := b.File(t, "runtime/containerd/goroutine-debug2.txt")
	if !bytes.Contains(dump, []byte("goroutine ")) || !bytes.Contains(dump, []byte("github.com/containerd/containerd")) {
		t.Errorf("goroutine-debug2.txt is not containerd's goroutine dump (%d bytes): %.300s", len(dump), dump)
	}
	if ns := string(b.File(t, "runtime/containerd/ctr-namespaces.txt")); !strings.Contains(ns, "nodesnap-test") || !strings.Contains(ns, "incident=001") {
		t.Errorf("ctr-namespaces.txt = %q", ns)
	}
	if s := string(b.File(t, "runtime/containerd/k8s.io/ctr-containers.txt")); !strings.HasPrefix(s, "CONTAINER") {
		t.Errorf("ctr-containers.txt = %q", s)
	}
	if s := string(b.File(t, "runtime/containerd/k8s.io/ctr-tasks.txt")); !strings.HasPrefix(s, "TASK") {
		t.Errorf("ctr-tasks.txt = %q", s)
	}
	cfg := b.File(t, "runtime/containerd/config.toml")
	if !bytes.Contains(cfg, []byte(c.debugSock)) || !bytes.Contains(cfg, []byte(`username = "robot"`)) {
		t.Errorf("config.toml copy is not the config: %s", cfg)
	}
	supervisortest.AssertAbsent(t, b, registryPassword)

	rs := runtimeSummary(t, b)
	ctd := rs["containerd"]
	if !ctd.Present || !ctd.SocketFound || !ctd.DebugSocketFound || ctd.Socket != c.sock || ctd.DebugSocket != c.debugSock || ctd.ConfigFile != c.config {
		t.Errorf("containerd summary %+v", ctd)
	}
	for _, it := range ctd.Items {
		if it.Error != "" {
			t.Errorf("item %+v failed", it)
		}
		if it.Skipped == "" && it.DurationSeconds <= 0 {
			t.Errorf("item %+v has no duration", it)
		}
	}
	// The CRI plugin is off: the CRI API is skipped, not failed, and ctr
	// listed the containers.
	if v := criItem(t, ctd, "Version"); !ctd.Listed || !strings.Contains(v.Skipped, "does not serve CRI v1") {
		t.Errorf("containerd without its CRI plugin: %+v", ctd)
	}
	if rs["cri-o"].Present || rs["docker"].Present {
		t.Errorf("absent runtimes reported present: %+v", rs)
	}

	// Without the ctr client (PATH holds nothing), the dump still comes
	// back and the manifest says what was skipped; with no CRI plugin
	// either, nothing listed the containers, and the run says so.
	t.Setenv("PATH", t.TempDir())
	b = supervisortest.Collect(t, "runtime", collectors.Common{})
	if b.Res.Status != bundle.StatusPartial || !strings.Contains(b.Res.Error, "containerd's socket") ||
		!strings.Contains(b.Res.Error, "its containers could not be listed") || !strings.Contains(b.Res.Error, "ctr not installed") {
		t.Fatalf("without ctr or CRI: status %q (%s), want partial saying why", b.Res.Status, b.Res.Error)
	}
	b.File(t, "runtime/containerd/goroutine-debug2.txt")
	if _, ok := b.Files["runtime/containerd/ctr-namespaces.txt"]; ok {
		t.Errorf("a ctr listing exists without ctr")
	}
	if !strings.Contains(b.Notes(), "ctr is not installed") {
		t.Errorf("notes do not say ctr is missing:\n%s", b.Notes())
	}
}

// No runtime at all (no socket, no client): unsupported, not an error.
func TestRuntimeAbsent(t *testing.T) {
	root := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	supervisortest.Flags(t, "runtime")
	b := supervisortest.Collect(t, "runtime", collectors.Common{Root: root})
	if b.Res.Status != bundle.StatusUnsupported {
		t.Fatalf("status %q (%s), want unsupported", b.Res.Status, b.Res.Error)
	}
	if !strings.Contains(b.Res.Error, "no container runtime found") {
		t.Errorf("error %q", b.Res.Error)
	}
	rs := runtimeSummary(t, b)
	if len(rs) != 3 {
		t.Errorf("summary %+v, want the three runtimes", rs)
	}
}

// dockerd over its unix socket (a stand-in serving the real pprof
// handlers and just enough of the API for `docker ps`), found under
// --root: the goroutine dump comes back, and `docker ps -a` where the
// docker client is installed.
func TestRuntimeDockerSocket(t *testing.T) {
	root, err := os.MkdirTemp("", "nsdock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.MkdirAll(filepath.Join(root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(root, "run", "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("API-Version", "1.41")
		io.WriteString(w, "OK")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/containers/json"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `[{"Id":"4f1d0c0ffee","Names":["/volume-writer"],"Image":"busybox","Command":"sh -c 'mkdir -p /data/$RANDOM'","Created":1700000000,"State":"created","Status":"Created"}]`)
		case strings.HasSuffix(r.URL.Path, "/info"):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ID":"x","Containers":1,"Driver":"overlay2","ServerVersion":"24.0.0"}`)
		default:
			http.NotFound(w, r)
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	supervisortest.Flags(t, "runtime", "--docker-socket", "/var/run/docker.sock")
	b := supervisortest.Collect(t, "runtime", collectors.Common{Root: root})
	if dump := b.File(t, "runtime/docker/goroutine-debug2.txt"); !bytes.Contains(dump, []byte("goroutine ")) {
		t.Errorf("docker goroutine dump %.200s", dump)
	}
	rs := runtimeSummary(t, b)
	if d := rs["docker"]; !d.Present || d.Socket != "/run/docker.sock" {
		t.Errorf("docker summary %+v", d)
	}
	if _, err := exec.LookPath("docker"); err == nil {
		if ps := string(b.File(t, "runtime/docker/docker-ps.txt")); !strings.Contains(ps, "volume-writer") {
			t.Errorf("docker-ps.txt = %q", ps)
		}
		if b.Res.Status != bundle.StatusOK && b.Res.Status != bundle.StatusPartial {
			t.Errorf("status %q", b.Res.Status)
		}
	} else if !strings.Contains(b.Notes(), "docker is not installed") {
		t.Errorf("no docker client, and the notes do not say so:\n%s", b.Notes())
	}
	assertDockerAPI(t, b)

	// Without the docker client, as in nodesnap's image: dockerd's API
	// lists the containers, and the run is complete.
	t.Setenv("PATH", t.TempDir())
	b = supervisortest.Collect(t, "runtime", collectors.Common{Root: root})
	if b.Res.Status != bundle.StatusOK {
		t.Errorf("without the docker client: status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	assertDockerAPI(t, b)
	if !strings.Contains(b.Notes(), "docker is not installed here") || !strings.Contains(b.Notes(), "listed by other means") {
		t.Errorf("notes do not say the client is missing and not needed:\n%s", b.Notes())
	}
	if _, ok := b.Files["runtime/docker/docker-ps.txt"]; ok {
		t.Errorf("docker-ps.txt exists without a docker client")
	}

	// dockerd down (its socket left behind): partial, saying why.
	srv.Close()
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	b = supervisortest.Collect(t, "runtime", collectors.Common{Root: root})
	if b.Res.Status != bundle.StatusPartial || !strings.Contains(b.Res.Error, "docker's socket") || !strings.Contains(b.Res.Error, "dockerd's API: connection refused") {
		t.Errorf("dockerd down: status %q (%s), want partial saying why", b.Res.Status, b.Res.Error)
	}
}

// assertDockerAPI checks the listing and info taken from dockerd's API.
func assertDockerAPI(t *testing.T, b *supervisortest.Bundle) {
	t.Helper()
	var cs []struct {
		Id    string
		Names []string
		State string
	}
	if err := json.Unmarshal(b.File(t, "runtime/docker/containers.json"), &cs); err != nil || len(cs) != 1 || cs[0].Names[0] != "/volume-writer" || cs[0].State != "created" {
		t.Errorf("docker/containers.json (%v): %s", err, b.File(t, "runtime/docker/containers.json"))
	}
	var info struct{ ServerVersion string }
	if err := json.Unmarshal(b.File(t, "runtime/docker/info.json"), &info); err != nil || info.ServerVersion != "24.0.0" {
		t.Errorf("docker/info.json (%v): %s", err, b.File(t, "runtime/docker/info.json"))
	}
	d := runtimeSummary(t, b)["docker"]
	if !d.Listed {
		t.Errorf("docker not listed: %+v", d)
	}
	for _, it := range d.Items {
		if it.URL == "unix:///run/docker.sock/containers/json?all=1" && it.File == "docker/containers.json" && it.StatusCode == 200 {
			return
		}
	}
	t.Errorf("no summary item for GET /containers/json: %+v", d.Items)
}

func TestParseContainerdAddresses(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     runtime.ContainerdAddresses
	}{
		{"debian default", "version = 2\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    address = \"nope\"\n", runtime.ContainerdAddresses{}},
		{"all three", "[grpc]\n  address = \"/run/containerd/containerd.sock\"\n[ttrpc]\naddress='/run/t.sock'\n[debug]\n  address = \"/run/containerd/debug.sock\" # pprof\n  level = \"debug\"\n",
			runtime.ContainerdAddresses{GRPC: "/run/containerd/containerd.sock", TTRPC: "/run/t.sock", Debug: "/run/containerd/debug.sock"}},
		{"escapes and comments", "# [debug]\n#address = \"/x\"\n[debug] # trailing\naddress = \"/run/a\\\"b.sock\"\n", runtime.ContainerdAddresses{Debug: `/run/a"b.sock`}},
		{"array table resets", "[debug]\n[[plugins.x]]\naddress = \"/wrong\"\n", runtime.ContainerdAddresses{}},
		{"unterminated", "[debug]\naddress = \"/run/x\n", runtime.ContainerdAddresses{}},
		{"crlf", "[debug]\r\naddress = \"/run/d.sock\"\r\n", runtime.ContainerdAddresses{Debug: "/run/d.sock"}},
	} {
		if got := runtime.ParseContainerdAddresses([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestSanitizeRuntimeConfig(t *testing.T) {
	in := `[plugins."io.containerd.grpc.v1.cri".registry.configs."r.example".auth]
  username = "robot"
  password = "p@ss\"word"
  auth = 'cm9ib3Q6cGFzcw=='
  identitytoken = ""
{"auths":{"r.example":{"auth":"cm9ib3Q6cGFzcw==","identitytoken":"eyJabc","password":""}},"sandboxImage":"pause:3.9"}
`
	out, n := runtime.SanitizeRuntimeConfig([]byte(in))
	for _, gone := range []string{`p@ss`, "cm9ib3Q6cGFzcw==", "eyJabc"} {
		if bytes.Contains(out, []byte(gone)) {
			t.Errorf("%q kept:\n%s", gone, out)
		}
	}
	for _, kept := range []string{`username = "robot"`, `"sandboxImage":"pause:3.9"`, `"password":""`} {
		if !bytes.Contains(out, []byte(kept)) {
			t.Errorf("%q lost:\n%s", kept, out)
		}
	}
	if n != 5 {
		t.Errorf("%d replacements, want 5:\n%s", n, out)
	}
}

func FuzzParseContainerdAddresses(f *testing.F) {
	f.Add([]byte("[debug]\n  address = \"/run/containerd/debug.sock\"\n"))
	f.Add([]byte("[grpc]\naddress='/a'\n[ttrpc]\naddress = \"\\t\\n\"\n"))
	f.Add([]byte("[debug\naddress = \"\\u00e9\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a := runtime.ParseContainerdAddresses(data)
		for _, s := range []string{a.GRPC, a.TTRPC, a.Debug} {
			if s != "" && !bytes.Contains(data, []byte("address")) {
				t.Fatalf("address %q from input without an address key", s)
			}
		}
	})
}

func FuzzSanitizeRuntimeConfig(f *testing.F) {
	f.Add([]byte(`password = "x"` + "\n" + `{"auth":"eA=="}`))
	f.Add([]byte(`token='a' secret = "b\"c"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, n := runtime.SanitizeRuntimeConfig(data)
		if n == 0 && !bytes.Equal(out, data) {
			t.Fatalf("changed without counting")
		}
		again, _ := runtime.SanitizeRuntimeConfig(out)
		if !bytes.Equal(again, out) {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
	})
}
