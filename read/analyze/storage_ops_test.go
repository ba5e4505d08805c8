package analyze_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// A CSI node plugin's log: the driver's own error about a volume, in a
// wording no signature knows, is a finding naming the volume, its
// operation and its newest error; its severity comes from state.
const podLog = "csi/podlogs/kube-system_acme-csi-node-x7k2p/acme-plugin/0.log"

func driverFiles(lines ...string) map[string][]byte {
	return map[string][]byte{
		"host/summary.json": []byte(`{"hostname":"node1"}`),
		podLog:              []byte(strings.Join(lines, "\n") + "\n"),
	}
}

func TestDriverErrorIsAFinding(t *testing.T) {
	stage := `2026-11-21T09:10:0%dZ stderr F E1121 09:10:0%d.000000       1 utils.go:101] "GRPC error" err="rpc error: code = Internal desc = frobnicating the widget of volume \"acme-7f3e1c\" broke: zorp"`
	call := `2026-11-21T09:10:0%dZ stderr F I1121 09:10:0%d.000000       1 utils.go:95] GRPC call: /csi.v1.Node/NodeStageVolume`
	req := `2026-11-21T09:10:0%dZ stderr F I1121 09:10:0%d.000000       1 utils.go:96] GRPC request: {"staging_target_path":"/var/lib/kubelet/plugins/kubernetes.io/csi/acme.example.com/abc/globalmount","volume_id":"acme-7f3e1c"}`
	at := func(f string, s int) string { return strings.ReplaceAll(f, "%d", string(rune('0'+s))) }

	// Still failing at the end of its log: a warning, with the object,
	// the operation and the error verbatim.
	r := analyzeFiles(t, driverFiles(at(call, 1), at(req, 1), at(stage, 2), at(call, 5), at(req, 5), at(stage, 6)))
	f := only(t, r, "csi-node-operation-failed")
	if f.Subject != "acme-7f3e1c" || f.Severity != analyze.Warning {
		t.Errorf("subject %q severity %s:\n%s", f.Subject, f.Severity, dump(r))
	}
	wantIn(t, "summary", f.Summary, "stage of volume acme-7f3e1c fails (2 times", "still failing at the end of the evidence")
	wantIn(t, "explanation", f.Explanation, `broke: zorp`, "gRPC code Internal")

	// A later success of the same operation on the volume: info, saying so.
	ok := `2026-11-21T09:10:09Z stderr F I1121 09:10:09.000000       1 utils.go:114] GRPC response: {}`
	r = analyzeFiles(t, driverFiles(at(call, 1), at(req, 1), at(stage, 2), at(call, 8), at(req, 8), ok))
	f = only(t, r, "csi-node-operation-failed")
	if f.Severity != analyze.Info {
		t.Errorf("a stage that succeeded later is %s:\n%s", f.Severity, dump(r))
	}
	wantIn(t, "summary", f.Summary, "a later stage of it succeeded")
}

// An error that does not mend with time is a warning even when a minute
// of lines shows it and the log goes on long after.
func TestPermanentErrorWarnsWhateverItsSpan(t *testing.T) {
	lines := []string{
		`2026-11-21T09:10:01Z stderr F {"level":"error","ts":"2026-11-21T09:10:01Z","msg":"NodePublishVolume failed","volume_id":"vol-0a1b2c3d4e5f60718","error":"read /dev/xvdf: input/output error"}`,
		`2026-11-21T09:59:00Z stderr F {"level":"info","ts":"2026-11-21T09:59:00Z","msg":"probe ok"}`,
	}
	r := analyzeFiles(t, driverFiles(lines...))
	f := only(t, r, "csi-node-operation-failed")
	if f.Severity != analyze.Warning || f.Subject != "vol-0a1b2c3d4e5f60718" {
		t.Errorf("%s %q:\n%s", f.Severity, f.Subject, dump(r))
	}
	wantIn(t, "summary", f.Summary, "permanent by its nature (EIO)")

	// A transient error whose retries stopped long before the log ends
	// is info.
	lines[0] = strings.ReplaceAll(lines[0], "read /dev/xvdf: input/output error", "context deadline exceeded")
	r = analyzeFiles(t, driverFiles(lines...))
	if f := only(t, r, "csi-node-operation-failed"); f.Severity != analyze.Info {
		t.Errorf("a transient error that stopped 49 minutes before the log ends is %s", f.Severity)
	}
}

