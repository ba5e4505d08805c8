package diff_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/read/diff"
)

const (
	incident002 = "incident002-rbd-held-in-namespace"
	incident003 = "incident003-cephfs-hung"
	incident004 = "incident004-csi-published-lost"
	cephPVC     = "/var/lib/kubelet/pods/8a4b6c2d-1e3f-4a5b-9c7d-0e1f2a3b4c5d/volumes/kubernetes.io~cephfs/pvc-5c1e9a7b-2d4f-4e6a-8b0c-1d2e3f4a5b6c"
)

// pair builds a bundle of each fixture (a day apart) and compares them.
func pair(t *testing.T, oldFixture, newFixture string) *diff.Diff {
	t.Helper()
	day := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	a := makeBundle(t, fixture(t, oldFixture), bundleOpts{at: day})
	b := makeBundle(t, fixture(t, newFixture), bundleOpts{at: day.Add(24 * time.Hour)})
	d := diff.Compare(load(t, a), load(t, b))
	var text bytes.Buffer
	if err := diff.WriteText(&text, d, diff.Width); err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > diff.Width {
			t.Errorf("line %d is %d columns wide: %q", i+1, n, l)
		}
	}
	t.Logf("%s → %s:\n%s", oldFixture, newFixture, text.String())
	return d
}

func refs(fs []diff.FindingRef) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Severity.String()+" "+f.ID+" "+f.Subject)
	}
	return out
}

func counts(cs []diff.CountChange) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for _, c := range cs {
		out[c.Name] = [2]uint64{c.Old, c.New}
	}
	return out
}

func wantHas[T comparable](t *testing.T, what string, list []T, want T) {
	t.Helper()
	if !slices.Contains(list, want) {
		t.Errorf("%s: %v lacks %v", what, list, want)
	}
}

// Incident 002: a device held only in another mount namespace appears,
// then goes away again.
func TestHealthyAndIncident002(t *testing.T) {
	d := pair(t, "healthy", incident002)
	wantHas(t, "new findings", refs(d.FindingsNew), "critical mount-held-in-foreign-namespace 250:0")
	wantHas(t, "foreign devices", d.ForeignDevicesNew, "250:0 ext4 /dev/rbd3")
	if !d.Worse {
		t.Error("a new critical finding must make the diff worse")
	}
	if got := counts(d.Signatures)["unmount-device-failed"]; got != [2]uint64{0, 2} {
		t.Errorf("unmount-device-failed lines %v, want 0 → 2", got)
	}
	wantHas(t, "host mounts added", d.HostMountsAdded, diff.Mount{Mountpoint: "/data", FSType: "xfs"})

	back := pair(t, incident002, "healthy")
	wantHas(t, "gone findings", refs(back.FindingsGone), "critical mount-held-in-foreign-namespace 250:0")
	wantHas(t, "foreign devices gone", back.ForeignDevicesGone, "250:0 ext4 /dev/rbd3")
	if back.Worse || len(back.FindingsNew) != 0 {
		t.Errorf("recovery is not worse: worse=%v new=%v", back.Worse, refs(back.FindingsNew))
	}
}

