package openfiles_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/openfiles"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/internal/procfs"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

func openFilesProcesses(t *testing.T, c *bundle.Contents) map[int]layout.OpenFilesProcess {
	t.Helper()
	out := map[int]layout.OpenFilesProcess{}
	raw := strings.TrimSpace(string(c.Files["openfiles/processes.jsonl"]))
	if raw == "" {
		t.Fatal("openfiles/processes.jsonl is empty")
	}
	for _, line := range strings.Split(raw, "\n") {
		var p layout.OpenFilesProcess
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("processes.jsonl: %v: %.200s", err, line)
		}
		out[p.PID] = p
	}
	return out
}

func openFilesHolder(hs []layout.FileHolder, pid int) *layout.FileHolder {
	for i := range hs {
		if hs[i].PID == pid {
			return &hs[i]
		}
	}
	return nil
}

// startProcess starts a program of the test's own (by path, so it may live
// on a test mount) that sleeps, in its own process group; it is killed by
// pid on cleanup.
func openFilesStart(t *testing.T, prog string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", prog, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// A process holding a file open, one with its cwd in the mount, one whose
// executable (and so its mappings) lives there, and one holding the block
// device node itself: all holders of the device and of the mount.
func TestOpenFilesHolders(t *testing.T) {
	testkit.RequireRoot(t)
	loop := testkit.LoopExt4(t, 16)
	mp := loop.Mountpoint
	if err := os.MkdirAll(filepath.Join(mp, "dir", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(mp, "dir", "data.txt")
	if err := os.WriteFile(file, []byte("held\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		skip.Missing(t, "sleep is not installed")
	}
	exe := filepath.Join(mp, "mysleep")
	openFilesCopy(t, sleep, exe)

	fdH := testkit.HoldOpenFile(t, file)
	cwdH := testkit.HoldCwd(t, filepath.Join(mp, "dir", "sub"))
	devH := testkit.HoldOpenFile(t, loop.Device)
	exeH := openFilesStart(t, exe, "infinity")
	openFilesWaitExec(t, exeH.Process.Pid, exe)

	c, _ := supervisortest.MountsCollect(t, 60*time.Second, "openfiles")
	supervisortest.MountsRequireOK(t, c, "openfiles", fdH.Pid, cwdH.Pid, devH.Pid, exeH.Process.Pid)
	var sum layout.OpenFilesSummary
	supervisortest.MountsDecode(t, c, "openfiles/holders.json", &sum)
	dev := fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
	var d *layout.DeviceHolders
	for i := range sum.Devices {
		if sum.Devices[i].Dev == dev {
			d = &sum.Devices[i]
		}
	}
	if d == nil {
		t.Fatalf("no holders entry for %s", dev)
	}
	if d.Block == nil || d.Block.BackingFile != loop.Image || !slices.Contains(d.FSTypes, "ext4") {
		t.Errorf("device %s: block %+v fs types %v", dev, d.Block, d.FSTypes)
	}
	wantUses := map[int][]string{
		fdH.Pid:          {"fd 3"},
		cwdH.Pid:         {"cwd"},
		devH.Pid:         {"fd 3 (device node)"},
		exeH.Process.Pid: {"exe", "mem"},
	}
	for pid, uses := range wantUses {
		h := openFilesHolder(d.Holders, pid)
		if h == nil {
			t.Errorf("pid %d not a holder of %s; holders %+v", pid, dev, d.Holders)
			continue
		}
		for _, u := range uses {
			if !slices.Contains(h.Uses, u) {
				t.Errorf("pid %d uses %q, want %q among them", pid, h.Uses, u)
			}
		}
	}
	if h := openFilesHolder(d.Holders, fdH.Pid); h != nil && !slices.Contains(h.Paths, file) {
		t.Errorf("fd holder paths %q, want %s", h.Paths, file)
	}
	if h := openFilesHolder(d.Holders, os.Getpid()); h != nil {
		t.Errorf("the test process itself holds nothing on %s, got %+v", dev, h)
	}

	// Per mountpoint: the same holders, except the device node, which is
	// on /dev, not on the mount.
	var m *layout.MountHolders
	for i := range sum.Mounts {
		if sum.Mounts[i].MountPoint == mp && sum.Mounts[i].Dev == dev {
			m = &sum.Mounts[i]
		}
	}
	if m == nil {
		t.Fatalf("no holders entry for mount %s", mp)
	}
	if m.MountID != loop.MountID || !m.Host || m.FSType != "ext4" || m.Source != loop.Device {
		t.Errorf("mount entry %+v", m)
	}
	for _, pid := range []int{fdH.Pid, cwdH.Pid, exeH.Process.Pid} {
		if openFilesHolder(m.Holders, pid) == nil {
			t.Errorf("pid %d not a holder of mount %s: %+v", pid, mp, m.Holders)
		}
	}
	if openFilesHolder(m.Holders, devH.Pid) != nil {
		t.Errorf("device node holder listed on the mount")
	}

	// The lsof-like listing.
	procs := openFilesProcesses(t, c)
	p, ok := procs[fdH.Pid]
	if !ok {
		t.Fatalf("fd holder %d not in processes.jsonl", fdH.Pid)
	}
	var fd3 *layout.OpenFD
	for i := range p.FDs {
		if p.FDs[i].FD == 3 {
			fd3 = &p.FDs[i]
		}
	}
	if fd3 == nil || fd3.Path != file || fd3.Dev != dev || fd3.MountID != loop.MountID || fd3.MountPoint != mp ||
		!strings.HasPrefix(fd3.Flags, "O_RDONLY") || fd3.Kind != procfs.LinkPath {
		t.Errorf("fd 3 of %d: %+v", fdH.Pid, fd3)
	}
	if p.Comm != "sleep" || p.Cwd == nil || p.Cwd.Path != "/" || p.Exe == nil || p.FDCount < 4 {
		t.Errorf("fd holder process %+v", p)
	}
	if c := procs[cwdH.Pid].Cwd; c == nil || c.Path != filepath.Join(mp, "dir", "sub") || c.MountID != loop.MountID || c.Dev != dev {
		t.Errorf("cwd of %d: %+v", cwdH.Pid, c)
	}
	if f := procs[devH.Pid].FDs; len(f) < 1 || !slices.ContainsFunc(f, func(o layout.OpenFD) bool {
		return o.FD == 3 && o.DeviceNode == dev && o.Kind == procfs.LinkDevice
	}) {
		t.Errorf("device node fd of %d: %+v", devH.Pid, f)
	}
	ep := procs[exeH.Process.Pid]
	if ep.Exe == nil || ep.Exe.Path != exe || ep.Exe.Dev != dev ||
		!slices.ContainsFunc(ep.Maps, func(f layout.OpenFile) bool { return f.Path == exe && f.Dev == dev }) {
		t.Errorf("exe holder: exe %+v maps %+v", ep.Exe, ep.Maps)
	}
	if _, ok := procs[2]; ok {
		t.Errorf("kthreadd listed as a process")
	}
	// Pipes, sockets and anonymous inodes are counted, not listed: this
	// test process reads its holders' stderr through pipes and has the Go
	// runtime's epoll instance.
	me := procs[os.Getpid()]
	if me.Pipes < 1 || me.AnonInodes["eventpoll"] < 1 || me.FDCount < len(me.FDs)+me.Pipes+me.Sockets {
		t.Errorf("test process: %d pipes, anon inodes %v, %d fds of which %d listed", me.Pipes, me.AnonInodes, me.FDCount, len(me.FDs))
	}
	for _, o := range me.FDs {
		if o.Kind != procfs.LinkPath && o.Kind != procfs.LinkDevice && o.Kind != procfs.LinkMemfd {
			t.Errorf("fd listed individually: %+v", o)
		}
	}
	if sum.KernelThreads == 0 || sum.Processes < 4 || sum.FDs == 0 {
		t.Errorf("counts: %d processes, %d kernel threads, %d fds", sum.Processes, sum.KernelThreads, sum.FDs)
	}
}

func openFilesCopy(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// openFilesWaitExec waits until pid runs exe (after exec its exe link
// names it).
func openFilesWaitExec(t *testing.T, pid int, exe string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); l == exe {
			return
		}
	}
	t.Fatalf("pid %d does not run %s", pid, exe)
}

// A hung FUSE mount with a process whose cwd is in it, one holding a file
// open in it and one blocked in a stat() of it: both collectors finish,
// list those holders (readlink of cwd and fd does not reach the FUSE
// server) and everything else, and send the hung server no request.
func TestOpenFilesAndMountsWithHungFUSE(t *testing.T) {
	testkit.RequireRoot(t)
	// Registered before the mount, so it runs after the mount's cleanup
	// aborted the connection and the blocked stat returned.
	var blocked *exec.Cmd
	t.Cleanup(func() {
		if blocked != nil {
			blocked.Process.Kill()
			blocked.Wait()
		}
	})
	fuse := testkit.HungFUSE(t, "")
	tmp := testkit.MountTmpfs(t, "")
	if err := os.WriteFile(filepath.Join(tmp, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cwdH := testkit.HoldCwd(t, filepath.Join(fuse.Mountpoint(), "data"))
	fdH := testkit.HoldOpenFile(t, filepath.Join(fuse.Mountpoint(), "README"))
	tmpH := testkit.HoldOpenFile(t, filepath.Join(tmp, "f"))
	fuse.Hang()
	blocked = exec.Command("stat", filepath.Join(fuse.Mountpoint(), "data", "a.txt"))
	blocked.Dir = "/"
	blocked.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := blocked.Start(); err != nil {
		t.Fatal(err)
	}
	fuse.WaitBlocked(1, 10*time.Second)

	c, elapsed := supervisortest.MountsCollect(t, 45*time.Second, "mounts", "openfiles")
	if elapsed > 40*time.Second {
		t.Errorf("collection took %v", elapsed)
	}
	// Had either collector touched the mount (a stat, or a readlink that
	// reached the filesystem), it would have hung: its status would be
	// timeout, or the item would be in hung_items. (Counting requests
	// blocked in the FUSE server would say the same, but tests of other
	// packages running at the same time may probe this mount too.)
	for _, name := range []string{"mounts", "openfiles"} {
		supervisortest.MountsRequireOK(t, c, name, cwdH.Pid, fdH.Pid, tmpH.Pid, blocked.Process.Pid)
	}
	t.Logf("%d requests blocked in the FUSE server after the run (1: the stat)", fuse.Blocked())

	dev := fmt.Sprintf("0:%d", fuse.ConnID())
	procs := openFilesProcesses(t, c)
	if cw := procs[cwdH.Pid].Cwd; cw == nil || cw.Path != filepath.Join(fuse.Mountpoint(), "data") || cw.Dev != dev || cw.MountID != fuse.MountID() {
		t.Errorf("cwd holder on the hung mount: %+v", cw)
	}
	if !slices.ContainsFunc(procs[fdH.Pid].FDs, func(o layout.OpenFD) bool {
		return o.FD == 3 && o.Dev == dev && o.Path == filepath.Join(fuse.Mountpoint(), "README")
	}) {
		t.Errorf("fd holder on the hung mount: %+v", procs[fdH.Pid].FDs)
	}
	if p, ok := procs[blocked.Process.Pid]; !ok || p.Comm != "stat" || p.Exe == nil || p.MapsError != "" {
		t.Errorf("process blocked in the hung mount: %+v (listed %v)", p, ok)
	}
	var sum layout.OpenFilesSummary
	supervisortest.MountsDecode(t, c, "openfiles/holders.json", &sum)
	held := map[string][]int{}
	for _, m := range sum.Mounts {
		for _, h := range m.Holders {
			held[m.MountPoint] = append(held[m.MountPoint], h.PID)
		}
	}
	if !slices.Contains(held[fuse.Mountpoint()], cwdH.Pid) || !slices.Contains(held[fuse.Mountpoint()], fdH.Pid) {
		t.Errorf("holders of %s: %v", fuse.Mountpoint(), held[fuse.Mountpoint()])
	}
	if !slices.Contains(held[tmp], tmpH.Pid) {
		t.Errorf("holders of %s: %v", tmp, held[tmp])
	}
	if len(held["/"]) < 3 {
		t.Errorf("holders of /: %v", held["/"])
	}

	var rep layout.MountsReport
	supervisortest.MountsDecode(t, c, "mounts/mounts.json", &rep)
	host := rep.Namespaces[0]
	var fuseM, tmpM bool
	for _, m := range host.Mounts {
		fuseM = fuseM || (m.MountPoint == fuse.Mountpoint() && m.FSType == "fuse."+testkit.DefaultFUSESubtype && m.Class == "fuse")
		tmpM = tmpM || (m.MountPoint == tmp && m.FSType == "tmpfs")
	}
	if !host.Host || !fuseM || !tmpM || len(host.Mounts) < 5 {
		t.Errorf("host namespace (host %v): FUSE mount listed %v, tmpfs listed %v, %d mounts", host.Host, fuseM, tmpM, len(host.Mounts))
	}
	if !supervisortest.HasPID(host.Processes, cwdH.Pid) || !supervisortest.HasPID(host.Processes, blocked.Process.Pid) {
		t.Errorf("host namespace processes lack the holders")
	}
}

// A filesystem unmounted lazily while a process still has a file open on
// it is in no namespace's mount table, yet keeps its device busy: the
// holder is listed under unknown_mounts with the mount's ID.
func TestOpenFilesLazilyUnmountedHolder(t *testing.T) {
	testkit.RequireRoot(t)
	tmp := testkit.MountTmpfs(t, "")
	file := filepath.Join(tmp, "kept")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ms, err := testkit.ReadMountinfo(0)
	if err != nil {
		t.Fatal(err)
	}
	id := 0
	for _, m := range ms {
		if m.Mountpoint == tmp {
			id = m.ID
		}
	}
	if id == 0 {
		t.Fatalf("%s not in mountinfo", tmp)
	}
	h := testkit.HoldOpenFile(t, file)
	if err := unix.Unmount(tmp, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}

	c, _ := supervisortest.MountsCollect(t, 60*time.Second, "openfiles")
	var sum layout.OpenFilesSummary
	supervisortest.MountsDecode(t, c, "openfiles/holders.json", &sum)
	var found *layout.UnknownMountHolders
	for i := range sum.UnknownMounts {
		if sum.UnknownMounts[i].MountID == id {
			found = &sum.UnknownMounts[i]
		}
	}
	if found == nil || openFilesHolder(found.Holders, h.Pid) == nil {
		t.Fatalf("unknown mounts %+v: want mount %d held by pid %d", sum.UnknownMounts, id, h.Pid)
	}
	if hh := openFilesHolder(found.Holders, h.Pid); !slices.Contains(hh.Uses, "fd 3") {
		t.Errorf("holder uses %q", hh.Uses)
	}
	for _, m := range sum.Mounts {
		if m.MountID == id {
			t.Errorf("detached mount listed as a mounted one: %+v", m)
		}
	}
	fds := openFilesProcesses(t, c)[h.Pid].FDs
	if !slices.ContainsFunc(fds, func(o layout.OpenFD) bool {
		return o.FD == 3 && o.MountID == id && o.MountPoint == "" && o.Dev == ""
	}) {
		t.Errorf("fd 3 of the holder: %+v", fds)
	}
}

func TestKernelThreadNamesDevice(t *testing.T) {
	for _, tt := range []struct {
		comm, name string
		want       bool
	}{
		{"jbd2/loop0-8", "loop0", true},
		{"jbd2/loop10-8", "loop1", false},
		{"jbd2/loop10-8", "loop10", true},
		{"rbd3-tasks", "rbd3", true},
		{"rbd30-tasks", "rbd3", false},
		{"kworker/u8:1-loop0", "loop0", true},
		{"kworker/u8:1+rbd3-tasks", "rbd3", true},
		{"kdmflush/253:0", "253:0", true},
		{"kdmflush/253:01", "253:0", false},
		{"jbd2/dm-0-8", "dm-0", true},
		{"jbd2/sda1-8", "sda", false},
		{"jbd2/sda1-8", "sda1", true},
		{"xfsaild/nbd0", "nbd0", true},
		{"loop0", "loop0", true},
		{"myloop0", "loop0", false},
		{"loop0", "", false},
		{"", "loop0", false},
		{"loo", "loop0", false},
	} {
		if got := layout.KernelThreadNamesDevice(tt.comm, tt.name); got != tt.want {
			t.Errorf("KernelThreadNamesDevice(%q, %q) = %v, want %v", tt.comm, tt.name, got, tt.want)
		}
	}
}

func TestMountForPath(t *testing.T) {
	mounts, bad := procfs.ParseMountInfo([]byte(`1 0 8:1 / / rw - ext4 /dev/sda1 rw
2 1 0:20 / /var/lib/kubelet rw - ext4 /dev/sdb1 rw
3 2 0:30 / /var/lib/kubelet/pods/p/volumes/v rw - nfs4 srv:/x rw
4 2 0:31 / /var/lib/kubelet/pods/p/volumes/v rw - tmpfs tmpfs rw
5 1 0:40 / /mnt/a\040b rw - tmpfs tmpfs rw
`))
	if len(bad) != 0 {
		t.Fatal(bad)
	}
	for _, tt := range []struct {
		path string
		want int // mount ID, 0 for none
	}{
		{"/", 1},
		{"/etc/passwd", 1},
		{"/var/lib/kubeletx", 1},
		{"/var/lib/kubelet", 2},
		{"/var/lib/kubelet/pods/p", 2},
		{"/var/lib/kubelet/pods/p/volumes/v", 4}, // the topmost of two
		{"/var/lib/kubelet/pods/p/volumes/v/f", 4},
		{"/var/lib/kubelet/pods/p/volumes/v/../../x", 2},
		{"/mnt/a b/c", 5},
		{"relative/path", 0},
		{"", 0},
		{"socket:[1234]", 0},
	} {
		got := 0
		if i := openfiles.MountForPath(mounts, tt.path); i >= 0 {
			got = mounts[i].ID
		}
		if got != tt.want {
			t.Errorf("MountForPath(%q) = mount %d, want %d", tt.path, got, tt.want)
		}
	}
	if i := openfiles.MountForPath(nil, "/x"); i != -1 {
		t.Errorf("no mounts: %d", i)
	}
	noRoot, _ := procfs.ParseMountInfo([]byte("7 1 0:9 / /data rw - tmpfs tmpfs rw\n"))
	if i := openfiles.MountForPath(noRoot, "/etc"); i != -1 {
		t.Errorf("path outside every mount placed on %d", i)
	}
}

// FuzzMountForPath: any path against any mount table returns -1 or a
// mount whose mount point is the path or one of its parents.
func FuzzMountForPath(f *testing.F) {
	f.Add([]byte("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:20 / /var/lib rw - tmpfs t rw\n"), "/var/lib/x")
	f.Add([]byte("2 1 0:20 / /a\\040b rw - tmpfs t rw\n"), "/a b/../a b/c")
	f.Fuzz(func(t *testing.T, mi []byte, p string) {
		mounts, _ := procfs.ParseMountInfo(mi)
		i := openfiles.MountForPath(mounts, p)
		if i < -1 || i >= len(mounts) {
			t.Fatalf("index %d of %d mounts", i, len(mounts))
		}
		if i < 0 {
			return
		}
		mp := mounts[i].MountPoint
		clean := filepath.Clean(p)
		if !strings.HasPrefix(p, "/") || !(clean == mp || mp == "/" || strings.HasPrefix(clean, mp+"/")) {
			t.Fatalf("%q placed on mount point %q", p, mp)
		}
	})
}
