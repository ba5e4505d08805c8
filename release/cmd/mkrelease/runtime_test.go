package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The image tests take the archive `make image` wrote (NODESNAP_IMAGE_ARCHIVE,
// named NODESNAP_IMAGE_REF), or build one from this checkout for this
// machine's architecture.

// needRuntime returns a program's path; a missing one fails where CI=true
// and skips elsewhere.
func needRuntime(t *testing.T, prog string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no container runtime")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root: runs a private containerd")
		}
		t.Skip("needs root: runs a private containerd")
	}
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed", prog)
		}
		t.Skipf("%s is not installed", prog)
	}
	return p
}

// testArchive returns an image archive, its reference and the version its
// nodesnap prints.
func testArchive(t *testing.T) (archive, ref, version string) {
	t.Helper()
	if a := os.Getenv("NODESNAP_IMAGE_ARCHIVE"); a != "" {
		ref = os.Getenv("NODESNAP_IMAGE_REF")
		if ref == "" {
			t.Fatal("NODESNAP_IMAGE_ARCHIVE is set but NODESNAP_IMAGE_REF is not")
		}
		// As containerd and podman list it: example/x:1 is docker.io/example/x:1.
		full, _, err := imageNames(ref)
		if err != nil {
			t.Fatal(err)
		}
		// nodesnap-<version>.oci.tar, as make image names it.
		version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(a), "nodesnap-"), ".oci.tar")
		return a, full, version
	}
	root := repoRoot(t)
	dir := t.TempDir()
	version = fmt.Sprintf("imagetest-%d", time.Now().UnixNano())
	bin := filepath.Join(dir, "nodesnap")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", bin, "./cmd/nodesnap")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nodesnap: %v\n%s", err, out)
	}
	ref = "ghcr.io/nodesnap/nodesnap:" + version
	archive = filepath.Join(dir, "nodesnap.oci.tar")
	err := writeImageArchive(archive, imageSpec{
		Ref: ref, Version: version, Revision: "test", Source: "https://github.com/nodesnap/nodesnap",
		Created: testEpoch, Binaries: map[string]string{runtime.GOARCH: bin},
		CACerts: "/etc/ssl/certs/ca-certificates.crt", DockerArch: runtime.GOARCH,
	})
	if err != nil {
		t.Fatal(err)
	}
	return archive, ref, version
}

// privateContainerd starts a containerd of its own (root, state and socket
// in a temporary directory) and stops it, its shims and its mounts when
// the test ends. It returns a ctr bound to it.
func privateContainerd(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	containerd := needRuntime(t, "containerd")
	ctr := needRuntime(t, "ctr")
	needRuntime(t, "runc")
	// Short: a unix socket's path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "ctd")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "c.sock")
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(containerd, "--config", filepath.Join(dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		// Shims outlive containerd by design; ours name our socket.
		killByCmdline(dir, "containerd-shim")
		unmountUnder(t, dir)
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				t.Logf("containerd's log:\n%s", lastLines(b, 30))
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing containerd's directory: %v", err)
		}
	})
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, ctr, append([]string{"--address", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := run("version"); err == nil {
			return run
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("containerd did not answer on %s within 30s:\n%s", sock, lastLines(b, 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// killByCmdline kills the processes named comm* whose command line names
// dir: the shims (conmons) our containerd (podman) started. Only their
// command lines are read.
func killByCmdline(dir, comm string) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		if c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err != nil || !bytes.HasPrefix(c, []byte(comm)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir)) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	var mps []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mps = append(mps, fields[4])
		}
	}
	slices.Sort(mps)
	for _, mp := range slices.Backward(mps) {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", mp, err)
		}
	}
}

// ctr import takes the archive with and without --all-platforms, lists it
// under its reference, and runs the image's nodesnap: its PATH finds it and
// its entrypoint is it.
func TestContainerdImport(t *testing.T) {
	ctr := privateContainerd(t)
	archive, ref, version := testArchive(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"all platforms", []string{"--all-platforms"}},
		{"this platform", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ctr(append(append([]string{"images", "import"}, tc.args...), archive)...)
			if err != nil {
				t.Fatalf("ctr images import: %v\n%s", err, out)
			}
			t.Cleanup(func() { ctr("images", "rm", ref) })
			out, err = ctr("images", "ls", "-q")
			if err != nil || !slices.Contains(strings.Fields(out), ref) {
				t.Fatalf("ctr images ls -q: %v, no %s in\n%s", err, ref, out)
			}
			out, err = ctr("images", "check")
			if err != nil || !strings.Contains(out, "complete") {
				t.Errorf("ctr images check: %v\n%s", err, out)
			}
			// The arguments replace the image's: `nodesnap` is found on its PATH.
			out, err = ctr("run", "--rm", ref, "nodesnap-version", "nodesnap", "version")
			// nodesnap version: "nodesnap <version> (go…, commit …)".
			if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "nodesnap "+version+" (go") {
				t.Errorf("ctr run %s nodesnap version: %v\n%s\nwant nodesnap %s", ref, err, out, version)
			}
			// No arguments: the entrypoint alone, nodesnap's help.
			out, err = ctr("run", "--rm", ref, "nodesnap-entrypoint")
			if err != nil || !strings.Contains(out, "Usage:\n  nodesnap [") {
				t.Errorf("ctr run %s (entrypoint): %v\n%s", ref, err, out)
			}
		})
	}
}

// podman load takes the same archive. podman is optional here: it skips
// where podman is not installed.
func TestPodmanLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no container runtime")
	}
	podmanBin, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman is not installed (apt-get install podman): podman load not checked")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for podman's own storage")
	}
	archive, ref, version := testArchive(t)
	dir, err := os.MkdirTemp("", "podman")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// podman run --rm removes its container from a cleanup process
		// of its own, which may still be writing: wait for it.
		deadline := time.Now().Add(15 * time.Second)
		for {
			killByCmdline(dir, "conmon")
			unmountUnder(t, dir)
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("removing podman's directory: %v", err)
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
	})
	podman := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		base := []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
			"--tmpdir", filepath.Join(dir, "tmp"), "--storage-driver", "vfs", "--events-backend", "none", "--cgroup-manager", "cgroupfs"}
		out, err := exec.CommandContext(ctx, podmanBin, append(base, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := podman("load", "-i", archive)
	if err != nil || !strings.Contains(out, "Loaded image: "+ref) {
		t.Fatalf("podman load: %v\n%s", err, out)
	}
	out, err = podman("image", "inspect", "--format", "{{json .Config.Entrypoint}} {{index .Config.Labels \"org.opencontainers.image.version\"}}", ref)
	if want := `["/usr/local/bin/nodesnap"] ` + version; err != nil || strings.TrimSpace(out) != want {
		t.Errorf("podman image inspect: %v\n%s\nwant %s", err, out, want)
	}
	out, err = podman("run", "--rm", "--network", "none", ref, "version")
	switch {
	case err != nil && strings.Contains(out, "error setting rlimit"):
		// This machine's container sandbox does not let runc set the
		// rlimits podman asks for; ctr run (TestContainerdImport) runs it.
		t.Logf("podman run not possible here: %s", strings.TrimSpace(out))
	case err != nil || !strings.HasPrefix(strings.TrimSpace(out), "nodesnap "+version+" (go"):
		t.Errorf("podman run %s version: %v\n%s", ref, err, out)
	}
}
