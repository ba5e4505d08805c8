package mountprobe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

func TestMountprobeFirstPath(t *testing.T) {
	const uid = "6f1c0e52-3b7a-4d1e-9a8b-0c2d4e6f8a10"
	for _, c := range []struct {
		path  string
		extra []string
		want  bool
	}{
		{"/var/lib/kubelet", nil, true},
		{"/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount", nil, true},
		{"/var/lib/kubeletx", nil, false},
		{"/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", nil, true},
		{"/run/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs", nil, true},
		{"/var/lib/docker/overlay2/x/merged", nil, true},
		{"/run/crio/abc", nil, true},
		{"/var/lib/csi-hostpath-data", nil, true},
		{"/", nil, false},
		{"/var", nil, false},
		{"/mnt/ceph/vol1", nil, false},
		{"/mnt/ceph/vol1", []string{"/mnt/ceph/"}, true},
		{"/mnt/cephx", []string{"/mnt/ceph"}, false},
		// A kubelet with another --root-dir, by the shape of its paths.
		{"/data/k/pods/" + uid + "/volumes/kubernetes.io~nfs/v", nil, true},
		{"/data/k/pods/" + uid + "/volume-subpaths/v/c/0", nil, true},
		{"/data/k/pods/" + uid + "/volumeDevices/kubernetes.io~csi/v", nil, true},
		{"/data/k/plugins/kubernetes.io/csi/driver/abc/globalmount", nil, true},
		{"/data/k/pods/" + uid + "/containers/x", nil, false},
		{"/data/k/pods/not-a-uid/volumes/x", nil, false},
		{"/home/u/pods/" + uid, nil, false},
		{"", nil, false},
	} {
		if got := firstPath(c.path, c.extra); got != c.want {
			t.Errorf("firstPath(%q, %q) = %v, want %v", c.path, c.extra, got, c.want)
		}
	}
}

func FuzzMountprobeFirstPath(f *testing.F) {
	f.Add("/var/lib/kubelet/pods/6f1c0e52-3b7a-4d1e-9a8b-0c2d4e6f8a10/volumes/x")
	f.Add("/data/plugins/kubernetes.io/csi")
	f.Add("pods//volumes")
	f.Fuzz(func(t *testing.T, p string) {
		got := firstPath(p, nil)
		// Anything below a first path is a first path too.
		if got && !firstPath(p+"/child", nil) {
			t.Errorf("%q is a first path but %q is not", p, p+"/child")
		}
	})
}

// The kubelet's mount waits for its parent and the parent for the root:
// both are lifted to the kubelet mount's priority, while an unrelated
// mount keeps its own; a filesystem's other mounts lift its first probe.
func TestMountprobeInherit(t *testing.T) {
	mk := func(tier int, class procfs.FSClass, order int) *mpItem {
		it := &mpItem{order: order}
		it.own = mpPrio{tier: tier, class: int(class), order: order}
		it.prio = it.own
		return it
	}
	root := mk(1, procfs.ClassOther, 0)
	kroot := mk(1, procfs.ClassOther, 1)
	kroot.parent = root
	vol := mk(0, procfs.ClassFUSE, 5)
	vol.parent = kroot
	other := mk(3, procfs.ClassFUSE, 2)
	other.parent = root
	sameA := mk(3, procfs.ClassFUSE, 3)
	sameB := mk(2, procfs.ClassFUSE, 4)
	sameB.devRep = sameA
	// A cycle (a mount moved under its own child) must not loop.
	c1, c2 := mk(3, procfs.ClassOther, 6), mk(3, procfs.ClassOther, 7)
	c1.parent, c2.parent = c2, c1
	inherit([]*mpItem{root, kroot, vol, other, sameA, sameB, c1, c2})
	for _, it := range []*mpItem{root, kroot} {
		if it.prio != vol.own || !it.rec.First {
			t.Errorf("ancestor %d: prio %+v first %v, want %+v", it.order, it.prio, it.rec.First, vol.own)
		}
	}
	if other.prio != other.own || other.rec.First {
		t.Errorf("unrelated mount: %+v", other.prio)
	}
	if sameA.prio != sameB.own {
		t.Errorf("first probe of a filesystem: %+v, want %+v", sameA.prio, sameB.own)
	}
}

