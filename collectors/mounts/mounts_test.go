package mounts_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/mounts"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/internal/procfs"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

func mountsDevice(rep *layout.MountsReport, major, minor uint32) *layout.MountDevice {
	for i := range rep.Devices {
		if rep.Devices[i].Major == major && rep.Devices[i].Minor == minor {
			return &rep.Devices[i]
		}
	}
	return nil
}

// mountsTable is the raw table of ns from the tables file mounts.json
// names for it.
func mountsTable(t *testing.T, files map[string][]byte, ns *layout.MountNamespace) []byte {
	t.Helper()
	if !strings.HasPrefix(ns.Mountinfo, "mountinfo") {
		t.Fatalf("namespace %d: raw table in %q, want a mountinfo*.txt file", ns.Inode, ns.Mountinfo)
	}
	file, ok := files["mounts/"+ns.Mountinfo]
	if !ok {
		t.Fatalf("namespace %d: the bundle has no mounts/%s", ns.Inode, ns.Mountinfo)
	}
	var found [][]byte
	layout.EachMountinfoTable(file, func(h layout.MountinfoHeader, b []byte, err error) {
		if h.Inode == ns.Inode {
			if err != nil {
				t.Errorf("namespace %d: %v", ns.Inode, err)
			}
			if h.PID != ns.ReadFrom.PID || h.TID != ns.ReadFrom.TID || h.Host != ns.Host || h.Truncated != ns.Truncated {
				t.Errorf("namespace %d: header %+v disagrees with mounts.json %+v", ns.Inode, h, ns)
			}
			found = append(found, b)
		}
	})
	if len(found) != 1 {
		t.Fatalf("namespace %d: %d tables in mounts/%s, want 1", ns.Inode, len(found), ns.Mountinfo)
	}
	return found[0]
}

func mountsNamespace(rep *layout.MountsReport, inode uint64) *layout.MountNamespace {
	for i := range rep.Namespaces {
		if rep.Namespaces[i].Inode == inode {
			return &rep.Namespaces[i]
		}
	}
	return nil
}

