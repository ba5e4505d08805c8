package analyze_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// kubeletTasks is a process list with one kubelet, pid, started at start.
func kubeletTasks(t *testing.T, pid int, start time.Time, cmdline ...string) []byte {
	t.Helper()
	b, err := json.Marshal([]layout.Task{
		{PID: 1, TID: 1, Comm: "systemd", State: "S", MountNS: 4026531840},
		{PID: pid, TID: pid, PPID: 1, Comm: "kubelet", State: "S", StartTime: start, MountNS: 4026531840, Cmdline: cmdline},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A kubelet restarted at 09:05: its predecessor (pid 4123) logged a stuck
// PLEG and a volume's TearDown failing with EBUSY; the running one (pid
// 5210) logged its start, version and the PLEG line every start logs. Lines
// in the form the journal collector writes (short-iso-precise).
func TestLogsOfAnEarlierKubeletInstance(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 5, 0, 0, time.UTC)
	earlier := strings.Join([]string{
		`2026-11-21T08:40:00.000000+0000 node1 kubelet[4123]: E1121 08:40:00.000000    4123 kubelet.go:2431] "Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s"`,
		`2026-11-21T08:41:00.000000+0000 node1 kubelet[4123]: E1121 08:41:00.000000    4123 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/hostpath.csi.k8s.io^vol-7 podName:0a1b nodeName:}" failed. No retries permitted until 2026-11-21 08:43:02 +0000 UTC m=+881.4 (durationBeforeRetry 2m2s). Error: UnmountVolume.TearDown failed for volume "data" (UniqueName: "kubernetes.io/csi/hostpath.csi.k8s.io^vol-7") pod "0a1b" (UID: "0a1b") : kubernetes.io/csi: failed to remove dir [/var/lib/kubelet/pods/0a1b/volumes/kubernetes.io~csi/pvc-7/mount]: remove /var/lib/kubelet/pods/0a1b/volumes/kubernetes.io~csi/pvc-7/mount: device or resource busy`,
	}, "\n") + "\n"
	current := strings.Join([]string{
		`2026-11-21T09:05:00.100000+0000 node1 kubelet[5210]: I1121 09:05:00.100000    5210 server.go:530] "Kubelet version" kubeletVersion="v1.34.4"`,
		`2026-11-21T09:05:03.000000+0000 node1 kubelet[5210]: I1121 09:05:03.000000    5210 kubelet.go:2544] "Skipping pod synchronization" err="PLEG is not healthy: pleg has yet to be successful"`,
	}, "\n") + "\n"
	files := func(log string) map[string][]byte {
		return map[string][]byte{
			"host/summary.json":    []byte(`{"hostname":"node1"}`),
			"processes/tasks.json": kubeletTasks(t, 5210, start, "/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"),
			"kubelet/healthz.txt":  []byte("[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"),
			"journal/kubelet.log":  []byte(log),
		}
	}
	r := analyzeFiles(t, files(earlier+current))
	if r.AtLeast(analyze.Warning) {
		t.Errorf("an earlier kubelet's lines make a warning:\n%s", dump(r))
	}
	if r.KubeletVersion != "v1.34.4" || !strings.Contains(r.KubeletVersionFrom, "start line") {
		t.Errorf("kubelet version %q from %q", r.KubeletVersion, r.KubeletVersionFrom)
	}
	f := only(t, r, "earlier-log-lines")
	if f.Severity != analyze.Info || f.Subject != "earlier" {
		t.Errorf("%s %s", f.Severity, f.Subject)
	}
	wantIn(t, "summary", f.Summary, "earlier: 2 log lines", "pleg-unhealthy", "teardown-busy", "an earlier kubelet (pid 4123), not the running one (pid 5210)")
	wantIn(t, "evidence", evidenceText(f), "pleg was last seen active", "device or resource busy")
	if n := r.Signatures["teardown-busy"]; n != 0 {
		t.Errorf("the earlier instance's lines are counted as current: %v", r.Signatures)
	}

	// The same EBUSY line written by the running kubelet is the incident.
	now := strings.ReplaceAll(strings.ReplaceAll(strings.SplitAfter(earlier, "\n")[1], "kubelet[4123]", "kubelet[5210]"), "2026-11-21T08:41", "2026-11-21T09:06")
	r = analyzeFiles(t, files(current+now))
	if tb := only(t, r, "volume-teardown-busy"); tb.Severity != analyze.Warning {
		t.Errorf("the running kubelet's EBUSY: %s", tb.Severity)
	}
	if len(findings(r, "earlier-log-lines")) != 0 {
		t.Errorf("current lines set aside:\n%s", dump(r))
	}
}

// A kubelet logging to a file (no journal prefix, a klog stamp in the
// node's unknown zone): a line is earlier than the running kubelet only
// when it is older than its start by more than any zone's offset.
func TestKlogFileLinesBeforeKubeletStart(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 5, 0, 0, time.UTC)
	for _, tc := range []struct {
		stamp   string
		earlier bool
	}{{"E1120 16:00:00.000000", true}, {"E1121 06:00:00.000000", false}} {
		log := tc.stamp + `    4123 kubelet.go:2431] "Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s"` + "\n"
		r := analyzeFiles(t, map[string][]byte{
			"host/summary.json":    []byte(`{"hostname":"node1"}`),
			"processes/tasks.json": kubeletTasks(t, 5210, start, "/usr/bin/kubelet"),
			"journal/kubelet.log":  []byte(log),
		})
		if got := len(findings(r, "kubelet-pleg-unhealthy")) == 0; got != tc.earlier {
			t.Errorf("%s: earlier=%v, want %v:\n%s", tc.stamp, got, tc.earlier, dump(r))
		}
		if tc.earlier {
			wantIn(t, "earlier", only(t, r, "earlier-log-lines").Summary, "written before the running kubelet (pid 5210) started at 2026-11-21T09:05:00Z")
		}
	}
}

// Incident 002's kubelet lines about /dev/rbd3 are evidence for the rbd3
// held in another namespace only when they are newer than that rbd3: a
// filesystem on it mounted (its jbd2 thread started) after them means the
// name was used before by another device.
func TestDeviceLinesOlderThanTheDevice(t *testing.T) {
	files := fixture(t, "incident002-rbd-held-in-namespace")
	r := analyzeFiles(t, files)
	f := only(t, r, "mount-held-in-foreign-namespace")
	wantIn(t, "current device", f.Summary, "keeps failing")

	files = fixture(t, "incident002-rbd-held-in-namespace")
	var tasks []layout.Task
	if err := json.Unmarshal(files["processes/tasks.json"], &tasks); err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		if tasks[i].Comm == "jbd2/rbd3-8" {
			// Months after the log's July lines.
			tasks[i].StartTime = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
		}
	}
	b, err := json.Marshal(tasks)
	if err != nil {
		t.Fatal(err)
	}
	files["processes/tasks.json"] = b
	r = analyzeFiles(t, files)
	f = only(t, r, "mount-held-in-foreign-namespace")
	if strings.Contains(f.Summary, "keeps failing") || strings.Contains(evidenceText(f), "UnmountDevice failed") {
		t.Errorf("lines older than the device are its evidence: %s\n%s", f.Summary, evidenceText(f))
	}
	e := only(t, r, "earlier-log-lines")
	wantIn(t, "set aside", e.Summary+evidenceText(e), "about an earlier device named rbd3", "UnmountDevice failed")
	if len(findings(r, "volume-unmount-device-failed")) != 0 {
		t.Errorf("the old lines became a finding of their own:\n%s", dump(r))
	}
}

