package analyze_test

import (
	"strings"
	"testing"
)

// TestCSIDriverNotRegisteredNamesTheCause: whatever kubelet volume
// operation wraps the kubelet's CSI client error "driver name X not found
// in the list of registered CSI drivers" (a mount, a block map, a
// teardown, an unmount of the device; glog text or structured), its
// finding names driver X as not registered with the kubelet; the same
// operations failing for another reason do not.
func TestCSIDriverNotRegisteredNamesTheCause(t *testing.T) {
	const uid = "012fe34e-6481-443f-a6cf-7cd98ad05efd"
	const unique = "kubernetes.io/csi/driver.longhorn.io^pvc-a6611096-cb7a-4645-9549-8034c051d07f"
	for _, tc := range []struct {
		name, line, id, driver string
	}{
		{"block map, structured", `E0221 23:43:50.583561    2334 nestedpendingoperations.go:348] Operation for "{volumeName:` + unique + ` podName: nodeName:}" failed. No retries permitted until 2024-02-21 23:43:51.083527137 +0000 UTC m=+222.949785582 (durationBeforeRetry 500ms). Error: MapVolume.MapPodDevice failed for volume "pvc-a6611096-cb7a-4645-9549-8034c051d07f" (UniqueName: "` + unique + `") pod "virt-launcher-ubuntu-2rd6c" (UID: "` + uid + `") : kubernetes.io/csi: blockMapper.MapPodDevice failed to get CSI client: driver name driver.longhorn.io not found in the list of registered CSI drivers`,
			"volume-mount-failed", "driver.longhorn.io"},
		{"mount device, quoted error of 1.19", `E0412 08:15:02.114233    2211 nestedpendingoperations.go:301] Operation for "{volumeName:kubernetes.io/csi/rbd.csi.ceph.com^0001-0009-rook-ceph-0000000000000001-4f7c2d1e podName: nodeName:}" failed. No retries permitted until 2021-04-12 08:17:04.114201 +0000 UTC m=+12.5 (durationBeforeRetry 2m2s). Error: "MountVolume.MountDevice failed for volume \"pvc-1\" (UniqueName: \"kubernetes.io/csi/rbd.csi.ceph.com^0001-0009-rook-ceph-0000000000000001-4f7c2d1e\") pod \"web-0\" (UID: \"` + uid + `\") : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name rook-ceph.rbd.csi.ceph.com not found in the list of registered CSI drivers"`,
			"volume-mount-failed", "rook-ceph.rbd.csi.ceph.com"},
		{"teardown", `E0601 10:00:00.000001    1234 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/nfs.csi.k8s.io^srv/share podName:` + uid + ` nodeName:}" failed. No retries permitted until 2024-06-01 10:02:02 +0000 UTC m=+99.1 (durationBeforeRetry 2m2s). Error: UnmountVolume.TearDown failed for volume "data" (UniqueName: "kubernetes.io/csi/nfs.csi.k8s.io^srv/share") pod "` + uid + `" (UID: "` + uid + `") : kubernetes.io/csi: Unmounter.TearDownAt failed to get CSI client: driver name nfs.csi.k8s.io not found in the list of registered CSI drivers`,
			"volume-teardown-failed", "nfs.csi.k8s.io"},
		{"unmount device", `E0601 10:00:00.000001    1234 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/ebs.csi.aws.com^vol-0abc podName: nodeName:}" failed. No retries permitted until 2024-06-01 10:02:02 +0000 UTC m=+99.1 (durationBeforeRetry 2m2s). Error: UnmountDevice failed for volume "pvc-2" (UniqueName: "kubernetes.io/csi/ebs.csi.aws.com^vol-0abc") on node "n1" : kubernetes.io/csi: attacher.UnmountDevice failed to create newCsiDriverClient: driver name ebs.csi.aws.com not found in the list of registered CSI drivers`,
			"volume-unmount-device-failed", "ebs.csi.aws.com"},
		// The same operations failing for their own reasons name no driver.
		{"mount failing otherwise", `E0102 03:04:05.000000    2211 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/secret/` + uid + `-creds podName:` + uid + ` nodeName:}" failed. No retries permitted until 2024-01-02 03:04:07 +0000 UTC m=+5.0 (durationBeforeRetry 2s). Error: MountVolume.SetUp failed for volume "creds" (UniqueName: "kubernetes.io/secret/` + uid + `-creds") pod "web-0" (UID: "` + uid + `") : secret "creds" not found`,
			"volume-mount-failed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyzeLines(t, tc.line)
			fs := findings(rep, tc.id)
			if len(fs) != 1 {
				t.Fatalf("want one %s finding, got ids %v\n%s", tc.id, ids(rep), dump(rep))
			}
			f := fs[0]
			text := f.Summary + "\n" + f.Explanation + "\n" + strings.Join(f.Remediation, "\n")
			named := strings.Contains(f.Summary, "not registered with this kubelet")
			if tc.driver == "" {
				if named || strings.Contains(text, "not registered") {
					t.Errorf("a failure of its own is blamed on an unregistered driver:\n%s", text)
				}
				return
			}
			if !named || !strings.Contains(f.Summary, "CSI driver "+tc.driver+" ") {
				t.Errorf("summary does not name driver %s as not registered: %q", tc.driver, f.Summary)
			}
			wantIn(t, "explanation", f.Explanation, "node plugin", tc.driver)
			wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "node-driver-registrar", "CSINode")
		})
	}
}
