package analyze_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// TestMountPathCheckAndVolumeMkdirFindings: a node plugin's checks of a
// mount path that time out again and again with no later success are a
// warning naming the path (a hung mount suspected); one check that timed
// out and was answered later, and blkid's ordinary answer before a new
// disk's format, warn of nothing; a volume's directory that cannot be
// made is a warning naming its PV.
func TestMountPathCheckAndVolumeMkdirFindings(t *testing.T) {
	const pv = "pvc-5d1e2f3a-6b7c-4d8e-9f0a-1b2c3d4e5f60"
	pod := "/var/lib/kubelet/pods/0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d/volumes/kubernetes.io~csi/" + pv + "/mount"
	call := func(sec string) []string {
		return []string{
			"I0102 03:04:" + sec + ".000000       1 utils.go:76] GRPC call: /csi.v1.Node/NodeGetVolumeStats",
			"I0102 03:04:" + sec + `.000001       1 utils.go:77] GRPC request: {"volume_id":"vol-17","volume_path":"` + pod + `"}`,
		}
	}
	timedOut := func(sec string) []string {
		return append(call(sec), "E0102 03:04:"+sec+".000002       1 utils.go:81] GRPC error: rpc error: code = DeadlineExceeded desc = stat "+pod+": context deadline exceeded")
	}
	answered := func(sec string) []string {
		return append(call(sec), "I0102 03:04:"+sec+`.000002       1 utils.go:83] GRPC response: {"usage":[{"available":1000,"total":2000,"used":1000,"unit":1}]}`)
	}
	warned := func(rep *analyze.Report, obj string) (warn, named bool, ids string) {
		var a []string
		for _, f := range rep.Findings {
			a = append(a, f.ID+"("+f.Severity.String()+")")
			if (f.Severity == analyze.Warning || f.Severity == analyze.Critical) && (obj == "" || strings.Contains(f.Subject+" "+f.Summary, obj)) {
				// A warning counts when it names the object (any
				// warning, for a benign case).
				warn = true
			}
			if strings.Contains(f.Subject+" "+f.Summary, obj) {
				named = true
			}
		}
		return warn, named, strings.Join(a, " ")
	}
	cases := []struct {
		name, plugin string
		lines        []string
		obj          string
		warn         bool
	}{
		{"checks of a plugin's own mount root time out over and over", "juicefs-plugin", []string{
			"E1025 18:25:43.329220       7 pod_driver.go:491] [podReadyHandler] stat mntPath: /jfs/j-dekytmec2j-volume-0-lymevw, podName: juicefs-n1-a, err: context deadline exceeded, don't do recovery",
			"E1025 18:25:49.349115       7 pod_driver.go:491] [podReadyHandler] stat mntPath: /jfs/j-dekytmec2j-volume-0-lymevw, podName: juicefs-n1-a, err: context deadline exceeded, don't do recovery",
			"E1025 18:25:55.373918       7 pod_driver.go:491] [podReadyHandler] stat mntPath: /jfs/j-dekytmec2j-volume-0-lymevw, podName: juicefs-n1-a, err: context deadline exceeded, don't do recovery",
		}, "/jfs/j-dekytmec2j-volume-0-lymevw", true},
		{"NodeGetVolumeStats of a pod's mount times out twice", "nfs-plugin", append(timedOut("05"), timedOut("35")...), pv, true},
		{"one check timed out, then answered", "nfs-plugin", append(timedOut("05"), answered("35")...), "", false},
		{"checks timed out twice, then answered", "nfs-plugin", append(append(timedOut("05"), timedOut("25")...), answered("45")...), "", false},
		{"blkid's answer before a new disk's format", "ebs-plugin", []string{
			"I0102 03:04:05.000000       1 mount_linux.go:509] Attempting to determine if disk \"/dev/nvme1n1\" is formatted using blkid with args: ([-p -s TYPE -s PTTYPE -o export /dev/nvme1n1])",
			"I0102 03:04:05.100000       1 mount_linux.go:512] Output: \"blkid: error: /dev/nvme1n1: No such file or directory\"",
			"I0102 03:04:05.200000       1 mount_linux.go:545] Disk \"/dev/nvme1n1\" appears to be unformatted, attempting to format as type: \"ext4\" with options: [-F -m0 /dev/nvme1n1]",
			"I0102 03:04:06.000000       1 mount_linux.go:560] Disk successfully formatted (mkfs): ext4 - /dev/nvme1n1 " + pod,
		}, "", false},
		{"a provisioner's helper cannot make the volume's directory", "local-path-provisioner", []string{
			`level=info msg="mkdir: can't create directory '/opt/local-path-provisioner/` + pv + `_default_data-0': Permission denied"`,
		}, pv, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := analyzeLinesOf(t, c.plugin, c.lines...)
			warn, named, ids := warned(rep, c.obj)
			if warn != c.warn {
				t.Errorf("warned=%v, want %v (findings %s)", warn, c.warn, ids)
			}
			if c.obj != "" && !named {
				t.Errorf("no finding names %s (findings %s)", c.obj, ids)
			}
		})
	}
}