// A line about another node (a copied log, a controller's) is not evidence
// for this one; the node's name is the one the kubelet runs pods under.
func TestLinesNamingAnotherNode(t *testing.T) {
	pods := []byte(`{"kind":"PodList","items":[{"metadata":{"name":"web-0","namespace":"default","uid":"3c6f1b2a-0f4e-4d7e-9a51-6d2f7a8b9c01"},"spec":{"nodeName":"node-a"},"status":{"phase":"Running"}}]}`)
	line := func(node string) []byte {
		return []byte(`2026-11-21T09:00:00.000000+0000 node-a kubelet[812]: E1121 09:00:00.000000     812 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/rbd.csi.ceph.com^0001-0009 podName: nodeName:` + node + `}" failed. No retries permitted until 2026-11-21 09:00:01 +0000 UTC m=+1.0 (durationBeforeRetry 500ms). Error: UnmountDevice failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/rbd.csi.ceph.com^0001-0009") on node "` + node + `" : rbd: unmap failed: (16) Device or resource busy` + "\n")
	}
	for _, tc := range []struct {
		node  string
		other bool
	}{{"node-b", true}, {"node-a", false}, {"NODE-A.example.internal", false}} {
		r := analyzeFiles(t, map[string][]byte{
			"host/summary.json":   []byte(`{"hostname":"node-a"}`),
			"kubelet/pods.json":   pods,
			"journal/kubelet.log": line(tc.node),
		})
		if got := len(findings(r, "volume-unmount-device-failed")) == 0; got != tc.other {
			t.Errorf("node %s: set aside=%v, want %v:\n%s", tc.node, got, tc.other, dump(r))
		}
		if tc.other {
			e := only(t, r, "earlier-log-lines")
			if e.Subject != "other-node" {
				t.Errorf("subject %s", e.Subject)
			}
			wantIn(t, "other node", e.Summary, "about node node-b, not this node (node-a")
		}
	}
}

