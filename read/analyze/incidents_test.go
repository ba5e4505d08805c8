package analyze_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Hand-made bundles, one per incident of ../shared/incidents and one for
// the other signatures there: each must yield its finding, with the
// evidence joined from every collector that saw it and the fix an
// operator applies.

func TestHealthyBundleHasNoFindings(t *testing.T) {
	for _, format := range []string{bundle.Gzip, bundle.Zstd} {
		t.Run(format, func(t *testing.T) {
			p := makeBundle(t, fixture(t, "healthy"), format)
			r, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// The fixture has what a healthy node shows and a careless
			// rule would flag: systemd's private tmpfs mounts and a
			// container's overlay root, both only outside the host's
			// namespace; a CSI volume mounted and published; the
			// kubelet's sync loop goroutine in the dump.
			if len(r.Findings) != 0 {
				t.Errorf("healthy bundle has findings:\n%s", dump(r))
			}
			if r.AtLeast(analyze.Warning) {
				t.Error("AtLeast(Warning) on a healthy bundle")
			}
			if r.FilesRead < 15 || r.Hostname != "node1" || r.BundleStatus != "complete" {
				t.Errorf("report header: files %d host %q status %q", r.FilesRead, r.Hostname, r.BundleStatus)
			}
		})
	}
}

// Incident 002: rbd3 kept mounted by node_exporter's private namespace.
func TestIncident002MountHeldInForeignNamespace(t *testing.T) {
	r := analyzeFixture(t, "incident002-rbd-held-in-namespace")
	f := only(t, r, "mount-held-in-foreign-namespace")
	if f.Severity != analyze.Critical || f.Subject != "250:0" {
		t.Errorf("severity %s subject %q", f.Severity, f.Subject)
	}
	const mp = "/host/data/kubelet/plugins/kubernetes.io/rbd/mounts/k8s-image-kubernetes-dynamic-pvc-c838258f-9c7a-11e9-a3b2-fa163ed7c802"
	// pid, comm, namespace, device, mountpoint, kernel threads.
	wantIn(t, "summary", f.Summary, "rbd3", "250:0", "4026532601", "node_exporter[21839]")
	wantIn(t, "explanation", f.Explanation, mp, "rbd3-tasks[6561]", "jbd2/rbd3-8[6589]", "private")
	ev := evidenceText(f)
	wantIn(t, "evidence", ev, "mounts/mounts.json", "only_outside_host_namespace\":true",
		"openfiles/holders.json", "processes/tasks.json", "--path.rootfs=/host")
	// The exact mountinfo line of the namespace that holds it.
	mi := evidenceFrom(f, "mounts/ns/4026532601.mountinfo")
	if len(mi) != 1 || len(mi[0].Lines) != 1 || mi[0].Lines[0].N != 4 || !strings.HasPrefix(mi[0].Lines[0].Text, "2892 2729 250:0 / "+mp) {
		t.Errorf("mountinfo evidence %+v", mi)
	}
	// The kubelet's unmap failure, with the byte array decoded.
	logs := evidenceFrom(f, "journal/kubelet.log")
	if len(logs) != 1 || len(logs[0].Lines) != 2 {
		t.Fatalf("kubelet log evidence %+v", logs)
	}
	for _, l := range logs[0].Lines {
		if l.Decoded != "rbd: sysfs write failed\nrbd: unmap failed: (16) Device or resource busy" {
			t.Errorf("line %d decoded %q", l.N, l.Decoded)
		}
	}
	if !strings.Contains(f.Summary, "keeps failing") {
		t.Errorf("summary does not say the kubelet fails: %s", f.Summary)
	}
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "nsenter -t 21839 -m umount "+mp, "mountPropagation: HostToContainer", "rbd unmap /dev/rbd3")
	// One cause, one finding: the log line is not reported again.
	if len(r.Findings) != 1 {
		t.Errorf("want only the joined finding, got %v", ids(r))
	}
}