// Incident 003: a cephfs volume hangs, the kubelet sits in D state on it.
func TestHealthyAndIncident003(t *testing.T) {
	d := pair(t, "healthy", incident003)
	wantHas(t, "new findings", refs(d.FindingsNew), "critical hung-mount 0:61")
	wantHas(t, "hung mounts", d.HungNew, cephPVC)
	wantHas(t, "D state", d.DStateNew, "4130911 kubelet in ceph_mdsc_do_request")
	wantHas(t, "host mounts added", d.HostMountsAdded, diff.Mount{Mountpoint: cephPVC, FSType: "ceph"})
	wantHas(t, "host mounts by type", d.HostMountsByType, diff.TypeCount{FSType: "ceph", Added: 1})
	sig := counts(d.Signatures)
	if sig["libceph-session-lost"] != [2]uint64{0, 2} || sig["kernel-hung-task"] != [2]uint64{0, 1} {
		t.Errorf("signatures %v", sig)
	}
	if !d.Worse {
		t.Error("a hung mount must make the diff worse")
	}
	// The incident bundle has no kubelet pod list: not "every pod gone".
	if len(d.PodsRemoved) != 0 || !strings.Contains(strings.Join(d.Notes, "\n"), "pods (kubelet/pods.json or the runtime's pod sandboxes): only in the old bundle") {
		t.Errorf("pods removed %v, notes %q", d.PodsRemoved, d.Notes)
	}

	back := pair(t, incident003, "healthy")
	wantHas(t, "hung mounts gone", back.HungGone, cephPVC)
	wantHas(t, "D state gone", back.DStateGone, "4130911 kubelet")
	wantHas(t, "gone findings", refs(back.FindingsGone), "critical hung-mount 0:61")
	if back.Worse || len(back.HungNew) != 0 {
		t.Errorf("recovery is not worse: worse=%v hung=%v", back.Worse, back.HungNew)
	}
}

// Incident 004: the CSI driver lost its published state; a new pod.
func TestHealthyAndIncident004(t *testing.T) {
	d := pair(t, "healthy", incident004)
	var ids []string
	for _, f := range d.FindingsNew {
		ids = append(ids, f.Severity.String()+" "+f.ID)
	}
	wantHas(t, "new findings", ids, "critical csi-published-state-lost")
	wantHas(t, "pods added", d.PodsAdded, "default/hello-xxxxxx (Running)")
	wantHas(t, "pods removed", d.PodsRemoved, "default/web-0 (Running)")
	if got := counts(d.Signatures)["csi-not-published"]; got != [2]uint64{0, 1} {
		t.Errorf("csi-not-published %v", got)
	}
	if !d.Worse {
		t.Error("want worse")
	}
	back := pair(t, incident004, "healthy")
	if back.Worse || len(back.FindingsGone) == 0 {
		t.Errorf("recovery: worse=%v gone=%v", back.Worse, refs(back.FindingsGone))
	}
}

// Two collections of a quiet node differ in time stamps and bundle names
// only: nothing is reported, the exit status is 0.
func TestQuietNodeNothingChanged(t *testing.T) {
	d := pair(t, "healthy", "healthy")
	if d.Changed() || d.Worse || d.HostsDiffer || len(d.Notes) != 0 {
		t.Errorf("identical collections differ: %+v", d)
	}
	var text bytes.Buffer
	if err := diff.WriteText(&text, d, 80); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Nothing noteworthy changed.") {
		t.Errorf("text:\n%s", text.String())
	}
}

