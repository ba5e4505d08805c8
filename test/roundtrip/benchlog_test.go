package roundtrip_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/skip"
)

// The kubelet journal of the large bundle, when NODESNAP_BENCH_KUBELET_LINES
// asks for one: that many lines of a busy node's kubelet, in the form the
// journal collector writes (journalctl -o short-iso-precise), in the
// wordings kubelets 1.20 to 1.32 log: the sync loop, probes, the volume
// reconciler starting, mounting and tearing down pods' volumes, containers
// killed and removed, pods crash-looping. About one line in a hundred is
// a storage error: a CSI volume's MountDevice failing with an I/O error,
// a teardown of a volume kept busy, an iSCSI login refused, pods waiting
// for their volumes, an orphaned pod's volume paths; some volumes recover
// later (their SetUp succeeds), some never do. It is the log the event
// model costs most on: every volume line and every error line is taken
// apart, not just scanned.

// kubeletLinesEnv names the number of lines; unset or 0 keeps the plain
// 100,000-line log of the benchmark as it always was.
const kubeletLinesEnv = "NODESNAP_BENCH_KUBELET_LINES"

// benchKubeletLines is the journal's size asked for (0: the plain log).
func benchKubeletLines() int {
	n, err := strconv.Atoi(os.Getenv(kubeletLinesEnv))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// benchPod is one pod of the busy node.
type benchPod struct {
	ns, name, uid, pvc, handle, ctr string
}

func benchPods(n int) []benchPod {
	nss := []string{"default", "monitoring", "payments", "kube-system", "ci"}
	apps := []string{"web", "api", "db", "cache", "worker", "grafana", "loki"}
	out := make([]benchPod, n)
	for i := range out {
		app := apps[i%len(apps)]
		out[i] = benchPod{ns: nss[i%len(nss)], name: fmt.Sprintf("%s-%d-%05x", app, i%13, i*7919%0xfffff),
			uid: benchUID(1_000_000 + i), pvc: "pvc-" + benchUID(2_000_000+i), handle: fmt.Sprintf("vol-0%015x", uint64(i)*0x9e3779b97f4a7c15>>4),
			ctr: app}
	}
	return out
}

// benchKubeletJournal writes n kubelet journal lines.
func benchKubeletJournal(w io.Writer, n int) error {
	pods := benchPods(300)
	// The pods whose volumes fail: the first 12 of those with a PVC;
	// the first half of them recover in the second half of the log.
	const failing = 12
	start := time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)
	// Ten hours of log, whatever the number of lines.
	step := 10 * time.Hour / time.Duration(max(n, 1))
	var x uint64 = 88172645463325252
	for i := 0; i < n; i++ {
		// xorshift: the same log every run.
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		t := start.Add(time.Duration(i) * step)
		p := pods[x>>8%uint64(len(pods))]
		fi := int(x >> 20 % failing)
		f := pods[fi]
		hex := fmt.Sprintf("%016x%016x%016x%016x", x, x*31, x*37, x*41)
		head := fmt.Sprintf("%s big-node kubelet[2211]: ", t.Format("2006-01-02T15:04:05.000000-07:00"))
		indent := strings.Repeat(" ", len(head))
		klog := func(level byte, file string, line int) string {
			return fmt.Sprintf("%c%s %s    2211 %s:%d] ", level, t.Format("0102"), t.Format("15:04:05.000000"), file, line)
		}
		recovered := fi < failing/2 && i > n/2
		var line string
		switch r := x % 1000; {
		case r < 150:
			line = fmt.Sprintf("%s%s\"SyncLoop (PLEG): event for pod\" pod=\"%s/%s\" event={\"ID\":\"%s\",\"Type\":\"ContainerStarted\",\"Data\":\"%s\"}\n", head, klog('I', "kubelet.go", 2426), p.ns, p.name, p.uid, hex)
		case r < 250:
			line = fmt.Sprintf("%s%s\"SyncLoop UPDATE\" source=\"api\" pods=[\"%s/%s\"]\n", head, klog('I', "kubelet.go", 2355), p.ns, p.name)
		case r < 330:
			line = fmt.Sprintf("%s%s\"Probe failed\" probeType=\"Readiness\" pod=\"%s/%s\" podUID=\"%s\" containerName=\"%s\" probeResult=\"failure\" output=\"HTTP probe failed with statuscode: 503\"\n", head, klog('I', "prober.go", 107), p.ns, p.name, p.uid, p.ctr)
		case r < 380:
			line = fmt.Sprintf("%s%s\"RemoveContainer\" containerID=\"%s\"\n", head, klog('I', "scope.go", 117), hex)
		case r < 430:
			line = fmt.Sprintf("%s%s\"Error syncing pod, skipping\" err=\"failed to \\\"StartContainer\\\" for \\\"%s\\\" with CrashLoopBackOff: \\\"back-off 5m0s restarting failed container=%s pod=%s_%s(%s)\\\"\" pod=\"%s/%s\" podUID=\"%s\"\n", head, klog('E', "pod_workers.go", 1300), p.ctr, p.ctr, p.name, p.ns, p.uid, p.ns, p.name, p.uid)
		case r < 510:
			line = fmt.Sprintf("%s%s\"operationExecutor.VerifyControllerAttachedVolume started for volume \\\"kube-api-access-%s\\\" (UniqueName: \\\"kubernetes.io/projected/%s-kube-api-access-%s\\\") pod \\\"%s\\\" (UID: \\\"%s\\\") \" pod=\"%s/%s\"\n", head, klog('I', "reconciler_common.go", 245), p.uid[:5], p.uid, p.uid[:5], p.name, p.uid, p.ns, p.name)
		case r < 590:
			line = fmt.Sprintf("%s%s\"operationExecutor.MountVolume started for volume \\\"%s\\\" (UniqueName: \\\"kubernetes.io/csi/ebs.csi.aws.com^%s\\\") pod \\\"%s\\\" (UID: \\\"%s\\\") \" pod=\"%s/%s\"\n", head, klog('I', "reconciler_common.go", 218), p.pvc, p.handle, p.name, p.uid, p.ns, p.name)
		case r < 690:
			line = fmt.Sprintf("%s%s\"MountVolume.SetUp succeeded for volume \\\"kube-api-access-%s\\\" (UniqueName: \\\"kubernetes.io/projected/%s-kube-api-access-%s\\\") pod \\\"%s\\\" (UID: \\\"%s\\\") \" pod=\"%s/%s\"\n", head, klog('I', "operation_generator.go", 721), p.uid[:5], p.uid, p.uid[:5], p.name, p.uid, p.ns, p.name)
		case r < 740:
			line = fmt.Sprintf("%s%s\"operationExecutor.UnmountVolume started for volume \\\"%s\\\" (UniqueName: \\\"kubernetes.io/csi/ebs.csi.aws.com^%s\\\") pod \\\"%s\\\" (UID: \\\"%s\\\") \"\n", head, klog('I', "reconciler_common.go", 159), p.pvc, p.handle, p.uid, p.uid)
		case r < 790:
			line = fmt.Sprintf("%s%sUnmountVolume.TearDown succeeded for volume \"kubernetes.io/projected/%s-kube-api-access-%s\" (OuterVolumeSpecName: \"kube-api-access-%s\") pod \"%s\" (UID: \"%s\"). InnerVolumeSpecName \"kube-api-access-%s\". PluginName \"kubernetes.io/projected\", VolumeGidValue \"\"\n", head, klog('I', "operation_generator.go", 803), p.uid, p.uid[:5], p.uid[:5], p.uid, p.uid, p.uid[:5])
		case r < 830:
			line = fmt.Sprintf("%s%s\"Volume detached for volume \\\"kube-api-access-%s\\\" (UniqueName: \\\"kubernetes.io/projected/%s-kube-api-access-%s\\\") on node \\\"big-node\\\" DevicePath \\\"\\\"\"\n", head, klog('I', "reconciler_common.go", 300), p.uid[:5], p.uid, p.uid[:5])
		case r < 860:
			line = fmt.Sprintf("%s%s\"Killing container with a grace period\" pod=\"%s/%s\" podUID=\"%s\" containerName=\"%s\" containerID=\"containerd://%s\" gracePeriod=30\n", head, klog('I', "kuberuntime_container.go", 770), p.ns, p.name, p.uid, p.ctr, hex)
		case r < 890:
			line = fmt.Sprintf("%s%s\"Observed pod startup duration\" pod=\"%s/%s\" podStartSLOduration=%d.%03d podStartE2EDuration=\"%ds\"\n", head, klog('I', "pod_startup_latency_tracker.go", 102), p.ns, p.name, x%30, x%1000, x%40)
		case r < 910:
			line = fmt.Sprintf("%s%s\"Cleaned up orphaned pod volumes dir\" podUID=\"%s\" path=\"/var/lib/kubelet/pods/%s/volumes\"\n", head, klog('I', "kubelet_volumes.go", 163), p.uid, p.uid)
		case r < 930:
			line = fmt.Sprintf("%s%sFailed to process watch event {EventType:0 Name:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope WatchSource:0}: task %s not found\n", head, klog('W', "manager.go", 1169), p.uid, hex, hex)
		case r < 950:
			line = fmt.Sprintf("%s%s\"kubernetes.io/csi: attacher.MountDevice STAGE_UNSTAGE_VOLUME capability not set. Skipping MountDevice...\"\n", head, klog('I', "csi_attacher.go", 380))
		case r < 990:
			line = fmt.Sprintf("%s%s\"Container runtime status\" status=\"Runtime Conditions: RuntimeReady=true reason: message:, NetworkReady=true reason: message:\"\n", head, klog('I', "kubelet.go", 2844))
		case recovered && r < 994:
			line = fmt.Sprintf("%s%s\"MountVolume.SetUp succeeded for volume \\\"%s\\\" (UniqueName: \\\"kubernetes.io/csi/ebs.csi.aws.com^%s\\\") pod \\\"%s\\\" (UID: \\\"%s\\\") \" pod=\"%s/%s\"\n", head, klog('I', "operation_generator.go", 721), f.pvc, f.handle, f.name, f.uid, f.ns, f.name)
		case r < 993:
			line = fmt.Sprintf("%s%sOperation for \"{volumeName:kubernetes.io/csi/ebs.csi.aws.com^%s podName: nodeName:}\" failed. No retries permitted until %s (durationBeforeRetry 2m2s). Error: MountVolume.MountDevice failed for volume \"%s\" (UniqueName: \"kubernetes.io/csi/ebs.csi.aws.com^%s\") pod \"%s\" (UID: \"%s\") : rpc error: code = Internal desc = could not format \"/dev/nvme%dn1\" and mount it at \"/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/%s/globalmount\": mount failed: exit status 32\n", head, klog('E', "nestedpendingoperations.go", 348), f.handle, t.Add(122*time.Second).Format("2006-01-02 15:04:05.000000000 -0700 MST"), f.pvc, f.handle, f.name, f.uid, x%8+1, hex)
		case r < 995:
			line = fmt.Sprintf("%s%sOperation for \"{volumeName:kubernetes.io/csi/rbd.csi.ceph.com^0001-0024-%s podName:%s nodeName:}\" failed. No retries permitted until %s (durationBeforeRetry 2m2s). Error: UnmountVolume.TearDown failed for volume \"%s\" (UniqueName: \"kubernetes.io/csi/rbd.csi.ceph.com^0001-0024-%s\") pod \"%s\" (UID: \"%s\") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc = unmount failed: exit status 32\nUnmounting arguments: /var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/%s/mount\nOutput: umount: /var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/%s/mount: target is busy.\n", head, klog('E', "nestedpendingoperations.go", 348), f.uid, f.uid, t.Add(122*time.Second).Format("2006-01-02 15:04:05.000000000 -0700 MST"), f.pvc, f.uid, f.uid, f.uid, f.uid, f.pvc, f.uid, f.pvc)
		case r < 997:
			line = fmt.Sprintf("%s%s\"Error syncing pod, skipping\" err=\"unmounted volumes=[data], unattached volumes=[data kube-api-access-%s]: timed out waiting for the condition\" pod=\"%s/%s\" podUID=\"%s\"\n", head, klog('E', "pod_workers.go", 1300), f.uid[:5], f.ns, f.name, f.uid)
		case r < 998:
			line = fmt.Sprintf("%s%sOperation for \"{volumeName:kubernetes.io/iscsi/10.0.3.%d:3260:iqn.2003-01.org.linux-iscsi.target:sn.%s:0 podName: nodeName:}\" failed. No retries permitted until %s (durationBeforeRetry 2m2s). Error: MountVolume.WaitForAttach failed for volume \"%s\" (UniqueName: \"kubernetes.io/iscsi/10.0.3.%d:3260:iqn.2003-01.org.linux-iscsi.target:sn.%s:0\") pod \"%s\" (UID: \"%s\") : failed to get any path for iscsi disk, last err seen:\niscsi: failed to attach disk: Error: iscsiadm: Could not login to [iface: default, target: iqn.2003-01.org.linux-iscsi.target:sn.%s, portal: 10.0.3.%d,3260].\niscsiadm: initiator reported error (24 - iSCSI login failed due to authorization failure)\n", head, klog('E', "nestedpendingoperations.go", 348), x%4+10, f.uid[:12], t.Add(122*time.Second).Format("2006-01-02 15:04:05.000000000 -0700 MST"), f.pvc, x%4+10, f.uid[:12], f.name, f.uid, f.uid[:12], x%4+10)
		default:
			line = fmt.Sprintf("%s%s\"There were many similar errors. Turn up verbosity to see them.\" err=\"orphaned pod \\\"%s\\\" found, but volume paths are still present on disk\" numErrs=1\n", head, klog('E', "kubelet_volumes.go", 263), f.uid)
		}
		// journalctl indents the lines of a message after its first
		// under the message.
		body, last := line[:len(line)-1], line[len(line)-1:]
		if _, err := io.WriteString(w, strings.ReplaceAll(body, "\n", "\n"+indent)+last); err != nil {
			return err
		}
	}
	return nil
}

// TestWriteLargeBundle writes, for test/bench/analyze_large.sh, the
// benchmark's bundle to the file NODESNAP_BENCH_LARGE_BUNDLE (its kubelet
// journal of NODESNAP_BENCH_KUBELET_LINES lines when set), and checks the
// journal holds what was asked for.
func TestWriteLargeBundle(t *testing.T) {
	keep := skip.OptIn(t, "NODESNAP_BENCH_LARGE_BUNDLE", "writing the large bundle for the analyze benchmark")
	if err := os.Remove(keep); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	t.Setenv("NODESNAP_BENCH_BUNDLE", keep)
	p := largeBundle(t)
	want := benchKubeletLines()
	if want == 0 {
		want = benchLogLines
	}
	var got int64
	err := bundle.Walk(context.Background(), p, bundle.DefaultLimits, func(e bundle.Entry) error {
		if !strings.HasSuffix(e.Name, "journal/kubelet.log") {
			return nil
		}
		var err error
		got, err = io.Copy(io.Discard, e.Reader)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each line is longer than 80 bytes.
	if got < int64(want)*80 {
		t.Fatalf("journal/kubelet.log is %d bytes, want %d lines", got, want)
	}
	t.Logf("%s: journal/kubelet.log %d bytes", p, got)
}
