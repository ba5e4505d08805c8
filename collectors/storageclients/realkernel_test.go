package storageclients_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// A FUSE daemon that stops answering, with a reader blocked on a file of
// its mount: storageclients sees the connection's requests waiting and
// the reader stuck in both samples, names the daemon (this test process
// serves the mount), and mountprobe reports the mount hung from that
// evidence without probing it.
func TestRealStuckFUSEConnection(t *testing.T) {
	testkit.RequireFUSE(t)
	fuse := testkit.HungFUSE(t, "")
	reader := startReader(t, filepath.Join(fuse.Mountpoint(), "README"), fuse.Hang)
	waitWchan(t, reader, "request_wait_answer")

	c, elapsed := supervisortest.Run(t, supervisor.Options{Only: []string{"storageclients", "mountprobe"}, Timeout: 60 * time.Second,
		Common: collectors.Common{ProbeTimeout: 3 * time.Second}})
	t.Logf("collection took %v", elapsed)
	var rep layout.StorageClients
	supervisortest.Decode(t, c, layout.StorageClientsPath, &rep)
	dev := fmt.Sprintf("0:%d", fuse.ConnID())

	conn := findConn(rep.FUSE, fuse.ConnID())
	if conn == nil || conn.Waiting < 1 || conn.Waiting2 < 1 || !slices.Contains(conn.Mountpoints, fuse.Mountpoint()) {
		t.Errorf("FUSE connection record: %+v", conn)
	}
	if !slices.ContainsFunc(rep.FUSEHolders, func(h layout.FUSEDevHolder) bool { return h.PID == os.Getpid() && h.FDs > 0 }) {
		t.Errorf("this test process serves the mount, but is not among the /dev/fuse holders %+v", rep.FUSEHolders)
	}
	s := findStuck(rep.Stuck, dev)
	if s == nil {
		t.Fatalf("connection %s not found stuck; stuck %+v, tasks %+v, errors %v", dev, rep.Stuck, rep.Tasks, rep.Errors)
	}
	if s.Kind != layout.StuckFUSE || !slices.Contains(s.TIDs, reader) || s.Requests < 1 || s.Evidence == nil {
		t.Errorf("stuck record: %+v", *s)
	}
	task := findTask(rep.Tasks, reader)
	if task == nil || task.Dev != dev || !strings.Contains(task.Via, "file descriptor") || !task.NotRun {
		t.Errorf("the reader's task record: %+v", task)
	}

	var probes layout.MountProbeReport
	supervisortest.Decode(t, c, layout.ProbesPath, &probes)
	p := supervisortest.FindProbe(&probes, fuse.Mountpoint())
	if p == nil {
		t.Fatalf("%s not in probes.json", fuse.Mountpoint())
	}
	if p.Result != layout.ProbeHung || p.Probed || p.KernelStuck == nil || !strings.Contains(p.Diagnosis, "already stuck in the kernel") {
		t.Errorf("the mount must be reported hung without a probe: %+v", *p)
	}
	if !supervisortest.HungTargets(c.Manifest)[fuse.Mountpoint()] {
		t.Errorf("manifest hung_mounts %v lacks %s", c.Manifest.HungMounts, fuse.Mountpoint())
	}
	if res := c.Manifest.Collector("storageclients"); res == nil || res.Status != bundle.StatusOK && res.Status != bundle.StatusPartial {
		t.Errorf("storageclients result: %+v", res)
	}
}

