package events

import "testing"

// TestMountPathCheckAndVolumeMkdir: a plugin's check of a mount path
// (stat, statfs, df, NodeGetVolumeStats) that times out is an operation
// on that path, whatever the driver's words around it; a volume
// directory's creation that fails with an errno names the PV, whatever
// a provisioner joins after its name. The lines are shapes drivers log
// (juicefs-csi-driver's pod_driver.go "stat mntPath:%s err:%v", Go's
// *os.PathError, mkdir(1) of GNU and busybox, gRPC status errors); the
// negative cases are what must not be read so.
func TestMountPathCheckAndVolumeMkdir(t *testing.T) {
	const pv = "pvc-4bcd4bcc-8d82-4d05-a625-b11a1438474a"
	pod := "/var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/" + pv + "/mount"
	// notOp marks a case that must be neither a check nor a mkdir
	// (what else it is is another rule's).
	const notOp = Op("neither")
	cases := []struct {
		name, line string
		op         Op
		outcome    Outcome
		path, pv   string
	}{
		// Checks that time out.
		{"juicefs stat, comma form", `E1025 18:25:43.329220       7 pod_driver.go:491] [podReadyHandler] stat mntPath: /jfs/j-dekytmec2j-volume-0-lymevw, podName: juicefs-node1-pvc-x, err: context deadline exceeded, don't do recovery`,
			OpCheck, OutcomeFailed, "/jfs/j-dekytmec2j-volume-0-lymevw", ""},
		{"juicefs stat, no spaces", `E1025 18:25:43.329220       7 pod_driver.go:310] [podReadyHandler] stat mntPath:/var/lib/juicefs/volume/` + pv + `-abcdef err:context deadline exceeded, don't do recovery`,
			OpCheck, OutcomeFailed, "/var/lib/juicefs/volume/" + pv + "-abcdef", pv},
		{"Go PathError of a kubelet pod mount, klog structured", `E0102 03:04:05.000000       1 nodeserver.go:412] "NodeGetVolumeStats failed" err="stat ` + pod + `: i/o timeout"`,
			OpCheck, OutcomeFailed, pod, pv},
		{"statfs timed out, logfmt", `time="2026-11-21T09:10:01Z" level=error msg="statfs /mnt/plugin/share-17 timed out after 30s"`,
			OpCheck, OutcomeFailed, "/mnt/plugin/share-17", ""},
		{"df of a mount, JSON", `{"level":"error","ts":"2026-11-21T09:10:01Z","msg":"df -k /var/lib/kubelet/plugins/kubernetes.io/csi/nfs.csi.k8s.io/abc/globalmount failed: signal: killed (timeout)"}`,
			OpCheck, OutcomeFailed, "/var/lib/kubelet/plugins/kubernetes.io/csi/nfs.csi.k8s.io/abc/globalmount", ""},
		{"NodeGetVolumeStats with a gRPC DeadlineExceeded and a volume_path field", `E1121 09:10:01.000000       1 utils.go:81] GRPC error: rpc error: code = DeadlineExceeded desc = NodeGetVolumeStats on volume_path: ` + pod + ` timed out`,
			OpCheck, OutcomeFailed, pod, pv},
		// A stat that fails at once, not a timeout: its own operation.
		{"stat not connected is not a check", `E1121 09:10:01.000000       1 mount.go:12] stat ` + pod + `: transport endpoint is not connected`,
			OpMount, OutcomeFailed, "", pv},
		// Not a mount path.
		{"stat of a device timing out", `E1121 09:10:01.000000       1 x.go:1] stat /dev/sdb: context deadline exceeded`,
			notOp, OutcomeFailed, "", ""},
		{"stat of a socket timing out", `E1121 09:10:01.000000       1 x.go:1] stat /var/lib/kubelet/plugins/x.csi/csi.sock: context deadline exceeded`,
			OpNone, OutcomeNone, "", ""},

		// Volume directories that cannot be made.
		{"busybox mkdir at info, PV joined to ns and claim", `level=info msg="mkdir: can't create directory '/opt/local-path-provisioner/` + pv + `_local-path-storage_local-path-pvc': Permission denied"`,
			OpMkdir, OutcomeFailed, "/opt/local-path-provisioner/" + pv + "_local-path-storage_local-path-pvc", pv},
		{"GNU mkdir relayed by a provisioner", `E1121 09:10:01.000000       1 provisioner.go:310] helper pod failed: Output: mkdir: cannot create directory '/data/hostpath/` + pv + `': No space left on device`,
			OpMkdir, OutcomeFailed, "/data/hostpath/" + pv, pv},
		{"Go MkdirAll under the kubelet's plugins", `E1121 09:10:01.000000       1 nodeserver.go:99] failed to create directory: mkdir /var/lib/kubelet/plugins/kubernetes.io/csi/pv/` + pv + `/globalmount: read-only file system`,
			OpMkdir, OutcomeFailed, "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/" + pv + "/globalmount", pv},
		// Not a volume's directory, or no errno.
		{"mkdir of a lock file's directory", `E1121 09:10:01.000000       1 x.go:1] mkdir /run/xtables: permission denied`,
			notOp, OutcomeFailed, "", ""},
		{"blkid's normal answer before formatting a new disk", `I1121 09:10:01.000000       1 mount_linux.go:553] Output: "blkid: error: /dev/nvme1n1: No such file or directory"`,
			OpNone, OutcomeNone, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, _ := NewParser(ref).Parse([]byte(c.line))
			if c.op == notOp {
				if ev.Op == OpCheck || ev.Op == OpMkdir {
					t.Fatalf("op %q, want neither a check nor a mkdir (%+v)", ev.Op, ev)
				}
				return
			}
			if ev.Op != c.op || ev.Outcome != c.outcome {
				t.Fatalf("op %q outcome %v, want %q %v (%+v)", ev.Op, ev.Outcome, c.op, c.outcome, ev)
			}
			if c.path != "" && ev.Keys.Path != c.path {
				t.Errorf("path %q, want %q", ev.Keys.Path, c.path)
			}
			if ev.Keys.PV != c.pv {
				t.Errorf("PV %q, want %q", ev.Keys.PV, c.pv)
			}
		})
	}
}
