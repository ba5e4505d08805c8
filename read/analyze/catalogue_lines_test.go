package analyze_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/signatures"
	"github.com/nodesnap/nodesnap/test/skip"
)

// findingOf is the finding a line of each catalogue class becomes when it
// is the only trouble in a healthy bundle ("" for classes that are
// evidence only).
var findingOf = map[string]string{
	"teardown-busy":                        "volume-teardown-busy",
	"teardown-not-empty":                   "volume-teardown-failed",
	"teardown-failed":                      "volume-teardown-failed",
	"teardown-succeeded":                   "",
	"still-mounted-by-other-references":    "staging-mount-still-referenced",
	"unmount-device-failed":                "volume-unmount-device-failed",
	"unmap-volume-failed":                  "volume-unmount-device-failed",
	"mount-failed":                         "volume-mount-failed",
	"volume-attach-mount-timeout":          "pod-volumes-not-mounted",
	"pod-volumes-not-cleaned-up":           "pod-volumes-not-cleaned-up",
	"rmdir-volume-busy":                    "orphaned-pod-volume-paths",
	"orphaned-pod-volumes-dir-not-removed": "orphaned-pod-volume-paths",
	"orphaned-pod-volume-paths":            "orphaned-pod-volume-paths",
	"orphaned-pods-cleanup-failed":         "orphaned-pod-volume-paths",
	"orphaned-pod-remove-failed":           "orphaned-pod-volume-paths",
	"pleg-unhealthy":                       "kubelet-pleg-unhealthy",
	"syncloop-slow":                        "kubelet-syncloop-unhealthy",
	"runtime-deadline-exceeded":            "runtime-call-timeout",
	"csi-operation-exists":                 "csi-operation-already-exists",
	"csi-not-published":                    "csi-driver-not-published",
	"csi-unstage-failed":                   "csi-node-operation-failed",
	"csi-unpublish-failed":                 "csi-node-operation-failed",
	"csi-unmount-error":                    "csi-node-operation-failed",
	"unmount-failed":                       "unmount-failed",
	"umount-target-busy":                   "unmount-failed",
	"runtime-shm-busy":                     "runtime-shm-busy",
	"runtime-rootfs-not-empty":             "container-rootfs-busy",
	"iscsi-connection-error":               "iscsi-connection-failed",
	"filesystem-error":                     "filesystem-error",
	"unlinkat-busy":                        "container-rootfs-busy",
	"runtime-remove-failed":                "container-remove-failed",
	"kernel-hung-task":                     "kernel-hung-task",
	"libceph-session-lost":                 "ceph-session-lost",
	"libceph-session-established":          "",
	"nfs-not-responding":                   "nfs-server-not-responding",
	"nfs-ok":                               "",
	"transport-not-connected":              "fuse-transport-not-connected-logged",
	"csi-node-unpublish":                   "",
	"deleting-dir":                         "",
}

// TestFindingOfEveryClass: every class of the catalogue says what it
// becomes (a class added without a finding fails here).
func TestFindingOfEveryClass(t *testing.T) {
	for _, c := range signatures.Classes {
		if _, ok := findingOf[c.ID]; !ok {
			t.Errorf("class %s: no finding listed in findingOf", c.ID)
		}
	}
}

// analyzeLines analyses a healthy bundle whose kubelet log holds lines.
func analyzeLines(t *testing.T, lines ...string) *analyze.Report {
	t.Helper()
	return analyzeLinesOf(t, "kubelet", lines...)
}

// hostWriters are the catalogue's sources that write to the node's
// journal; every other source is a CSI driver, whose lines a node keeps
// in its plugin container's log.
var hostWriters = map[string]bool{"kubelet": true, "containerd": true, "dockerd": true, "cri-o": true, "mount-utils": true}