// Incident 003: a hung cephfs mount stops the kubelet's sync loop.
func TestIncident003HungCephfsStopsKubelet(t *testing.T) {
	r := analyzeFixture(t, "incident003-cephfs-hung")
	f := only(t, r, "hung-mount")
	if f.Severity != analyze.Critical || f.Subject != "0:61" {
		t.Errorf("severity %s subject %q", f.Severity, f.Subject)
	}
	wantIn(t, "summary", f.Summary, "ceph", "pvc-5c1e9a7b", "kubelet is stuck", "sync loop is unhealthy")
	wantIn(t, "explanation", f.Explanation, "kubelet[4130911]", "ceph_mdsc_do_request", "goroutine 412 [syscall, 12 minutes]", "cleanupOrphanedPodDirs", "os.Stat", "12 minutes")
	ev := evidenceText(f)
	wantIn(t, "evidence", ev, "mountprobe/probes.json", "\"result\":\"hung\"", "manifest.json",
		"[-]syncloop failed: reason withheld", "goroutine 412 [syscall, 12 minutes]:",
		"INFO: task kubelet:4130911 blocked for more than 120 seconds", "ceph_mdsc_do_request+0x1a4/0x280 [ceph]",
		"libceph: mon0 (1)10.0.0.11:6789 session lost", "sync Loop took longer than expected")
	g := evidenceFrom(f, "kubelet/goroutine-debug2.txt")
	if len(g) != 1 || g[0].Lines[0].N != 5 || g[0].Lines[0].Text != "goroutine 412 [syscall, 12 minutes]:" {
		t.Errorf("goroutine evidence %+v", g)
	}
	rem := strings.Join(f.Remediation, "\n")
	wantIn(t, "remediation", rem, "umount -f /var/lib/kubelet/pods/8a4b6c2d-1e3f-4a5b-9c7d-0e1f2a3b4c5d/volumes/kubernetes.io~cephfs/pvc-5c1e9a7b", "umount -l", "restart the kubelet")
	// Everything is one cause: no separate sync loop, hung task or ceph
	// finding.
	if len(r.Findings) != 1 {
		t.Errorf("want one joined finding, got %v\n%s", ids(r), dump(r))
	}
}

// Incident 004: the CSI driver lost "Published" while the target is
// mounted; the kubelet's TearDown EBUSY and "not cleaned up" lines join it.
func TestIncident004CSIPublishedStateLost(t *testing.T) {
	r := analyzeFixture(t, "incident004-csi-published-lost")
	f := only(t, r, "csi-published-state-lost")
	const target = "/var/lib/kubelet/pods/9a42f711-028a-4ca2-802a-0e4db734592d/volumes/kubernetes.io~csi/pvc-ea3178bf-fc12-432c-a01b-8389b04c508e/mount"
	if f.Severity != analyze.Critical || f.Subject != target {
		t.Errorf("severity %s subject %q", f.Severity, f.Subject)
	}
	wantIn(t, "explanation", f.Explanation, "\"Published\": null", "default/hello-xxxxxx", "csi-driver-host-path#457")
	ev := evidenceText(f)
	wantIn(t, "evidence", ev, "csi/state/var/lib/csi-hostpath-data/state.json", "csi/vol_data/9a42f711-028a-4ca2-802a-0e4db734592d/",
		"\"published_state\":\"null\"", "812 22 253:1 /var/lib/csi-hostpath-data/e9216f9a-425b-11ef-9abf-4e607aa5fc75 "+target,
		"durationBeforeRetry 2m2s", "remove "+target+": device or resource busy", "Pod is terminated, but some volumes have not been cleaned up")
	// Each log line once.
	seen := map[int]bool{}
	for _, e := range evidenceFrom(f, "journal/kubelet.log") {
		for _, l := range e.Lines {
			if seen[l.N] {
				t.Errorf("kubelet.log line %d quoted twice", l.N)
			}
			seen[l.N] = true
		}
	}
	if len(seen) != 5 {
		t.Errorf("quoted %d kubelet.log lines, want all 5", len(seen))
	}
	// The driver's own log, kept by the csi collector from /var/log/pods:
	// its new instance answered the unpublish with "nothing to do". Only
	// that line: the rest of the driver's log is not about the leak.
	const driverLog = "csi/podlogs/kube-system_csi-hostpathplugin-0/hostpath/1.log"
	dl := evidenceFrom(f, driverLog)
	if len(dl) != 1 || len(dl[0].Lines) != 1 || dl[0].Lines[0].N != 6 ||
		!strings.Contains(dl[0].Lines[0].Text, `Volume "e9216f9a-425b-11ef-9abf-4e607aa5fc75" is not published at "`+target+`", nothing to do.`) {
		t.Errorf("the driver's \"not published\" line is not quoted from %s:\n%s", driverLog, evidenceText(f))
	}
	if len(evidenceFrom(f, "csi/podlogs/kube-system_csi-hostpathplugin-0/hostpath/0.log")) != 0 {
		t.Errorf("lines of the driver's previous instance quoted:\n%s", evidenceText(f))
	}
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "umount "+target, "#457")
	if len(r.Findings) != 1 {
		t.Errorf("want one joined finding, got %v", ids(r))
	}
}

