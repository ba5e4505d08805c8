package testkit

import (
	"bytes"
	binenc "encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Journald is a systemd-journald started by StartJournald in its own mount
// namespace: pid 1 here is not systemd, and the host's journal is never
// touched. Its journal files land in Dir, which `journalctl -D` and
// nodesnap's --journal-dir read.
type Journald struct {
	Dir string
	Pid int
}

// journaldScript starts systemd-journald in the private mount namespace
// unshare gave it: a tmpfs over /run (so its sockets and runtime journal
// never touch the host's /run), the runtime journal directory bound to a
// directory of the test, volatile storage, no rate limit, nothing
// forwarded. $1 is that directory, $2 the journald binary.
const journaldScript = `set -e
[ -s /etc/machine-id ] || { echo "journald needs /etc/machine-id" >&2; exit 3; }
mount -t tmpfs -o mode=0755 nodesnap-test-run /run
mkdir -p /run/systemd/journal /run/systemd/journald.conf.d /run/log/journal
mount --bind "$1" /run/log/journal
if [ -d /var/log/journal ]; then mount -t tmpfs -o mode=0755 nodesnap-test-journal /var/log/journal; fi
cat > /run/systemd/journald.conf.d/nodesnap-test.conf <<EOF
[Journal]
Storage=volatile
RateLimitBurst=0
RuntimeMaxUse=2G
RuntimeMaxFileSize=512M
ForwardToSyslog=no
ForwardToKMsg=no
ForwardToConsole=no
ForwardToWall=no
EOF
exec "$2"
`

// StartJournald starts a private systemd-journald and returns once it
// accepts entries. It is stopped (SIGTERM, then SIGKILL, by its pid) on
// cleanup; its namespace and mounts go with it. Needs root, unshare and
// journalctl; missing ones skip the test, or fail it with CI=true.
func StartJournald(t testing.TB) *Journald {
	t.Helper()
	return StartJournaldEnv(t)
}

// StartJournaldEnv is StartJournald with extra environment variables for
// journald (SYSTEMD_JOURNAL_COMPACT=0 and SYSTEMD_JOURNAL_KEYED_HASH=0 make
// it write the older file layout).
func StartJournaldEnv(t testing.TB, env ...string) *Journald {
	t.Helper()
	RequireRoot(t)
	RequireTool(t, "unshare")
	RequireTool(t, "journalctl")
	RequireTool(t, "sh")
	bin := ""
	for _, p := range []string{"/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		missing(t, "systemd-journald is not installed (Debian package systemd)")
	}
	dir := t.TempDir()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", journaldScript, "sh", dir, bin)
	cmd.Env = append(os.Environ(), env...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testkit: starting journald: %v", err)
	}
	j := &Journald{Dir: dir, Pid: cmd.Process.Pid}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(j.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(j.Pid, syscall.SIGKILL)
			<-done
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("testkit: journald exited at start: %v: %s", cmd.ProcessState, stderr.String())
		default:
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", j.Pid))
		// Both the native socket and the stream socket (systemd-cat's).
		_, serr := os.Stat(fmt.Sprintf("/proc/%d/root/run/systemd/journal/socket", j.Pid))
		if serr == nil {
			_, serr = os.Stat(fmt.Sprintf("/proc/%d/root/run/systemd/journal/stdout", j.Pid))
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*.journal"))
		if strings.TrimSpace(string(comm)) == "systemd-journal" && serr == nil && len(files) > 0 {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("testkit: journald not ready after 15s (comm %q, socket %v, files %v): %s", comm, serr, files, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Native sends one entry over journald's native protocol, which, unlike
// systemd-cat, carries a MESSAGE of several lines.
func (j *Journald) Native(t testing.TB, ident, msg string) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("SYSLOG_IDENTIFIER=" + ident + "\nPRIORITY=6\nMESSAGE\n")
	_ = binenc.Write(&b, binenc.LittleEndian, uint64(len(msg)))
	b.WriteString(msg + "\n")
	sock := fmt.Sprintf("/proc/%d/root/run/systemd/journal/socket", j.Pid)
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatalf("testkit: journald socket: %v", err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatalf("testkit: sending to journald: %v", err)
	}
}

// WaitCount waits until the journal holds n entries matching match
// (FIELD=VALUE): journald stores what it receives asynchronously.
func (j *Journald) WaitCount(t testing.TB, match string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := exec.Command("journalctl", "-D", j.Dir, "--no-pager", "-q", "-a", "-o", "export", "--output-fields=MESSAGE", match).Output()
		got := bytes.Count(out, []byte("\n__CURSOR="))
		if len(out) > 0 && bytes.HasPrefix(out, []byte("__CURSOR=")) {
			got++
		}
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testkit: the journal holds %d entries for %s after 20s, want %d (%v)", got, match, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
