package mountprobe_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/mountprobe"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// A stuck FUSE daemon, a dead one, a healthy tmpfs, and a bind mount of
// the hung filesystem: mountprobe reports hung, ENOTCONN and ok within
// about one probe deadline, tells the run which mounts hang, and spends no
// second deadline on the bind mount.
func TestMountprobeHungAndDeadFUSE(t *testing.T) {
	testkit.RequireFUSE(t)
	dir := t.TempDir()
	hung := testkit.HungFUSE(t, filepath.Join(dir, "cephfs"), testkit.FUSEStartHung(),
		testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	dead := testkit.DeadFUSE(t, filepath.Join(dir, "dead"))
	tmp := testkit.MountTmpfs(t, filepath.Join(dir, "tmp"))

	const probe = time.Second
	c, elapsed := supervisortest.Run(t, supervisor.Options{Only: []string{"mountprobe"}, Timeout: 30 * time.Second,
		Common: collectors.Common{ProbeTimeout: probe}})
	res := c.Manifest.Collector("mountprobe")
	if res == nil {
		t.Fatal("no mountprobe result in the manifest")
	}
	var rep layout.MountProbeReport
	supervisortest.Decode(t, c, "mountprobe/probes.json", &rep)
	t.Logf("run %v; mountprobe %.2fs (its own measure %.2fs), status %s; counts %v", elapsed, res.DurationSeconds, rep.DurationMS/1000, res.Status, rep.Counts)

	h := supervisortest.FindProbe(&rep, hung.Mountpoint())
	if h == nil {
		t.Fatalf("hung mount %s not in probes.json", hung.Mountpoint())
	}
	if h.Result != layout.ProbeHung || h.Class != "network" || h.FSType != "fuse.ceph-fuse" || !h.Probed {
		t.Errorf("hung mount record: %+v", *h)
	}
	if h.FUSE == nil || h.FUSE.Conn != hung.ConnID() {
		t.Errorf("hung mount FUSE state %+v, want connection %d", h.FUSE, hung.ConnID())
	} else if h.FUSE.WaitingAfter == nil {
		t.Errorf("fusectl waiting after the hung probe was not read")
	} else {
		// Not asserted >= 1: killing the worker withdraws its request
		// if the daemon had not read it yet, which is a race.
		t.Logf("fusectl waiting after the hung probe: %d", *h.FUSE.WaitingAfter)
	}
	// The worker was caught waiting for the daemon's answer.
	if !strings.Contains(h.BlockedIn, "request_wait_answer") {
		t.Errorf("hung mount's evidence %q does not show the wait for the FUSE daemon", h.BlockedIn)
	}
	if !supervisortest.HungTargets(c.Manifest)[hung.Mountpoint()] {
		t.Errorf("manifest hung_mounts %v lacks %s", c.Manifest.HungMounts, hung.Mountpoint())
	}

	d := supervisortest.FindProbe(&rep, dead.Mountpoint())
	if d == nil || d.Result != layout.ProbeError || d.Errno != "ENOTCONN" || !strings.Contains(d.Diagnosis, "FUSE daemon gone") {
		t.Errorf("dead FUSE record: %+v", d)
	}
	if supervisortest.HungTargets(c.Manifest)[dead.Mountpoint()] {
		t.Errorf("a dead FUSE mount fails at once; it must not be reported hung")
	}
	ok := supervisortest.FindProbe(&rep, tmp)
	if ok == nil || ok.Result != layout.ProbeOK || ok.Class != "local" || ok.Statfs == nil || !strings.Contains(ok.Statfs.TypeMagic, "tmpfs") {
		t.Errorf("tmpfs record: %+v", ok)
	}
	// Network and FUSE first.
	if rep.Probes[0].Class != "network" {
		t.Errorf("first record is %s %s, want the network (ceph-fuse) mount first", rep.Probes[0].Class, rep.Probes[0].Mountpoint)
	}
	// Only this test's mounts are counted: tests of other packages may
	// have hung mounts of their own at the same time.
	for _, p := range rep.Probes {
		if strings.HasPrefix(p.Mountpoint, dir+"/") && p.Result == layout.ProbeHung && p.Mountpoint != hung.Mountpoint() {
			t.Errorf("%s reported hung: %+v", p.Mountpoint, p)
		}
	}
	// One deadline, plus the kill of the stuck worker (up to
	// isolate.ReapGrace for a task the kernel will not let die), plus
	// slack for a loaded machine; not a second deadline per mount.
	if own, limit := time.Duration(rep.DurationMS*float64(time.Millisecond)), probe+isolate.ReapGrace+2*time.Second; own > limit {
		t.Errorf("mountprobe measured %v for itself with one hung mount; want under %v", own, limit)
	}
	if limit := probe + isolate.ReapGrace + 5*time.Second; time.Duration(res.DurationSeconds*float64(time.Second)) > limit {
		t.Errorf("mountprobe took %.2fs with one hung mount; want under %v", res.DurationSeconds, limit)
	}
	summary := string(c.Files["mountprobe/summary.txt"])
	if !strings.Contains(summary, "HUNG") || !strings.Contains(summary, hung.Mountpoint()) || !strings.Contains(summary, "ENOTCONN") {
		t.Errorf("summary.txt does not show the hung and dead mounts:\n%s", summary)
	}
}

// A mount under a hung one is not touched, and a second mount of the
// hung filesystem is known hung without a second deadline.
func TestMountprobeUnderAndSameAsHung(t *testing.T) {
	testkit.RequireFUSE(t)
	dir := t.TempDir()
	// A FUSE mount holding a tmpfs and bind-mounted elsewhere, made to
	// hang afterwards.
	f := testkit.HungFUSE(t, filepath.Join(dir, "fuse"), testkit.FUSEFiles(map[string]string{"sub/": "", "other/": ""}))
	inner := filepath.Join(f.Mountpoint(), "sub")
	// Not testkit.MountTmpfs: its cleanup would walk the path through
	// the hung mount. The FUSE cleanup's lazy unmount takes it along.
	if err := unix.Mount("nodesnap-testkit", inner, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs on the FUSE mount: %v", err)
	}
	bind := filepath.Join(dir, "bind")
	if err := os.Mkdir(bind, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(filepath.Join(f.Mountpoint(), "other"), bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	// Runs before the FUSE cleanup; unmounting a bind mount sends the
	// daemon nothing.
	t.Cleanup(func() { _ = unix.Unmount(bind, unix.MNT_DETACH) })
	f.Hang()

	c, _ := supervisortest.Run(t, supervisor.Options{Only: []string{"mountprobe"}, Timeout: 30 * time.Second,
		Common: collectors.Common{ProbeTimeout: time.Second}})
	var rep layout.MountProbeReport
	supervisortest.Decode(t, c, "mountprobe/probes.json", &rep)
	top := supervisortest.FindProbe(&rep, f.Mountpoint())
	under := supervisortest.FindProbe(&rep, inner)
	same := supervisortest.FindProbe(&rep, bind)
	if top == nil || under == nil || same == nil {
		t.Fatalf("records missing: fuse %v, tmpfs under it %v, bind %v", top, under, same)
	}
	if top.Result != layout.ProbeHung {
		t.Errorf("FUSE mount: %+v", *top)
	}
	if under.Result != layout.ProbeSkipped || under.Probed || !strings.Contains(under.SkipReason, f.Mountpoint()) {
		t.Errorf("tmpfs under the hung mount: %+v", *under)
	}
	if same.Result != layout.ProbeHung || same.Probed || same.HungVia != f.Mountpoint() {
		t.Errorf("bind mount of the hung filesystem: %+v", *same)
	}
	hung := supervisortest.HungTargets(c.Manifest)
	if !hung[f.Mountpoint()] || !hung[bind] {
		t.Errorf("manifest hung_mounts %v: want %s and %s", c.Manifest.HungMounts, f.Mountpoint(), bind)
	}

}

// BenchmarkMountprobe200 probes 200 extra mounts of which 20 hang (each
// its own stuck FUSE daemon) and reports the collector's time against the
// probe deadline. Run by test/bench/dirshape_mountprobe.sh.
func BenchmarkMountprobe200(b *testing.B) {
	testkit.RequireFUSE(b)
	dir := b.TempDir()
	const hung, total = 20, 200
	for i := 0; i < hung; i++ {
		testkit.HungFUSE(b, filepath.Join(dir, fmt.Sprintf("hung%02d", i)), testkit.FUSEStartHung())
	}
	for i := 0; i < total-hung; i++ {
		testkit.MountTmpfs(b, filepath.Join(dir, fmt.Sprintf("ok%03d", i)), "size=1m")
	}
	probe := 2 * time.Second
	if v := os.Getenv("NODESNAP_BENCH_PROBE_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			probe = d
		}
	}
	var worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		workers := watchWorkers()
		c, elapsed := supervisortest.Run(b, supervisor.Options{Only: []string{"mountprobe"}, Timeout: time.Minute,
			Common: collectors.Common{ProbeTimeout: probe}})
		b.Logf("round %d: %d worker processes seen", i, workers())
		res := c.Manifest.Collector("mountprobe")
		var rep layout.MountProbeReport
		supervisortest.Decode(b, c, "mountprobe/probes.json", &rep)
		d := time.Duration(res.DurationSeconds * float64(time.Second))
		worst = max(worst, d)
		b.Logf("round %d: %d mounts, counts %v; mountprobe %.3fs (probe deadline %v, over by %.3fs); whole run %.3fs",
			i, len(rep.Probes), rep.Counts, d.Seconds(), probe, (d - probe).Seconds(), elapsed.Seconds())
		n := 0
		for _, p := range rep.Probes {
			if strings.HasPrefix(p.Mountpoint, dir+"/") && p.Result == layout.ProbeHung {
				n++
			}
		}
		if n != hung {
			b.Errorf("%d of the benchmark's mounts hung, want %d", n, hung)
		}
	}
	b.ReportMetric(worst.Seconds(), "s/collector")
	b.ReportMetric((worst - probe).Seconds(), "s-over-deadline")
}

// kubeletScene is incident 003 behind a namespace full of stale FUSE
// mounts: n hung ceph-fuse mounts and a few healthy tmpfs mounts that
// exist only in another mount namespace (a CSI node plugin full of stale ceph-fuse mounts), and one
// hung ceph-fuse mount under a kubelet-like pods/<uid>/volumes/... path
// in the host namespace, on a kubelet root that is its own filesystem.
type kubeletScene struct {
	holder  *testkit.Holder
	hung    []string // mountpoints of the other namespace's hung mounts
	nsOK    []string // healthy mounts of the other namespace
	kroot   string   // the kubelet root (a tmpfs in the host namespace)
	kubelet *testkit.FUSE
	// shared is one hung FUSE filesystem mounted in both namespaces at
	// different paths: sharedNS in the other one, sharedHost (a bind
	// mount) in the host's.
	sharedNS, sharedHost string
}

func setUpKubeletScene(t testing.TB, n int) *kubeletScene {
	t.Helper()
	testkit.RequireFUSE(t)
	dir := t.TempDir()
	s := &kubeletScene{}
	plugin := filepath.Join(dir, "plugin")
	for i := 0; i < n; i++ {
		f := testkit.HungFUSE(t, filepath.Join(plugin, fmt.Sprintf("ceph%03d", i)), testkit.FUSEStartHung(),
			testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
		s.hung = append(s.hung, f.Mountpoint())
	}
	for i := 0; i < 3; i++ {
		s.nsOK = append(s.nsOK, testkit.MountTmpfs(t, filepath.Join(plugin, fmt.Sprintf("ok%d", i)), "size=1m"))
	}
	// Bound before it hangs: the bind's own path walk then cannot wait
	// on the daemon.
	shared := testkit.HungFUSE(t, filepath.Join(plugin, "shared"), testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	s.sharedNS = shared.Mountpoint()
	s.sharedHost = filepath.Join(dir, "shared-bind")
	if err := os.Mkdir(s.sharedHost, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(s.sharedNS, s.sharedHost, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	// Runs before the FUSE cleanup; unmounting a bind mount sends the
	// daemon nothing.
	t.Cleanup(func() { _ = unix.Unmount(s.sharedHost, unix.MNT_DETACH) })
	shared.Hang()
	// The holder copies the table; unmounted here, the mounts live only
	// in its namespace. A lazy unmount of a FUSE mount sends its daemon
	// nothing. The fixtures' own cleanups find them gone and end the
	// servers; the holder is killed first (cleanups run in reverse).
	s.holder = testkit.HoldInPrivateNamespace(t, "")
	for _, mp := range append(append([]string{s.sharedNS}, s.hung...), s.nsOK...) {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			t.Fatalf("unmount %s in the host namespace: %v", mp, err)
		}
	}
	s.kroot = testkit.MountTmpfs(t, filepath.Join(dir, "kubelet"), "size=4m")
	vol := filepath.Join(s.kroot, "pods", "6f1c0e52-3b7a-4d1e-9a8b-0c2d4e6f8a10", "volumes", "kubernetes.io~csi", "pvc-0a1b2c3d", "mount")
	s.kubelet = testkit.HungFUSE(t, vol, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	return s
}

// kubeletRun collects mountprobe alone with the default probe deadline
// and collector timeout, and returns the report and the kubelet mount's
// record.
func kubeletRun(t testing.TB, s *kubeletScene) (*bundle.Contents, *layout.MountProbeReport, *layout.MountProbe) {
	t.Helper()
	c, elapsed := supervisortest.Run(t, supervisor.Options{Only: []string{"mountprobe"}, Timeout: time.Minute,
		Common: collectors.Common{ProbeTimeout: 3 * time.Second}})
	var rep layout.MountProbeReport
	supervisortest.Decode(t, c, "mountprobe/probes.json", &rep)
	k := supervisortest.FindProbe(&rep, s.kubelet.Mountpoint())
	if k == nil {
		t.Fatalf("the kubelet's mount %s is not in probes.json", s.kubelet.Mountpoint())
	}
	t.Logf("run %.2fs, mountprobe %.2fs, counts %v; kubelet mount: %s, started at %.2fs, result at %.2fs",
		elapsed.Seconds(), rep.DurationMS/1000, rep.Counts, k.Result, k.StartedMS/1000, k.DoneMS/1000)
	return c, &rep, k
}

// Incident 003 with 200 hung FUSE mounts in another namespace: the
// kubelet's mount is probed and reported hung within the collector's
// deadline, and healthy mounts (in both namespaces) are probed, although
// the other namespace's hung mounts cannot all be probed in that time.
func TestMountprobeKubeletMountNotStarvedByHungNamespace(t *testing.T) {
	s := setUpKubeletScene(t, 200)
	c, rep, k := kubeletRun(t, s)

	if self, _ := testkit.MountNamespace(0); k.Result != layout.ProbeHung || !k.Probed || !k.First || k.ProbeNamespace != self {
		t.Errorf("kubelet mount record: %+v (namespaces %+v)", *k, rep.Namespaces)
	}
	if !supervisortest.HungTargets(c.Manifest)[s.kubelet.Mountpoint()] {
		t.Errorf("the manifest's hung_mounts lack the kubelet's mount %s", s.kubelet.Mountpoint())
	}
	// Probed in the first round: its probe started before one probe
	// deadline had passed.
	if k.StartedMS > float64(rep.ProbeTimeoutMS) {
		t.Errorf("the kubelet mount's probe started %.2fs into the run, after other probes' deadlines", k.StartedMS/1000)
	}
	if r := supervisortest.FindProbe(rep, s.kroot); r == nil || r.Result != layout.ProbeOK {
		t.Errorf("kubelet root %s: %+v", s.kroot, r)
	}
	for _, mp := range s.nsOK {
		r := supervisortest.FindProbe(rep, mp)
		if r == nil || r.Result != layout.ProbeOK || r.ProbeNamespace != s.holder.NSInode {
			t.Errorf("healthy mount %s of the other namespace: %+v", mp, r)
		}
	}
	// One probe for the filesystem in both namespaces, made through the
	// host's mount; the other namespace's is known hung from it.
	sh, sn := supervisortest.FindProbe(rep, s.sharedHost), supervisortest.FindProbe(rep, s.sharedNS)
	if sh == nil || sn == nil {
		t.Fatalf("shared filesystem records missing: host %v, other namespace %v", sh, sn)
	}
	if sh.Result != layout.ProbeHung || !sh.Probed {
		t.Errorf("shared filesystem, host mount: %+v", *sh)
	}
	if sn.Result != layout.ProbeHung || sn.Probed || sn.HungVia != s.sharedHost || sn.ProbeNamespace != s.holder.NSInode {
		t.Errorf("shared filesystem, other namespace's mount: %+v", *sn)
	}
	var hung, unfinished int
	for _, mp := range s.hung {
		r := supervisortest.FindProbe(rep, mp)
		switch {
		case r == nil:
			t.Errorf("%s (other namespace) not in probes.json", mp)
		case r.ProbeNamespace != s.holder.NSInode:
			t.Errorf("%s probed through namespace %d, want %d", mp, r.ProbeNamespace, s.holder.NSInode)
		case r.Result == layout.ProbeHung:
			hung++
		case r.Result == layout.ProbeUnfinished:
			unfinished++
		default:
			t.Errorf("%s (hung, other namespace): %+v", mp, *r)
		}
	}
	t.Logf("other namespace: %d hung, %d not probed before the deadline", hung, unfinished)
	if hung == 0 {
		t.Errorf("none of the other namespace's hung mounts was found hung")
	}
}

// BenchmarkMountprobeKubeletBehind200 measures when the kubelet's hung
// mount is reported hung while 200 hung FUSE mounts of another namespace
// wait too (probe deadline 3s, the default). Run by
// test/bench/dirshape_mountprobe.sh.
func BenchmarkMountprobeKubeletBehind200(b *testing.B) {
	s := setUpKubeletScene(b, 200)
	var worst float64
	missed := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, rep, k := kubeletRun(b, s)
		if k.Result != layout.ProbeHung {
			// Never reported: the whole run is a lower bound.
			b.Logf("round %d: the kubelet's mount was %s: %s", i, k.Result, k.SkipReason)
			missed++
			worst = max(worst, rep.DurationMS/1000)
			continue
		}
		worst = max(worst, k.DoneMS/1000)
	}
	b.ReportMetric(worst, "s-to-kubelet-hung")
	b.ReportMetric(float64(missed), "rounds-kubelet-not-probed")
}

// BenchmarkMountprobeHung200 is issue 17's cost curve: 200 hung FUSE
// mounts (each its own stuck daemon, so no probe is spared as "same
// filesystem") beside 50 healthy tmpfs mounts, at the default probe
// deadline of 3 s. Every healthy mount must be probed, and the collector
// should take about one probe deadline whatever the number of hung mounts.
// Run by test/bench/dirshape_mountprobe.sh.
func BenchmarkMountprobeHung200(b *testing.B) {
	testkit.RequireFUSE(b)
	dir := b.TempDir()
	const hung, healthy = 200, 50
	for i := 0; i < hung; i++ {
		testkit.HungFUSE(b, filepath.Join(dir, fmt.Sprintf("hung%03d", i)), testkit.FUSEStartHung())
	}
	var ok []string
	for i := 0; i < healthy; i++ {
		ok = append(ok, testkit.MountTmpfs(b, filepath.Join(dir, fmt.Sprintf("ok%03d", i)), "size=1m"))
	}
	probe := 3 * time.Second
	var worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		workers := watchWorkers()
		c, elapsed := supervisortest.Run(b, supervisor.Options{Only: []string{"mountprobe"}, Timeout: time.Minute,
			Common: collectors.Common{ProbeTimeout: probe}})
		b.Logf("round %d: %d worker processes seen", i, workers())
		res := c.Manifest.Collector("mountprobe")
		var rep layout.MountProbeReport
		supervisortest.Decode(b, c, "mountprobe/probes.json", &rep)
		d := time.Duration(res.DurationSeconds * float64(time.Second))
		worst = max(worst, d)
		nh := 0
		var lastStart, lastDone float64
		for _, p := range rep.Probes {
			if strings.HasPrefix(p.Mountpoint, dir+"/hung") && p.Result == layout.ProbeHung {
				nh++
				lastStart, lastDone = max(lastStart, p.StartedMS), max(lastDone, p.DoneMS)
			}
		}
		b.Logf("round %d: last hung probe started at %.2fs, its result at %.2fs; at most %d stuck at once", i, lastStart/1000, lastDone/1000, rep.PeakStuck)
		unprobed := 0
		for _, mp := range ok {
			if r := supervisortest.FindProbe(&rep, mp); r == nil || r.Result != layout.ProbeOK {
				unprobed++
			}
		}
		b.Logf("round %d: %d mounts, counts %v; %d of %d hung found, %d of %d healthy not ok; mountprobe %.3fs (deadline %v, over by %.3fs), status %s; whole run %.3fs",
			i, len(rep.Probes), rep.Counts, nh, hung, unprobed, healthy, d.Seconds(), probe, (d - probe).Seconds(), res.Status, elapsed.Seconds())
		if unprobed > 0 {
			b.Errorf("%d healthy mount(s) not probed ok", unprobed)
		}
		if nh != hung {
			b.Errorf("%d hung mounts found, want %d", nh, hung)
		}
	}
	b.ReportMetric(worst.Seconds(), "s/collector")
	b.ReportMetric((worst - probe).Seconds(), "s-over-deadline")
}

// watchWorkers watches, every 20 ms until the returned function is
// called, for the worker processes of this process's collectors (its
// grandchildren of the same program), and that function returns how many
// it saw. Workers live for a probe deadline at least, so none is missed.
func watchWorkers() (stop func() int) {
	me := os.Getpid()
	seen := map[int]bool{}
	done := make(chan struct{})
	finished := make(chan struct{})
	stat := func(pid int) (comm string, ppid int) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return "", 0
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			return "", 0
		}
		f := strings.Fields(s[j+1:])
		if len(f) < 2 {
			return "", 0
		}
		ppid, _ = strconv.Atoi(f[1])
		return s[i+1 : j], ppid
	}
	selfComm, _ := stat(me)
	go func() {
		defer close(finished)
		for {
			ents, _ := os.ReadDir("/proc")
			parents := map[int]int{}
			comms := map[int]string{}
			for _, e := range ents {
				if pid, err := strconv.Atoi(e.Name()); err == nil {
					comms[pid], parents[pid] = stat(pid)
				}
			}
			for pid, pp := range parents {
				if comms[pid] == selfComm && parents[pp] == me && pid != me {
					seen[pid] = true
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(done)
		<-finished
		return len(seen)
	}
}

// hungScene mounts n hung FUSE filesystems (each its own stuck daemon,
// so none is spared as "same filesystem") and k healthy tmpfs mounts.
func hungScene(t testing.TB, n, k int) (dir string, ok []string) {
	t.Helper()
	testkit.RequireFUSE(t)
	dir = t.TempDir()
	for i := 0; i < n; i++ {
		testkit.HungFUSE(t, filepath.Join(dir, fmt.Sprintf("hung%03d", i)), testkit.FUSEStartHung())
	}
	for i := 0; i < k; i++ {
		ok = append(ok, testkit.MountTmpfs(t, filepath.Join(dir, fmt.Sprintf("ok%03d", i)), "size=1m"))
	}
	return dir, ok
}

// countHung counts the scene's mounts found hung, and the healthy ones
// not found ok.
func countHung(rep *layout.MountProbeReport, dir string, ok []string) (hung, notOK int) {
	for _, p := range rep.Probes {
		if strings.HasPrefix(p.Mountpoint, dir+"/hung") && p.Result == layout.ProbeHung {
			hung++
		}
	}
	for _, mp := range ok {
		if r := supervisortest.FindProbe(rep, mp); r == nil || r.Result != layout.ProbeOK {
			notOK++
		}
	}
	return hung, notOK
}

// Hung mounts cost about one probe deadline together, not one per
// --mountprobe-max-workers of them: a probe stuck past its slow mark
// gives its slot to a fresh worker at once. With 96 hung mounts and 32
// workers, holding the slots would take three deadlines; the test allows
// less than two.
func TestMountprobeManyHungCostOneDeadline(t *testing.T) {
	dir, ok := hungScene(t, 96, 10)
	const probe = 3 * time.Second
	c, elapsed := supervisortest.Run(t, supervisor.Options{Only: []string{"mountprobe"}, Timeout: time.Minute,
		Common: collectors.Common{ProbeTimeout: probe}})
	res := c.Manifest.Collector("mountprobe")
	var rep layout.MountProbeReport
	supervisortest.Decode(t, c, "mountprobe/probes.json", &rep)
	d := time.Duration(res.DurationSeconds * float64(time.Second))
	hung, notOK := countHung(&rep, dir, ok)
	t.Logf("run %.2fs, mountprobe %.2fs, status %s, counts %v, at most %d stuck at once", elapsed.Seconds(), d.Seconds(), res.Status, rep.Counts, rep.PeakStuck)
	if hung != 96 || notOK != 0 {
		t.Errorf("%d of 96 hung mounts found hung, %d of %d healthy mounts not ok", hung, notOK, len(ok))
	}
	if res.Status != "ok" {
		t.Errorf("mountprobe status %s (%s), want ok", res.Status, res.Error)
	}
	if rep.PeakStuck <= rep.MaxWorkers {
		t.Errorf("at most %d probes were stuck at once: stuck probes still hold their slots (max workers %d)", rep.PeakStuck, rep.MaxWorkers)
	}
	if limit := 2 * probe; d >= limit {
		t.Errorf("mountprobe took %v with 96 hung mounts; want under %v (about one deadline)", d, limit)
	}
}

// --mountprobe-max-stuck bounds the workers left waiting on hung mounts:
// with a bound of 8, never more than 8 + --mountprobe-max-workers are
// stuck at once, every hung mount is still found (in more deadlines) and
// the healthy ones are all probed.
func TestMountprobeMaxStuckBound(t *testing.T) {
	defer mountprobe.SetMountprobeMaxStuckForTest(8)()
	dir, ok := hungScene(t, 60, 5)
	const probe = time.Second
	c, _ := supervisortest.Run(t, supervisor.Options{Only: []string{"mountprobe"}, Timeout: time.Minute,
		Common: collectors.Common{ProbeTimeout: probe}})
	var rep layout.MountProbeReport
	supervisortest.Decode(t, c, "mountprobe/probes.json", &rep)
	hung, notOK := countHung(&rep, dir, ok)
	t.Logf("mountprobe %.2fs, counts %v, max stuck %d, at most %d stuck at once", rep.DurationMS/1000, rep.Counts, rep.MaxStuck, rep.PeakStuck)
	if rep.MaxStuck != 8 {
		t.Fatalf("probes.json max_stuck %d, want the 8 set", rep.MaxStuck)
	}
	if hung != 60 || notOK != 0 {
		t.Errorf("%d of 60 hung mounts found hung, %d of %d healthy mounts not ok", hung, notOK, len(ok))
	}
	if rep.PeakStuck > rep.MaxStuck+rep.MaxWorkers {
		t.Errorf("%d probes stuck at once, over the bound %d + %d", rep.PeakStuck, rep.MaxStuck, rep.MaxWorkers)
	}
	// 60 hung mounts, at most 40 stuck at once: a second deadline.
	if rep.DurationMS < 2*float64(probe.Milliseconds()) {
		t.Errorf("mountprobe took %.2fs: the bound on stuck probes did not hold them back", rep.DurationMS/1000)
	}
}

// Three runs over hung FUSE mounts whose daemon has read the request leave
// one stuck worker per mount, not one per mount and run: the later runs
// find the first run's workers (by the note in their environment), report
// the mounts hung with the earlier probe's pid, and do not probe them
// again. HUNG_MOUNTS=50 runs it over 50 mounts, as issue 17 measured.
func TestMountprobeEarlierStuckProbesReused(t *testing.T) {
	n := 4
	if v, err := strconv.Atoi(os.Getenv("HUNG_MOUNTS")); err == nil && v > 0 {
		n = v
	}
	dir, ok := hungScene(t, n, 2)
	devs := map[string]bool{}
	var rep layout.MountProbeReport
	// countStuck counts the stuck probe workers on the scene's hung
	// mounts, and the most on one of them.
	countStuck := func() (total, perDev int) {
		stuck, err := mountprobe.StuckProbesForTest()
		if err != nil {
			t.Fatal(err)
		}
		for d := range devs {
			total += len(stuck[d])
			perDev = max(perDev, len(stuck[d]))
		}
		return total, perDev
	}
	for run := 1; run <= 3; run++ {
		// A worker killed before the daemon read its request ends; only
		// those still stuck are reused.
		before, _ := countStuck()
		c, _ := supervisortest.Run(t, supervisor.Options{Only: []string{"mountprobe"}, Timeout: time.Minute,
			Common: collectors.Common{ProbeTimeout: time.Second}})
		rep = layout.MountProbeReport{}
		supervisortest.Decode(t, c, "mountprobe/probes.json", &rep)
		hung, notOK := countHung(&rep, dir, ok)
		if hung != n || notOK != 0 {
			t.Fatalf("run %d: %d of %d hung mounts found hung, %d healthy mounts not ok", run, hung, n, notOK)
		}
		reused := 0
		for _, p := range rep.Probes {
			if !strings.HasPrefix(p.Mountpoint, dir+"/hung") {
				continue
			}
			devs[p.Dev] = true
			if e := p.EarlierProbe; e != nil {
				reused++
				if p.Probed || !strings.Contains(p.Diagnosis, fmt.Sprintf("a probe from an earlier run (pid %d, started ", e.PID)) {
					t.Errorf("run %d: %s: probed %v, diagnosis %q", run, p.Mountpoint, p.Probed, p.Diagnosis)
				}
			}
		}
		t.Logf("run %d: %d stuck probe worker(s) before it; %d mount(s) reported through one", run, before, reused)
		if run == 1 && reused != 0 || run > 1 && (reused < before || reused == 0) {
			t.Errorf("run %d: %d mount(s) reported through an earlier run's stuck probe, with %d such probes stuck before it", run, reused, before)
		}
		if run > 1 {
			if rep.EarlierStuck < reused {
				t.Errorf("run %d: probes.json earlier_stuck %d, want at least %d", run, rep.EarlierStuck, reused)
			}
			if !strings.Contains(strings.Join(c.Manifest.Collector("mountprobe").Notes, "\n"), "of earlier runs are still stuck") {
				t.Errorf("run %d: the manifest does not say earlier probes are still stuck: %q", run, c.Manifest.Collector("mountprobe").Notes)
			}
		}
	}
	// A killed worker stuck on a read request may take a moment to show
	// D state; count until the first run's have.
	deadline := time.Now().Add(5 * time.Second)
	for {
		total, perDev := countStuck()
		if total == n && perDev == 1 {
			t.Logf("after 3 runs: %d stuck probe worker(s) over %d hung mounts", total, n)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 runs over %d hung mounts: %d stuck probe workers (at most %d on one mount), want %d", n, total, perDev, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