// Drivers word their unpublish differently: a lower-case "volume ... is
// not published", and a line naming NodeUnpublishVolume with the volume's
// ID in its arguments are quoted for the volume; an unpublish of another
// volume is not.
func TestIncident004DriverLogVariants(t *testing.T) {
	const (
		vol    = "e9216f9a-425b-11ef-9abf-4e607aa5fc75"
		target = "/var/lib/kubelet/pods/9a42f711-028a-4ca2-802a-0e4db734592d/volumes/kubernetes.io~csi/pvc-ea3178bf-fc12-432c-a01b-8389b04c508e/mount"
		log    = "csi/podlogs/kube-system_csi-hostpath-node-x/plugin/3.log"
	)
	files := fixture(t, "incident004-csi-published-lost")
	files[log] = []byte(strings.Join([]string{
		`2024-07-15T03:49:31.0Z stderr F I0715 03:49:31.000000 1 node.go:310] NodeUnpublishVolume: called with args {VolumeId:` + vol + ` TargetPath:` + target + `}`,
		`2024-07-15T03:49:31.1Z stderr F I0715 03:49:31.100000 1 node.go:322] volume "` + vol + `" is not published at "` + target + `", nothing to do.`,
		`2024-07-15T03:49:32.0Z stderr F I0715 03:49:32.000000 1 node.go:310] NodeUnpublishVolume: called with args {VolumeId:0aa0-other-volume TargetPath:/var/lib/kubelet/pods/other/volumes/kubernetes.io~csi/pvc-other/mount}`,
	}, "\n") + "\n")
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := only(t, r, "csi-published-state-lost")
	var quoted []int
	for _, e := range evidenceFrom(f, log) {
		for _, l := range e.Lines {
			quoted = append(quoted, l.N)
		}
	}
	if len(quoted) != 2 || quoted[0]+quoted[1] != 3 {
		t.Errorf("quoted lines %v of %s, want 1 and 2:\n%s", quoted, log, evidenceText(f))
	}

	// Alone (no lost state to explain it), the lower-case line is still
	// the driver's "not published" for its volume.
	r, err = analyze.AnalyzeFile(context.Background(), makeBundle(t, map[string][]byte{
		"csi/podlogs/kube-system_csi-hostpath-node-x/plugin/0.log": []byte(`2024-07-15T03:49:31.1Z stderr F I0715 03:49:31.100000 1 node.go:322] volume "vol-lower" is not published at "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-l/mount", nothing to do.` + "\n"),
	}, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if np := only(t, r, "csi-driver-not-published"); np.Subject != "vol-lower" {
		t.Errorf("not-published finding for %q, want vol-lower", np.Subject)
	}
}

// A driver run as a host process: its log file (klog lines, no CRI
// prefix) and its journal lines, kept under csi/hostlogs/, are read as
// the driver pods' logs are.
func TestIncident004HostDriverLog(t *testing.T) {
	for name, line := range map[string]string{
		"csi/hostlogs/hostpath.csi.k8s.io.4242.log":         `I0715 03:49:31.100000 4242 nodeserver.go:263] Volume "vol-host" is not published at "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-h/mount", nothing to do.`,
		"csi/hostlogs/hostproc.csi.test.4243.log":           `2024/07/15 03:49:31.100000 main.go:216: Volume "vol-host" is not published at "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-h/mount", nothing to do.`,
		"csi/hostlogs/hostpath.csi.k8s.io.4242.journal.log": `2024-07-15T03:49:31+0000 node-1 hostpathplugin[4242]: I0715 03:49:31.100000 4242 nodeserver.go:263] Volume "vol-host" is not published at "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-h/mount", nothing to do.`,
	} {
		t.Run(path.Base(name), func(t *testing.T) {
			r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, map[string][]byte{name: []byte(line + "\n")}, bundle.Gzip), analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			np := only(t, r, "csi-driver-not-published")
			if np.Subject != "vol-host" || len(evidenceFrom(np, name)) == 0 {
				t.Errorf("not-published finding for %q with evidence %s, want vol-host quoted from %s", np.Subject, evidenceText(np), name)
			}
		})
	}
}

// Incident 000: 22 .deleting~ leftovers, the original still mounted.
func TestIncident000DeletingLeftovers(t *testing.T) {
	r := analyzeFixture(t, "incident000-deleting-leftovers")
	f := only(t, r, "volume-dir-deleting-leftovers")
	const parent = "/var/lib/kubelet/pods/612f2e76-3ce1-11e8-b2c9-0cc47ae2b22c/volumes/transwarp.io~tosdisk"
	if f.Severity != analyze.Warning || f.Subject != parent {
		t.Errorf("severity %s subject %q", f.Severity, f.Subject)
	}
	wantIn(t, "summary", f.Summary, "22 .deleting~ leftovers", "22 empty", "pvc-f39e86b9-019b-11e8-b2c9-0cc47ae2b22c is still mounted")
	ev := evidenceText(f)
	wantIn(t, "evidence", ev, "dirshape/shape.json", "\"count\":22", "733 22 8:32 / "+parent+"/pvc-f39e86b9-019b-11e8-b2c9-0cc47ae2b22c",
		".deleting~859156558: device or resource busy")
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"),
		"find "+parent+" -maxdepth 1 -name 'pvc-f39e86b9-019b-11e8-b2c9-0cc47ae2b22c.deleting~*' -type d -empty -delete",
		"grep pvc-f39e86b9-019b-11e8-b2c9-0cc47ae2b22c /proc/*/task/*/mountinfo")
	if len(r.Findings) != 1 {
		t.Errorf("want one joined finding, got %v", ids(r))
	}
}

