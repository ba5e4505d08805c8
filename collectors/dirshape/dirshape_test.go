package dirshape_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/dirshape"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

func TestParseDeletingName(t *testing.T) {
	for _, tc := range []struct {
		name, orig, suffix string
		ok                 bool
	}{
		{"pvc-0a1b.deleting~123456789", "pvc-0a1b", "123456789", true},
		{"kubernetes.io~csi", "", "", false},
		{"pvc-x", "", "", false},
		{"pvc-x.deleting~", "pvc-x", "", true},
		{".deleting~42", "", "42", true},
		// Renamed twice: the last marker splits.
		{"a.deleting~1.deleting~2", "a.deleting~1", "2", true},
		{"a.deleting-1", "", "", false},
		{"a.DELETING~1", "", "", false},
		{"名前.deleting~007", "名前", "007", true},
		{"", "", "", false},
	} {
		orig, suffix, ok := layout.ParseDeletingName(tc.name)
		if orig != tc.orig || suffix != tc.suffix || ok != tc.ok {
			t.Errorf("ParseDeletingName(%q) = %q, %q, %v; want %q, %q, %v", tc.name, orig, suffix, ok, tc.orig, tc.suffix, tc.ok)
		}
	}
}

func FuzzParseDeletingName(f *testing.F) {
	for _, s := range []string{"pvc-1.deleting~123456789", ".deleting~", "x", "a.deleting~b.deleting~c", "\x00.deleting~\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		orig, suffix, ok := layout.ParseDeletingName(name)
		if ok != strings.Contains(name, ".deleting~") {
			t.Fatalf("ok=%v for %q", ok, name)
		}
		if !ok {
			return
		}
		if orig+".deleting~"+suffix != name || strings.Contains(suffix, ".deleting~") {
			t.Fatalf("%q split into %q + %q", name, orig, suffix)
		}
	})
}

func TestDeletingGroup(t *testing.T) {
	type leftover struct {
		name    string
		typ     string
		read    bool
		entries uint64
		done    bool
	}
	for _, tc := range []struct {
		desc                     string
		keep                     int
		in                       []leftover
		empty, notEmpty, unknown uint64
		kept, omitted            int
		origs                    map[string]uint64
	}{
		{desc: "all kinds", keep: 10, in: []leftover{
			{"pvc-a.deleting~1", "dir", true, 0, true},
			{"pvc-a.deleting~2", "dir", true, 3, true},
			{"pvc-a.deleting~3", "dir", true, 7, false}, // partly read, not empty
			{"pvc-a.deleting~4", "dir", true, 0, false}, // partly read, nothing seen yet
			{"pvc-b.deleting~5", "file", false, 0, false},
			{"pvc-b.deleting~6", "dir", false, 0, false}, // not entered
		}, empty: 1, notEmpty: 2, unknown: 3, kept: 6, origs: map[string]uint64{"pvc-a": 4, "pvc-b": 2}},
		{desc: "detail bounded, counts complete", keep: 2, in: []leftover{
			{"v.deleting~1", "dir", true, 0, true},
			{"v.deleting~2", "dir", true, 0, true},
			{"v.deleting~3", "dir", true, 0, true},
			{"v.deleting~4", "dir", true, 1, true},
		}, empty: 3, notEmpty: 1, kept: 2, omitted: 2, origs: map[string]uint64{"v": 4}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var g layout.DeletingGroup
			for _, l := range tc.in {
				o, s, _ := layout.ParseDeletingName(l.name)
				i := g.Add(layout.DeletingEntry{Name: l.name, Original: o, Suffix: s, Type: l.typ}, tc.keep)
				g.Resolve(i, l.entries, l.read, l.done)
			}
			if g.Count != uint64(len(tc.in)) || g.Empty != tc.empty || g.NotEmpty != tc.notEmpty || g.Unknown != tc.unknown {
				t.Errorf("counts %d/%d/%d/%d, want %d/%d/%d/%d", g.Count, g.Empty, g.NotEmpty, g.Unknown, len(tc.in), tc.empty, tc.notEmpty, tc.unknown)
			}
			if len(g.Entries) != tc.kept || int(g.EntriesOmitted) != tc.omitted {
				t.Errorf("kept %d omitted %d, want %d and %d", len(g.Entries), g.EntriesOmitted, tc.kept, tc.omitted)
			}
			got := map[string]uint64{}
			for _, o := range g.Originals {
				got[o.Name] = o.Count
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.origs) {
				t.Errorf("originals %v, want %v", got, tc.origs)
			}
			for i, e := range g.Entries {
				l := tc.in[i]
				switch {
				case !l.read || (l.entries == 0 && !l.done):
					if e.Empty != nil {
						t.Errorf("%s: empty=%v, want unknown (null)", e.Name, *e.Empty)
					}
				case e.Empty == nil || *e.Empty != (l.entries == 0):
					t.Errorf("%s: empty=%v with %d entries", e.Name, e.Empty, l.entries)
				}
			}
		})
	}

	groups := []layout.DeletingGroup{{Parent: "/k/pods/u/volumes/csi", Originals: []layout.DeletingOriginal{{Name: "pvc-a"}, {Name: "pvc-b"}}}}
	mounts := []string{"/k/pods/u/volumes/csi/pvc-a/mount", "/k/pods/u/volumes/csi/pvc-ab"}
	layout.MarkDeletingMounted(groups, func(p string) []string {
		var out []string
		for _, m := range mounts {
			if m == p || strings.HasPrefix(m, p+"/") {
				out = append(out, m)
			}
		}
		return out
	})
	if o := groups[0].Originals; !o[0].Mounted || len(o[0].Mounts) != 1 || o[1].Mounted {
		t.Errorf("mounted marks: %+v", o)
	}
}