// With the process list read and no kubelet in it, the kubelet's lines
// are a gone instance's: listed as earlier, not as the node's state (here
// an e2e cluster's kubelet that had stopped 30 s before the run).
func TestKubeletLinesWithNoKubeletRunning(t *testing.T) {
	tasks, err := json.Marshal([]layout.Task{{PID: 1, TID: 1, Comm: "systemd", State: "S", MountNS: 4026531840}})
	if err != nil {
		t.Fatal(err)
	}
	line := `2026-11-21T09:17:44.360127+0000 node1 kubelet[29504]: E1121 09:17:44.360075   29504 kubelet_volumes.go:263] "There were many similar errors. Turn up verbosity to see them." err="orphaned pod \"5d1c7a3e-2b4f-4c6d-8e9a-0f1b2c3d4e21\" found, but volume paths are still present on disk" numErrs=1` + "\n"
	files := map[string][]byte{"host/summary.json": []byte(`{"hostname":"node1"}`), "journal/kubelet.log": []byte(line)}
	if r := analyzeFiles(t, files); len(findings(r, "orphaned-pod-volume-paths")) != 1 {
		t.Errorf("without a process list the line is current:\n%s", dump(r))
	}
	files = map[string][]byte{"host/summary.json": []byte(`{"hostname":"node1"}`), "journal/kubelet.log": []byte(line), "processes/tasks.json": tasks}
	r := analyzeFiles(t, files)
	if r.AtLeast(analyze.Warning) {
		t.Errorf("a gone kubelet's line is a warning:\n%s", dump(r))
	}
	wantIn(t, "earlier", only(t, r, "earlier-log-lines").Summary, "a kubelet that no longer runs")
}