// The upstream csi-driver-host-path logs every call with its result; an
// empty Error is a success and a healthy node stays silent.
func TestHostpathSuccessLinesAreSilent(t *testing.T) {
	var lines []string
	for i, m := range []string{"NodeStageVolume", "NodePublishVolume", "NodeGetVolumeStats", "NodeUnpublishVolume", "NodeUnstageVolume"} {
		lines = append(lines, `2026-11-21T09:10:0`+string(rune('1'+i))+`Z stderr F I1121 09:10:01.000000       1 server.go:117] gRPCCall: {"Method":"/csi.v1.Node/`+m+`","Request":{"volume_id":"4b7f2d7e-1a2b-11ee-8c3d-0242ac120002","target_path":"/var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f/mount"},"Response":{},"Error":"","FullError":null}`)
	}
	r := analyzeFiles(t, driverFiles(lines...))
	if len(r.Findings) != 0 {
		t.Errorf("a healthy driver's success lines make findings:\n%s", dump(r))
	}
}

// The kubelet's lines logged by its wrapper (k0s runs the kubelet as a
// child and logs its output under its own pid, wrapped in logfmt) are the
// running kubelet's, not an earlier instance's.
func TestKubeletLinesOfAWrapperAreCurrent(t *testing.T) {
	start := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	tasks, err := json.Marshal([]layout.Task{
		{PID: 1, TID: 1, Comm: "systemd", State: "S", MountNS: 4026531840},
		{PID: 3011, TID: 3011, PPID: 1, Comm: "k0s", State: "S", StartTime: start, MountNS: 4026531840, Cmdline: []string{"/usr/local/bin/k0s", "worker"}},
		{PID: 3050, TID: 3050, PPID: 3011, Comm: "kubelet", State: "S", StartTime: start, MountNS: 4026531840, Cmdline: []string{"/var/lib/k0s/bin/kubelet", "--root-dir=/var/lib/k0s/kubelet", "--kubeconfig=/var/lib/k0s/kubelet.conf"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	line := `2026-11-21T09:10:0%dZ node1 k0s[3011]: time="2026-11-21 09:10:0%d" level=info msg="E1121 09:10:0%d.000000    3050 nestedpendingoperations.go:348] Operation for \"{volumeName:kubernetes.io/csi/acme.example.com^acme-7f3e1c podName: nodeName:}\" failed. No retries permitted until 2026-11-21 09:12:03 (durationBeforeRetry 2m2s). Error: MountVolume.MountDevice failed for volume \"pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f\" (UniqueName: \"kubernetes.io/csi/acme.example.com^acme-7f3e1c\") pod \"web-0\" (UID: \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\") : rpc error: code = Internal desc = frobnicating failed" component=kubelet stream=stderr`
	at := func(s int) string { return strings.ReplaceAll(line, "%d", string(rune('0'+s))) }
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json":    []byte(`{"hostname":"node1"}`),
		"processes/tasks.json": tasks,
		"journal/k0s.log":      []byte(at(1) + "\n" + at(5) + "\n"),
	})
	if len(findings(r, "earlier-log-lines")) != 0 {
		t.Errorf("the wrapper's lines of the running kubelet are read as history:\n%s", dump(r))
	}
	var named bool
	for _, f := range r.Findings {
		if f.Severity >= analyze.Warning && strings.Contains(f.Subject+f.Summary, "acme-7f3e1c") {
			named = true
		}
	}
	if !named {
		t.Errorf("no warning names the volume:\n%s", dump(r))
	}
}

// A runtime's failure to remove a pod sandbox names the sandbox: a CNI
// delete failing holds no volume and is info; a network namespace kept
// busy by a mount blocks the sandbox's removal and warns, under the
// runtime's removal, not a container rootfs.
func TestSandboxRemovalNamesTheSandbox(t *testing.T) {
	const id = "9a8b7c6d5e4f30211a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7081"
	files := func(line string) map[string][]byte {
		return map[string][]byte{
			"host/summary.json":      []byte(`{"hostname":"node1"}`),
			"journal/containerd.log": []byte(line + "\n"),
		}
	}
	r := analyzeFiles(t, files(`Nov 21 09:10:01 node1 containerd[700]: time="2026-11-21T09:10:01.123456789Z" level=error msg="StopPodSandbox for \"`+id+`\" failed" error="failed to destroy network for sandbox \"`+id+`\": plugin type=\"bridge\" failed (delete): netplugin failed"`))
	f := only(t, r, "container-remove-failed")
	if f.Subject != id || f.Severity != analyze.Info {
		t.Errorf("subject %q severity %s:\n%s", f.Subject, f.Severity, dump(r))
	}
	wantIn(t, "summary", f.Summary, "sandbox removal", "network teardown")

	const ns = "/var/run/netns/cni-11112222-3333-4444-5555-666677778888"
	r = analyzeFiles(t, files(`Nov 21 09:10:01 node1 containerd[700]: time="2026-11-21T09:10:01.123456789Z" level=error msg="PodSandboxStatus for \"`+id+`\" failed" error="failed to get sandbox ip: check network namespace closed: remove netns: unlinkat `+ns+`: device or resource busy"`))
	f = only(t, r, "container-remove-failed")
	if f.Severity != analyze.Warning || !strings.Contains(f.Subject+f.Summary, ns) {
		t.Errorf("a busy netns: %s %q:\n%s", f.Severity, f.Subject, dump(r))
	}
	for _, g := range r.Findings {
		if g.ID == "container-rootfs-busy" {
			t.Errorf("a network namespace read as a container rootfs: %s", g.Summary)
		}
	}
}

// iscsid's own lines of a connection failing (as rsyslog writes them to
// /var/log/messages) are read as the kernel's are; another program's
// line claiming them is not.
func TestISCSIDConnectionErrors(t *testing.T) {
	files := func(ident string) map[string][]byte {
		return map[string][]byte{
			"host/summary.json": []byte(`{"hostname":"node1"}`),
			"journal/messages": []byte(`Nov 21 09:10:01 node1 ` + ident + `[1056]: Kernel reported iSCSI connection 4:0 error (1020 - ISCSI_ERR_TCP_CONN_CLOSE: TCP connection closed) state (3)
Nov 21 09:10:08 node1 ` + ident + `[1056]: connect to 10.20.30.40:3260 failed (Connection refused)
`),
		}
	}
	r := analyzeFiles(t, files("iscsid"))
	named := map[string]bool{}
	for _, f := range r.Findings {
		if f.ID == "iscsi-connection-failed" && f.Severity == analyze.Warning {
			named[f.Subject] = true
		}
	}
	if !named["4:0"] || !named["10.20.30.40"] {
		t.Errorf("iscsid's connection errors not named (%v):\n%s", named, dump(r))
	}
	for _, g := range analyzeFiles(t, files("logger")).Findings {
		if g.ID == "iscsi-connection-failed" {
			t.Errorf("another program's line read as iscsid's: %s", g.Summary)
		}
	}
}

// umount's output the kubelet quotes on a line of its own (its error's
// head cut from the excerpt) is the kubelet's unmount failing on the
// volume the path names: the writer is the kubelet by its prefix.
func TestKubeletQuotedUmountOutputIsItsUnmount(t *testing.T) {
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json": []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(`Nov 21 09:10:01 node1 kubelet[812]: Output: umount: can't unmount /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f/mount: Invalid argument
`),
	})
	f := only(t, r, "unmount-failed")
	wantIn(t, "summary", f.Subject+" "+f.Summary, "pvc-5d1e2f3a-1b2c-4d5e-8f90-0a1b2c3d4e5f")
}

// The kubelet's in-tree volume plugin failing a mount, with no CSI call
// in its line, is the kubelet's mount failing even when a CSI driver's
// wording in the catalogue matches its words (here "staging" and
// "could not", the first in the node's name).
func TestInTreePluginMountIsNotACSIDriversFailure(t *testing.T) {
	const pv = "pvc-7a1b2c3d-4e5f-11ee-8a9b-0242ac120002"
	dev := "/dev/disk/by-path/ip-10.1.2.3:3260-iscsi-iqn.2020-01.com.example.store:" + pv + "-lun-0"
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json": []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(`Nov 21 09:10:01 lab-staging-pool-1 kubelet[812]: E1121 09:10:01.674565     812 iscsi_util.go:338] iscsi: failed to mount iscsi volume ` + dev +
			` [ext4] to /var/lib/kubelet/plugins/kubernetes.io/iscsi/iface-default/10.1.2.3:3260-iqn.2020-01.com.example.store:` + pv + `-lun-0, error 'fsck' found errors on device ` + dev + ` but could not correct them: fsck from util-linux 2.34
`),
	})
	for _, f := range r.Findings {
		if f.ID == "csi-node-operation-failed" {
			t.Errorf("an in-tree plugin's mount read as a CSI driver's: %s", f.Summary)
		}
	}
	f := only(t, r, "volume-mount-failed")
	wantIn(t, "summary", f.Summary, pv, "mount")
}

// The kubelet's own log file, its headers cut down by a log viewer: a
// record in it that no other program's prefix claims is the kubelet's,
// so a pod's volumes not mounting is the kubelet's mount failing.
func TestKubeletLogFileRecordIsTheKubelets(t *testing.T) {
	const uid = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json": []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(`[pod_workers.go:1298] "Error syncing pod, skipping" err="unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: context deadline exceeded" pod="shop/web-0" podUID="` + uid + `"
`),
	})
	for _, f := range r.Findings {
		if f.ID == "volume-mount-failed" || f.ID == "pod-volumes-not-mounted" {
			if strings.Contains(f.Subject+" "+f.Summary, uid) || strings.Contains(f.Subject+" "+f.Summary, "shop/web-0") {
				return
			}
		}
	}
	t.Errorf("the kubelet's mount failing not named as its own:\n%s", dump(r))
}

// Removing a directory of a pod's volume is the volume's teardown, and
// EBUSY makes it a busy teardown, whatever else the (wrapped, cut)
// record says.
func TestPodVolumeDirBusyIsATeardownBusy(t *testing.T) {
	const uid = "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d"
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json": []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(`Nov 21 09:10:01 node1 kubelet[812]: cleanup failed: remove /var/lib/kubelet/pods/` + uid + `/volumes/kubernetes.io~secret/token-abcde: device or resource busy
`),
	})
	f := only(t, r, "volume-teardown-busy")
	wantIn(t, "summary", f.Subject+" "+f.Summary, uid)
}

// multipathd's paths, in whatever checker's words: a path still down at
// the end of the journal is a warning naming it; one reinstated after is
// information, saying so.
func TestMultipathdPathState(t *testing.T) {
	files := func(lines ...string) map[string][]byte {
		return map[string][]byte{
			"host/summary.json":      []byte(`{"hostname":"node1"}`),
			"journal/multipathd.log": []byte(strings.Join(lines, "\n") + "\n"),
		}
	}
	down := `Nov 21 09:10:01 node1 multipathd[900]: mpathq: sdx - frobcheck reports path is down`
	r := analyzeFiles(t, files(down))
	f := only(t, r, "storage-operation-failing")
	if f.Subject != "/dev/sdx" || f.Severity != analyze.Warning {
		t.Errorf("subject %q severity %s:\n%s", f.Subject, f.Severity, dump(r))
	}
	wantIn(t, "summary", f.Summary, "mpathq")
	r = analyzeFiles(t, files(down, `Nov 21 09:10:31 node1 multipathd[900]: mpathq: sdx - frobcheck reports path is up`))
	f = only(t, r, "storage-operation-failing")
	if f.Severity != analyze.Info {
		t.Errorf("a path reinstated after is %s:\n%s", f.Severity, dump(r))
	}
	wantIn(t, "summary", f.Summary, "succeeded")
}

// A kernel controller's or host's state is the newest of its failure
// and its recovery: an NVMe-oF controller whose commands time out and
// whose error recovery is still reconnecting at the end of the kernel
// log is a warning naming it; the same controller reconnected after is
// information, and so is a SCSI host whose reset succeeded.
func TestKernelControllerState(t *testing.T) {
	files := func(lines ...string) map[string][]byte {
		return map[string][]byte{
			"host/summary.json": []byte(`{"hostname":"node1"}`),
			"journal/dmesg.log": []byte(strings.Join(lines, "\n") + "\n"),
		}
	}
	failing := []string{
		`[40950.767822] nvme nvme7: queue 0: timeout cid 0x4001 type 4 opcode 0x18 (Admin Cmd)`,
		`[40950.767900] nvme nvme7: starting error recovery`,
		`[40950.937368] nvme nvme7: Reconnecting in 10 seconds...`,
	}
	r := analyzeFiles(t, files(failing...))
	f := only(t, r, "storage-operation-failing")
	if f.Subject != "/dev/nvme7" || f.Severity != analyze.Warning {
		t.Errorf("subject %q severity %s:\n%s", f.Subject, f.Severity, dump(r))
	}
	r = analyzeFiles(t, files(append(failing, `[40962.017504] nvme nvme7: Successfully reconnected (1 attempt)`)...))
	for _, f := range r.Findings {
		if f.Severity >= analyze.Warning {
			t.Errorf("a controller reconnected after warns: %s %s", f.ID, f.Summary)
		}
	}
	r = analyzeFiles(t, files(
		`[  610.100000] megaraid_sas 0000:5a:00.0: [30]waiting for 65 commands to complete for scsi2`,
		`[  640.100000] megaraid_sas 0000:5a:00.0: resetting fusion adapter scsi2.`,
		`[  650.100000] megaraid_sas 0000:5a:00.0: Reset successful for scsi2.`,
	))
	for _, f := range r.Findings {
		if f.Severity >= analyze.Warning {
			t.Errorf("a host reset successfully warns: %s %s", f.ID, f.Summary)
		}
	}
}