// dsOptions sets dirshape's options for one test.
func dsOptions(t *testing.T, set func(o *dirshape.Options)) {
	t.Helper()
	spec, ok := collectors.Lookup("dirshape")
	if !ok {
		t.Fatal("dirshape is not registered")
	}
	o := spec.Options.(*dirshape.Options)
	saved := *o
	t.Cleanup(func() { *o = saved })
	set(o)
}

// dsTree creates files ("a/b") and directories ("a/c/") under root.
func dsTree(t testing.TB, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func dsRoot(t testing.TB, rep *layout.DirShapeReport, path string) *layout.DirShapeRoot {
	t.Helper()
	for i := range rep.Roots {
		if rep.Roots[i].Path == path {
			return &rep.Roots[i]
		}
	}
	var have []string
	for _, r := range rep.Roots {
		have = append(have, r.Path+" ("+r.Status+")")
	}
	t.Fatalf("no root %s in shape.json; have %v", path, have)
	return nil
}

// Incident 001: one ext4 directory with 70,000 subdirectories is counted
// exactly and its st_nlink of 1 reported.
const dsNlinkMax = 64998

func TestDirShapeExt4NlinkAnomaly(t *testing.T) {
	skip.Short(t, "70,000 directories on a loop device")
	testkit.RequireLoop(t)
	const n = 70000
	l := testkit.LoopExt4(t, 128, testkit.LoopInodes(n+2000))
	big, small := filepath.Join(l.Mountpoint, "volumes", "leak", "_data"), filepath.Join(l.Mountpoint, "volumes", "ok", "_data")
	dsTree(t, l.Mountpoint, "volumes/leak/_data/", "volumes/ok/_data/", "volumes/metadata.db")
	start := time.Now()
	testkit.ManySubdirs(t, small, 1000)
	testkit.ManySubdirs(t, big, n)
	t.Logf("made %d directories in %v", n+1000, time.Since(start))

	// Read every directory to the end: the counts are checked exactly.
	dsOptions(t, func(o *dirshape.Options) { o.Roots = []string{l.Mountpoint}; o.MaxDirTime = 0 })
	c, elapsed := supervisortest.Run(t, supervisor.Options{Only: []string{"dirshape"}, Timeout: time.Minute})
	var rep layout.DirShapeReport
	supervisortest.Decode(t, c, "dirshape/shape.json", &rep)
	r := dsRoot(t, &rep, l.Mountpoint)
	t.Logf("collection %v; scan %.0fms, %.0f entries/s", elapsed, r.DurationMS, r.EntriesPerSecond)
	// volumes, leak, _data, ok, _data, metadata.db, lost+found, and the subdirectories.
	want := uint64(7 + n + 1000)
	if r.Status != layout.DirShapeComplete || !r.Complete || r.Entries != want || r.Dirs != want-1 || r.EmptyDirs != n+1000+1 {
		t.Errorf("root: status %s complete %v entries %d dirs %d empty %d; want complete with %d entries, %d dirs",
			r.Status, r.Complete, r.Entries, r.Dirs, r.EmptyDirs, want, want-1)
	}
	if len(r.Largest) < 2 {
		t.Fatalf("largest dirs: %+v", r.Largest)
	}
	top := r.Largest[0]
	if top.Path != big || top.Entries != n || top.Subdirs != n || top.Nlink != 1 || !top.NlinkAnomaly || top.InodeSize < 1<<20 {
		t.Errorf("largest dir %+v; want %s with %d entries, nlink 1, an anomaly, a directory inode of over 1 MiB", top, big, n)
	}
	// The inode's estimate, made when the directory filled a buffer,
	// bounds the true count sensibly.
	if top.Count != layout.DirCountExact || top.EstimatedEntries < n/2 || top.EstimatedEntries > 2*n || !strings.Contains(top.EstimateBasis, "ext4") {
		t.Errorf("largest dir: count %q, estimate %d (%s); want exact, and an estimate within a factor of 2 of %d", top.Count, top.EstimatedEntries, top.EstimateBasis, n)
	}
	if second := r.Largest[1]; second.Path != small || second.Nlink != 1002 || second.NlinkAnomaly {
		t.Errorf("second largest %+v; want %s with nlink 1002 and no anomaly", second, small)
	}
	if len(r.NlinkAnomalies) != 1 || r.NlinkAnomalies[0].Path != big || rep.NlinkAnomalies != 1 {
		t.Errorf("nlink anomalies %+v (total %d), want exactly %s", r.NlinkAnomalies, rep.NlinkAnomalies, big)
	}
	if !strings.Contains(string(c.Files["dirshape/summary.txt"]), "NLINK ANOMALY: "+big) {
		t.Errorf("summary.txt does not name the anomaly:\n%s", c.Files["dirshape/summary.txt"])
	}
	// Left at a per-directory budget, the huge directory is still named
	// (and as incident 001, from its inode's st_nlink of 1), its count a
	// lower bound with the inode's estimate, and the scan goes on.
	cut := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: l.Mountpoint, MaxDirTime: time.Nanosecond})
	if cut.Status != layout.DirShapeComplete || cut.Complete || !cut.CountsAreLowerBounds || !strings.Contains(cut.StopReason, big+" holds at least") {
		t.Errorf("budget-stopped scan: status %s complete %v lower bounds %v, reason %q", cut.Status, cut.Complete, cut.CountsAreLowerBounds, cut.StopReason)
	}
	if len(cut.Largest) == 0 {
		t.Fatalf("budget-stopped scan lists no directory")
	}
	ct := cut.Largest[0]
	t.Logf("true count %d; full scan's estimate %d; left after %gs at %d entries, estimate %d", n, top.EstimatedEntries, ct.ReadSeconds, ct.Entries, ct.EstimatedEntries)
	if ct.Path != big || ct.Count != layout.DirCountLowerBound || !ct.LowerBound() || ct.Entries >= n || ct.Entries == 0 ||
		ct.EstimatedEntries < dsNlinkMax+1 || ct.EstimatedEntries > 2*n || !ct.NlinkAnomaly || ct.ReadSeconds < 0 || ct.Size() != ct.EstimatedEntries {
		t.Errorf("budget-stopped directory %+v; want %s, a lower bound under %d, an estimate of 64,999..%d, an nlink anomaly", ct, big, n, 2*n)
	}
	if len(cut.NlinkAnomalies) != 1 || cut.NlinkAnomalies[0].Path != big {
		t.Errorf("budget-stopped scan: nlink anomalies %+v", cut.NlinkAnomalies)
	}
	// The scan went on past the huge directory: the smaller one (1,000
	// entries, about one buffer: a nanosecond's budget may leave it just
	// before its end of directory) was read.
	readSmall := false
	for _, d := range cut.Largest {
		readSmall = readSmall || (d.Path == small && d.Entries == 1000)
	}
	if !readSmall {
		t.Errorf("the directory after the huge one was not read: %+v", cut.Largest)
	}
	// The fallback for kernels without openat2 counts the same.
	fb := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: l.Mountpoint, NoOpenat2: true})
	if fb.Method != "mount-table" || fb.Entries != want || len(fb.NlinkAnomalies) != 1 {
		t.Errorf("fallback scan: method %s, %d entries, %d anomalies", fb.Method, fb.Entries, len(fb.NlinkAnomalies))
	}
}