// A real v1.34.4 kubelet restarted on the e2e cluster: its journal holds
// the start of pid 15795 and of the running pid 21824, each logging the
// "pleg has yet to be successful" line every start logs. The node is
// healthy. A stuck-PLEG line (the real start line with the error a stuck
// relist gives) is history when pid 15795 wrote it and a warning when the
// running kubelet did.
func TestRealRestartedKubelet(t *testing.T) {
	const startLine = `err="[container runtime status check may not have completed yet, PLEG is not healthy: pleg has yet to be successful]"`
	const stuck = `err="PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s"`
	files := fixture(t, "kubelet-v1.34-restarted")
	r := analyzeFiles(t, files)
	if r.AtLeast(analyze.Warning) {
		t.Errorf("a healthy restarted kubelet gets a warning:\n%s", dump(r))
	}
	if r.KubeletVersion != "v1.34.4" || r.KubeletVersionFrom != "kubernetes_build_info in kubelet/metrics.txt" {
		t.Errorf("version %q from %q", r.KubeletVersion, r.KubeletVersionFrom)
	}

	// Without metrics (a run without the kubelet's credentials): the
	// running instance's own start line, not the earlier one's.
	files = fixture(t, "kubelet-v1.34-restarted")
	delete(files, "kubelet/metrics.txt")
	log := string(files["journal/kubelet.log"])
	files["journal/kubelet.log"] = []byte(strings.Replace(log, `kubelet[15795]: I1123 22:25:53.283195   15795 server.go:529] "Kubelet version" kubeletVersion="v1.34.4"`,
		`kubelet[15795]: I1123 22:25:53.283195   15795 server.go:529] "Kubelet version" kubeletVersion="v1.33.9"`, 1))
	r = analyzeFiles(t, files)
	if r.KubeletVersion != "v1.34.4" || !strings.Contains(r.KubeletVersionFrom, "start line") {
		t.Errorf("without metrics: version %q from %q", r.KubeletVersion, r.KubeletVersionFrom)
	}

	for _, tc := range []struct {
		pid     string
		current bool
	}{{"15795", false}, {"21824", true}} {
		files = fixture(t, "kubelet-v1.34-restarted")
		lines := strings.SplitAfter(string(files["journal/kubelet.log"]), "\n")
		edited := 0
		for i, l := range lines {
			if strings.Contains(l, "kubelet["+tc.pid+"]") && strings.Contains(l, startLine) {
				lines[i] = strings.Replace(l, startLine, stuck, 1)
				edited++
			}
		}
		if edited != 1 {
			t.Fatalf("pid %s: %d start PLEG lines in the fixture, want 1", tc.pid, edited)
		}
		files["journal/kubelet.log"] = []byte(strings.Join(lines, ""))
		r = analyzeFiles(t, files)
		pleg := findings(r, "kubelet-pleg-unhealthy")
		if (len(pleg) == 1) != tc.current {
			t.Errorf("pid %s: %d kubelet-pleg-unhealthy findings, want current=%v:\n%s", tc.pid, len(pleg), tc.current, dump(r))
		}
		if !tc.current {
			wantIn(t, "earlier", only(t, r, "earlier-log-lines").Summary, "an earlier kubelet (pid 15795), not the running one (pid 21824)")
		}
	}
}

// A log source that ignores --since (a rotated file, the kernel ring
// buffer) may hold lines older than the window: they are history.
func TestLinesOlderThanTheWindow(t *testing.T) {
	// The run started 2026-11-21T09:18:14Z with --since 1h.
	hung := func(stamp string) []byte {
		return []byte(stamp + ` node1 kernel: INFO: task kworker/u8:2:1234 blocked for more than 120 seconds.` + "\n")
	}
	for _, tc := range []struct {
		stamp   string
		earlier bool
	}{{"2026-11-21T07:00:00.000000+0000", true}, {"2026-11-21T08:30:00.000000+0000", false}} {
		r := analyzeFiles(t, map[string][]byte{
			"_manifest.json":     []byte(`{"settings":{"since_seconds":3600}}`),
			"host/summary.json":  []byte(`{"hostname":"node1"}`),
			"journal/kernel.log": hung(tc.stamp),
		})
		if got := len(findings(r, "kernel-hung-task")) == 0; got != tc.earlier {
			t.Errorf("%s: earlier=%v, want %v:\n%s", tc.stamp, got, tc.earlier, dump(r))
		}
		if tc.earlier {
			wantIn(t, "window", only(t, r, "earlier-log-lines").Summary, "older than the collection window (from 2026-11-21T08:18:14Z)")
		}
	}
}