// Incident 002: a loop-backed ext4 is mounted on the host, a process in a
// private mount namespace keeps a copy, the host unmounts. The index must
// name the holder, its namespace, the device and its backing file, and say
// the device is mounted only outside the host's namespace.
func TestMountsDeviceHeldOnlyInPrivateNamespace(t *testing.T) {
	testkit.RequireRoot(t)
	loop := testkit.LoopExt4(t, 16)
	h := testkit.HoldInPrivateNamespace(t, loop.Mountpoint)
	if err := unix.Unmount(loop.Mountpoint, 0); err != nil {
		t.Fatalf("unmount %s on the host: %v", loop.Mountpoint, err)
	}
	self, err := testkit.MountNamespace(0)
	if err != nil {
		t.Fatal(err)
	}

	c, _ := supervisortest.MountsCollect(t, 60*time.Second, "mounts", "openfiles")
	for _, name := range []string{"mounts", "openfiles"} {
		supervisortest.MountsRequireOK(t, c, name, h.Pid)
	}
	var rep layout.MountsReport
	supervisortest.MountsDecode(t, c, "mounts/mounts.json", &rep)
	if rep.HostNamespace != self {
		t.Errorf("host namespace %d, want the test's own %d (pid 1's)", rep.HostNamespace, self)
	}
	d := mountsDevice(&rep, loop.Major, loop.Minor)
	if d == nil {
		t.Fatalf("device %d:%d (%s) not in the index", loop.Major, loop.Minor, loop.Device)
	}
	if d.Dev != fmt.Sprintf("%d:%d", loop.Major, loop.Minor) {
		t.Errorf("dev %q", d.Dev)
	}
	if d.InHostNamespace || !d.OnlyOutsideHostNamespace {
		t.Errorf("in host namespace %v, only outside %v; want false, true", d.InHostNamespace, d.OnlyOutsideHostNamespace)
	}
	if d.Block == nil || d.Block.Name != filepath.Base(loop.Device) || d.Block.BackingFile != loop.Image {
		t.Errorf("block device %+v, want name %s backed by %s", d.Block, filepath.Base(loop.Device), loop.Image)
	}
	if len(d.Namespaces) != 1 {
		t.Fatalf("device mounted in %d namespaces, want 1 (the holder's): %+v", len(d.Namespaces), d.Namespaces)
	}
	dn := d.Namespaces[0]
	if dn.Namespace != h.NSInode || dn.Host {
		t.Errorf("namespace %d (host %v), want the holder's %d", dn.Namespace, dn.Host, h.NSInode)
	}
	found := false
	for _, p := range dn.Processes {
		if p.PID == h.Pid {
			found = p.Comm == "sleep"
		}
	}
	if !found {
		t.Errorf("holder pid %d (sleep) not among the namespace's processes %+v", h.Pid, dn.Processes)
	}
	if len(dn.Mounts) != 1 || dn.Mounts[0].MountPoint != loop.Mountpoint || dn.Mounts[0].Propagation != "private" ||
		dn.Mounts[0].Source != loop.Device || dn.Mounts[0].FSType != "ext4" {
		t.Errorf("mounts %+v, want %s of %s, ext4, private", dn.Mounts, loop.Mountpoint, loop.Device)
	}

	// The namespaces: the host's first and marked, the holder's with its
	// raw mountinfo in the bundle.
	if len(rep.Namespaces) == 0 || !rep.Namespaces[0].Host || rep.Namespaces[0].Inode != self {
		t.Errorf("first namespace is not the host's")
	}
	ns := mountsNamespace(&rep, h.NSInode)
	if ns == nil {
		t.Fatalf("holder's namespace %d not listed", h.NSInode)
	}
	raw := mountsTable(t, c.Files, ns)
	if !strings.Contains(string(raw), fmt.Sprintf(" %d:%d / %s ", loop.Major, loop.Minor, loop.Mountpoint)) {
		t.Errorf("raw mountinfo of the holder's namespace (in %s) lacks the loop mount:\n%s", ns.Mountinfo, raw)
	}
	for _, m := range mountsNamespace(&rep, self).Mounts {
		if m.Major == loop.Major && m.Minor == loop.Minor {
			t.Errorf("host namespace still lists the loop mount: %+v", m)
		}
	}

	// openfiles names the kernel thread that keeps the journal of the
	// device the host no longer sees: all lsof showed in incident 002.
	var sum layout.OpenFilesSummary
	supervisortest.MountsDecode(t, c, "openfiles/holders.json", &sum)
	want := "jbd2/" + filepath.Base(loop.Device) + "-8"
	var kts []string
	for _, od := range sum.Devices {
		if od.Major == loop.Major && od.Minor == loop.Minor {
			for _, kt := range od.KernelThreads {
				kts = append(kts, kt.Comm)
			}
		}
	}
	if !strings.Contains(strings.Join(kts, " "), want) {
		t.Errorf("kernel threads of %s: %q, want %s", loop.Device, kts, want)
	}
}

