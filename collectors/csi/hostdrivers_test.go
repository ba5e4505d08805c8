package csi_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/csi"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/skip"
)

// startCSIListener starts a real process listening on sock with its
// stdout and stderr sent where out says ("file" → logPath, "null" →
// /dev/null, "pipe" → a pipe), waits until it listens and stops it at
// the end of the test.
func startCSIListener(t *testing.T, sock, out, logPath string) *exec.Cmd {
	t.Helper()
	if cg, err := os.ReadFile("/proc/self/cgroup"); err == nil && strings.Contains(string(cg), "kubepods") {
		skip.Because(t, "this test runs in a Kubernetes pod: the process it starts is a pod's, whose log the kubelet keeps, not a host process's")
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "NODESNAP_TEST_CSI_LISTENER="+sock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var ready func() error
	switch out {
	case "file":
		f, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }() // the child holds its own copy
		cmd.Stdout, cmd.Stderr = f, f
		ready = func() error {
			for range 500 {
				if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "READY") {
					return nil
				}
				time.Sleep(10 * time.Millisecond)
			}
			return os.ErrDeadlineExceeded
		}
	case "null":
		ready = func() error { return nil }
	case "pipe":
		r, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		ready = func() error {
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				if sc.Text() == "READY" {
					return nil
				}
			}
			return os.ErrDeadlineExceeded
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	if err := ready(); err != nil {
		t.Fatalf("the listener did not start: %v", err)
	}
	if out == "null" {
		for i := 0; i < 500; i++ {
			if _, err := os.Stat(sock); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The collector finds host drivers in pid 1's socket table
	// (/proc/1/net/unix): a listener in another network namespace (the
	// unit tier timed under unshare -n) is not in it.
	if tab, err := os.ReadFile("/proc/1/net/unix"); err == nil && !strings.Contains(string(tab), " "+sock+"\n") {
		skip.Because(t, "this test does not run in pid 1's network namespace: the csi collector reads pid 1's socket table, where the listener it starts is not")
	}
	return cmd
}

// A CSI driver run as a host process, logging to a file: found through
// its csi.sock, its log file's newest lines are kept under hostlogs/ and
// the inventory names its driver, pid, command line and log file.
func TestCSIHostDriverLogFile(t *testing.T) {
	root := t.TempDir()
	kl := filepath.Join(root, "k")
	plug := filepath.Join(kl, "plugins", "host.csi.test")
	for _, d := range []string{plug, filepath.Join(kl, "plugins_registry"), filepath.Join(kl, "pods")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(root, "driver.log")
	cmd := startCSIListener(t, filepath.Join(plug, "csi.sock"), "file", logPath)

	supervisortest.Flags(t, "csi", "--csi-kubelet-dir=/k", "--csi-state-glob=/none/state.json")
	b := supervisortest.Collect(t, "csi", collectors.Common{Root: root, Proc: "/proc"})
	if b.Res.Status != bundle.StatusOK && b.Res.Status != bundle.StatusPartial {
		t.Fatalf("status %q (%s)", b.Res.Status, b.Res.Error)
	}
	inv := csiInventory(t, b)
	var d *layout.CSIHostDriver
	for i := range inv.HostDrivers {
		if inv.HostDrivers[i].PID == cmd.Process.Pid {
			d = &inv.HostDrivers[i]
		}
	}
	if d == nil {
		t.Fatalf("the listener (pid %d) is not among the host drivers: %+v (errors %v)", cmd.Process.Pid, inv.HostDrivers, inv.Errors)
	}
	if d.Driver != "host.csi.test" || len(d.Sockets) != 1 || d.Sockets[0] != "/k/plugins/host.csi.test/csi.sock" {
		t.Errorf("driver %q sockets %v, want host.csi.test at /k/plugins/host.csi.test/csi.sock", d.Driver, d.Sockets)
	}
	if d.LogFrom != "file" || d.LogSource != logPath || d.Stderr == nil || d.Stderr.Kind != "file" || d.Error != "" {
		t.Errorf("log from %q %q, stderr %+v, error %q; want the file %s", d.LogFrom, d.LogSource, d.Stderr, d.Error, logPath)
	}
	if !strings.Contains(d.Cmdline, filepath.Base(os.Args[0])) || d.Comm == "" {
		t.Errorf("cmdline %q comm %q", d.Cmdline, d.Comm)
	}
	want := "host.csi.test." + strconv.Itoa(cmd.Process.Pid) + ".log"
	if d.File != layout.CSIHostLogsDir+want {
		t.Fatalf("kept as %q, want %s%s", d.File, layout.CSIHostLogsDir, want)
	}
	got := string(b.File(t, "csi/"+d.File))
	if !strings.Contains(got, `Volume "vol-host-1" is not published at`) || !strings.Contains(got, "Listening for connections") {
		t.Errorf("csi/%s lacks the driver's lines:\n%s", d.File, got)
	}
	if !strings.Contains(b.Notes(), "CSI driver host.csi.test runs as host process "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("notes do not name the host driver:\n%s", b.Notes())
	}
}

// Output to /dev/null says there is nothing to read; a pipe (as to a
// supervisor or journald) leads to the journal's lines of the pid.
func TestCSIHostDriverNoFile(t *testing.T) {
	for _, tc := range []struct{ out, from, kind string }{
		{"null", "none", "null"},
		{"pipe", "journal", "pipe"},
	} {
		t.Run(tc.out, func(t *testing.T) {
			root := t.TempDir()
			reg := filepath.Join(root, "k", "plugins_registry")
			if err := os.MkdirAll(reg, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := startCSIListener(t, filepath.Join(reg, "pipe.csi.test-reg.sock"), tc.out, "")
			supervisortest.Flags(t, "csi", "--csi-kubelet-dir=/k", "--csi-state-glob=/none/state.json")
			b := supervisortest.Collect(t, "csi", collectors.Common{Root: root, Proc: "/proc"})
			inv := csiInventory(t, b)
			if len(inv.HostDrivers) != 1 || inv.HostDrivers[0].PID != cmd.Process.Pid {
				t.Fatalf("host drivers %+v, want pid %d (errors %v)", inv.HostDrivers, cmd.Process.Pid, inv.Errors)
			}
			d := inv.HostDrivers[0]
			if d.Driver != "pipe.csi.test" || d.LogFrom != tc.from || d.Stdout == nil || d.Stdout.Kind != tc.kind {
				t.Errorf("driver %q log from %q stdout %+v, want pipe.csi.test, %s, %s", d.Driver, d.LogFrom, d.Stdout, tc.from, tc.kind)
			}
			if tc.from == "journal" && !strings.Contains(d.LogSource, "_PID="+strconv.Itoa(cmd.Process.Pid)) {
				t.Errorf("journal query %q does not select pid %d", d.LogSource, cmd.Process.Pid)
			}
		})
	}
}

func TestFDKind(t *testing.T) {
	for link, want := range map[string]string{
		"": "", "pipe:[123]": "pipe", "socket:[9]": "socket", "/dev/null": "null", "/dev/pts/3": "tty",
		"/dev/console": "tty", "/var/log/csi.log": "file", "/var/log/csi.log (deleted)": "file", "anon_inode:[eventfd]": "other",
	} {
		if got := csi.FDKind(link); got != want {
			t.Errorf("FDKind(%q) = %q, want %q", link, got, want)
		}
	}
}

func TestCgroupPath(t *testing.T) {
	for in, want := range map[string]string{
		"0::/system.slice/csi-hostpath.service\n":                              "/system.slice/csi-hostpath.service",
		"12:pids:/user.slice\n1:name=systemd:/kubepods/burstable/podabc/123\n": "1:name=systemd:/kubepods/burstable/podabc/123",
		"3:cpu:/\n": "3:cpu:/",
	} {
		if got := csi.CgroupPath(in); got != want {
			t.Errorf("CgroupPath(%q) = %q, want %q", in, got, want)
		}
	}
}