// dsKubelet builds a kubelet root under root: pods/<uid>/volumes/... with
// the files given relative to the pod's volumes directory.
func dsKubelet(t testing.TB, root, uid string, paths ...string) string {
	t.Helper()
	vol := filepath.Join(root, "var/lib/kubelet/pods", uid, "volumes")
	dsTree(t, vol, paths...)
	dsTree(t, filepath.Join(root, "var/lib/kubelet/pods", uid), "etc-hosts", "containers/app/0a1b2c")
	return vol
}

// Incident 000: forty pvc-x.deleting~NNNNNNNNN leftovers next to the
// still-mounted original are all reported, grouped, empty or not.
func TestDirShapeDeletingLeftovers(t *testing.T) {
	testkit.RequireRoot(t)
	root := t.TempDir()
	const uid = "8f2e6c1a-0000-4000-8000-000000000001"
	csi := dsKubelet(t, root, uid, "kubernetes.io~csi/pvc-x/vol_data.json", "kubernetes.io~csi/pvc-x/mount/")
	var leftovers []string
	for i := 0; i < 40; i++ {
		name := fmt.Sprintf("kubernetes.io~csi/pvc-x.deleting~%09d", 100000000+i*7919)
		leftovers = append(leftovers, name+"/")
	}
	leftovers[17] = strings.TrimSuffix(leftovers[17], "/") + "/mount/data.bin"
	dsTree(t, csi, leftovers...)
	mnt := testkit.MountTmpfs(t, filepath.Join(csi, "kubernetes.io~csi/pvc-x/mount"))
	dsTree(t, mnt, "a", "b", "c/")

	dsOptions(t, func(o *dirshape.Options) { o.Roots = nil })
	c, _ := supervisortest.Run(t, supervisor.Options{Only: []string{"dirshape"}, Timeout: time.Minute,
		Common: collectors.Common{Root: root, Proc: "/proc", Sys: "/sys"}})
	if st := c.Manifest.Collector("dirshape").Status; st != "ok" {
		t.Errorf("dirshape status %s: %s", st, c.Manifest.Collector("dirshape").Error)
	}
	var rep layout.DirShapeReport
	supervisortest.Decode(t, c, "dirshape/shape.json", &rep)
	pods := dsRoot(t, &rep, "/var/lib/kubelet/pods")
	parent := "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi"
	if !pods.Complete || pods.DeletingCount != 40 || len(pods.Deleting) != 1 {
		t.Fatalf("pods root: complete %v, %d leftovers in %d groups", pods.Complete, pods.DeletingCount, len(pods.Deleting))
	}
	g := pods.Deleting[0]
	if g.Parent != parent || g.Count != 40 || g.Empty != 39 || g.NotEmpty != 1 || g.Unknown != 0 || len(g.Entries) != 40 {
		t.Errorf("group %s: count %d empty %d not empty %d unknown %d, %d listed", g.Parent, g.Count, g.Empty, g.NotEmpty, g.Unknown, len(g.Entries))
	}
	if len(g.Originals) != 1 {
		t.Fatalf("originals %+v", g.Originals)
	}
	o := g.Originals[0]
	if o.Name != "pvc-x" || o.Count != 40 || o.Exists == nil || !*o.Exists || !o.Mounted || len(o.Mounts) != 1 || !strings.HasSuffix(o.Mounts[0], "/pvc-x/mount") {
		t.Errorf("original %+v; want pvc-x, 40 leftovers, existing, mounted at .../pvc-x/mount", o)
	}
	for _, e := range g.Entries {
		wantEmpty := !strings.HasPrefix(leftovers[17], "kubernetes.io~csi/"+e.Name+"/")
		if e.Original != "pvc-x" || len(e.Suffix) != 9 || e.Type != "dir" || e.Empty == nil || *e.Empty != wantEmpty {
			t.Errorf("leftover %+v (empty should be %v)", e, wantEmpty)
		}
	}
	// The tmpfs was not entered from the pods root, but scanned on its own.
	if pods.MountsNotEntered != 1 || len(pods.MountsNotEnteredSample) != 1 || pods.MountsNotEnteredSample[0] != parent+"/pvc-x/mount" {
		t.Errorf("pods root mounts not entered: %d %v", pods.MountsNotEntered, pods.MountsNotEnteredSample)
	}
	vol := dsRoot(t, &rep, parent+"/pvc-x/mount")
	if vol.Kind != "volume_mount" || !vol.Complete || vol.Entries != 3 || vol.FSType != "tmpfs" {
		t.Errorf("volume mount: %+v", *vol)
	}
	// uid dir: etc-hosts, containers, app, 0a1b2c, volumes, kubernetes.io~csi, pvc-x,
	// vol_data.json, mount, 40 leftovers, mount, data.bin.
	if want := uint64(1 + 9 + 40 + 2); pods.Entries != want {
		t.Errorf("pods root counted %d entries, want %d", pods.Entries, want)
	}
	for _, r := range rep.Roots {
		if r.Path == "/var/lib/docker/volumes" && r.Status != layout.DirShapeAbsent {
			t.Errorf("%s: %s, want absent", r.Path, r.Status)
		}
	}
	sum := string(c.Files["dirshape/summary.txt"])
	if !strings.Contains(sum, ".deleting~ in "+parent+": 40 (empty 39, not empty 1, unknown 0)") || !strings.Contains(sum, "STILL MOUNTED") {
		t.Errorf("summary.txt:\n%s", sum)
	}
}