// analyzeLinesOf analyses a healthy bundle holding lines where their
// source writes them: the kubelet's journal for the kubelet and what runs
// in it (mount-utils) and the runtimes, else a CSI driver's container
// log (CRI format) — a driver's own wording never comes from the kubelet
// bare.
func analyzeLinesOf(t *testing.T, source string, lines ...string) *analyze.Report {
	t.Helper()
	files := maps.Clone(fixture(t, "healthy"))
	if hostWriters[source] {
		files["journal/kubelet.log"] = []byte(strings.Join(lines, "\n") + "\n")
	} else {
		var b strings.Builder
		for i, l := range lines {
			fmt.Fprintf(&b, "2024-01-02T03:04:%02d.678901000Z stderr F %s\n", 5+i, l)
		}
		files["csi/podlogs/kube-system_"+source+"-node-x7k2p/"+source+"/0.log"] = []byte(b.String())
	}
	rep, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// sampleObjects are the objects a rendered line may name, as a finding
// names them.
var sampleObjects = []string{signatures.SamplePodUID, signatures.SampleUniqueName, signatures.SampleVolume, signatures.SampleDevice,
	signatures.SamplePodPath, signatures.SampleStaging, signatures.SamplePodNS + "/" + signatures.SamplePodName}

// TestGeneratedLinesFindings: each catalogued format of every version,
// rendered in every log format, becomes the finding of its class, and the
// finding names the object the line names.
func TestGeneratedLinesFindings(t *testing.T) {
	skip.Short(t, "analyses one bundle per catalogued format")
	total, pass := 0, 0
	for _, f := range signatures.Formats {
		c := signatures.ByID(f.Class)
		want := findingOf[f.Class]
		if c == nil || want == "" {
			continue
		}
		var lines []string
		for _, form := range signatures.Forms {
			if l, ok := signatures.Render(f, c, form); ok {
				lines = append(lines, l)
			}
		}
		total++
		rep := analyzeLinesOf(t, f.Source, lines...)
		fs := findings(rep, want)
		if len(fs) == 0 {
			t.Errorf("%s %s %q: no %s finding; got %v\n  %s", f.Source, f.Versions, f.Format, want, ids(rep), strings.Join(lines, "\n  "))
			continue
		}
		named := false
		for _, fd := range fs {
			for _, o := range sampleObjects {
				if strings.Contains(strings.Join(lines, " "), o) && strings.Contains(fd.Subject+" "+fd.Summary, o) {
					named = true
				}
			}
		}
		// A line that names no object (the runtime's timeouts, PLEG)
		// has nothing to name.
		if !named && lineNamesObject(lines) && c.Key != signatures.KeyNone {
			t.Errorf("%s %s %q: %s finding names none of the line's objects: %s / %s", f.Source, f.Versions, f.Format, want, fs[0].Subject, fs[0].Summary)
			continue
		}
		pass++
	}
	t.Logf("generated lines to findings: %d of %d formats named with their object (%.1f %%)", pass, total, 100*float64(pass)/float64(max(total, 1)))
}

func lineNamesObject(lines []string) bool {
	for _, o := range sampleObjects {
		for _, l := range lines {
			if strings.Contains(l, o) {
				return true
			}
		}
	}
	return false
}

// TestNoEmptySubject: a line of any class that names no object at all
// still makes a finding with a subject, and no summary with a hole where
// the object goes ("pod  is terminated", "TearDown of unknown").
func TestNoEmptySubject(t *testing.T) {
	var lines []string
	for _, c := range signatures.Classes {
		// The class's own words, and what its lines need: nothing else.
		var words []string
		for _, w := range append(append([]string(nil), c.Words...), c.Needs...) {
			words = append(words, strings.Split(w, "|")[0])
		}
		lines = append(lines, "E0102 03:04:05.678901    1234 x.go:1] X"+strings.Join(words, " "))
	}
	rep := analyzeLines(t, lines...)
	if len(rep.Findings) < 10 {
		t.Fatalf("only %d findings from %d lines: %v", len(rep.Findings), len(lines), ids(rep))
	}
	for _, f := range rep.Findings {
		s := f.Summary
		if strings.TrimSpace(f.Subject) == "" && f.ID != "healthy" {
			t.Errorf("%s: empty subject (%s)", f.ID, s)
		}
		for _, hole := range []string{"  ", " unknown", "pod  ", "of  ", "()"} {
			if strings.Contains(s, hole) {
				t.Errorf("%s: summary has a hole %q: %s", f.ID, hole, s)
			}
		}
	}
}

// TestSubjectsInEveryWording: the same pod or volume is named the same way
// whichever kubelet wording carries it.
func TestSubjectsInEveryWording(t *testing.T) {
	const uid = signatures.SamplePodUID
	for _, tc := range []struct {
		line, id string
		want     []string
	}{
		{`I0101 10:00:00.000000    1234 kubelet_pods.go:915] Pod "web-0_shop(` + uid + `)" is terminated, but some volumes have not been cleaned up`,
			"pod-volumes-not-cleaned-up", []string{"shop/web-0", uid}},
		{`I0101 10:00:00.000000    1234 kubelet.go:2296] "Pod is terminated, but some volumes have not been cleaned up" pod="shop/web-0" podUID="` + uid + `"`,
			"pod-volumes-not-cleaned-up", []string{"shop/web-0", uid}},
		{`{"ts":1704103200.0,"caller":"kubelet/kubelet.go:2296","msg":"Pod is terminated, but some volumes have not been cleaned up","v":3,"pod":{"name":"web-0","namespace":"shop"},"podUID":"` + uid + `"}`,
			"pod-volumes-not-cleaned-up", []string{"shop/web-0", uid}},
		{`E0101 10:00:00.000000    1234 kubelet_volumes.go:128] Orphaned pod "` + uid + `" found, but volume paths are still present on disk.`,
			"orphaned-pod-volume-paths", []string{uid}},
		{`E0101 10:00:00.000000    1234 kubelet_volumes.go:147] Failed to remove orphaned pod "` + uid + `" dir; err: remove /var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~secret: device or resource busy`,
			"orphaned-pod-volume-paths", []string{uid}},
		// A TearDown line of a kubelet without UniqueName in its wording.
		{`E0101 10:00:00.000000    1234 reconciler.go:233] operationExecutor.UnmountVolume failed for volume "pvc-9" (spec.Name: "data") pod "` + uid + `" (UID: "` + uid + `") : UnmountVolume.TearDown failed for volume "pvc-9": unmount failed: exit status 32`,
			"volume-teardown-failed", []string{"pvc-9"}},
	} {
		rep := analyzeLines(t, tc.line)
		fs := findings(rep, tc.id)
		if len(fs) != 1 {
			t.Errorf("%s: %d %s findings; all: %v", tc.line, len(fs), tc.id, ids(rep))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(fs[0].Subject+" "+fs[0].Summary, w) {
				t.Errorf("%s: finding does not name %q: %s / %s", tc.id, w, fs[0].Subject, fs[0].Summary)
			}
		}
	}
}