// A thread that unshares its own mount namespace (its process's other
// threads stay in the host's) and mounts a tmpfs there: found through the
// task's ns link, with the task named.
func TestMountsThreadLevelNamespace(t *testing.T) {
	testkit.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "threadns")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pid, tid, dev := mountsStartThreadHelper(t, dir)
	self, _ := testkit.MountNamespace(0)
	taskNS, err := mountsTaskNS(pid, tid)
	if err != nil {
		t.Fatal(err)
	}
	if taskNS == self {
		t.Fatal("helper thread is still in the test's namespace")
	}

	c, _ := supervisortest.MountsCollect(t, 60*time.Second, "mounts", "openfiles")
	var rep layout.MountsReport
	supervisortest.MountsDecode(t, c, "mounts/mounts.json", &rep)
	ns := mountsNamespace(&rep, taskNS)
	if ns == nil {
		t.Fatalf("thread's namespace %d not found", taskNS)
	}
	if !ns.ThreadLevel || ns.TaskCount != 1 || len(ns.Processes) != 1 {
		t.Fatalf("namespace %+v: want thread-level, one task of one process", ns)
	}
	p := ns.Processes[0]
	if p.PID != pid || len(p.Tasks) != 1 || p.Tasks[0].TID != tid || p.Tasks[0].Comm != "nsthread" {
		t.Errorf("namespace's process %+v, want pid %d with task %d named nsthread", p, pid, tid)
	}
	var tm *layout.NamespaceMount
	for i, m := range ns.Mounts {
		if m.MountPoint == dir {
			tm = &ns.Mounts[i]
		}
	}
	if tm == nil || tm.FSType != "tmpfs" || tm.Source != "nodesnap-threadns" || tm.Dev() != dev {
		t.Fatalf("thread's tmpfs at %s: %+v, want tmpfs nodesnap-threadns %s", dir, tm, dev)
	}
	// The process's other threads are in the test's namespace.
	if host := mountsNamespace(&rep, self); host == nil || !supervisortest.HasPID(host.Processes, pid) {
		t.Errorf("helper's main thread not listed in the host namespace")
	}
	maj, mnr, _ := strings.Cut(dev, ":")
	a, _ := strconv.ParseUint(maj, 10, 32)
	b, _ := strconv.ParseUint(mnr, 10, 32)
	d := mountsDevice(&rep, uint32(a), uint32(b))
	if d == nil || !d.OnlyOutsideHostNamespace || len(d.Namespaces) != 1 || d.Namespaces[0].Namespace != taskNS ||
		len(d.Namespaces[0].Processes) != 1 || d.Namespaces[0].Processes[0].PID != pid {
		t.Errorf("index entry for %s: %+v", dev, d)
	}

	// openfiles lists the thread with its own namespace and cwd.
	var procs []layout.OpenFilesProcess
	for _, line := range strings.Split(strings.TrimSpace(string(c.Files["openfiles/processes.jsonl"])), "\n") {
		var p layout.OpenFilesProcess
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("processes.jsonl: %v", err)
		}
		procs = append(procs, p)
	}
	ok := false
	for _, p := range procs {
		if p.PID != pid {
			continue
		}
		for _, th := range p.Threads {
			ok = ok || (th.TID == tid && th.Namespace == taskNS && th.Comm == "nsthread" && th.Cwd != nil)
		}
		if p.Namespace != self {
			t.Errorf("helper process namespace %d, want %d", p.Namespace, self)
		}
	}
	if !ok {
		t.Errorf("openfiles does not list thread %d of pid %d in namespace %d", tid, pid, taskNS)
	}
}

func mountsTaskNS(pid, tid int) (uint64, error) {
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%d/ns/mnt", pid, tid))
	if err != nil {
		return 0, err
	}
	return procfs.ParseMountNS(link)
}

const threadHelperEnv = "NODESNAP_TEST_THREADNS_DIR"

// mountsStartThreadHelper re-executes the test binary as
// TestMountsThreadHelper and waits for its thread to be ready. It returns
// the pid, the thread's tid and the tmpfs's major:minor.
func mountsStartThreadHelper(t *testing.T, dir string) (int, int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMountsThreadHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), threadHelperEnv+"="+dir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill() // by pid: our own child
		cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") || strings.HasPrefix(sc.Text(), "failed ") {
				lines <- sc.Text()
				return
			}
		}
		close(lines)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(20 * time.Second):
		t.Fatal("thread helper not ready after 20s")
	}
	var tid int
	var dev string
	if _, err := fmt.Sscanf(line, "ready %d %s", &tid, &dev); err != nil {
		t.Fatalf("thread helper: %q", line)
	}
	return cmd.Process.Pid, tid, dev
}

// TestMountsThreadHelper is not a test: it is the helper process of
// TestMountsThreadLevelNamespace (the test binary re-executed), whose one
// thread unshares its mount namespace and mounts a tmpfs.
func TestMountsThreadHelper(t *testing.T) {
	dir := os.Getenv(threadHelperEnv)
	if dir == "" {
		skip.Because(t, "helper process of TestMountsThreadLevelNamespace")
	}
	out := make(chan string)
	var unshareOnThread func()
	unshareOnThread = func() {
		// Never unlocked: the Go runtime must not reuse this thread,
		// whose namespace differs; it ends with the process.
		runtime.LockOSThread()
		if unix.Gettid() == os.Getpid() {
			// The main thread: keep it occupied and try another, so
			// that it is a thread, not the process, that unshares.
			go unshareOnThread()
			select {}
		}
		fail := func(what string, err error) { out <- fmt.Sprintf("failed %s: %v", what, err) }
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			fail("unshare", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fail("make private", err)
			return
		}
		if err := unix.Mount("nodesnap-threadns", dir, "tmpfs", 0, "size=1m"); err != nil {
			fail("mount", err)
			return
		}
		if err := os.WriteFile("/proc/thread-self/comm", []byte("nsthread"), 0); err != nil {
			fail("set name", err)
			return
		}
		mi, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			fail("mountinfo", err)
			return
		}
		ms, _ := procfs.ParseMountInfo(mi)
		dev := ""
		for _, m := range ms {
			if m.MountPoint == dir {
				dev = m.Dev()
			}
		}
		out <- fmt.Sprintf("ready %d %s", unix.Gettid(), dev)
		select {}
	}
	go unshareOnThread()
	fmt.Println(<-out)
	// Until the test closes stdin (or kills us).
	buf := make([]byte, 1)
	os.Stdin.Read(buf)
	os.Exit(0)
}