// Other hosts, other obfuscation and a partial collection are said.
func TestHostsObfuscationAndCompleteness(t *testing.T) {
	a := makeBundle(t, fixture(t, "healthy"), bundleOpts{host: "node1"})
	b := makeBundle(t, fixture(t, "healthy"), bundleOpts{host: "node2", status: "partial",
		collectors: map[string]string{"kubelet": bundle.StatusTimeout}, obfuscated: []string{"ip"}})
	d := diff.Compare(load(t, a), load(t, b))
	if !d.HostsDiffer || !d.ObfuscationDiffers {
		t.Errorf("hosts differ %v, obfuscation differs %v", d.HostsDiffer, d.ObfuscationDiffers)
	}
	if d.BundleStatus == nil || d.BundleStatus.Old != "complete" || d.BundleStatus.New != "partial" {
		t.Errorf("bundle status %+v", d.BundleStatus)
	}
	wantHas(t, "collectors", d.Collectors, diff.ValueChange{Name: "kubelet", Old: "ok", New: "timeout"})
	var text bytes.Buffer
	if err := diff.WriteText(&text, d, diff.Width); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"WARNING: the bundles come from different hosts (node1, node2)", "obfuscated differently (none / ip)", "kubelet: ok → timeout", "bundle: complete → partial"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// Severity changes, restarts, growth and versions, on snapshots built by
// hand: each case changes one thing.
func TestCompareCases(t *testing.T) {
	base := func() *diff.Snapshot {
		return &diff.Snapshot{
			Report:   &analyze.Report{Hostname: "n", Findings: []analyze.Finding{{ID: "x", Subject: "s", Severity: analyze.Info}}},
			Manifest: &bundle.Manifest{Settings: bundle.Settings{SinceSeconds: 3600}}, Hostname: "n", Kernel: "6.1",
			HostMounts: map[string]string{"/": "ext4"}, ForeignDevices: map[string]string{}, Hung: map[string]bool{},
			DState: map[string]string{}, Pods: map[string]diff.Pod{"u1": {Namespace: "ns", Name: "p", Phase: "Running"}},
			Containers: map[string]uint32{"ns/p/c": 0}, Dirs: map[string]uint64{"/var/lib/kubelet/pods": 1000},
			Deleting: map[string]uint64{"/var/lib/kubelet/pods": 0}, Runtimes: map[string]string{},
			Seen: map[string]bool{"mounts": true, "tasks": true, "pods": true, "containers": true, "dirshape": true},
		}
	}
	cases := []struct {
		name   string
		change func(*diff.Snapshot)
		worse  bool
		check  func(*diff.Diff) bool
	}{
		{"severity rises", func(s *diff.Snapshot) { s.Report.Findings[0].Severity = analyze.Warning }, true,
			func(d *diff.Diff) bool {
				return len(d.FindingsChanged) == 1 && d.FindingsChanged[0].New == analyze.Warning
			}},
		{"severity falls", func(s *diff.Snapshot) {
			s.Report.Findings[0].Severity = analyze.Info
		}, false, func(d *diff.Diff) bool {
			return len(d.FindingsChanged) == 1 && d.FindingsChanged[0].Old == analyze.Critical && d.FindingsChanged[0].New == analyze.Info
		}},
		{"new info finding", func(s *diff.Snapshot) {
			s.Report.Findings = append(s.Report.Findings, analyze.Finding{ID: "y", Severity: analyze.Info})
		}, false, func(d *diff.Diff) bool { return len(d.FindingsNew) == 1 }},
		{"container restarted", func(s *diff.Snapshot) { s.Containers["ns/p/c"] = 3 }, false,
			func(d *diff.Diff) bool {
				return len(d.ContainerRestart) == 1 && d.ContainerRestart[0].New == 3
			}},
		{"pod phase", func(s *diff.Snapshot) {
			s.Pods["u1"] = diff.Pod{Namespace: "ns", Name: "p", Phase: "Failed"}
		}, false,
			func(d *diff.Diff) bool {
				return len(d.PodPhaseChanges) == 1 && d.PodPhaseChanges[0] == diff.ValueChange{Name: "ns/p", Old: "Running", New: "Failed"}
			}},
		{"directory grows a little: not reported", func(s *diff.Snapshot) { s.Dirs["/var/lib/kubelet/pods"] = 1050 }, false,
			func(d *diff.Diff) bool { return !d.Changed() }},
		{"directory grows", func(s *diff.Snapshot) { s.Dirs["/var/lib/kubelet/pods"] = 70000 }, false,
			func(d *diff.Diff) bool { return len(d.DirGrowth) == 1 && d.DirGrowth[0].New == 70000 }},
		{".deleting~ appears", func(s *diff.Snapshot) { s.Deleting["/var/lib/kubelet/pods"] = 7 }, false,
			func(d *diff.Diff) bool { return len(d.DeletingChange) == 1 && d.DeletingChange[0].New == 7 }},
		{"kernel upgraded", func(s *diff.Snapshot) { s.Kernel = "6.12" }, false,
			func(d *diff.Diff) bool {
				return len(d.Versions) == 1 && d.Versions[0] == diff.ValueChange{Name: "kernel", Old: "6.1", New: "6.12"}
			}},
		{"a longer log window", func(s *diff.Snapshot) {
			s.Manifest = &bundle.Manifest{Settings: bundle.Settings{SinceSeconds: 86400}}
			s.Report.Signatures = map[string]int{"teardown-busy": 40}
		}, false, func(d *diff.Diff) bool {
			var b strings.Builder
			_ = diff.WriteText(&b, d, 100)
			return d.LogWindowDiffers && len(d.Signatures) == 1 && strings.Contains(b.String(), "the log windows differ (--since 1h0m0s and 24h0m0s)")
		}},
		{"no task list in the new bundle", func(s *diff.Snapshot) { delete(s.Seen, "tasks"); s.DState = map[string]string{} }, false,
			func(d *diff.Diff) bool { return len(d.Notes) == 1 && len(d.DStateGone) == 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := base(), base()
			if c.name == "severity falls" {
				a.Report.Findings[0].Severity = analyze.Critical
			}
			if c.name == "no task list in the new bundle" {
				a.DState["12 kubelet"] = "ceph_mdsc_do_request"
			}
			c.change(b)
			d := diff.Compare(a, b)
			if d.Worse != c.worse || !c.check(d) {
				t.Errorf("worse=%v (want %v), diff %+v", d.Worse, c.worse, d)
			}
		})
	}
}

// A truncated bundle and a hostile one are refused with the readers' own
// words; nothing is compared.
func TestRefusesTruncatedAndHostile(t *testing.T) {
	good := makeBundle(t, fixture(t, "healthy"), bundleOpts{})
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.tar.gz")
	if err := os.WriteFile(cut, raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = diff.Load(context.Background(), cut)
	if !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), cut) ||
		!(strings.Contains(err.Error(), "truncated") || strings.Contains(err.Error(), "unexpected EOF")) {
		t.Errorf("truncated bundle: %v", err)
	}

	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(t.TempDir(), "evil.tar.gz")
	if err := os.WriteFile(evil, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = diff.Load(context.Background(), evil)
	if !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("hostile bundle: %v", err)
	}
}

