package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Holder is a child process started by HoldInPrivateNamespace,
// HoldOpenFile or HoldCwd. It sleeps until it is killed, by its pid, on
// cleanup (or Close).
type Holder struct {
	// Pid is the holder's process id.
	Pid int
	// NSInode is the inode of the holder's mount namespace
	// (readlink /proc/<pid>/ns/mnt gives "mnt:[NSInode]"). For
	// HoldOpenFile and HoldCwd it is the test's own namespace.
	NSInode uint64

	t      testing.TB
	what   string
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *lockedBuffer

	closeOnce sync.Once
	closeErr  error
}

// HoldInPrivateNamespace starts `unshare --mount --propagation private
// sleep infinity`: a process with a private copy of the test's mount
// table, like a container started with the host root mounted with
// propagation None (incident 002). It returns once the process runs in a
// mount namespace different from the test's and, unless mountpoint is
// "", once mountpoint is in that namespace's mountinfo. After that a test
// can unix.Unmount(mountpoint, 0) on the host and the mount survives only
// in the holder's namespace. The holder is killed by pid and reaped on
// cleanup.
//
// mountpoint is not stat()ed (only its parent directory is resolved), so
// it may be a hung mount.
func HoldInPrivateNamespace(t testing.TB, mountpoint string) *Holder {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "unshare")
	RequireTool(t, "sleep")
	self, err := mountNS(0)
	if err != nil {
		t.Fatalf("testkit: own mount namespace: %v", err)
	}
	var mp string
	if mountpoint != "" {
		if mp, err = canonicalParent(mountpoint); err != nil {
			t.Fatalf("testkit: HoldInPrivateNamespace: %v", err)
		}
	}
	h := startHolder(t, "private-namespace holder", func(pid int) (bool, error) {
		if !isSleeping(pid) {
			return false, nil
		}
		ns, err := mountNS(pid)
		if err != nil || ns == self {
			return false, err
		}
		if mp != "" {
			if _, ok, err := lastMountAt(pid, mp, nil); err != nil || !ok {
				return false, fmt.Errorf("%s is not mounted in the holder's namespace (err=%v)", mp, err)
			}
		}
		return true, nil
	}, "unshare", "--mount", "--propagation", "private", "sleep", "infinity")
	return h
}

// HoldOpenFile starts a child process that holds path open (read-only,
// as file descriptor 3; path may be a directory) and sleeps, like a
// process keeping a volume busy. The child opens the path itself, so the
// test process never touches it. Killed by pid and reaped on cleanup.
func HoldOpenFile(t testing.TB, path string) *Holder {
	t.Helper()
	RequireTool(t, "sh")
	RequireTool(t, "sleep")
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatalf("testkit: HoldOpenFile: %v", err)
	}
	return startHolder(t, "open-file holder of "+abs, func(pid int) (bool, error) {
		if !isSleeping(pid) {
			return false, nil
		}
		if _, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/3", pid)); err != nil {
			return false, fmt.Errorf("holder has no fd 3: %v", err)
		}
		return true, nil
	}, "sh", "-c", `exec 3<"$1" && exec sleep infinity`, "sh", abs)
}

// HoldCwd starts a child process whose working directory is dir and
// sleeps. The child changes directory itself, so the test process never
// touches dir. Killed by pid and reaped on cleanup.
func HoldCwd(t testing.TB, dir string) *Holder {
	t.Helper()
	RequireTool(t, "sh")
	RequireTool(t, "sleep")
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("testkit: HoldCwd: %v", err)
	}
	// Not exec.Cmd.Dir: os.StartProcess stat()s Dir in the parent, which
	// would hang the test process on a hung mount.
	return startHolder(t, "cwd holder in "+abs, func(pid int) (bool, error) {
		return isSleeping(pid), nil
	}, "sh", "-c", `cd "$1" && exec sleep infinity`, "sh", abs)
}

// Close kills the holder by its pid (SIGKILL) and reaps it. It is
// idempotent and also run by t.Cleanup. A holder that does not die within
// a few seconds (it is stuck in the kernel, for instance on a hung FUSE
// mount) is logged and reaped in the background once it dies; closing
// the FUSE fixture waits for such processes.
func (h *Holder) Close() error {
	h.closeOnce.Do(func() { h.closeErr = h.close() })
	return h.closeErr
}

