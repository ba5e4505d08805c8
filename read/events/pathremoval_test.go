package events

import "testing"

// TestPathRemovalAndDeviceDirs: a removal's error quoted as Go writes it
// is a failure whatever its level, a container's subPath directory is
// its volume's, and a device under a directory of /dev is named whole;
// a skip stays a success.
func TestPathRemovalAndDeviceDirs(t *testing.T) {
	cases := []struct {
		name, line string
		ok         bool
		op         Op
		outcome    Outcome
		errno      string
		keys       Keys
	}{
		{"subpath removal not empty, no level",
			`nestedpendingoperations.go:301] [...] remove /var/lib/kubelet/pods/5e50975f-6331-4e76-9968-09627864d30d/volume-subpaths/pv-smb/deployment-smb: directory not empty"`,
			true, OpTeardown, OutcomeFailed, "ENOTEMPTY", Keys{PodUID: "5e50975f-6331-4e76-9968-09627864d30d"}},
		{"volume dir removal busy at info",
			`I1121 09:10:01.000000     812 kubelet.go:2006] Failed to remove orphaned pod "87cfe5a1-34c7-11e6-85f1-42010af00002" dir; err: remove /var/lib/kubelet/pods/87cfe5a1-34c7-11e6-85f1-42010af00002/volumes/kubernetes.io~secret/default-token-qf0cp: device or resource busy`,
			true, OpTeardown, OutcomeFailed, "EBUSY", Keys{PodUID: "87cfe5a1-34c7-11e6-85f1-42010af00002"}},
		{"unmount skipped is a success",
			`mount_helper_common.go:33] Warning: Unmount skipped because path does not exist: /var/lib/kubelet/pods/5e50975f-6331-4e76-9968-09627864d30d/volume-subpaths/pv-smb/deployment-smb/0`,
			true, OpUnmount, OutcomeSucceeded, "", Keys{}},
		{"removal at debug is a detail",
			`time="2026-11-21T09:10:01Z" level=debug msg="cleanup" detail="remove /var/lib/kubelet/pods/5e50975f-6331-4e76-9968-09627864d30d/volume-subpaths/pv-smb/deployment-smb: directory not empty"`,
			false, OpTeardown, OutcomeNone, "ENOTEMPTY", Keys{}},
		{"a mount directory's removal is the unmount's cleanup",
			`E0317 15:16:03.105342       1 deletelv.go:87] unable to remove mount directory:/tmp/csi-lvm/pvc-18285b91-fdf0-408c-82e5-c6be034caef0 err:remove /tmp/csi-lvm/pvc-18285b91-fdf0-408c-82e5-c6be034caef0: device or resource busy`,
			true, OpUnmount, OutcomeFailed, "EBUSY", Keys{}},
		{"a mount that fails is still a mount",
			`E1121 09:10:01.000000       1 mount_linux.go:200] Mount failed: exit status 32 Mounting command: mount Mounting arguments: -t nfs 10.0.0.5:/exports /mnt/x Output: mount.nfs: access denied by server`,
			true, OpMount, OutcomeFailed, "", Keys{}},
		{"LVM device path whole",
			`E0317 15:16:03.105274       1 deletelv.go:83] unable to umount /dev/csi-lvm/pvc-18285b91-fdf0-408c-82e5-c6be034caef0 from /tmp/csi-lvm/pvc-18285b91-fdf0-408c-82e5-c6be034caef0 output:umount: /dev/csi-lvm/pvc-18285b91-fdf0-408c-82e5-c6be034caef0: not mounted.`,
			true, OpUnmount, OutcomeFailed, "", Keys{Device: "/dev/csi-lvm/pvc-18285b91-fdf0-408c-82e5-c6be034caef0"}},
		{"device mapper path whole",
			`E1121 09:10:01.000000       1 mount_linux.go:200] Mount failed: exit status 32 Mounting command: mount Mounting arguments: -t ext4 /dev/mapper/vg0-data /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-1/globalmount`,
			true, OpMount, OutcomeFailed, "", Keys{Device: "/dev/mapper/vg0-data"}},
		{"a device of /dev itself unchanged",
			`mount: wrong fs type, bad option, bad superblock on /dev/sdc,`,
			true, OpMount, OutcomeFailed, "", Keys{Device: "/dev/sdc"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if ok != c.ok || ev.Outcome != c.outcome {
				t.Fatalf("ok=%v outcome=%q, want ok=%v outcome=%q (op %q)", ok, ev.Outcome, c.ok, c.outcome, ev.Op)
			}
			if c.ok && ev.Op != c.op {
				t.Errorf("op %q, want %q", ev.Op, c.op)
			}
			if ev.Err.Errno != c.errno {
				t.Errorf("errno %q, want %q", ev.Err.Errno, c.errno)
			}
			if c.keys.PodUID != "" && ev.Keys.PodUID != c.keys.PodUID {
				t.Errorf("pod UID %q, want %q", ev.Keys.PodUID, c.keys.PodUID)
			}
			if c.keys.Device != "" && ev.Keys.Device != c.keys.Device {
				t.Errorf("device %q, want %q", ev.Keys.Device, c.keys.Device)
			}
		})
	}
}