// Incident 003 in miniature: a FUSE volume whose daemon stopped answering
// sits in the scanned kubelet root. mountprobe finds it hung within its
// deadline, dirshape stays out of it and still reports everything else,
// and the run ends in time.
func TestDirShapeSkipsHungMountInRun(t *testing.T) {
	testkit.RequireFUSE(t)
	root := t.TempDir()
	const uidA, uidB = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
	csiA := dsKubelet(t, root, uidA, "kubernetes.io~csi/pvc-h/vol_data.json", "kubernetes.io~csi/pvc-h/mount/",
		"kubernetes.io~csi/pvc-h.deleting~123456789/")
	dsKubelet(t, root, uidB, "kubernetes.io~secret/token/", "kubernetes.io~empty-dir/cache/f1", "kubernetes.io~empty-dir/cache/f2")
	hung := testkit.HungFUSE(t, filepath.Join(csiA, "kubernetes.io~csi/pvc-h/mount"), testkit.FUSEStartHung(),
		testkit.FUSESubtype("ceph-fuse"), testkit.FUSESource("ceph-fuse"))
	secret := testkit.MountTmpfs(t, filepath.Join(root, "var/lib/kubelet/pods", uidB, "volumes/kubernetes.io~secret/token"))
	dsTree(t, secret, "ca.crt", "namespace", "token")

	const timeout, probe = 20 * time.Second, time.Second
	dsOptions(t, func(o *dirshape.Options) { o.Roots = nil })
	c, elapsed := supervisortest.Run(t, supervisor.Options{Only: []string{"mountprobe", "dirshape"}, Timeout: timeout,
		Common: collectors.Common{Root: root, Proc: "/proc", Sys: "/sys", ProbeTimeout: probe}})
	t.Logf("run took %v", elapsed)
	if elapsed > timeout {
		t.Errorf("run took %v, past its global deadline %v", elapsed, timeout)
	}

	var mp layout.MountProbeReport
	supervisortest.Decode(t, c, "mountprobe/probes.json", &mp)
	h := supervisortest.FindProbe(&mp, hung.Mountpoint())
	if h == nil || h.Result != layout.ProbeHung {
		t.Fatalf("mountprobe did not find %s hung: %+v", hung.Mountpoint(), h)
	}
	mres := c.Manifest.Collector("mountprobe")
	if d := time.Duration(mres.DurationSeconds * float64(time.Second)); d > probe+8*time.Second {
		t.Errorf("mountprobe took %v with a %v probe deadline", d, probe)
	}
	if !supervisortest.HungTargets(c.Manifest)[hung.Mountpoint()] {
		t.Errorf("manifest hung_mounts %v lack %s", c.Manifest.HungMounts, hung.Mountpoint())
	}

	dres := c.Manifest.Collector("dirshape")
	if dres.Status != "ok" || len(dres.HungItems) != 0 || dres.HangEvidence != nil {
		t.Errorf("dirshape: status %s, hung items %v, evidence %v: it must never have touched the hung mount", dres.Status, dres.HungItems, dres.HangEvidence)
	}
	var rep layout.DirShapeReport
	supervisortest.Decode(t, c, "dirshape/shape.json", &rep)
	hungDisplay := "/var/lib/kubelet/pods/" + uidA + "/volumes/kubernetes.io~csi/pvc-h/mount"
	if r := dsRoot(t, &rep, hungDisplay); r.Status != layout.DirShapeSkippedHung || r.Kind != "volume_mount" || !r.CountsAreLowerBounds {
		t.Errorf("hung volume: %+v", *r)
	}
	if r := dsRoot(t, &rep, "/var/lib/kubelet/pods/"+uidB+"/volumes/kubernetes.io~secret/token"); !r.Complete || r.Entries != 3 {
		t.Errorf("secret volume: %+v", *r)
	}
	pods := dsRoot(t, &rep, "/var/lib/kubelet/pods")
	// Per pod: etc-hosts, containers, app, 0a1b2c, volumes; A: csi, pvc-h,
	// vol_data.json, mount, leftover; B: secret, token, empty-dir, cache, f1, f2.
	if want := uint64(2 + 2*5 + 5 + 6); !pods.Complete || pods.Entries != want || pods.MountsNotEntered != 2 {
		t.Errorf("pods root: complete %v, %d entries (want %d), %d mounts not entered (want 2)", pods.Complete, pods.Entries, want, pods.MountsNotEntered)
	}
	if pods.DeletingCount != 1 || len(pods.Deleting) != 1 || !pods.Deleting[0].Originals[0].Mounted {
		t.Errorf("leftover next to the hung volume: %+v", pods.Deleting)
	}
	if !strings.Contains(string(c.Files["dirshape/summary.txt"]), "skipped_hung") {
		t.Errorf("summary.txt does not say the hung volume was skipped:\n%s", c.Files["dirshape/summary.txt"])
	}
}