// probes.json written one probe at a time decodes to the same report as
// the report encoded whole, with and without probes.
func TestMpEncodeReport(t *testing.T) {
	w := 3
	full := layout.MountProbeReport{ProbeTimeoutMS: 3000, Workers: 4, MaxWorkers: 32, MaxStuck: 256, PeakStuck: 7,
		Counts: map[string]int{layout.ProbeOK: 1, layout.ProbeHung: 1}, Notes: []string{"a \"quoted\" note\n"},
		Namespaces: []layout.MountProbeNamespace{{Inode: 4026531840, Host: true, PID: 1}},
		Probes: []layout.MountProbe{{Mountpoint: "/mnt/a\xff", Result: layout.ProbeOK, LatencyMS: 0.5},
			{Mountpoint: "/mnt/b", Result: layout.ProbeHung, FUSE: &layout.MountProbeFUSE{Conn: 42, WaitingBefore: &w}}}}
	for _, tc := range []struct {
		name string
		rep  layout.MountProbeReport
	}{{"probes", full}, {"none", layout.MountProbeReport{Counts: map[string]int{}, Probes: []layout.MountProbe{}}}} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			var probes []*layout.MountProbe
			for i := range tc.rep.Probes {
				probes = append(probes, &tc.rep.Probes[i])
			}
			if err := encodeReport(&buf, &tc.rep, probes); err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(&tc.rep)
			if err != nil {
				t.Fatal(err)
			}
			var got, exp any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("streamed report is not JSON: %v\n%s", err, buf.Bytes())
			}
			if err := json.Unmarshal(want, &exp); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("streamed report differs:\n%s\nwant the same as\n%s", buf.Bytes(), want)
			}
		})
	}
}

func TestMpParseNote(t *testing.T) {
	at := time.UnixMilli(1763939000123).UTC()
	for _, tc := range []struct {
		name, note string
		want       mpNote
		ok         bool
	}{
		{"written", mpNote{Dev: "0:55", Started: at, Path: "/mnt/a b"}.String(), mpNote{Dev: "0:55", Started: at, Path: "/mnt/a b"}, true},
		{"non-UTF-8 path", mpNote{Dev: "0:7", Started: at, Path: "/mnt/\xff\xfe"}.String(), mpNote{Dev: "0:7", Started: at, Path: "/mnt/\xff\xfe"}, true},
		{"no path", "mountprobe dev=8:1 started=1763939000123", mpNote{Dev: "8:1", Started: at}, true},
		{"thread", mpNote{Dev: "0:55", Started: at, TID: 4242, Path: "/mnt/a"}.String(), mpNote{Dev: "0:55", Started: at, TID: 4242, Path: "/mnt/a"}, true},
		{"short with thread", "mountprobe dev=0:5 started=1763939000123 tid=9", mpNote{Dev: "0:5", Started: at, TID: 9}, true},
		{"bad thread", "mountprobe dev=0:5 started=1763939000123 tid=-9", mpNote{}, false},
		{"another note", "dirshape dev=0:1 started=1", mpNote{}, false},
		{"bad dev", "mountprobe dev=0x1:2 started=1763939000123", mpNote{}, false},
		{"no start", "mountprobe dev=0:1", mpNote{}, false},
		{"bad start", "mountprobe dev=0:1 started=-5", mpNote{}, false},
		{"bad path quoting", "mountprobe dev=0:1 started=1 path=\"/a", mpNote{}, false},
		{"garbage", "mountprobe ===", mpNote{}, false},
		{"empty", "", mpNote{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseNote(tc.note)
			if ok != tc.ok || got != tc.want {
				t.Errorf("parseNote(%q) = %+v, %v; want %+v, %v", tc.note, got, ok, tc.want, tc.ok)
			}
		})
	}
	long := mpNote{Dev: "0:9", Started: at, TID: 7, Path: "/" + strings.Repeat("x", 5000)}
	if n, ok := parseNote(long.Short()); !ok || n.Path != "" || n.TID != 7 || len(long.Short()) > 80 {
		t.Errorf("the short line of a note for a path too long: %q, parsed %+v %v", long.Short(), n, ok)
	}
	// Short lines of every probe a worker may run at once fit in its
	// note, however long the filesystem's numbers.
	widest := mpNote{Dev: "4294967295:4294967295", Started: time.UnixMilli(1<<42 - 1), TID: 1<<22 - 1}.Short()
	if n := isolate.WorkerItems() * (len(widest) + 1); n > isolate.NoteSize {
		t.Errorf("%d short lines of %d bytes take %d bytes, over the note's %d", isolate.WorkerItems(), len(widest), n, isolate.NoteSize)
	}
}

