package csi_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/csi"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Pods of the fixture's /var/log/pods.
const (
	hostpathPodUID = "5b0f3c2e-9d1a-4e7b-8c6f-0000000000d1"
	hostpathPod    = "kube-system_csi-hostpathplugin-0_" + hostpathPodUID
	// Named after the hostpath driver's first label only: selected because
	// the kubelet knows a driver hostpath.csi.k8s.io.
	nodeAgentPod = "storage_hostpath-node-7xk2q_5b0f3c2e-9d1a-4e7b-8c6f-0000000000d2"
	// Not a CSI pod: never collected.
	webPod = "default_web-5d9c7b-abcde_5b0f3c2e-9d1a-4e7b-8c6f-0000000000d3"

	podLogBudget = 4096
	// A bearer token in a log line of the driver's previous instance.
	podLogToken = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImNzaS10ZXN0In0.c2VjcmV0LXBheWxvYWQ"
)

// criLines makes n lines in the CRI log format.
func criLines(from, n int, msg string) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "2024-07-15T03:%02d:%02d.%09dZ stderr F I0715 03:%02d:%02d.000000       1 %s %d\n", (i/60)%60, i%60, i, (i/60)%60, i%60, msg, i)
	}
	return b.String()
}

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// podLogFixture adds /var/log/pods to a csi fixture root and returns the
// contents of the files the assertions need.
func podLogFixture(t *testing.T, root string) map[string]string {
	t.Helper()
	target := "/var/lib/kubelet/pods/" + podA + "/volumes/kubernetes.io~csi/pvc-aaa/mount"
	hp := "var/log/pods/" + hostpathPod + "/"
	files := map[string]string{
		// The driver's current instance, after its restart: small, and it
		// holds the line that explains incident 004.
		hp + "hostpath/1.log": criLines(0, 3, "main.go:120] Driver: hostpath.csi.k8s.io restarted, state loaded") +
			`2024-07-15T03:49:30.123456789Z stderr F I0715 03:49:30.123456       1 nodeserver.go:257] Volume "` + vol1 + `" is not published at "` + target + `", nothing to do.` + "\n",
		// The instance before the restart: larger than what is left of
		// the budget; its end carries a token that must not survive.
		hp + "hostpath/0.log": criLines(0, 80, "server.go:101] GRPC call: /csi.v1.Node/NodeGetCapabilities") +
			"2024-07-15T03:48:59.000000000Z stderr F I0715 03:48:59.000000       1 client.go:77] calling the API server with Authorization: Bearer " + podLogToken + "\n" +
			criLines(80, 2, "main.go:200] shutting down"),
		// A rotated part of the previous instance: older than the window.
		hp + "hostpath/0.log.20240714-230000": criLines(0, 5, "older"),
		// Three instances: 2 is current, 1 previous, 0 older (not read).
		hp + "node-driver-registrar/0.log": criLines(0, 2, "registrar instance 0"),
		hp + "node-driver-registrar/1.log": criLines(0, 2, "registrar instance 1"),
		hp + "node-driver-registrar/2.log": criLines(0, 2, "registrar instance 2"),
		// Rotated: the live file, an uncompressed part, a compressed one,
		// and the kubelet's temporary file while it compresses.
		hp + "liveness-probe/0.log":                        criLines(0, 1, "liveness live"),
		hp + "liveness-probe/0.log.20240715-020000":        criLines(0, 2, "liveness rotated"),
		hp + "liveness-probe/0.log.20240715-010000.gz":     gzipped(t, criLines(0, 2, "liveness compressed")),
		hp + "liveness-probe/0.log.20240715-030000.gz.tmp": "being compressed",
		"var/log/pods/" + nodeAgentPod + "/plugin/0.log":   criLines(0, 2, "node agent"),
		"var/log/pods/" + webPod + "/nginx/0.log":          criLines(0, 2, "GET /index.html csi"),
		"var/log/pods/not-a-pod-directory/x/0.log":         "never read",
		"var/log/pods/stray-file":                          "not a directory",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func podLog(t *testing.T, inv layout.CSIInventory, pod, container string) layout.CSIPodLog {
	t.Helper()
	for _, pl := range inv.PodLogs {
		if pl.Pod == pod && pl.Container == container {
			return pl
		}
	}
	t.Fatalf("inventory keeps no logs of %s/%s: %+v", pod, container, inv.PodLogs)
	return layout.CSIPodLog{}
}

// fileNamed returns one file of a container's record.
func fileNamed(t *testing.T, pl layout.CSIPodLog, name string) layout.CSIPodLogFile {
	t.Helper()
	for _, f := range pl.Files {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("%s/%s: no file %s in %+v", pl.Pod, pl.Container, name, pl.Files)
	return layout.CSIPodLogFile{}
}

// The CSI pods' container logs are kept, newest first within a byte budget
// per container: the driver's current instance whole, the tail of the
// instance before its restart (whole lines, redacted), nothing older; a
// pod that is not a CSI pod is left alone.
func TestCSIPodLogs(t *testing.T) {
	root, proc := csiFixture(t)
	src := podLogFixture(t, root)
	supervisortest.Flags(t, "csi", stateGlobs, fmt.Sprintf("--csi-pod-log-bytes=%d", podLogBudget))
	b := supervisortest.Collect(t, "csi", collectors.Common{Root: root, Proc: proc})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	inv := csiInventory(t, b)
	if inv.PodLogDir != "/var/log/pods" {
		t.Errorf("pod log dir %q", inv.PodLogDir)
	}
	if !strings.Contains(strings.Join(inv.Drivers, ","), "hostpath.csi.k8s.io") {
		t.Errorf("drivers %q, want hostpath.csi.k8s.io among them", inv.Drivers)
	}

	// Which containers: every container of the two CSI pods, none of the
	// web pod's.
	var got []string
	for _, pl := range inv.PodLogs {
		got = append(got, pl.Namespace+"/"+pl.Pod+"/"+pl.Container)
		if pl.Namespace == "default" {
			t.Errorf("the web pod's logs were kept: %+v", pl)
		}
	}
	want := "kube-system/csi-hostpathplugin-0/hostpath kube-system/csi-hostpathplugin-0/liveness-probe " +
		"kube-system/csi-hostpathplugin-0/node-driver-registrar storage/hostpath-node-7xk2q/plugin"
	if strings.Join(got, " ") != want {
		t.Errorf("containers kept:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), want)
	}
	for name := range b.Files {
		if strings.HasPrefix(name, "csi/podlogs/") && (strings.Contains(name, "web-") || strings.Contains(name, "not-a-pod")) {
			t.Errorf("bundle holds %s", name)
		}
	}
	if !strings.Contains(strings.Join(inv.Errors, "\n"), "not-a-pod-directory") {
		t.Errorf("the malformed pod log directory is not reported: %q", inv.Errors)
	}
	if pl := podLog(t, inv, "hostpath-node-7xk2q", "plugin"); !strings.Contains(pl.Match, "hostpath.csi.k8s.io") || pl.PodUID != "5b0f3c2e-9d1a-4e7b-8c6f-0000000000d2" {
		t.Errorf("node agent pod: %+v", pl)
	}

	// The driver: 1.log whole, then the newest whole lines of 0.log that
	// fit in what is left, then nothing.
	hp := podLog(t, inv, "csi-hostpathplugin-0", "hostpath")
	if hp.PodUID != hostpathPodUID || hp.Match != `pod name contains "csi"` || hp.Dir != "/var/log/pods/"+hostpathPod+"/hostpath" {
		t.Errorf("driver container: %+v", hp)
	}
	cur, prev, rot := fileNamed(t, hp, "1.log"), fileNamed(t, hp, "0.log"), fileNamed(t, hp, "0.log.20240714-230000")
	curSrc, prevSrc := src["var/log/pods/"+hostpathPod+"/hostpath/1.log"], src["var/log/pods/"+hostpathPod+"/hostpath/0.log"]
	const bdir = "podlogs/kube-system_csi-hostpathplugin-0/hostpath/"
	if cur.Instance != "current" || cur.Restart != 1 || cur.Truncated || cur.Bytes != int64(len(curSrc)) || cur.SourceBytes != int64(len(curSrc)) || cur.File != bdir+"1.log" {
		t.Errorf("current instance's file: %+v", cur)
	}
	if got := b.File(t, "csi/"+cur.File); string(got) != curSrc {
		t.Errorf("1.log kept as %q, want it whole", got)
	}
	window := prevSrc[len(prevSrc)-(podLogBudget-len(curSrc)):]
	wantPrev := window[strings.IndexByte(window, '\n')+1:]
	if prev.Instance != "previous" || prev.Restart != 0 || !prev.Truncated || prev.Bytes != int64(len(wantPrev)) || prev.SourceBytes != int64(len(prevSrc)) || prev.File != bdir+"0.log" {
		t.Errorf("previous instance's file: %+v, want the last %d bytes", prev, len(wantPrev))
	}
	gotPrev := string(b.File(t, "csi/"+prev.File))
	wantRedacted := strings.ReplaceAll(wantPrev, podLogToken, "[REDACTED]")
	if wantRedacted == wantPrev {
		t.Fatal("the fixture's token is not inside the kept window")
	}
	if gotPrev != wantRedacted {
		t.Errorf("0.log kept as:\n%s\nwant:\n%s", gotPrev, wantRedacted)
	}
	if !b.FileEntry(t, "csi/"+prev.File).Truncated || b.FileEntry(t, "csi/"+cur.File).Truncated {
		t.Errorf("manifest truncation flags: 0.log %v, 1.log %v", b.FileEntry(t, "csi/"+prev.File).Truncated, b.FileEntry(t, "csi/"+cur.File).Truncated)
	}
	redactions := 0
	for _, n := range b.FileEntry(t, "csi/"+prev.File).Redactions {
		redactions += n
	}
	if redactions == 0 {
		t.Errorf("the manifest records no redaction in 0.log")
	}
	if rot.File != "" || rot.Bytes != 0 || !strings.Contains(rot.Skipped, "older than the newest bytes kept") {
		t.Errorf("older rotated part: %+v", rot)
	}
	if !hp.Truncated || hp.Bytes != cur.Bytes+prev.Bytes || hp.Bytes > podLogBudget {
		t.Errorf("driver container: %d bytes, truncated %v", hp.Bytes, hp.Truncated)
	}
	for name, data := range b.Raw {
		if bytes.Contains(data, []byte(podLogToken)) {
			t.Errorf("%s holds the token", name)
		}
	}

	// Three instances: the current and previous ones kept, the oldest
	// listed only.
	reg := podLog(t, inv, "csi-hostpathplugin-0", "node-driver-registrar")
	if len(reg.Files) != 3 || reg.Truncated {
		t.Errorf("registrar: %+v", reg)
	}
	for name, inst := range map[string]string{"2.log": "current", "1.log": "previous", "0.log": "older"} {
		f := fileNamed(t, reg, name)
		if f.Instance != inst || (inst == "older") != (f.File == "") {
			t.Errorf("registrar %s: %+v, want %s", name, f, inst)
		}
	}
	if got := b.File(t, "csi/podlogs/kube-system_csi-hostpathplugin-0/node-driver-registrar/1.log"); !strings.Contains(string(got), "registrar instance 1") {
		t.Errorf("registrar 1.log: %q", got)
	}

	// Rotation: the live file, then its uncompressed rotated part; the
	// compressed part listed, not read; the kubelet's temporary file
	// ignored.
	lp := podLog(t, inv, "csi-hostpathplugin-0", "liveness-probe")
	var order []string
	for _, f := range lp.Files {
		order = append(order, f.Name)
	}
	if strings.Join(order, " ") != "0.log 0.log.20240715-020000 0.log.20240715-010000.gz" {
		t.Errorf("liveness-probe files, newest first: %q", order)
	}
	if f := fileNamed(t, lp, "0.log.20240715-020000"); !f.Rotated || f.File == "" || f.Bytes != int64(len(criLines(0, 2, "liveness rotated"))) {
		t.Errorf("rotated part: %+v", f)
	}
	if f := fileNamed(t, lp, "0.log.20240715-010000.gz"); !f.Compressed || f.File != "" || !strings.Contains(f.Skipped, "compressed") {
		t.Errorf("compressed part: %+v", f)
	}
	if !lp.Truncated {
		t.Errorf("liveness-probe: a compressed part was not read, yet not marked truncated")
	}
	if !strings.Contains(b.Notes(), "of the logs of 4 containers of 2 CSI pods under csi/podlogs/") {
		t.Errorf("no note about the pod logs:\n%s", b.Notes())
	}
}

// A pod log directory on a hung mount costs one item: the other CSI pods'
// logs are still kept, and the hang is in the manifest.
func TestCSIPodLogsHungDir(t *testing.T) {
	testkit.RequireFUSE(t)
	root, proc := csiFixture(t)
	podLogFixture(t, root)
	b := csiHungRun(t, root, proc, "/var/log/pods/kube-system_csi-hung-0_5b0f3c2e-9d1a-4e7b-8c6f-0000000000d9", "podlogs-hung")
	inv := csiInventory(t, b)
	if len(inv.PodLogs) != 4 {
		t.Errorf("%d containers kept after the hang, want 4: %+v", len(inv.PodLogs), inv.PodLogs)
	}
	b.File(t, "csi/podlogs/kube-system_csi-hostpathplugin-0/hostpath/1.log")
}

// No pod log directory: nothing kept, nothing reported.
func TestCSIPodLogsAbsent(t *testing.T) {
	root, proc := csiFixture(t)
	podLogFixture(t, root)
	supervisortest.Flags(t, "csi", stateGlobs, "--csi-pod-log-dir=/var/log/elsewhere")
	b := supervisortest.Collect(t, "csi", collectors.Common{Root: root, Proc: proc})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("status %q (%s), want ok", b.Res.Status, b.Res.Error)
	}
	inv := csiInventory(t, b)
	if inv.PodLogDir != "/var/log/elsewhere" || len(inv.PodLogs) != 0 || len(inv.Errors) != 0 {
		t.Errorf("pod log dir %q, %d containers, errors %q", inv.PodLogDir, len(inv.PodLogs), inv.Errors)
	}
}

func TestParsePodLogDirName(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    csi.PodLogDirName
		wantErr string
	}{
		{in: "kube-system_csi-hostpathplugin-0_5b0f3c2e-9d1a-4e7b-8c6f-0000000000d1",
			want: csi.PodLogDirName{Namespace: "kube-system", Pod: "csi-hostpathplugin-0", UID: "5b0f3c2e-9d1a-4e7b-8c6f-0000000000d1"}},
		// A static pod: its UID is the config hash; its name holds the node's.
		{in: "kube-system_kube-apiserver-node-1.example.com_0a1b2c3d4e5f60718293a4b5c6d7e8f9",
			want: csi.PodLogDirName{Namespace: "kube-system", Pod: "kube-apiserver-node-1.example.com", UID: "0a1b2c3d4e5f60718293a4b5c6d7e8f9"}},
		{in: "a_b_c", want: csi.PodLogDirName{Namespace: "a", Pod: "b", UID: "c"}},
		{in: "", wantErr: "not namespace_pod-name_pod-uid"},
		{in: "garbage", wantErr: "not namespace_pod-name_pod-uid"},
		{in: "ns_pod", wantErr: "not namespace_pod-name_pod-uid"},
		{in: "ns_pod_uid_extra", wantErr: "not namespace_pod-name_pod-uid"},
		{in: "_pod_uid", wantErr: "not a namespace name"},
		{in: "ns__uid", wantErr: "not a pod name"},
		{in: "ns_pod_", wantErr: "not a pod UID"},
		{in: "Kube-System_pod_uid", wantErr: "not a namespace name"},
		{in: "-ns_pod_uid", wantErr: "not a namespace name"},
		{in: "ns.dotted_pod_uid", wantErr: "not a namespace name"},
		{in: strings.Repeat("n", 64) + "_pod_uid", wantErr: "not a namespace name"},
		{in: "ns_pod..x_uid", wantErr: "not a pod name"},
		{in: "ns_pod-_uid", wantErr: "not a pod name"},
		{in: "ns_po/d_uid", wantErr: "not a pod name"},
		{in: "ns_pod_u/id", wantErr: "not a pod UID"},
		{in: "ns_pod_uid\x00", wantErr: "not a pod UID"},
		{in: "ns_pod_" + strings.Repeat("u", 129), wantErr: "not a pod UID"},
	} {
		got, err := csi.ParsePodLogDirName(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.wantErr == "" && got != tc.want:
			t.Errorf("%q: %+v, want %+v", tc.in, got, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: %+v, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
		case tc.wantErr != "" && got != (csi.PodLogDirName{}):
			t.Errorf("%q: error with a result %+v", tc.in, got)
		}
	}
}

func TestParsePodLogFileName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want csi.PodLogFileName
		ok   bool
	}{
		{"0.log", csi.PodLogFileName{Restart: 0}, true},
		{"17.log", csi.PodLogFileName{Restart: 17}, true},
		{"1.log.20240715-034930", csi.PodLogFileName{Restart: 1, Rotation: "20240715-034930"}, true},
		{"1.log.20240715-034930.gz", csi.PodLogFileName{Restart: 1, Rotation: "20240715-034930", Compressed: true}, true},
		{"1.log.20240715-034930.gz.tmp", csi.PodLogFileName{}, false},
		{"1.log.20240715-034930.tmp", csi.PodLogFileName{}, false},
		{"1.log.", csi.PodLogFileName{}, false},
		{"1.log.gz", csi.PodLogFileName{}, false},
		{"1.log.tmp", csi.PodLogFileName{}, false},
		{"1.log.gz.gz", csi.PodLogFileName{}, false},
		{"1.logx", csi.PodLogFileName{}, false},
		{"01.log", csi.PodLogFileName{}, false},
		{"-1.log", csi.PodLogFileName{}, false},
		{"+1.log", csi.PodLogFileName{}, false},
		{".log", csi.PodLogFileName{}, false},
		{"1234567890.log", csi.PodLogFileName{}, false},
		{"x.log", csi.PodLogFileName{}, false},
		{"1.log.2024 07", csi.PodLogFileName{}, false},
		{"1.log.a/b", csi.PodLogFileName{}, false},
		{"stray-file", csi.PodLogFileName{}, false},
		{"", csi.PodLogFileName{}, false},
	} {
		got, ok := csi.ParsePodLogFileName(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCSIPodMatch(t *testing.T) {
	words := map[string]string{"hostpath": "hostpath.csi.k8s.io", "longhorn": "driver.longhorn.io"}
	for _, tc := range []struct {
		pod        string
		containers []string
		match      bool
	}{
		{"csi-hostpathplugin-0", []string{"hostpath"}, true},
		{"ebs-CSI-node-x", nil, true},
		{"portworx-api-x", []string{"portworx", "csi-node-driver-registrar"}, true},
		{"px-node-x", []string{"driver-registrar"}, true},
		{"hostpath-node-x", []string{"plugin"}, true},
		{"agent-x", []string{"longhorn"}, true},
		{"longhornish-x", []string{"app"}, false},
		{"web-5d9c7b-abcde", []string{"nginx", "liveness-probe"}, false},
		{"nvidia-driver-x", []string{"driver"}, false},
	} {
		got := csi.CSIPodMatch(tc.pod, tc.containers, words)
		if (got != "") != tc.match {
			t.Errorf("%s %q: %q, want a match: %v", tc.pod, tc.containers, got, tc.match)
		}
	}
	if got := csi.CSIPodMatch("hostpath-x", nil, nil); got != "" {
		t.Errorf("without drivers, matched %q", got)
	}
}

// The pod log directory's names come from the node: parsing them never
// panics, and what parses is exactly the name it came from.
func FuzzParsePodLogDirName(f *testing.F) {
	for _, s := range []string{hostpathPod, nodeAgentPod, webPod, "a_b_c", "garbage", "ns__uid", "_", "ns_pod_uid_x", "ns_a.b_c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		d, err := csi.ParsePodLogDirName(name)
		if err != nil {
			if d != (csi.PodLogDirName{}) {
				t.Fatalf("error %v with %+v", err, d)
			}
			return
		}
		if d.Namespace+"_"+d.Pod+"_"+d.UID != name {
			t.Fatalf("%q parsed as %+v", name, d)
		}
		for _, p := range []string{d.Namespace, d.Pod, d.UID} {
			if p == "" || strings.ContainsAny(p, "_/\x00") || p == "." || p == ".." {
				t.Fatalf("%q: part %q", name, p)
			}
		}
	})
}

func FuzzParsePodLogFileName(f *testing.F) {
	for _, s := range []string{"0.log", "12.log.20240715-034930", "1.log.20240715-034930.gz", "1.log.x.gz.tmp", "01.log", "1.log."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		p, ok := csi.ParsePodLogFileName(name)
		if !ok {
			if p != (csi.PodLogFileName{}) {
				t.Fatalf("not ok with %+v", p)
			}
			return
		}
		back := fmt.Sprintf("%d.log", p.Restart)
		if p.Rotation != "" {
			back += "." + p.Rotation
		}
		if p.Compressed {
			back += ".gz"
		}
		if back != name || p.Restart < 0 || (p.Compressed && p.Rotation == "") || strings.Contains(name, "/") {
			t.Fatalf("%q parsed as %+v", name, p)
		}
	})
}