func TestPropagationType(t *testing.T) {
	for _, tt := range []struct {
		p    procfs.Propagation
		want string
	}{
		{procfs.Propagation{}, "private"},
		{procfs.Propagation{Shared: 1}, "shared"},
		{procfs.Propagation{Master: 3}, "slave"},
		{procfs.Propagation{Shared: 5, Master: 3}, "shared,slave"},
		{procfs.Propagation{Unbindable: true}, "private,unbindable"},
		{procfs.Propagation{Master: 7, PropagateFrom: 2}, "slave"},
	} {
		if got := mounts.PropagationType(tt.p); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.p, got, tt.want)
		}
	}
}

func mountsFixture(t testing.TB, inode uint64, host bool, file string, procs ...layout.NamespaceProcess) layout.MountNamespace {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "mounts", file))
	if err != nil {
		t.Fatal(err)
	}
	return mountsNSFromBytes(inode, host, data, procs...)
}

func mountsNSFromBytes(inode uint64, host bool, data []byte, procs ...layout.NamespaceProcess) layout.MountNamespace {
	ms, _ := procfs.ParseMountInfo(data)
	ns := layout.MountNamespace{Inode: inode, Host: host, ProcessCount: len(procs), Processes: procs}
	for _, m := range ms {
		ns.Mounts = append(ns.Mounts, layout.NamespaceMount{Mount: m, PropagationType: mounts.PropagationType(m.Propagation), Class: procfs.Classify(m).String()})
	}
	return ns
}