// Incident 001: 5 million directories in a Docker volume; dockerd removing
// it under its volume lock.
func TestIncident001HugeDirectoryAndRuntimeLock(t *testing.T) {
	r := analyzeFixture(t, "incident001-huge-volume")
	f := only(t, r, "ext4-nlink-overflow")
	const dir = "/var/lib/docker/volumes/3f1a9c0e7b1d4e5f8a2b6c7d9e0f1a2b/_data/cache"
	if f.Severity != analyze.Critical || f.Subject != dir {
		t.Errorf("severity %s subject %q", f.Severity, f.Subject)
	}
	wantIn(t, "summary", f.Summary, "at least 5000000 entries", "st_nlink 1")
	// The writer is in a container: found through its mount's root.
	wantIn(t, "explanation", f.Explanation, "64,998", "app[31337]", "cwd /data/cache")
	wantIn(t, "evidence", evidenceText(f), "\"nlink_anomaly\":true", "openfiles/processes.jsonl", "\"pid\":31337", "\"line\":2")

	l := only(t, r, "runtime-volume-removal-blocking")
	if l.Severity != analyze.Critical {
		t.Errorf("runtime lock severity %s", l.Severity)
	}
	wantIn(t, "runtime summary", l.Summary, "193 minutes", "2 goroutines are waiting")
	wantIn(t, "runtime explanation", l.Explanation, "volume/local.(*Root).Get", dir)
	wantIn(t, "runtime evidence", evidenceText(l), "goroutine 5123 [syscall, 193 minutes]:", "os.RemoveAll(", "goroutine 6001 [semacquire, 187 minutes]:")
	if len(r.Findings) != 2 {
		t.Errorf("findings %v", ids(r))
	}
}