func (h *Holder) close() error {
	if err := h.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s (pid %d): %w", h.what, h.Pid, err)
	}
	start := time.Now()
	for {
		select {
		case <-h.done:
			return nil
		case <-time.After(5 * time.Millisecond):
		}
		waited := time.Since(start)
		// A task blocked on a FUSE request that the server has read
		// (wchan request_wait_answer) ignores SIGKILL until the
		// connection is aborted: no point waiting the full time.
		fuseStuck := waited > 200*time.Millisecond && procWchan(h.Pid) == "request_wait_answer"
		if fuseStuck || waited > 3*time.Second {
			break
		}
	}
	addOrphan(h.done)
	h.t.Logf("testkit: %s (pid %d) has not exited %v after SIGKILL (state %s, wchan %s); it will be reaped in the background, after the FUSE fixture it is stuck on is closed",
		h.what, h.Pid, time.Since(start).Round(time.Millisecond), procState(h.Pid), procWchan(h.Pid))
	return nil
}

// Alive reports whether the holder process has not exited yet.
func (h *Holder) Alive() bool {
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

func startHolder(t testing.TB, what string, ready func(pid int) (bool, error), name string, args ...string) *Holder {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("testkit: %s: %v", what, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = "/"
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so that tests (and nodesnap) that signal
		// process groups never hit it; killed with the test binary.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testkit: start %s: %v", what, err)
	}
	h := &Holder{Pid: cmd.Process.Pid, t: t, what: what, cmd: cmd, done: make(chan struct{}), stderr: stderr}
	go func() {
		cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("testkit: %v", err)
		}
	})

	deadline := time.Now().Add(10 * time.Second)
	var lastErr error
	for {
		select {
		case <-h.done:
			t.Fatalf("testkit: %s exited before it was ready: %v; stderr: %q", what, cmd.ProcessState, stderr.String())
		default:
		}
		ok, err := ready(h.Pid)
		if ok {
			break
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("testkit: %s (pid %d) not ready after 10s: %v (state %s, wchan %s); stderr: %q",
				what, h.Pid, lastErr, procState(h.Pid), procWchan(h.Pid), stderr.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	if h.NSInode, err = mountNS(h.Pid); err != nil {
		t.Fatalf("testkit: %s: %v", what, err)
	}
	return h
}

// isSleeping reports whether pid has exec'd sleep (its comm is "sleep"),
// i.e. the wrapper (unshare, sh) finished its setup.
func isSleeping(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(b)) == "sleep"
}

// mountNS returns the inode of pid's mount namespace (0: ourselves).
func mountNS(pid int) (uint64, error) {
	p := "/proc/self/ns/mnt"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/ns/mnt", pid)
	}
	link, err := os.Readlink(p)
	if err != nil {
		return 0, err
	}
	s, ok := strings.CutPrefix(link, "mnt:[")
	if !ok || !strings.HasSuffix(s, "]") {
		return 0, fmt.Errorf("unexpected %s link %q", p, link)
	}
	return strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
}

// MountNamespace returns the inode number of the mount namespace of pid
// (0 means the calling process), as in "mnt:[4026531841]".
func MountNamespace(pid int) (uint64, error) { return mountNS(pid) }

// canonicalParent resolves symlinks in the parent of p but does not touch
// p itself, which may be a hung mountpoint.
func canonicalParent(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, filepath.Base(abs)), nil
}

// procState returns the state letter of pid (R, S, D, Z, ...) or "?".
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "?"
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return "?"
	}
	return string(b[i+2])
}

func procWchan(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
	if err != nil {
		return "?"
	}
	return string(b)
}

// ProcState returns the scheduler state letter of pid from
// /proc/<pid>/stat: "R" running, "S" interruptible sleep, "D"
// uninterruptible (or killable) sleep, "Z" zombie, ..., or "?" if the
// process is gone.
func ProcState(pid int) string { return procState(pid) }

// orphans are done channels of processes testkit killed that had not
// exited yet (stuck in the kernel); FUSE.Close waits for them after
// aborting its connection.
var orphans struct {
	mu   sync.Mutex
	done []chan struct{}
}

func addOrphan(done chan struct{}) {
	orphans.mu.Lock()
	orphans.done = append(orphans.done, done)
	orphans.mu.Unlock()
}

func waitOrphans(timeout time.Duration) {
	orphans.mu.Lock()
	pending := orphans.done
	orphans.done = nil
	orphans.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	expired := false
	var still []chan struct{}
	for _, d := range pending {
		if !expired {
			select {
			case <-d:
				continue
			case <-timer.C:
				expired = true
			}
		}
		select {
		case <-d:
		default:
			still = append(still, d)
		}
	}
	if len(still) > 0 {
		orphans.mu.Lock()
		orphans.done = append(orphans.done, still...)
		orphans.mu.Unlock()
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