// A bundle whose file differs from its manifest's checksum is refused as
// validate refuses it, without bundle.ErrInvalid (whose exit status, 3,
// means "worse" for diff).
func TestRefusesInvalid(t *testing.T) {
	good := makeBundle(t, fixture(t, "healthy"), bundleOpts{})
	c, err := bundle.ReadAll(context.Background(), good, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same manifest over other bytes of one file.
	staging := t.TempDir()
	for name, b := range c.Files {
		if name == "processes/tasks.json" {
			b = append([]byte(nil), b...)
			b[len(b)/2] ^= 1
		}
		p := filepath.Join(staging, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.tar.gz")
	if _, err := bundle.Write(context.Background(), bad, bundle.Gzip, c.Manifest, staging, c.Manifest.StartedAt); err != nil {
		t.Fatal(err)
	}
	_, err = diff.Load(context.Background(), bad)
	if !errors.Is(err, diff.ErrInvalid) || errors.Is(err, bundle.ErrInvalid) || !strings.Contains(err.Error(), "processes/tasks.json: sha256") {
		t.Errorf("tampered bundle: %v", err)
	}
}

// A collector file that does not decode is named, not fatal.
func TestUndecodableFileIsNamed(t *testing.T) {
	files := fixture(t, "healthy")
	files["processes/tasks.json"] = []byte(`[{"pid": 1, "state": `)
	b := makeBundle(t, files, bundleOpts{})
	s := load(t, b)
	if s.Seen["tasks"] || len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0], "processes/tasks.json: could not be decoded") {
		t.Errorf("seen %v, skipped %q", s.Seen, s.Skipped)
	}
}