// The other signatures of incidents/README.md, each alone.
func TestOtherSignatures(t *testing.T) {
	r := analyzeFixture(t, "signatures")
	want := map[string]analyze.Severity{
		"fuse-transport-not-connected":        analyze.Critical,
		"ceph-session-lost":                   analyze.Warning,
		"container-rootfs-busy":               analyze.Warning,
		"csi-operation-already-exists":        analyze.Warning,
		"fuse-transport-not-connected-logged": analyze.Warning,
		"kernel-hung-task":                    analyze.Warning,
		"kubelet-pleg-unhealthy":              analyze.Warning,
		"orphaned-pod-volume-paths":           analyze.Warning,
		"staging-mount-still-referenced":      analyze.Warning,
		"volume-teardown-busy":                analyze.Warning,
		"decoded-command-output":              analyze.Info,
		"pod-volumes-not-cleaned-up":          analyze.Warning,
		"csi-driver-not-published":            analyze.Info,
	}
	for id, sev := range want {
		fs := findings(r, id)
		if len(fs) != 1 {
			t.Errorf("%s: %d findings, want 1", id, len(fs))
			continue
		}
		if fs[0].Severity != sev {
			t.Errorf("%s: severity %s, want %s", id, fs[0].Severity, sev)
		}
		if len(fs[0].Evidence) == 0 || len(fs[0].Remediation) == 0 && id != "decoded-command-output" {
			t.Errorf("%s: no evidence or no remediation", id)
		}
	}
	// 10.1.2.3 is still mounted (/mnt/nfs-data) and never answered again;
	// 10.9.9.9 has no mount left on the node: what it did is history.
	nfs := only(t, r, "nfs-server-not-responding")
	if nfs.Subject != "10.1.2.3" || nfs.Severity != analyze.Warning {
		t.Errorf("NFS finding %s %s, want the still-mounted 10.1.2.3 as a warning", nfs.Subject, nfs.Severity)
	}
	earlier := only(t, r, "earlier-log-lines")
	if earlier.Severity != analyze.Info {
		t.Errorf("earlier-log-lines is %s, want info", earlier.Severity)
	}
	wantIn(t, "earlier NFS lines", earlier.Summary+evidenceText(earlier), "NFS server 10.9.9.9 has no mount on the node now", "nfs: server 10.9.9.9 not responding")
	// The dead FUSE mount carries the kubelet's ENOTCONN line about it;
	// the other ENOTCONN line (a path not mounted) stands alone.
	fuse := only(t, r, "fuse-transport-not-connected")
	wantIn(t, "dead FUSE", evidenceText(fuse), "\"errno\":\"ENOTCONN\"", "stat /var/lib/kubelet/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/0a1b2c3d/globalmount: transport endpoint is not connected")
	wantIn(t, "dead FUSE fix", strings.Join(fuse.Remediation, "\n"), "fusermount -uz /var/lib/kubelet/plugins/kubernetes.io/csi/cephfs.csi.ceph.com/0a1b2c3d/globalmount")
	if s := only(t, r, "fuse-transport-not-connected-logged").Subject; s != "/mnt/x" {
		t.Errorf("logged ENOTCONN subject %q", s)
	}
	out := only(t, r, "decoded-command-output")
	if !strings.Contains(out.Summary, "mount.nfs: Access denied") {
		t.Errorf("decoded output: %s", out.Summary)
	}
	td := only(t, r, "volume-teardown-busy")
	wantIn(t, "teardown", td.Summary, "ebs.csi.aws.com^vol-0abc", "32s")
	wantIn(t, "teardown", td.Explanation, "not mounted in any namespace now")
	if s := only(t, r, "orphaned-pod-volume-paths").Subject; s != "b7c8d9e0-1f2a-4b3c-8d4e-5f6a7b8c9d0e" {
		t.Errorf("orphaned pod subject %q", s)
	}
	if len(r.Findings) != len(want)+2 {
		t.Errorf("findings: %v", ids(r))
	}
	// Findings are sorted worst first.
	for i := 1; i < len(r.Findings); i++ {
		if r.Findings[i].Severity > r.Findings[i-1].Severity {
			t.Errorf("finding %d (%s) is worse than %d", i, r.Findings[i].ID, i-1)
		}
	}
}

// A hung-mount fixture without probes.json still names the hung mount from
// the manifest, and says which evidence is incomplete.
func TestHungMountFromManifestOnly(t *testing.T) {
	files := fixture(t, "incident003-cephfs-hung")
	delete(files, "mountprobe/probes.json")
	files["_manifest.json"] = []byte(`{"hung_mounts":[{"op":"mountprobe.probe","target":"/var/lib/kubelet/pods/x/volumes/kubernetes.io~cephfs/pvc-1","collector":"mountprobe"}],
		"collectors":[{"name":"mountprobe","status":"timeout","error":"did not finish within 20s"}]}`)
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := only(t, r, "hung-mount")
	if f.Subject != "/var/lib/kubelet/pods/x/volumes/kubernetes.io~cephfs/pvc-1" {
		t.Errorf("subject %q", f.Subject)
	}
	inc := only(t, r, "evidence-incomplete")
	wantIn(t, "incomplete", inc.Summary, "mountprobe timeout")
}