// Lines of a worker's note name the probes it runs; only those whose
// thread is still stuck (and that are older than the cutoff) count.
func TestMpStuckInNote(t *testing.T) {
	at := time.UnixMilli(1763939000123).UTC()
	cutoff := at.Add(time.Minute)
	env := func(lines ...string) []byte {
		note := strings.Join(lines, "\n")
		return []byte(isolate.WorkerNoteVar + "=" + note + strings.Repeat(" ", isolate.NoteSize-len(note)) + "\x00PATH=/bin\x00")
	}
	a := mpNote{Dev: "0:51", Started: at, TID: 101, Path: "/mnt/a"}
	b := mpNote{Dev: "0:52", Started: at, TID: 102, Path: "/mnt/b"}
	c := mpNote{Dev: "0:53", Started: at, TID: 103}
	recent := mpNote{Dev: "0:54", Started: cutoff.Add(time.Second), TID: 104}
	old := "mountprobe dev=0:55 started=1763939000123"
	for _, tc := range []struct {
		name    string
		environ []byte
		stuck   []int
		want    []string // devs
	}{
		{"every stuck probe", env(a.String(), b.String(), c.Short()), []int{101, 102, 103}, []string{"0:51", "0:52", "0:53"}},
		{"only the stuck threads", env(a.String(), b.String(), c.Short()), []int{102}, []string{"0:52"}},
		{"too recent", env(a.String(), recent.Short()), []int{101, 104}, []string{"0:51"}},
		{"a line naming no thread", env(old, b.String()), []int{7}, []string{"0:55"}},
		{"garbage lines skipped", env("junk", a.String(), "mountprobe dev=x"), []int{101}, []string{"0:51"}},
		{"no note", []byte("PATH=/bin\x00"), []int{101}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range stuckInNote(42, tc.environ, tc.stuck, cutoff) {
				if e.PID != 42 {
					t.Errorf("probe %+v: pid %d, want 42", e, e.PID)
				}
				got = append(got, e.Dev)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("stuck probes on %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzMpParseNote(f *testing.F) {
	f.Add(mpNote{Dev: "0:55", Started: time.UnixMilli(1), Path: "/a"}.String())
	f.Add("mountprobe dev=1:2 started=3")
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseNote(s)
		if !ok {
			return
		}
		if n.Dev == "" || n.Started.IsZero() {
			t.Errorf("accepted %q without dev or start: %+v", s, n)
		}
		again, ok := parseNote(n.String())
		if !ok || again != n {
			t.Errorf("%+v does not survive a round trip: %+v %v", n, again, ok)
		}
	})
}

// A process of another user can look like one of our stuck probe workers
// in every way it controls: its program's name, its arguments, its
// environment, a thread in D state (its own FUSE mount can do that). Its
// note must not make this run skip mounts it names; nor may one note name
// more probes than a worker runs at once.
func TestMpEarlierOpTrustsOnlyOurOwnWorkers(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Hour)
	proc := t.TempDir()
	// worker writes /proc/<pid> of a worker stuck on one thread, run by
	// uid, whose note has the given lines.
	worker := func(pid, uid int, lines ...string) {
		tid := pid + 1
		dir := filepath.Join(proc, strconv.Itoa(pid))
		tdir := filepath.Join(dir, "task", strconv.Itoa(tid))
		if err := os.MkdirAll(tdir, 0o755); err != nil {
			t.Fatal(err)
		}
		note := strings.Join(lines, "\n")
		files := map[string]string{
			"stat":    strconv.Itoa(tid) + " (" + filepath.Base(self) + ") D 1 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 1000 1000000 100",
			"status":  fmt.Sprintf("Name:\tx\nUid:\t%d\t%d\t%d\t%d\nGid:\t0\t0\t0\t0\n", uid, uid, uid, uid),
			"cmdline": filepath.Base(self) + "\x00" + isolate.ModeWorker + "\x00",
			"environ": isolate.WorkerNoteVar + "=" + note + strings.Repeat(" ", max(isolate.NoteSize-len(note), 0)) + "\x00PATH=/bin\x00",
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(tdir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{dir, tdir} {
			if err := os.Symlink(self, filepath.Join(d, "exe")); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "status"), []byte(files["status"]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	line := func(dev string, tid int) string {
		return mpNote{Dev: dev, Started: at, TID: tid, Path: "/mnt/" + dev}.String()
	}
	me := os.Geteuid()
	worker(100, me, line("0:61", 101))
	worker(200, me+1, line("0:62", 201), line("8:1", 201))
	var many []string
	for i := range isolate.NoteSize / 40 {
		many = append(many, mpNote{Dev: "0:" + strconv.Itoa(1000+i), Started: at, TID: 301}.Short())
	}
	worker(300, me, many...)

	v, err := earlierOp(earlierRequest{Proc: proc, OlderThanMS: 1000})
	if err != nil {
		t.Fatal(err)
	}
	byPID := map[int][]string{}
	for _, e := range v.([]mpEarlier) {
		byPID[e.PID] = append(byPID[e.PID], e.Dev)
	}
	if !slices.Equal(byPID[100], []string{"0:61"}) {
		t.Errorf("our own stuck worker: probes on %v, want [0:61]", byPID[100])
	}
	if len(byPID[200]) != 0 {
		t.Errorf("a worker-like process of uid %d (we are %d) was trusted: its note names %v", me+1, me, byPID[200])
	}
	if n := len(byPID[300]); n > isolate.WorkerItems() {
		t.Errorf("one worker's note was taken to name %d stuck probes; a worker runs at most %d at once", n, isolate.WorkerItems())
	}
}
