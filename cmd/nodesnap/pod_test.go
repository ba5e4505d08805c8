package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// In a Kubernetes init container only status 0 lets the pod go on: with
// --exit-zero-if-written a partial bundle exits 0, and the output still
// says it is partial and, last, where the bundle is on the node.
func TestCollectExitZeroIfWritten(t *testing.T) {
	out := t.TempDir()
	args := []string{"collect", "--output-dir", out, "--only", "test-exit,test-slow", "--timeout", "30s", "--host-output-dir", "/var/tmp/nodesnap"}
	plain := runNodesnap(t, 60*time.Second, []string{fastEnv}, args...)
	if plain.code != exitPartial {
		t.Fatalf("without the flag: exit %d, want %d\n%s", plain.code, exitPartial, plain.stderr)
	}
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append(args, "--exit-zero-if-written")...)
	if r.code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "bundle is partial: test-exit (error)") || !strings.Contains(r.stderr, "exit status 0, not 3 (--exit-zero-if-written)") {
		t.Errorf("stderr does not say the bundle is partial and why it exits 0:\n%s", r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	last := lines[len(lines)-1]
	var p string
	for _, l := range lines {
		if strings.HasPrefix(l, out+"/") {
			p = l
		}
	}
	if p == "" || last != "on the node: /var/tmp/nodesnap/"+filepath.Base(p) {
		t.Errorf("last line %q does not name the bundle %q in the node's /var/tmp/nodesnap", last, p)
	}
	mustValidate(t, p)

	// --output json: the real exit status, the status, the node's path.
	j := runNodesnap(t, 60*time.Second, []string{fastEnv}, append(args, "--exit-zero-if-written", "--output", "json")...)
	var res collectResult
	if err := json.Unmarshal([]byte(j.stdout), &res); err != nil {
		t.Fatalf("json output %q: %v", j.stdout, err)
	}
	if j.code != exitOK || res.ExitStatus != exitOK || res.Status != "partial" || res.HostPath != "/var/tmp/nodesnap/"+filepath.Base(res.Path) {
		t.Errorf("exit %d, json %+v", j.code, res)
	}

	// A run that writes no bundle still fails.
	// (A missing output directory is made: one under a file cannot be.)
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := runNodesnap(t, 30*time.Second, nil, "collect", "--output-dir", filepath.Join(notDir, "missing"), "--exit-zero-if-written", "--only", "test-slow")
	if bad.code != exitFatal {
		t.Errorf("no output directory: exit %d, want %d", bad.code, exitFatal)
	}
	usage := runNodesnap(t, 30*time.Second, nil, "collect", "--output-dir", out, "--host-output-dir", "relative/dir", "--only", "test-slow")
	if usage.code != exitUsage {
		t.Errorf("relative --host-output-dir: exit %d, want %d", usage.code, exitUsage)
	}
}

// bundle-cat writes exactly the bundle's bytes, and nothing but a bundle
// directly in its directory.
func TestBundleCat(t *testing.T) {
	dir := t.TempDir()
	older := "nodesnap-node-1-20261121T101500Z.tar.gz"
	newer := "nodesnap-node-1-20261122T090000Z.tar.gz"
	newest := "nodesnap-node-1-20261122T090000Z-2.tar.zst"
	// Bytes a terminal or a text mode would alter: NUL, CR LF, 0xff.
	content := map[string][]byte{older: []byte("old"), newer: append([]byte("\x00\r\n\xff"), make([]byte, 300<<10)...), newest: nil}
	content[newest] = make([]byte, 1<<20)
	if _, err := rand.Read(content[newest]); err != nil {
		t.Fatal(err)
	}
	for n, b := range content {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	secret := filepath.Join(outside, "nodesnap-node-1-20261123T000000Z.tar.gz")
	os.WriteFile(secret, []byte("not in the output directory"), 0o600)
	link := "nodesnap-node-1-20261124T000000Z.tar.gz"
	if err := os.Symlink(secret, filepath.Join(dir, link)); err != nil {
		t.Fatal(err)
	}
	fifo := "nodesnap-node-1-20261125T000000Z.tar.gz"
	if err := unix.Mkfifo(filepath.Join(dir, fifo), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)

	for _, c := range []struct {
		name string
		args []string
		env  []string
		code int
		want []byte
	}{
		{"latest", []string{"--dir", dir, "latest"}, nil, exitOK, content[newest]},
		{"by name", []string{"--dir", dir, newer}, nil, exitOK, content[newer]},
		{"by path in the directory", []string{"--dir", dir, filepath.Join(dir, older)}, nil, exitOK, content[older]},
		{"directory from the environment", []string{newer}, []string{OutputDirEnv + "=" + dir}, exitOK, content[newer]},
		{"path outside", []string{"--dir", dir, secret}, nil, exitUsage, nil},
		{"dot-dot", []string{"--dir", dir, filepath.Join(dir, "..", filepath.Base(outside), filepath.Base(secret))}, nil, exitUsage, nil},
		{"not a bundle's name", []string{"--dir", dir, "notes.txt"}, nil, exitUsage, nil},
		{"system file", []string{"--dir", dir, "/etc/passwd"}, nil, exitUsage, nil},
		{"symbolic link", []string{"--dir", dir, link}, nil, exitUsage, nil},
		{"fifo", []string{"--dir", dir, fifo}, nil, exitUsage, nil},
		{"missing", []string{"--dir", dir, "nodesnap-node-1-20200101T000000Z.tar.gz"}, nil, exitFatal, nil},
		{"no argument", []string{"--dir", dir}, nil, exitUsage, nil},
		{"no bundle at all", []string{"--dir", outside + "/empty", "latest"}, nil, exitFatal, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runNodesnap(t, 20*time.Second, c.env, append([]string{"bundle-cat"}, c.args...)...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", r.code, c.code, r.stderr)
			}
			if c.code == exitOK && !bytes.Equal([]byte(r.stdout), c.want) {
				t.Errorf("wrote %d bytes that differ from the bundle's %d", len(r.stdout), len(c.want))
			}
			if c.code != exitOK && (r.stdout != "" || !strings.HasPrefix(r.stderr, "nodesnap: ")) {
				t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
			}
		})
	}

	l := runNodesnap(t, 20*time.Second, nil, "bundle-cat", "--dir", dir, "--list")
	want := strings.Join([]string{newest, newer, older}, "\n") + "\n"
	if l.code != exitOK || l.stdout != want {
		t.Errorf("--list: exit %d, %q; want %q (regular bundles only, newest first)", l.code, l.stdout, want)
	}
}

// hold lists the bundles, then waits: --for, or a signal, ends it with
// status 0.
func TestHold(t *testing.T) {
	dir := t.TempDir()
	name := "nodesnap-node-1-20261122T090000Z.tar.gz"
	os.WriteFile(filepath.Join(dir, name), []byte("b"), 0o600)
	r := runNodesnap(t, 20*time.Second, nil, "hold", "--dir", dir, "--for", "300ms")
	if r.code != exitOK || r.elapsed < 300*time.Millisecond {
		t.Fatalf("exit %d after %s", r.code, r.elapsed)
	}
	if !strings.Contains(r.stdout, "nodesnap bundle-cat --dir "+dir+" "+name) {
		t.Errorf("hold does not say how to copy the bundle:\n%s", r.stdout)
	}

	cmd := nodesnapCmd(t, nil, "hold", "--dir", dir)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }()
	defer func() {
		select {
		case <-done:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	select {
	case <-done:
		t.Fatalf("hold without --for ended by itself: %v", waitErr)
	case <-time.After(time.Second):
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
		if waitErr != nil {
			t.Errorf("hold after SIGTERM: %v", waitErr)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("hold did not end on SIGTERM")
	}
	if bad := runNodesnap(t, 20*time.Second, nil, "hold", "--for", "-1s"); bad.code != exitUsage {
		t.Errorf("--for -1s: exit %d", bad.code)
	}
}