// The index on incident 002's shape: rbd1 is mounted on the host and (as a
// slave) in node_exporter's namespace; rbd3 only in node_exporter's, where
// the host unmounted it long ago.
func TestBuildMountDeviceIndex(t *testing.T) {
	host := mountsFixture(t, 4026531840, true, "host.mountinfo",
		layout.NamespaceProcess{PID: 1, Comm: "systemd", Threads: 1},
		layout.NamespaceProcess{PID: 900, Comm: "kubelet", Threads: 40})
	nodeExp := mountsFixture(t, 4026532999, false, "node-exporter.mountinfo",
		layout.NamespaceProcess{PID: 4242, Comm: "node_exporter", Threads: 9})
	idx := mounts.BuildMountDeviceIndex([]layout.MountNamespace{host, nodeExp})

	type row struct {
		dev     string
		sources []string
		inHost  bool
		only    bool
		nss     []uint64
	}
	var got []row
	for _, d := range idx {
		r := row{dev: d.Dev, sources: d.Sources, inHost: d.InHostNamespace, only: d.OnlyOutsideHostNamespace}
		for _, n := range d.Namespaces {
			r.nss = append(r.nss, n.Namespace)
		}
		got = append(got, r)
	}
	want := []row{
		{"0:24", []string{"tmpfs"}, true, false, []uint64{4026531840, 4026532999}},
		{"0:52", []string{"10.0.0.5:/export/data"}, true, false, []uint64{4026531840}},
		{"0:60", []string{"overlay"}, true, false, []uint64{4026531840, 4026532999}},
		{"252:1", []string{"/dev/vda1"}, true, false, []uint64{4026531840, 4026532999}},
		{"252:16", []string{"/dev/rbd1"}, true, false, []uint64{4026531840, 4026532999}},
		{"252:48", []string{"/dev/rbd3"}, false, true, []uint64{4026532999}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("index:\n got %+v\nwant %+v", got, want)
	}
	rbd3 := idx[len(idx)-1]
	ne := rbd3.Namespaces[0]
	if len(ne.Processes) != 1 || ne.Processes[0].Comm != "node_exporter" || ne.Processes[0].PID != 4242 {
		t.Errorf("rbd3 holders %+v", ne.Processes)
	}
	if len(ne.Mounts) != 2 || ne.Mounts[0].Propagation != "private" || ne.Mounts[0].MountID != 1204 ||
		ne.Mounts[1].MountPoint != "/host/var/lib/kubelet/pods/p3/volumes/kubernetes.io~rbd/pvc-b3" {
		t.Errorf("rbd3 mounts %+v", ne.Mounts)
	}
	// The host namespace's processes are not repeated per device.
	rbd1 := idx[4]
	if rbd1.Namespaces[0].Processes != nil || rbd1.Namespaces[0].ProcessCount != 2 {
		t.Errorf("host entry of rbd1 %+v: want no process list, count 2", rbd1.Namespaces[0])
	}
	if len(rbd1.Namespaces[0].Mounts) != 2 || rbd1.Namespaces[1].Mounts[0].Propagation != "master:50" {
		t.Errorf("rbd1 mounts %+v", rbd1.Namespaces)
	}
	if d := idx[2]; !reflect.DeepEqual(d.FSTypes, []string{"overlay"}) || d.Class != "other" {
		t.Errorf("overlay entry %+v", d)
	}
	// No host namespace known: nothing can be "in" it.
	nodeExp.Host = false
	host.Host = false
	for _, d := range mounts.BuildMountDeviceIndex([]layout.MountNamespace{host, nodeExp}) {
		if d.InHostNamespace {
			t.Errorf("%s in host namespace without one", d.Dev)
		}
	}
	if got := mounts.BuildMountDeviceIndex(nil); len(got) != 0 {
		t.Errorf("empty input: %v", got)
	}
}

// FuzzBuildMountDeviceIndex feeds arbitrary mountinfo through the parser
// into the index: it must not panic, and every non-pseudo mount must be in
// the index under its device, in its namespace.
func FuzzBuildMountDeviceIndex(f *testing.F) {
	for _, name := range []string{"host.mountinfo", "node-exporter.mountinfo"} {
		b, err := os.ReadFile(filepath.Join("testdata", "mounts", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, b[:len(b)/2])
	}
	f.Add([]byte("1 0 0:1 / / rw - tmpfs tmpfs rw\n"), []byte("garbage\n2 1 8:1 / /x rw - ext4 /dev/sda1 rw"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		nss := []layout.MountNamespace{mountsNSFromBytes(1, true, a), mountsNSFromBytes(2, false, b)}
		idx := mounts.BuildMountDeviceIndex(nss)
		seen := map[string]bool{}
		for i, d := range idx {
			if seen[d.Dev] {
				t.Fatalf("device %s twice", d.Dev)
			}
			seen[d.Dev] = true
			if d.InHostNamespace == d.OnlyOutsideHostNamespace {
				t.Fatalf("%s: in host %v, only outside %v", d.Dev, d.InHostNamespace, d.OnlyOutsideHostNamespace)
			}
			if i > 0 && (idx[i-1].Major > d.Major || idx[i-1].Major == d.Major && idx[i-1].Minor >= d.Minor) {
				t.Fatalf("not sorted at %s", d.Dev)
			}
		}
		for _, ns := range nss {
			for _, m := range ns.Mounts {
				if m.Class == "pseudo" {
					continue
				}
				ok := false
				for _, d := range idx {
					if d.Dev != m.Dev() {
						continue
					}
					for _, dn := range d.Namespaces {
						for _, dm := range dn.Mounts {
							ok = ok || (dn.Namespace == ns.Inode && dm.MountID == m.ID && dm.MountPoint == m.MountPoint)
						}
					}
				}
				if !ok {
					t.Fatalf("mount %d %s (%s) of namespace %d not indexed", m.ID, m.MountPoint, m.Dev(), ns.Inode)
				}
			}
		}
	})
}

// A mount table cut at the file size cap loses the mounts after the cut:
// the collector says so and is partial, not ok with a note.
func TestMountsTableCutIsPartial(t *testing.T) {
	testkit.RequireRoot(t)
	b := supervisortest.Collect(t, "mounts", collectors.Common{MaxFileBytes: 1024})
	if b.Res.Status != bundle.StatusPartial {
		t.Errorf("status %s with every table cut at 1 KiB, want partial", b.Res.Status)
	}
	if !strings.Contains(b.Res.Error+b.Notes(), "the mounts after the cut are missing") {
		t.Errorf("nothing says the tables were cut: error %q, notes %q", b.Res.Error, b.Notes())
	}
}
