package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/skip"
)

// child is a process a test starts to touch a mount the test process
// itself must not touch.
type child struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	done   chan struct{}
	err    error
	killed bool
}

func startChild(t *testing.T, name string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(name, args...), out: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd.Dir = "/"
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		select {
		case <-c.done:
		case <-time.After(100 * time.Millisecond):
			// Stuck in a hung mount: reaped after the FUSE
			// cleanup aborts the connection.
			addOrphan(c.done)
		}
	})
	return c
}

func (c *child) finishedWithin(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

func (c *child) mustFinish(t *testing.T, d time.Duration) {
	t.Helper()
	if !c.finishedWithin(d) {
		t.Fatalf("%v did not finish within %v (state %s, wchan %s)", c.cmd.Args, d, procState(c.cmd.Process.Pid), procWchan(c.cmd.Process.Pid))
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	c := startChild(t, name, args...)
	c.mustFinish(t, 10*time.Second)
	if c.err != nil {
		t.Fatalf("%v: %v\n%s", c.cmd.Args, c.err, c.out.String())
	}
	return c.out.String()
}

func mountedAt(t *testing.T, pid int, mountpoint string) bool {
	t.Helper()
	_, ok, err := lastMountAt(pid, mountpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func hasDevice(t *testing.T, pid int, major, minor uint32) bool {
	t.Helper()
	ms, err := ReadMountinfo(pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Major == major && m.Minor == minor {
			return true
		}
	}
	return false
}

func TestHungFUSE(t *testing.T) {
	f := HungFUSE(t, filepath.Join(t.TempDir(), "hung"))
	mp := f.Mountpoint()
	if f.ConnID() == 0 {
		t.Fatalf("ConnID 0")
	}
	m, ok, err := lastMountAt(0, mp, nil)
	if err != nil || !ok || m.FSType != "fuse."+DefaultFUSESubtype || m.Major != 0 || m.Minor != f.ConnID() || m.ID != f.MountID() {
		t.Fatalf("mountinfo entry %+v ok=%v err=%v; want fuse.%s 0:%d", m, ok, err, DefaultFUSESubtype, f.ConnID())
	}

	// Healthy: the tree is served (checked from children anyway).
	if got := run(t, "cat", mp+"/data/sub/c.txt"); got != "ccc\n" {
		t.Fatalf("cat: %q", got)
	}
	if got := run(t, "ls", mp); got != "README\ndata\nempty\n" {
		t.Fatalf("ls: %q", got)
	}
	run(t, "stat", "-f", mp)

	f.Hang()
	stat := startChild(t, "stat", mp)
	statfs := startChild(t, "stat", "-f", mp+"/data")
	ls := startChild(t, "ls", mp+"/empty")
	f.WaitBlocked(3, 5*time.Second)
	if stat.finishedWithin(time.Second) {
		t.Fatalf("stat of the hung mount finished: %v %s", stat.err, stat.out.String())
	}
	if w, err := f.Waiting(); err != nil || w < 3 {
		t.Errorf("fusectl waiting = %d, %v; want >= 3", w, err)
	}
	pid := stat.cmd.Process.Pid
	t.Logf("hung stat: state %s, wchan %s", procState(pid), procWchan(pid))

	// The request has been read by the server, so not even SIGKILL gets
	// the process out: it goes from S to D.
	stat.cmd.Process.Kill()
	if stat.finishedWithin(300 * time.Millisecond) {
		t.Fatalf("SIGKILLed stat exited although its request was in the server")
	}
	if s := procState(pid); s != "D" {
		t.Errorf("SIGKILLed stat in state %s, want D", s)
	}
	t.Logf("after SIGKILL: state %s, wchan %s", procState(pid), procWchan(pid))

	start := time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	for _, c := range []*child{stat, statfs, ls} {
		c.mustFinish(t, 5*time.Second)
		t.Logf("%v after abort: %v: %s", c.cmd.Args, c.err, strings.TrimSpace(c.out.String()))
		if c.err == nil {
			t.Errorf("%v succeeded after abort", c.cmd.Args)
		}
	}
	if mountedAt(t, 0, mp) {
		t.Fatalf("%s still mounted after Close", mp)
	}
	if _, err := os.Lstat(mp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mountpoint created by HungFUSE not removed: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestHungFUSEStartHung(t *testing.T) {
	var f *FUSE
	var c *child
	// Registered first, so it runs after the FUSE cleanup (cleanups
	// run last-in first-out).
	t.Cleanup(func() {
		if f == nil || c == nil {
			return
		}
		if !c.finishedWithin(5 * time.Second) {
			t.Errorf("statfs child still stuck after cleanup")
		}
		if mountedAt(t, 0, f.Mountpoint()) {
			t.Errorf("still mounted after cleanup")
		}
	})
	f = HungFUSE(t, "", FUSEStartHung(), FUSESubtype("ceph-fuse"), FUSESource("ceph-fuse"),
		FUSEFiles(map[string]string{"volumes/csi/": ""}))
	m, ok, err := lastMountAt(0, f.Mountpoint(), nil)
	if err != nil || !ok || m.FSType != "fuse.ceph-fuse" || m.Source != "ceph-fuse" {
		t.Fatalf("mountinfo entry %+v ok=%v err=%v", m, ok, err)
	}
	c = startChild(t, "stat", "-f", f.Mountpoint())
	f.WaitBlocked(1, 5*time.Second)
	if c.finishedWithin(200 * time.Millisecond) {
		t.Fatalf("statfs of a mount started hung finished: %s", c.out.String())
	}
	// The cleanups (not Close) must wake it and unmount.
}

// A process killed while it holds a file open on a hung FUSE mount
// cannot finish exiting: closing the file sends FLUSH, which hangs.
// Holder.Close leaves it to be reaped after the FUSE cleanup aborts.
func TestHoldersOnHungFUSE(t *testing.T) {
	var f *FUSE
	t.Cleanup(func() {
		// f is nil when the test skipped (not root): nothing was mounted.
		if f != nil && mountedAt(t, 0, f.Mountpoint()) {
			t.Errorf("still mounted after cleanup")
		}
	})
	f = HungFUSE(t, "")
	open := HoldOpenFile(t, f.Mountpoint()+"/README")
	cwd := HoldCwd(t, f.Mountpoint()+"/data")
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", open.Pid))
	if err != nil || link != f.Mountpoint()+"/README" {
		t.Fatalf("fd 3 of holder -> %q, %v", link, err)
	}
	if link, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", cwd.Pid)); err != nil || link != f.Mountpoint()+"/data" {
		t.Fatalf("cwd of holder -> %q, %v", link, err)
	}
	f.Hang()
	start := time.Now()
	if err := cwd.Close(); err != nil {
		t.Fatal(err)
	}
	if cwd.Alive() {
		t.Errorf("cwd holder still alive after Close")
	}
	t.Logf("cwd holder on hung mount killed in %v", time.Since(start))
	start = time.Now()
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("open-file holder on hung mount: Close returned after %v, alive=%v, state %s, wchan %s",
		time.Since(start), open.Alive(), procState(open.Pid), procWchan(open.Pid))
	start = time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if open.Alive() {
		t.Errorf("open-file holder not reaped after FUSE Close")
	}
	t.Logf("FUSE Close (with the stuck holder) took %v", time.Since(start))
}

func TestDeadFUSE(t *testing.T) {
	f := DeadFUSE(t, "")
	c := startChild(t, "stat", f.Mountpoint())
	c.mustFinish(t, 5*time.Second)
	if c.err == nil || !strings.Contains(c.out.String(), "Transport endpoint is not connected") {
		t.Fatalf("stat of dead FUSE: %v %q", c.err, c.out.String())
	}
	if !mountedAt(t, 0, f.Mountpoint()) {
		t.Fatalf("dead FUSE mount not in mountinfo")
	}
	// Even the test process can touch a dead mount: it fails at once.
	var st unix.Stat_t
	if err := unix.Stat(f.Mountpoint(), &st); !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("stat: %v, want ENOTCONN", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if mountedAt(t, 0, f.Mountpoint()) {
		t.Fatalf("still mounted after Close")
	}
}

func TestLoopExt4InPrivateNamespace(t *testing.T) {
	start := time.Now()
	l := LoopExt4(t, 32)
	t.Logf("LoopExt4 32 MiB ready in %v: %s %d:%d at %s", time.Since(start), l.Device, l.Major, l.Minor, l.Mountpoint)
	if l.Major != 7 || !strings.HasPrefix(l.Device, "/dev/loop") {
		t.Fatalf("device %s %d:%d", l.Device, l.Major, l.Minor)
	}
	if err := os.WriteFile(filepath.Join(l.Mountpoint, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, ok, _ := lastMountAt(0, l.Mountpoint, nil)
	if !ok || m.FSType != "ext4" || m.Major != l.Major || m.Minor != l.Minor || m.Source != l.Device {
		t.Fatalf("mountinfo entry %+v", m)
	}

	h := HoldInPrivateNamespace(t, l.Mountpoint)
	self, _ := MountNamespace(0)
	if h.NSInode == 0 || h.NSInode == self {
		t.Fatalf("holder namespace %d, ours %d", h.NSInode, self)
	}
	if err := unix.Unmount(l.Mountpoint, 0); err != nil {
		t.Fatalf("host umount: %v", err)
	}
	if hasDevice(t, 0, l.Major, l.Minor) {
		t.Errorf("device %d:%d still in /proc/self/mountinfo after umount", l.Major, l.Minor)
	}
	if !hasDevice(t, h.Pid, l.Major, l.Minor) {
		t.Errorf("device %d:%d not in /proc/%d/mountinfo", l.Major, l.Minor, h.Pid)
	}
	hm, ok, _ := lastMountAt(h.Pid, l.Mountpoint, nil)
	if !ok || len(hm.Optional) != 0 {
		t.Errorf("holder's copy %+v ok=%v: want a private mount (no shared/master tags)", hm, ok)
	}
	// The device is busy, as in incident 002.
	if out, err := exec.Command("losetup", "-d", l.Device).CombinedOutput(); err == nil {
		// losetup -d of a busy device only sets autoclear.
		b, _ := os.ReadFile(filepath.Join("/sys/block", filepath.Base(l.Device), "loop", "autoclear"))
		t.Logf("losetup -d on the held device succeeded (autoclear=%s)", strings.TrimSpace(string(b)))
	} else {
		t.Logf("losetup -d on the held device: %v %s", err, out)
	}
	start = time.Now()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("holder kill + loop detach took %v", time.Since(start))
}

func TestManySubdirsExt4Nlink(t *testing.T) {
	skip.Short(t, "70,000 directories")
	const n = 70000
	l := LoopExt4(t, 128, LoopInodes(n+2000))
	small, big := filepath.Join(l.Mountpoint, "small"), filepath.Join(l.Mountpoint, "big")
	for _, d := range []string{small, big} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ManySubdirs(t, small, 1000)
	start := time.Now()
	ManySubdirs(t, big, n)
	t.Logf("ManySubdirs(%d) on ext4 took %v", n, time.Since(start))
	var st unix.Stat_t
	if err := unix.Stat(small, &st); err != nil || st.Nlink != 1002 {
		t.Errorf("nlink of dir with 1000 subdirs = %d (%v), want 1002", st.Nlink, err)
	}
	if err := unix.Stat(big, &st); err != nil || st.Nlink != 1 {
		t.Errorf("nlink of dir with %d subdirs = %d (%v), want 1", n, st.Nlink, err)
	}
	if _, err := os.Lstat(filepath.Join(big, SubdirName(n-1))); err != nil {
		t.Errorf("last subdir: %v", err)
	}
}

func TestManySubdirsCleanup(t *testing.T) {
	parent := t.TempDir()
	t.Run("make", func(t *testing.T) { ManySubdirs(t, parent, 500) })
	ents, err := os.ReadDir(parent)
	if err != nil || len(ents) != 0 {
		t.Fatalf("%d entries left after cleanup (%v)", len(ents), err)
	}
}

func TestTmpfsAndHolders(t *testing.T) {
	dir := MountTmpfs(t, filepath.Join(t.TempDir(), "a", "b"))
	file := filepath.Join(dir, "busy")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := HoldOpenFile(t, file)
	c := HoldCwd(t, filepath.Join(dir, "sub"))
	if err := unix.Unmount(dir, 0); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("umount with holders: %v, want EBUSY", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(dir, 0); !errors.Is(err, unix.EBUSY) {
		t.Fatalf("umount with cwd holder: %v, want EBUSY", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if o.Alive() || c.Alive() {
		t.Fatalf("holders alive after Close")
	}
	// The cleanup unmounts it and removes a/b.
}

func TestHolderBadPath(t *testing.T) {
	fake := &fakeTB{TB: t}
	func() {
		defer func() { recover() }()
		HoldCwd(fake, "/nonexistent/nodesnap-testkit")
	}()
	fake.runCleanups()
	if !fake.fatal || !strings.Contains(fake.msg, "exited before it was ready") || !strings.Contains(fake.msg, "nonexistent") {
		t.Errorf("HoldCwd of a missing dir: fatal=%v %q", fake.fatal, fake.msg)
	}
}

// fakeTB records Fatalf instead of ending the test, to test failure
// paths of the fixtures.
type fakeTB struct {
	testing.TB
	fatal    bool
	msg      string
	cleanups []func()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal, f.msg = true, fmt.Sprintf(format, args...)
	panic("fatal")
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Helper()           {}
func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestRequireInCI runs a test that needs a missing tool in a child test
// binary: skipped normally, failed with CI=true.
func TestRequireInCI(t *testing.T) {
	if os.Getenv("TESTKIT_HELPER") == "require" {
		RequireTool(t, "nodesnap-no-such-tool")
		t.Fatal("RequireTool returned")
	}
	for _, tc := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP"},
		{"false", false, "--- SKIP"},
		{"true", true, "--- FAIL"},
		{"1", true, "--- FAIL"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRequireInCI$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTKIT_HELPER=require", "CI="+tc.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.wantFail || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "nodesnap-no-such-tool") {
			t.Errorf("CI=%q: err=%v, output:\n%s", tc.ci, err, out)
		}
	}
}

// TestBuildCommand tests Binary's build step on small fake modules, so
// that it does not depend on the state of the real cmd/nodesnap.
func TestBuildCommand(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "testkit", "binary.go")); err != nil {
		t.Fatalf("ModuleRoot %q: %v", root, err)
	}
	goTool, err := findGo()
	if err != nil {
		missing(t, "%v", err)
	}
	write := func(dir, name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// No command yet: a clear message.
	empty := t.TempDir()
	write(empty, "go.mod", "module example.com/fake\n\ngo 1.21\n")
	write(empty, "cmd/nodesnap/main_test.go", "package main\n")
	if _, _, err := buildCommand(goTool, empty); err == nil || !strings.Contains(err.Error(), "has no Go files yet") {
		t.Errorf("no command: %v", err)
	}

	// A command that does not compile: the compiler's output.
	broken := t.TempDir()
	write(broken, "go.mod", "module example.com/fake\n\ngo 1.21\n")
	write(broken, "cmd/nodesnap/main.go", "package main\n\nfunc main() { undefinedThing() }\n")
	if _, _, err := buildCommand(goTool, broken); err == nil || !strings.Contains(err.Error(), "undefinedThing") {
		t.Errorf("broken command: %v", err)
	}

	// A working one.
	good := t.TempDir()
	write(good, "go.mod", "module example.com/fake\n\ngo 1.21\n")
	write(good, "cmd/nodesnap/main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"fake nodesnap\") }\n")
	exe, dir, err := buildCommand(goTool, good)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if filepath.Dir(exe) != dir || !strings.HasPrefix(filepath.Base(dir), binDirPrefix) {
		t.Errorf("exe %q in dir %q", exe, dir)
	}
	if out := run(t, exe); out != "fake nodesnap\n" {
		t.Errorf("fake binary printed %q", out)
	}
}

// TestBinary builds the real command when NODESNAP_TEST_BINARY=1 (it
// depends on the rest of the module compiling).
func TestBinary(t *testing.T) {
	if os.Getenv("NODESNAP_TEST_BINARY") != "1" {
		skip.Because(t, "set NODESNAP_TEST_BINARY=1 to build the real cmd/nodesnap")
	}
	start := time.Now()
	bin := Binary(t)
	t.Logf("Binary built %s in %v", bin, time.Since(start))
	if bin2 := Binary(t); bin2 != bin {
		t.Errorf("second Binary call %q != %q", bin2, bin)
	}
}

func TestParseMountinfo(t *testing.T) {
	in := "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 shared:2 - ext3 /dev/root rw,errors=continue\n" +
		"37 35 0:52 / /mnt/f rw,nosuid,nodev,relatime - fuse.ceph-fuse ceph-fuse rw,user_id=0,group_id=0\n"
	ms, err := parseMountinfo([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("%d entries", len(ms))
	}
	m := ms[0]
	if m.ID != 36 || m.ParentID != 35 || m.Major != 98 || m.Minor != 0 || m.Root != "/mnt1" ||
		m.Mountpoint != "/mnt/with space" || m.Options != "rw,noatime" ||
		strings.Join(m.Optional, " ") != "master:1 shared:2" || m.FSType != "ext3" ||
		m.Source != "/dev/root" || m.SuperOptions != "rw,errors=continue" {
		t.Errorf("%+v", m)
	}
	if ms[1].FSType != "fuse.ceph-fuse" || ms[1].Minor != 52 || len(ms[1].Optional) != 0 {
		t.Errorf("%+v", ms[1])
	}
	if _, err := parseMountinfo([]byte("1 2 3\n")); err == nil {
		t.Error("malformed line accepted")
	}
	if got := unescapeMountinfo(`a\134b\011c\`); got != "a\\b\tc\\" {
		t.Errorf("unescape: %q", got)
	}
}

// A hung FUSE mount that survives only in another mount namespace: the
// host unmount succeeds, processes in the holder's namespace still hang,
// and the cleanups (holder first, then the FUSE) leave nothing behind.
func TestHungFUSEOnlyInPrivateNamespace(t *testing.T) {
	RequireTool(t, "nsenter")
	var f *FUSE
	t.Cleanup(func() {
		if f != nil && mountedAt(t, 0, f.Mountpoint()) {
			t.Errorf("still mounted after cleanup")
		}
	})
	f = HungFUSE(t, "")
	h := HoldInPrivateNamespace(t, f.Mountpoint())
	f.Hang()
	if err := unix.Unmount(f.Mountpoint(), 0); err != nil {
		t.Fatalf("host umount of hung FUSE: %v", err)
	}
	if mountedAt(t, 0, f.Mountpoint()) || !mountedAt(t, h.Pid, f.Mountpoint()) {
		t.Fatalf("want the mount only in the holder's namespace")
	}
	c := startChild(t, "nsenter", "-t", strconv.Itoa(h.Pid), "-m", "stat", f.Mountpoint())
	f.WaitBlocked(1, 5*time.Second)
	if c.finishedWithin(200 * time.Millisecond) {
		t.Fatalf("stat in the holder's namespace finished: %s", c.out.String())
	}
	start := time.Now()
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("holder of the hung mount killed in %v", time.Since(start))
	if w, err := f.Waiting(); err == nil {
		t.Logf("connection still alive after the holder died (the stat child keeps the namespace), waiting=%d", w)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	c.mustFinish(t, 5*time.Second)
	t.Logf("stat in holder namespace after Close: %v %s", c.err, strings.TrimSpace(c.out.String()))
}
