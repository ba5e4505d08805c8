package analyze_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Incident 003 as a node with many stale FUSE mounts elsewhere shows it
// when mountprobe ran out of time before the kubelet's mount: the probe
// of the pod volume is "unfinished", 160 ceph-fuse mounts of another
// namespace hung, the kubelet thread sleeps in ceph code and dirshape's
// scan of the volume did not answer. The analysis says "not probed" with
// that evidence, and nothing in it claims that no mount hung.
func TestNotProbedKubeletMountBesideHungMounts(t *testing.T) {
	files := fixture(t, "incident003-cephfs-hung")
	var rep layout.MountProbeReport
	if err := json.Unmarshal(files["mountprobe/probes.json"], &rep); err != nil {
		t.Fatal(err)
	}
	var vol string
	for i := range rep.Probes {
		p := &rep.Probes[i]
		if p.Result == layout.ProbeHung {
			vol = p.Mountpoint
			*p = layout.MountProbe{Mountpoint: p.Mountpoint, ProbePath: p.ProbePath, Namespaces: p.Namespaces, ProbeNamespace: p.ProbeNamespace,
				MountID: p.MountID, FSType: p.FSType, Source: p.Source, Dev: p.Dev, Root: p.Root, Class: p.Class, First: true,
				Result: layout.ProbeUnfinished, SkipReason: "not probed: the collector's deadline came first"}
		}
	}
	if vol == "" {
		t.Fatal("the fixture has no hung probe")
	}
	const other = 4026532999
	rep.Namespaces = append(rep.Namespaces, layout.MountProbeNamespace{Inode: other, PID: 7001, Comm: "csi-cephfsplugin", PIDs: []int{7001}, Tasks: 1, Mounts: 160})
	rep.Counts = map[string]int{layout.ProbeOK: 2, layout.ProbeHung: 160, layout.ProbeUnfinished: 1}
	for i := 0; i < 160; i++ {
		rep.Probes = append(rep.Probes, layout.MountProbe{
			Mountpoint: fmt.Sprintf("/var/lib/cephfs-plugin/mnt/v%03d", i), ProbePath: fmt.Sprintf("/proc/7001/root/var/lib/cephfs-plugin/mnt/v%03d", i),
			Namespaces: []uint64{other}, ProbeNamespace: other, MountID: 2000 + i, FSType: "fuse.ceph-fuse", Source: "ceph-fuse",
			Dev: fmt.Sprintf("0:%d", 300+i), Root: "/", Class: "network", Result: layout.ProbeHung, Probed: true, LatencyMS: 3000,
			FUSE: &layout.MountProbeFUSE{Conn: uint32(300 + i)},
		})
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	files["mountprobe/probes.json"] = b
	// The manifest's hung_mounts name the kubelet's mount only when it
	// was probed: here, the 160 others.
	var hung []bundle.HungItem
	for _, p := range rep.Probes[len(rep.Probes)-160:] {
		hung = append(hung, bundle.HungItem{Op: "mountprobe.probe", Target: p.ProbePath, Collector: "mountprobe"})
	}
	m, _ := json.Marshal(map[string]any{"hung_mounts": hung})
	files["_manifest.json"] = m
	shape := layout.DirShapeReport{Roots: []layout.DirShapeRoot{{Path: vol, Kind: "volume_mount", Status: layout.DirShapeHung,
		StopReason: "its filesystem did not answer: nothing was counted", Error: "dirshape.probe " + vol + ": no answer within 3s", Mountpoint: vol, FSType: "ceph"}}}
	if files["dirshape/shape.json"], err = json.Marshal(shape); err != nil {
		t.Fatal(err)
	}
	// And a task in D state nothing ties to a mount.
	var tasks []layout.Task
	if err := json.Unmarshal(files["processes/tasks.json"], &tasks); err != nil {
		t.Fatal(err)
	}
	tasks = append(tasks, layout.Task{PID: 812, TID: 812, PPID: 2, Comm: "jbd2/vda1-8", State: "D", Wchan: "jbd2_journal_commit_transaction",
		Kernel: true, Stack: []string{"[<0>] jbd2_journal_commit_transaction+0x1a2/0x1870 [jbd2]", "[<0>] kjournald2+0xaf/0x280 [jbd2]"}})
	if files["processes/tasks.json"], err = json.Marshal(tasks); err != nil {
		t.Fatal(err)
	}

	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var f analyze.Finding
	for _, g := range findings(r, "mount-not-probed") {
		if g.Subject == "0:61" {
			f = g
		}
	}
	if f.ID == "" {
		t.Fatalf("no mount-not-probed finding for the kubelet's volume:\n%s", dump(r))
	}
	if f.Severity != analyze.Critical {
		t.Errorf("severity %s, want critical: dirshape and a kubelet thread say it hangs", f.Severity)
	}
	wantIn(t, "summary", f.Summary, vol, "not probed", "dirshape", "1 task sleeps in ceph code")
	wantIn(t, "explanation", f.Explanation, "kubelet[4130911]", "ceph_mdsc_do_request", "cleanupOrphanedPodDirs")
	wantIn(t, "evidence", evidenceText(f), "dirshape/shape.json", "processes/tasks.json", "\"result\":\"unfinished\"")
	// The 160 mounts of one FUSE source in one namespace are one cause:
	// one finding, after the kubelet's own mount.
	hungFs := findings(r, "hung-mount")
	if len(hungFs) != 1 || len(hungFs[0].Members) != 160 {
		t.Fatalf("%d hung-mount findings (want 1 grouping 160):\n%s", len(hungFs), dump(r))
	}
	if r.Findings[0].ID != "mount-not-probed" || r.Findings[0].Impact != analyze.ImpactSyncLoop {
		t.Errorf("first finding %s (impact %q), want the kubelet's mount-not-probed: it stops the sync loop", r.Findings[0].ID, r.Findings[0].Impact)
	}
	// The other mounts' FUSE fix mounts fusectl where it is missing.
	wantIn(t, "hung-mount remediation", strings.Join(hungFs[0].Remediation, "\n"),
		"mountpoint -q /sys/fs/fuse/connections || mount -t fusectl none /sys/fs/fuse/connections; echo 1 > /sys/fs/fuse/connections/300/abort", "umount -l /var/lib/cephfs-plugin/mnt/v000")
	blocked := findings(r, "tasks-blocked-in-kernel")
	if len(blocked) != 1 || !strings.Contains(blocked[0].Summary, "jbd2/vda1-8[812]") {
		t.Fatalf("the unrelated D task: %v\n%s", blocked, dump(r))
	}
	wantIn(t, "blocked tasks explanation", blocked[0].Explanation, "160 mounts hung", "1 was not probed")
	for _, g := range r.Findings {
		for _, s := range []string{g.Summary, g.Explanation} {
			if strings.Contains(s, "No probed mount hung") || strings.Contains(s, "No probe of its mounts hung") {
				t.Errorf("%s %s contradicts the hung mounts: %s", g.ID, g.Subject, s)
			}
		}
	}
}