// A budget smaller than the tree: the output says the counts are lower
// bounds, in the JSON and in words.
func TestDirShapeBudget(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for d := 0; d < 30; d++ {
		for f := 0; f < 100; f++ {
			paths = append(paths, fmt.Sprintf("d%02d/f%03d", d, f))
		}
	}
	dsTree(t, dir, paths...)
	dsOptions(t, func(o *dirshape.Options) {
		o.Roots = []string{dir}
		o.MaxEntries = 1000
	})
	c, _ := supervisortest.Run(t, supervisor.Options{Only: []string{"dirshape"}, Timeout: time.Minute})
	var rep layout.DirShapeReport
	supervisortest.Decode(t, c, "dirshape/shape.json", &rep)
	r := dsRoot(t, &rep, dir)
	if r.Status != layout.DirShapeBudget || r.Complete || !r.CountsAreLowerBounds || r.Entries != 1000 ||
		!strings.Contains(r.StopReason, "entry budget of 1000") || rep.LowerBounds != 1 {
		t.Errorf("budget-limited root: %+v", *r)
	}
	// The directory being read when the budget ran out is flagged too.
	partial := false
	for _, d := range r.Largest {
		partial = partial || d.Partial
	}
	if !partial {
		t.Errorf("no largest directory marked partial: %+v", r.Largest)
	}
	if !strings.Contains(string(c.Files["dirshape/summary.txt"]), "COUNTS ARE LOWER BOUNDS") {
		t.Errorf("summary.txt:\n%s", c.Files["dirshape/summary.txt"])
	}
	if notes := strings.Join(c.Manifest.Collector("dirshape").Notes, "\n"); !strings.Contains(notes, "lower bounds") {
		t.Errorf("manifest notes: %s", notes)
	}
	// A time budget stops a scan the same way.
	tr := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: dir, MaxTime: time.Nanosecond})
	if tr.Status != layout.DirShapeBudget || !strings.Contains(tr.StopReason, "time budget") || tr.Entries >= 3030 {
		t.Errorf("time-limited scan: %s %q, %d entries", tr.Status, tr.StopReason, tr.Entries)
	}
}

