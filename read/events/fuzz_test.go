package events

import (
	"testing"
	"unicode/utf8"
)

// FuzzParse: any record, however malformed, is read without a panic, in
// bounded output, and the parser's state stays bounded.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`E1121 09:10:01.123456  4321 reconciler.go:123] "operationExecutor.MountVolume failed" err="MountVolume.SetUp failed for volume \"data\" : exit status 32" pod="default/web-0"`,
		`{"level":"error","msg":"NodeStageVolume failed","volume_id":"vol-0123456789abcdef0","error":"input/output error"}`,
		`{"log":"E1121 09:10:01.000000 1 utils.go:101] GRPC error: rpc error: code = NotFound desc = x\n","stream":"stderr","time":"2026-11-21T09:10:01Z"}`,
		`2026-11-21T09:10:01.123456Z ERROR csi_node::node: NodeStageVolume failed volume_id="x"`,
		`Nov 21 09:10:01 node-1 kernel: blk_update_request: I/O error, dev sdb, sector 2048`,
		`ID: 1 Req-ID: 0001 GRPC error: rpc error: code = Internal desc = mount failed`,
		`time="x" level=error msg="failed to remove rootfs" error="unmount /run/x/rootfs: device or resource busy"`,
		`[12345.678901] Buffer I/O error on dev rbd0`,
		`2026-11-21 09:10:01,123:ERROR:grpc._server:Exception calling application: [Errno 2] No such file or directory: '/x'`,
		`2026-11-21 09:10:01 default ERROR a.b [req-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d] !! GRPC NodeStageVolume failed with NOT_FOUND`,
		`Nov 21 09:10:01 n multipathd[9]: mpatha: sdc - tur checker reports path is down`,
		`E1121 09:10:01.123456  4321 kubelet_pods.go:364] "Failed to prepare subPath for volumeMount of the container" err=< error mounting /x: mount failed: exit status 32 > containerName="c" volumeMountName="v"`,
		`[1.0] nvme nvme2: Removing after probe failure status: -19`,
		`2026-11-21T09:10:01.000000000Z E1121 09:10:01.000000 1 f.go:1] volume(a#b) failed`,
		`level=error msg="AttachDisk: x" output="1.2.3.4:3260,1 iqn.2001-05.com.example:x"`,
		`E0101 00:00:00.0 1 desired_state_of_world_populator.go:1] "Error processing volume" err="x" pod="ns/p" volume="kubernetes.io/configmap/5b0e2c1a-7d3f-4e8a-9c6b-1f2e3d4c5b6a-" uniqueName="a/b^"`,
		`E0101 00:00:00.0 1 kubelet.go:1] Unable to mount volumes for pod "a_b(": exit status 32 volumeMount "`,
		`msg="failed to clean up after shim disconnected" error="open /run/containerd/io.containerd.runtime.v2.task/k8s.io/x/runtime: exit status 1" id=- -publish`,
		`[1.0] BTRFS error (device dm-0): bdev /dev/mapper/x errs: wr 0, rd 1, flush 0, corrupt 0, gen 0`,
		`E1025 18:25:43.329220 7 pod_driver.go:491] stat mntPath:/jfs/x-1 err: context deadline exceeded`,
		`level=info msg="mkdir: can't create directory '/opt/lp/pvc-4bcd4bcc-8d82-4d05-a625-b11a1438474a_ns_c': Permission denied"`,
		`E0101 00:00:00.0 1 u.go:1] GRPC error: NodeGetVolumeStats statfs(/a/b timed out`,
		`[1.0] XFS (sdb6): log I/O error -5`, `[1.0] CIFS: VFS: cifs_mount failed w/return code = -`,
		`[1.0] critical target error, dev sdz, sector 1 op 0x1:(WRITE)`, `[1.0] EXT4-fs (x): (`,
		`{"a":{"b":[1,2,{"c":"\u0000"}]},"msg":"\"`, `"unterminated`, `E0101 00:00:00.0 1 f.go:1] "x" k="v\"`,
		`2026-11-21 09:10:01.000001 77 [ERROR]: [requestID:12] check device: dm-3 is a partition device failed`,
		`[2026-11-21 09:10:01,123] ERROR [_server - 454:_call_behavior] - Exception calling application: [1]  volume=x`,
		`{"level":"debug","msg":"a"} {"level":"error","msg":"nvme connect nqn.2020-01.io.x:y failed"} {`, `{"a":1}{"b":2}`, `[2026-01-01 00:00:00]`,
		`E0101 00:00:00.0 1 kubelet.go:1] "Unable to attach or mount volumes for pod; skipping pod" err="unmounted volumes=[data]" pod="n`,
		`E0101 00:00:00.0 1 f.go:1] failed to open volume data file [x/var/data/kubelet/pods/5b0e2c1a-7d3f-4e8a-9c6b-1f2e3d4c5b6a/volumes/a~b/c/mount]`,
		`[1.0] sd 1:0:0:0: [sdb] tag#0 Sense Key : Medium Error [current] error`, `[1.0] sd 1:0:0:0: [sd] Sense Key : (-`,
		`[1.0] SPLError: 1:0:(x) WARNING: Pool 'tank' has been suspended`, `[1.0] WARNING: Pool '' failed (result -`,
		`1.2.3.4: kern:   alert: [2024-05-13T15:13:11.99476118Z]: XFS (sdb6): log I/O error -5`, `kern: err: [2024-01-01T00:00:00Z]: `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p := NewParser(ref)
		for range 2 {
			ev, _ := p.Parse(b)
			if len(ev.Err.Message) > MaxMessage+len("…") {
				t.Fatalf("message of %d bytes", len(ev.Err.Message))
			}
			if utf8.Valid(b) && !utf8.ValidString(ev.Err.Message) {
				t.Fatalf("message of valid input is not valid UTF-8: %q", ev.Err.Message)
			}
			_, _ = ev.Permanent()
			_ = ev.Keys.All()
		}
		if len(p.methods) > maxRequests {
			t.Fatal("request table unbounded")
		}
	})
}