// A hung block device in miniature: ext4 on a loop device whose backing
// file lives on a FUSE mount whose daemon stops answering. A writer's
// fsync and ext4's journal thread block, the loop device keeps requests
// in flight, and storageclients names the device stuck.
func TestRealStuckLoopOnFUSE(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireLoop(t)
	testkit.RequireTool(t, "dd")
	fuse := testkit.HungFUSE(t, "", testkit.FUSELoopback(t.TempDir()))
	loop := testkit.LoopExt4(t, 16, testkit.LoopImageDir(fuse.Mountpoint()))
	// Cleanups run in reverse: the daemon answers again before the
	// ext4 mount and the loop device are torn down, so they see no error.
	t.Cleanup(fuse.Resume)
	writer := startWriter(t, filepath.Join(loop.Mountpoint, "f"), fuse.Hang)
	name := filepath.Base(loop.Device)
	waitInflight(t, name, writer)

	c, elapsed := supervisortest.Run(t, supervisor.Options{Only: []string{"storageclients", "mountprobe"}, Timeout: 60 * time.Second,
		Common: collectors.Common{ProbeTimeout: 3 * time.Second}})
	t.Logf("collection took %v", elapsed)
	var rep layout.StorageClients
	supervisortest.Decode(t, c, layout.StorageClientsPath, &rep)
	dev := fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
	var bq *layout.BlockQueue
	for i := range rep.Block {
		if rep.Block[i].Name == name {
			bq = &rep.Block[i]
		}
	}
	if bq == nil || bq.Dev != dev || bq.Inflight2[0]+bq.Inflight2[1] < 1 || !strings.HasPrefix(bq.BackingFile, fuse.Mountpoint()) {
		t.Errorf("loop device record: %+v", bq)
	}
	s := findStuck(rep.Stuck, dev)
	if s == nil {
		t.Fatalf("%s (%s) not found stuck; stuck %+v, tasks %+v, errors %v", name, dev, rep.Stuck, rep.Tasks, rep.Errors)
	}
	jbd2 := false
	for _, tid := range s.TIDs {
		if task := findTask(rep.Tasks, tid); task != nil && strings.HasPrefix(task.Comm, "jbd2/"+name) {
			jbd2 = true
		}
	}
	if s.Kind != layout.StuckBlock || s.Requests < 1 || !slices.Contains(s.TIDs, writer) || !jbd2 {
		t.Errorf("stuck record (want the writer %d and jbd2/%s): %+v; tasks %+v", writer, name, *s, rep.Tasks)
	}
	var probes layout.MountProbeReport
	supervisortest.Decode(t, c, layout.ProbesPath, &probes)
	if p := supervisortest.FindProbe(&probes, loop.Mountpoint); p == nil || p.Result != layout.ProbeHung || p.Probed {
		t.Errorf("the ext4 mount must be reported hung without a probe: %+v", p)
	}
}

// startReader starts a shell that opens path, then (after hang) reads it
// through the descriptor: its blocked read names the file it waits on.
func startReader(t *testing.T, path string, hang func()) int {
	t.Helper()
	return startReaderTB(t, path, hang)
}

func startReaderTB(t testing.TB, path string, hang func()) int {
	t.Helper()
	return startBlocked(t, hang, "sh", "-c", `exec 3<"$0" && echo ready && read x && exec cat <&3 >/dev/null`, path)
}

// startWriter writes a file on the loop-backed ext4 and, after hang,
// fsyncs it: the fsync waits for the loop device's I/O.
func startWriter(t *testing.T, path string, hang func()) int {
	t.Helper()
	return startBlocked(t, hang, "sh", "-c", `exec 3>"$0" && echo ready && read x && exec dd if=/dev/zero bs=64k count=64 conv=fsync status=none >&3`, path)
}

// startBlocked starts the command, waits for its "ready", calls hang and
// lets it go on into the hung filesystem. It is killed on cleanup
// (before the filesystem is torn down: cleanups run in reverse).
func startBlocked(t testing.TB, hang func(), name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond):
			// Stuck in the kernel: it dies once the filesystem answers.
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("%s did not start: %q %v", name, line, err)
	}
	hang()
	if _, err := io.WriteString(in, "go\n"); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func waitWchan(t *testing.T, pid int, want string) {
	t.Helper()
	waitWchanTB(t, pid, want)
}

func waitWchanTB(t testing.TB, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never waited in %s (wchan %q)", pid, want, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitInflight waits until the loop device has requests in flight and
// the writer sleeps in the kernel.
func waitInflight(t *testing.T, name string, writer int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile("/sys/block/" + name + "/inflight")
		f := strings.Fields(string(b))
		n := 0
		for _, v := range f {
			x, _ := strconv.Atoi(v)
			n += x
		}
		// ext4 commits its journal every 5 seconds: then jbd2 blocks too.
		jbd2 := journalThread(name)
		if n > 0 && testkit.ProcState(writer) == "D" && jbd2 > 0 && testkit.ProcState(jbd2) == "D" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: inflight %q, writer state %s, jbd2 %d state %s", name, b, testkit.ProcState(writer), jbd2, testkit.ProcState(jbd2))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// journalThread finds the pid of ext4's journal thread for a device.
func journalThread(name string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		if strings.HasPrefix(strings.TrimSpace(string(b)), "jbd2/"+name+"-") {
			return pid
		}
	}
	return 0
}

func findConn(cs []layout.FUSEConn, id uint32) *layout.FUSEConn {
	for i := range cs {
		if cs[i].Conn == id {
			return &cs[i]
		}
	}
	return nil
}

func findStuck(ss []layout.KernelStuck, dev string) *layout.KernelStuck {
	for i := range ss {
		if ss[i].Dev == dev {
			return &ss[i]
		}
	}
	return nil
}

func findTask(ts []layout.StorageTask, tid int) *layout.StorageTask {
	for i := range ts {
		if ts[i].TID == tid {
			return &ts[i]
		}
	}
	return nil
}
