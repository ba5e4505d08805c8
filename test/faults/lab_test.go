package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// labVolume is the Docker volume holding the lab's huge directory.
const labVolume = "var/lib/docker/volumes/5c1e0b7a9d3f4e2a8b6c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a/_data"

// TestBenchLab is issue 43's lab (test/bench/lab.sh): a quiet node whose
// /var/lib is an ext4 filesystem on a loop device backed by a file on
// disk, so that a cold cache means disk reads, holding
//   - a Docker volume whose _data directory has LAB_ENTRIES (70,000) empty
//     subdirectories: past ext4's 64,998-link limit, incident 001;
//   - 38 leaked pvc-….deleting~NNN directories under a pod's CSI volumes
//     (/var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~csi/);
//   - a hung ceph-fuse mount as an orphaned pod's volume, with a process
//     named kubelet stuck stat()ing it (incident 003);
//   - an ext4 on a second loop device held only in a private mount
//     namespace (the rbd device of incident 002);
//   - a pod volume on a third loop device, frozen with FIFREEZE;
//   - an HTTPS kubelet stand-in serving real pprof, LAB_NS (10) mount
//     namespaces of 20 tasks and LAB_LINES (20,000) kubelet log lines.
//
// It then runs a full `nodesnap collect` ROUNDS times warm and ROUNDS
// times cold (sync and drop_caches before each), and prints the medians,
// the CPU time, each collector's own duration from the manifest, and
// whether `nodesnap analyze` still names the huge directory and incident
// 001. A benchmark, not a test: it runs only when NODESNAP_BENCH_LAB=1.
// LAB_STATE, when set, names a file where what must be undone is written
// before it is done (test/bench/lab.sh undoes it if the test is killed).
func TestBenchLab(t *testing.T) {
	if os.Getenv("NODESNAP_BENCH_LAB") != "1" {
		skip.Because(t, "a benchmark: run with NODESNAP_BENCH_LAB=1 (test/bench/lab.sh, make bench)")
	}
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	testkit.RequireLoop(t)
	nss, entries, lines, rounds := envInt("LAB_NS", 10), envInt("LAB_ENTRIES", 70_000), envInt("LAB_LINES", 20_000), envInt("ROUNDS", 3)
	cold := envInt("COLD_ROUNDS", rounds)
	state := labState(t)
	n := newNode(t)
	varlib := filepath.Join(n.root, "var/lib")

	// Mount namespaces first and the held device next: a namespace copies
	// the mounts that exist when it is made, and one holding a copy of the
	// lab's filesystems would keep their loop devices busy after the test
	// unmounted them.
	mountNamespaces(t, nss)
	// The held device: mounted, held in a private namespace, unmounted on
	// the host.
	heldImg := t.TempDir()
	state("image", heldImg)
	held := testkit.LoopExt4(t, 32, testkit.LoopImageDir(heldImg))
	state("mount", held.Mountpoint)
	testkit.HoldInPrivateNamespace(t, held.Mountpoint)
	if err := unix.Unmount(held.Mountpoint, 0); err != nil {
		t.Fatal(err)
	}

	// /var/lib on an ext4 of its own, on a disk-backed image (not tmpfs):
	// the files newNode wrote there are moved onto it.
	img := t.TempDir()
	state("image", img)
	mib := 64 + entries/256 // a 1 KiB block per directory, and room
	lib := testkit.LoopExt4(t, mib, testkit.LoopImageDir(img), testkit.LoopInodes(entries+20_000))
	state("mount", lib.Mountpoint)
	if out, err := exec.Command("cp", "-a", varlib+"/.", lib.Mountpoint).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	state("mount", varlib)
	if err := unix.Mount(lib.Mountpoint, varlib, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", varlib, err)
	}
	t.Cleanup(func() { labUnmount(t, varlib) })

	// 38 leaked .deleting~ directories beside a volume.
	csi := filepath.Join(varlib, "kubelet/pods", podUID, "volumes/kubernetes.io~csi")
	for i := 0; i < 38; i++ {
		if err := os.MkdirAll(filepath.Join(csi, fmt.Sprintf("pvc-5d2b7c1e-8a4f-4b3c-9e0d-1f2a3b4c5d6e.deleting~%09d", 418263507+i*7919)), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	// The huge directory, in a runtime volume.
	big := filepath.Join(n.root, labVolume)
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("creating %d subdirectories in %s", entries, big)
	testkit.ManySubdirs(t, big, entries)

	// A pod volume on a filesystem frozen with FIFREEZE, thawed before
	// anything is unmounted.
	frozenImg := t.TempDir()
	state("image", frozenImg)
	frozenFS := testkit.LoopExt4(t, 32, testkit.LoopImageDir(frozenImg))
	state("mount", frozenFS.Mountpoint)
	_ = os.WriteFile(filepath.Join(frozenFS.Mountpoint, "data.db"), []byte("rows\n"), 0o600)
	frozen := filepath.Join(csi, "pvc-frozen/mount")
	if err := os.MkdirAll(frozen, 0o750); err != nil {
		t.Fatal(err)
	}
	state("mount", frozen)
	if err := unix.Mount(frozenFS.Mountpoint, frozen, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", frozen, err)
	}
	t.Cleanup(func() { labUnmount(t, frozen) })
	state("frozen", frozen)
	freeze(t, frozen)

	// The hung ceph-fuse mount of an orphaned pod, and the kubelet
	// stand-in's thread stuck in it (reaped last, once the mount is
	// aborted).
	// Past the FUSE cleanup, nodesnap's own workers left stuck on the
	// mount (by design: it never waits on a task in D state) wake up and
	// exit; the filesystems below are unmounted once they are gone.
	var ours []string
	t.Cleanup(func() { labWaitGone(t, ours, 30*time.Second) })
	exited := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Errorf("the kubelet stand-in did not exit after its mount was aborted")
		}
	})
	hung := filepath.Join(varlib, "kubelet/pods", orphanUID, "volumes/kubernetes.io~csi/pvc-gone/mount")
	state("mount", hung)
	f := testkit.HungFUSE(t, hung, testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))
	stuck := exec.Command(copyAs(t, "stat", filepath.Join(t.TempDir(), "kubelet")), f.Mountpoint())
	stuck.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = stuck.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(stuck.Process.Pid, syscall.SIGKILL) })
	f.WaitBlocked(1, 10*time.Second)

	// The kubelet's HTTPS endpoint and its log.
	kurl, token := kubeletStandIn(t, n.root)
	var logb strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&logb, "2026-11-21T08:%02d:%02d.%06d+00:00 node kubelet[4242]: I1121 08:00:00.000000    4242 reconciler.go:%d] \"operationExecutor.UnmountVolume started\" volumeName=\"kubernetes.io/csi/hostpath.csi.k8s.io^vol-%d\" podUID=\"%s\"\n", (i/60)%60, i%60, i, 100+i%50, i%400, podUID)
	}
	if err := os.WriteFile(filepath.Join(n.root, "var/log/kubelet.log"), []byte(logb.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	bin := testkit.Binary(t)
	out := t.TempDir()
	args := []string{"collect", "-q", "--output-dir", out, "--root", n.root, "--proc", "/proc", "--sys", "/sys",
		"--kubelet-url", kurl, "--kubelet-token", token, "--kubelet-readonly-url", "http://127.0.0.1:1"}
	if extra := os.Getenv("LAB_ARGS"); extra != "" {
		args = append(args, strings.Fields(extra)...)
	}
	if hold := os.Getenv("LAB_HOLD"); hold != "" {
		// For working on the lab by hand: it stays up while the file
		// LAB_HOLD exists.
		if err := os.WriteFile(hold, []byte(bin+" "+strings.Join(args, " ")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("lab up: remove %s to take it down; the command is in it", hold)
		for _, err := os.Stat(hold); err == nil; _, err = os.Stat(hold) {
			time.Sleep(time.Second)
		}
	}
	// LAB_BEFORE: an earlier binary, run in turn with this one, round by
	// round, so that both meet the same load.
	bins := []string{bin}
	if before := os.Getenv("LAB_BEFORE"); before != "" {
		bins = []string{before, bin}
	}
	ours = bins
	t.Logf("machine: load average %s", loadavg())
	warm := labRuns(t, bins, args, out, rounds, false)
	coldRuns := labRuns(t, bins, args, out, cold, true)
	t.Logf("machine: load average %s", loadavg())

	type set struct {
		name string
		r    []labRun
	}
	var sets []set
	for _, k := range []struct {
		name string
		r    [][]labRun
	}{{"warm", warm}, {"cold", coldRuns}} {
		for i, r := range k.r {
			name := k.name
			if len(bins) > 1 {
				name += [...]string{" before (LAB_BEFORE)", " after (this tree)"}[i]
			}
			sets = append(sets, set{name, r})
		}
	}
	for _, s := range sets {
		if len(s.r) == 0 {
			continue
		}
		wall, cpu := labMedian(s.r, func(r labRun) time.Duration { return r.wall }), labMedian(s.r, func(r labRun) time.Duration { return r.cpu })
		var walls []string
		for _, r := range s.r {
			walls = append(walls, r.wall.Round(time.Millisecond).String())
		}
		t.Logf("LAB %s: full collect median %s over %d rounds (%s), CPU (user+sys, with workers) median %s",
			s.name, wall.Round(time.Millisecond), len(s.r), strings.Join(walls, " "), cpu.Round(time.Millisecond))
		var per []string
		for _, name := range labCollectorNames(s.r) {
			d := labMedian(s.r, func(r labRun) time.Duration { return r.collectors[name] })
			per = append(per, fmt.Sprintf("%s=%s", name, d.Round(time.Millisecond)))
		}
		t.Logf("LAB %s: each collector's own duration (manifest, median): %s", s.name, strings.Join(per, " "))
		res := map[string]any{"name": "lab full collect " + s.name, "nodesnap_ms": wall.Milliseconds(), "cpu_ms": cpu.Milliseconds(),
			"rounds": len(s.r), "entries": entries, "namespaces": nss, "lines": lines}
		if p := os.Getenv("RESULTS_JSONL"); p != "" {
			if f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				_ = json.NewEncoder(f).Encode(res)
				_ = f.Close()
			}
		}
	}

	// The figures mean nothing unless the last bundle still shows the lab.
	last := coldRuns[len(bins)-1]
	if len(last) == 0 {
		last = warm[len(bins)-1]
	}
	if len(last) == 0 {
		t.Fatal("no round ran")
	}
	labCheck(t, bin, last[len(last)-1].bundle, entries)
	if t.Failed() {
		return
	}
	// All undone by the cleanups that follow; LAB_STATE has nothing left to
	// undo.
	t.Cleanup(func() {
		if p := os.Getenv("LAB_STATE"); p != "" && !t.Failed() {
			_ = os.Remove(p)
		}
	})
}

// labRun is one full collection.
type labRun struct {
	wall, cpu  time.Duration
	collectors map[string]time.Duration
	bundle     string
	statuses   string
}

// labRuns runs collect rounds times with each binary in turn, dropping the
// page, dentry and inode caches before each run when cold; the runs of
// bins[i] are in runs[i].
func labRuns(t *testing.T, bins []string, args []string, out string, rounds int, cold bool) [][]labRun {
	t.Helper()
	runs := make([][]labRun, len(bins))
	for i := 0; i < rounds; i++ {
		for b, bin := range bins {
			r := labRun1(t, bin, args, out, cold)
			kind := "warm"
			if cold {
				kind = "cold"
			}
			t.Logf("%s round %d, %s: %s (CPU %s) %s", kind, i+1, filepath.Base(filepath.Dir(bin))+"/"+filepath.Base(bin), r.wall.Round(time.Millisecond), r.cpu.Round(time.Millisecond), r.statuses)
			if i < rounds-1 || b < len(bins)-1 {
				// Keep the last bundle for the checks.
				_ = os.Remove(r.bundle)
			}
			runs[b] = append(runs[b], r)
		}
	}
	return runs
}

// labRun1 runs one collection.
func labRun1(t *testing.T, bin string, args []string, out string, cold bool) labRun {
	t.Helper()
	for _, e := range mustReadDir(out) {
		_ = os.Remove(filepath.Join(out, e))
	}
	if cold {
		dropCaches(t)
	}
	start := time.Now()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	r := labRun{wall: time.Since(start), collectors: map[string]time.Duration{}}
	if cmd.ProcessState == nil {
		t.Fatalf("collect: %v", err)
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if code := cmd.ProcessState.ExitCode(); code != 0 && code != 3 {
		t.Fatalf("collect: exit %d\n%s", code, stderr.String())
	}
	for _, e := range mustReadDir(out) {
		if !strings.HasSuffix(e, ".sha256") {
			r.bundle = filepath.Join(out, e)
		}
	}
	m, _, err := bundle.ReadManifest(t.Context(), r.bundle)
	if err != nil {
		t.Fatalf("manifest of %s: %v", r.bundle, err)
	}
	var st []string
	for _, c := range m.Collectors {
		r.collectors[c.Name] = time.Duration(c.DurationSeconds * float64(time.Second))
		st = append(st, c.Name+"="+c.Status)
	}
	r.statuses = strings.Join(st, " ")
	return r
}

// labCheck runs `nodesnap analyze --json` on the bundle: the huge
// directory must be named, with incident 001 when it is past ext4's link
// limit.
func labCheck(t *testing.T, bin, bundlePath string, entries int) {
	t.Helper()
	out, err := exec.Command(bin, "analyze", "--json", bundlePath).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("analyze: %v", err)
	}
	var findings []struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	}
	var wrapped struct {
		Findings json.RawMessage `json:"findings"`
	}
	raw := out
	if json.Unmarshal(out, &wrapped) == nil && len(wrapped.Findings) > 0 {
		raw = wrapped.Findings
	}
	if err := json.Unmarshal(raw, &findings); err != nil {
		t.Fatalf("analyze --json: %v\n%.2000s", err, out)
	}
	dir := "/" + labVolume
	named, deleting := false, false
	var ids []string
	for _, f := range findings {
		ids = append(ids, f.ID)
		if (f.ID == "ext4-nlink-overflow" || f.ID == "huge-directory") && strings.Contains(f.Summary, dir) {
			named = true
			t.Logf("analyze: %s: %s", f.ID, f.Summary)
		}
		if f.ID == "volume-dir-deleting-leftovers" {
			deleting = true
		}
	}
	t.Logf("analyze findings: %s", strings.Join(ids, " "))
	if entries > 64_998 && !named {
		t.Errorf("analyze does not name %s (incident 001: %d subdirectories, past ext4's link limit)", dir, entries)
	}
	if !deleting {
		t.Errorf("analyze does not name the .deleting~ leftovers")
	}
	if entries > 64_998 && !strings.Contains(string(out), "incident 001") {
		t.Errorf("analyze's findings do not name incident 001")
	}
}

// FIFREEZE and FITHAW, _IOWR('X', 119, int) and _IOWR('X', 120, int);
// golang.org/x/sys/unix does not name them.
const (
	fiFreeze = 0xc0045877
	fiThaw   = 0xc0045878
)

// freeze freezes the filesystem at mp (FIFREEZE) and thaws it on cleanup.
func freeze(t *testing.T, mp string) {
	t.Helper()
	fd, err := unix.Open(mp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetInt(fd, fiFreeze, 0); err != nil {
		_ = unix.Close(fd)
		t.Fatalf("FIFREEZE %s: %v", mp, err)
	}
	t.Cleanup(func() {
		defer func() { _ = unix.Close(fd) }()
		if err := unix.IoctlSetInt(fd, fiThaw, 0); err != nil {
			t.Errorf("FITHAW %s: %v (thaw it with fsfreeze -u)", mp, err)
		}
	})
}

// dropCaches makes the next run cold: dirty data written back, then the
// page cache, dentries and inodes dropped.
func dropCaches(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { unix.Sync(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("sync did not return within a minute")
	}
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o644); err != nil {
		t.Fatalf("drop_caches: %v", err)
	}
}

// labState returns a function that appends "what path" to LAB_STATE (a
// no-op without it), before the thing is done.
func labState(t *testing.T) func(what, path string) {
	p := os.Getenv("LAB_STATE")
	return func(what, path string) {
		if p == "" {
			return
		}
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatalf("LAB_STATE: %v", err)
		}
		_, _ = fmt.Fprintf(f, "%s %s\n", what, path)
		_ = f.Close()
	}
}

func labMedian(runs []labRun, f func(labRun) time.Duration) time.Duration {
	d := make([]time.Duration, 0, len(runs))
	for _, r := range runs {
		d = append(d, f(r))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func labCollectorNames(runs []labRun) []string {
	seen := map[string]bool{}
	var names []string
	for _, r := range runs {
		for n := range r.collectors {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// labWaitGone waits until no process runs one of bins (by /proc/<pid>/exe,
// a readlink that never blocks), or for timeout.
func labWaitGone(t *testing.T, bins []string, timeout time.Duration) {
	t.Helper()
	want := map[string]bool{}
	for _, b := range bins {
		if r, err := filepath.EvalSymlinks(b); err == nil {
			want[r] = true
		}
	}
	if len(want) == 0 {
		return
	}
	var left []string
	for end := time.Now().Add(timeout); ; time.Sleep(200 * time.Millisecond) {
		left = left[:0]
		for _, e := range mustReadDir("/proc") {
			if exe, err := os.Readlink("/proc/" + e + "/exe"); err == nil && want[exe] {
				left = append(left, e)
			}
		}
		if len(left) == 0 || time.Now().After(end) {
			break
		}
	}
	if len(left) > 0 {
		t.Logf("nodesnap processes still there after %s: %v", timeout, left)
	}
}

// labUnmount unmounts mp, waiting up to 30 s while it is busy (a process
// that held it may still be exiting): an unmount that succeeds releases
// the filesystem before it returns, so its loop device can be detached at
// once; a lazy one, the last resort, releases it whenever the last user
// lets go.
func labUnmount(t *testing.T, mp string) {
	t.Helper()
	var err error
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err = unix.Unmount(mp, 0); err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(end) {
			break
		}
	}
	if err != nil && !errors.Is(err, unix.EINVAL) {
		t.Logf("unmount %s: %v; detaching it lazily", mp, err)
		_ = unix.Unmount(mp, unix.MNT_DETACH)
	}
}