// moby#22260: a container's rootfs (overlay, not a block device) copied
// into a service's private namespace; dockerd's unlinkat EBUSY joins it.
func TestRootfsLeakedIntoServiceNamespace(t *testing.T) {
	r := analyzeFixture(t, "rootfs-leaked-into-service")
	f := only(t, r, "mount-held-in-foreign-namespace")
	const merged = "/var/lib/docker/overlay2/9a8b7c6d5e4f3a2b1c0d/merged"
	if f.Subject != "0:66" || f.Severity != analyze.Critical {
		t.Errorf("subject %q severity %s", f.Subject, f.Severity)
	}
	wantIn(t, "summary", f.Summary, "Filesystem 0:66", "4026532450", "ntpd[1210]")
	wantIn(t, "evidence", evidenceText(f), "unlinkat "+merged+": device or resource busy", "801 800 0:66 / "+merged)
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "nsenter -t 1210 -m umount "+merged)
	// The service's own /tmp (tmpfs, only in its namespace) is not a
	// finding, and the log line is not reported twice.
	if len(r.Findings) != 1 {
		t.Errorf("findings %v", ids(r))
	}
}

// The kubelet's sync loop stuck with no hung mount in the bundle: a
// finding of its own, with the goroutine and how long.
func TestKubeletSyncloopStuckAlone(t *testing.T) {
	r := analyzeFixture(t, "kubelet-syncloop-stuck")
	f := only(t, r, "kubelet-syncloop-unhealthy")
	if f.Severity != analyze.Critical {
		t.Errorf("severity %s", f.Severity)
	}
	wantIn(t, "summary", f.Summary, "goroutine 412 [syscall, 12 minutes] in cleanupOrphanedPodDirs", "os.Stat", "stuck for 12 minutes")
	ev := evidenceText(f)
	wantIn(t, "evidence", ev, "[-]syncloop failed: reason withheld", "goroutine 412 [syscall, 12 minutes]:",
		"k8s.io/kubernetes/pkg/kubelet.(*Kubelet).HandlePodCleanups(", "sync Loop took longer than expected")
	if len(r.Findings) != 1 {
		t.Errorf("findings %v", ids(r))
	}
}

// CSI leftovers: a vol_data.json whose volume is not mounted (its pod is
// gone), and mounts of a pod the kubelet does not run.
func TestCSILeftovers(t *testing.T) {
	r := analyzeFixture(t, "csi-leftovers")
	const gone, stray = "d0d0d0d0-1111-4222-8333-444455556666", "e1e1e1e1-2222-4333-8444-555566667777"
	vd := only(t, r, "csi-vol-data-without-mount")
	if vd.Subject != gone || vd.Severity != analyze.Warning {
		t.Errorf("vol_data finding: subject %q severity %s", vd.Subject, vd.Severity)
	}
	wantIn(t, "vol_data", vd.Summary, "pvc-gone", "not in kubelet/pods.json")
	wantIn(t, "vol_data evidence", evidenceText(vd), "vol-0gone", "orphaned pod \\\""+gone+"\\\" found")
	mp := only(t, r, "volume-mounted-for-unknown-pod")
	if mp.Subject != stray {
		t.Errorf("mount finding subject %q", mp.Subject)
	}
	wantIn(t, "mounts", mp.Summary, "2 mounts remain")
	wantIn(t, "mounts evidence", evidenceText(mp), "401 22 253:1 /var/lib/csi-hostpath-data/v-stray /var/lib/kubelet/pods/"+stray+"/volumes/kubernetes.io~csi/pvc-stray/mount")
	wantIn(t, "mounts fix", strings.Join(mp.Remediation, "\n"), "umount /var/lib/kubelet/pods/"+stray+"/volumes/kubernetes.io~csi/pvc-stray/mount")
	if len(r.Findings) != 2 {
		t.Errorf("findings %v", ids(r))
	}
}

// The report survives a JSON round trip with its severities by name.
func TestReportJSON(t *testing.T) {
	r := analyzeFixture(t, "incident002-rbd-held-in-namespace")
	var buf bytes.Buffer
	if err := analyze.WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"severity": "critical"`) || !strings.Contains(buf.String(), `"decoded": "rbd: sysfs write failed\nrbd: unmap failed: (16) Device or resource busy"`) {
		t.Errorf("JSON:\n%s", buf.String())
	}
	var back analyze.Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Findings) != 1 || back.Findings[0].Severity != analyze.Critical || back.Counts["critical"] != 1 || back.Findings[0].Evidence[0].Path != "mounts/mounts.json" {
		t.Errorf("round trip: %+v", back)
	}
	text := dump(r)
	// The table's row is the summary (cut at 80 columns); the title heads
	// the finding's detail.
	for _, want := range []string{"#  SEVERITY  ID", "SUMMARY", "1  critical  mount-held-in-foreign-namespace  ", "[1] CRITICAL mount-held-in-foreign-namespace — Mount held only in a",
		"Why:", "Evidence:", "Fix:", "decoded: rbd: sysfs write failed"} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
}