// Symlinks are counted, never followed (loops included); other mounts are
// not entered, with openat2 or with the mount-table fallback; a dead FUSE
// mount the fallback does not know of costs one unreadable directory;
// depth is bounded.
func TestScanDirShapeNeverLeaves(t *testing.T) {
	testkit.RequireFUSE(t)
	dir := t.TempDir()
	dsTree(t, dir, "a/b/c/d/e/f", "data/x", "data/y", "tmp/", "dead/")
	for _, l := range [][2]string{{"/usr", "usr-link"}, {"loop", "loop"}, {".", "self"}, {"a", "data/up"}} {
		if err := os.Symlink(l[0], filepath.Join(dir, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp := testkit.MountTmpfs(t, filepath.Join(dir, "tmp"))
	dsTree(t, tmp, "inside/1", "inside/2")
	dead := testkit.DeadFUSE(t, filepath.Join(dir, "dead"))

	// a b c d e f data x y tmp dead usr-link loop self up fifo
	const want = 16
	got := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: dir})
	if got.Method != "openat2" || !got.Complete || got.Entries != want || got.Symlinks != 4 || got.Other != 1 ||
		got.MountsNotEntered != 2 || got.Unreadable != 0 {
		t.Errorf("openat2 scan: %+v", got)
	}
	fb := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: dir, NoOpenat2: true, Exclude: []string{tmp}})
	if fb.Method != "mount-table" || fb.Entries != want || fb.MountsNotEntered != 1 || fb.Unreadable != 1 ||
		len(fb.UnreadableSample) != 1 || fb.UnreadableSample[0].Path != dead.Mountpoint() || !fb.CountsAreLowerBounds {
		t.Errorf("fallback scan: %+v", fb)
	}
	deep := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: dir, MaxDepth: 3})
	if deep.DepthLimited != 1 || deep.MaxDepth != 4 || !deep.CountsAreLowerBounds {
		t.Errorf("depth-bounded scan: depth limited %d, max depth %d, lower bounds %v", deep.DepthLimited, deep.MaxDepth, deep.CountsAreLowerBounds)
	}
	if r := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: filepath.Join(dir, "nope")}); r.Status != layout.DirShapeAbsent {
		t.Errorf("missing root: %s", r.Status)
	}
	if r := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: filepath.Join(dir, "data/x")}); r.Status != layout.DirShapeNotDir {
		t.Errorf("file as root: %s", r.Status)
	}
}

