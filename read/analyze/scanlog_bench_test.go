package analyze

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkScanLog: reading a kubelet log of 100,000 lines of ordinary
// noise with one line in a thousand of the catalogue's, the path every
// log file of a bundle takes (record reading, matching, keeping hits).
// Its figures compare matchers across versions: the file builds against
// any version of the package that has scanLog.
func BenchmarkScanLog(b *testing.B) {
	var buf bytes.Buffer
	for i := 0; i < 100_000; i++ {
		switch {
		case i%1000 == 7:
			fmt.Fprintf(&buf, "Nov 21 09:%02d:%02d node kubelet[812]: E1121 09:%02d:%02d.%06d     812 nestedpendingoperations.go:348] Operation for \"{volumeName:kubernetes.io/csi/rbd.csi.ceph.com^0001-%d podName:0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d nodeName:}\" failed. No retries permitted until 2026-11-21 09:00:00 (durationBeforeRetry 2m2s). Error: UnmountVolume.TearDown failed for volume \"pvc-%d\" (UniqueName: \"kubernetes.io/csi/rbd.csi.ceph.com^0001-%d\") pod \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\" (UID: \"0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d\") : unlinkat /var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/pvc-%d/mount: device or resource busy\n",
				i/60%60, i%60, i/60%60, i%60, i, i%50, i%50, i%50, i%50)
		case i%3 == 0:
			fmt.Fprintf(&buf, "Nov 21 09:%02d:%02d node kubelet[812]: I1121 09:%02d:%02d.%06d     812 kubelet.go:2355] \"SyncLoop UPDATE\" source=\"api\" pods=[\"default/web-%d\"]\n", i/60%60, i%60, i/60%60, i%60, i, i)
		case i%3 == 1:
			fmt.Fprintf(&buf, "Nov 21 09:%02d:%02d node kubelet[812]: I1121 09:%02d:%02d.%06d     812 reconciler_common.go:245] \"operationExecutor.VerifyControllerAttachedVolume started for volume \\\"kube-api-access-%d\\\" (UniqueName: \\\"kubernetes.io/projected/%d-kube-api-access\\\") pod \\\"web-%d\\\" (UID: \\\"%d\\\") \" pod=\"default/web-%d\"\n", i/60%60, i%60, i/60%60, i%60, i, i, i, i, i, i)
		default:
			fmt.Fprintf(&buf, "Nov 21 09:%02d:%02d node containerd[700]: time=\"2026-11-21T09:00:00.%06dZ\" level=info msg=\"StartContainer for \\\"%064x\\\" returns successfully\"\n", i/60%60, i%60, i, i)
		}
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := newLogIndex()
		if err := x.scanLog("journal/kubelet.log", bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
