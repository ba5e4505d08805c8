package analyze_test

import (
	"strings"
	"testing"
)

// A kubelet's teardown failing with "unlinkat <pod volume dir>: device or
// resource busy" is one event, the volume's teardown: not also a runtime
// failing to remove a container's filesystem. A runtime's own unlinkat of
// an overlay rootfs still is.
func TestTeardownBusyLineIsOneEvent(t *testing.T) {
	const teardown = `E0217 14:13:02.919124   11533 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/projected/29da47e0-52ea-49d5-bcc1-39824ad9abc2-kube-api-access-b6pqn podName:29da47e0-52ea-49d5-bcc1-39824ad9abc2 nodeName:}" failed. No retries permitted until 2025-02-17 14:13:06.9190655 +0000 UTC m=+967942.401661721 (durationBeforeRetry 4s). Error: UnmountVolume.TearDown failed for volume "kube-api-access-b6pqn" (UniqueName: "kubernetes.io/projected/29da47e0-52ea-49d5-bcc1-39824ad9abc2-kube-api-access-b6pqn") pod "29da47e0-52ea-49d5-bcc1-39824ad9abc2" (UID: "29da47e0-52ea-49d5-bcc1-39824ad9abc2") : unlinkat /var/lib/kubelet/pods/29da47e0-52ea-49d5-bcc1-39824ad9abc2/volumes/kubernetes.io~projected/kube-api-access-b6pqn: device or resource busy`
	const rootfs = `time="2024-05-02T10:00:00.000000000Z" level=error msg="failed to remove container" error="unlinkat /var/lib/containerd/io.containerd.runtime.v2.task/k8s.io/4f0c/rootfs/merged: device or resource busy"`
	cases := []struct {
		name    string
		source  string
		lines   []string
		want    string
		notWant string
	}{
		{name: "kubelet teardown unlinkat busy", source: "kubelet", lines: []string{teardown},
			want: "volume-teardown-busy", notWant: "container-rootfs-busy"},
		{name: "runtime rootfs unlinkat busy", source: "containerd", lines: []string{rootfs},
			want: "container-rootfs-busy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := analyzeLinesOf(t, c.source, c.lines...)
			var ids []string
			for _, f := range rep.Findings {
				ids = append(ids, f.ID)
			}
			got := strings.Join(ids, " ")
			if !strings.Contains(got, c.want) {
				t.Errorf("findings %q, want %s", got, c.want)
			}
			if c.notWant != "" && strings.Contains(got, c.notWant) {
				t.Errorf("findings %q: the line is one event, want no %s", got, c.notWant)
			}
		})
	}
}