// BenchmarkScanDirShape scans a 100,000-entry tree on tmpfs (warm).
func BenchmarkScanDirShape(b *testing.B) {
	testkit.RequireRoot(b)
	dir := testkit.MountTmpfs(b, "", "size=256m,nr_inodes=200k")
	for d := 0; d < 100; d++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", d))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 999; f++ {
			fd, err := syscall.Open(filepath.Join(sub, fmt.Sprintf("f%04d", f)), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			_ = syscall.Close(fd)
		}
	}
	b.ResetTimer()
	var r layout.DirShapeRoot
	for i := 0; i < b.N; i++ {
		r = dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: dir})
	}
	if r.Entries != 100000 {
		b.Fatalf("%d entries", r.Entries)
	}
	b.ReportMetric(float64(r.Entries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// A huge directory's subdirectories are entered only within its budget:
// past it they are counted from the listing, not opened one by one (on a
// cold cache a disk read or two apiece), and the counts below them are
// lower bounds, said so.
func TestDirShapeHugeDirChildrenCountedNotEntered(t *testing.T) {
	const n = 3000 // some 96 KiB of records: more than one 32 KiB buffer
	root := t.TempDir()
	big := filepath.Join(root, "volumes", "leak", "_data")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.ManySubdirs(t, big, n)
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(big, testkit.SubdirName(i), "f"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := 0; i < n; i++ {
			_ = os.Remove(filepath.Join(big, testkit.SubdirName(i), "f"))
		}
	})

	// No budget: every subdirectory is entered, its file counted.
	all := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: root, MaxDirTime: 0})
	if !all.Complete || all.Files != n || all.Dirs != n+3 || strings.Contains(all.StopReason, "not entered") {
		t.Errorf("unbounded scan: complete %v, %d files, %d dirs, reason %q; want complete, %d files, %d dirs", all.Complete, all.Files, all.Dirs, all.StopReason, n, n+3)
	}
	// A budget spent as soon as the directory is found huge: none of its
	// subdirectories is entered, each one listed is still counted.
	cut := dirshape.ScanDirShape(dirshape.DirShapeScanRequest{Path: root, MaxDirTime: time.Nanosecond})
	if cut.Complete || !cut.CountsAreLowerBounds || !strings.Contains(cut.StopReason, "subdirectories of huge directories were counted but not entered") {
		t.Errorf("budget-stopped scan: complete %v, lower bounds %v, reason %q", cut.Complete, cut.CountsAreLowerBounds, cut.StopReason)
	}
	if cut.Files != 0 || cut.Dirs < 4 || cut.Dirs >= n+3 {
		t.Errorf("budget-stopped scan: %d files, %d dirs; want no file (no subdirectory entered) and some of the %d subdirectories counted", cut.Files, cut.Dirs, n)
	}
	if len(cut.Largest) == 0 || cut.Largest[0].Path != big || !cut.Largest[0].LowerBound() {
		t.Errorf("budget-stopped scan: largest %+v; want %s first, a lower bound", cut.Largest, big)
	}
}
