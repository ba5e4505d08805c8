package events

import (
	"testing"
	"time"
)

// `talosctl dmesg` puts the node, the facility, the level and an RFC
// 3339 time before the kernel's record: it is read as the kernel's,
// whatever record follows.
func TestTalosKernPrefix(t *testing.T) {
	cases := []struct {
		name   string
		line   string
		ok     bool
		device string
		level  Level
		at     time.Time
	}{
		{"a node's file system shut down", `109.200.197.196: kern:   alert: [2024-05-13T15:13:11.99476118Z]: XFS (sdb6): log I/O error -5`, true, "/dev/sdb6", LevelFatal, time.Date(2024, 5, 13, 15, 13, 11, 994761180, time.UTC)},
		{"without the node's name", `kern: warning: [2024-10-29T13:44:17.655294812Z]: nvme nvme2: rdma connection establishment failed (-104)`, true, "/dev/nvme2", LevelWarning, time.Date(2024, 10, 29, 13, 44, 17, 655294812, time.UTC)},
		{"a block layer error", ` kern:     err: [2024-10-29T13:44:18.000000000Z]: I/O error, dev nvme2n1, sector 2048 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0`, true, "/dev/nvme2n1", LevelError, time.Date(2024, 10, 29, 13, 44, 18, 0, time.UTC)},
		{"a clean mount is none", `109.200.197.196: kern:    info: [2024-04-16T18:19:30.92421418Z]: XFS (sdb5): Ending clean mount`, false, "", LevelInfo, time.Time{}},
		{"a word kern: elsewhere is no prefix", `level=error msg="kern: x [y]: failed" error="input/output error"`, false, "", LevelError, time.Time{}},
	}
	for _, c := range cases {
		ev, check := parsedAs(t, c.name, c.line, c.ok)
		if !check {
			continue
		}
		if ev.Source != "kernel" || ev.Outcome != OutcomeFailed || ev.Keys.Device != c.device || ev.Level != c.level || !ev.Time.Equal(c.at) {
			t.Errorf("%s: source %q outcome %v device %q level %v time %v, want kernel failed %q %v %v", c.name, ev.Source, ev.Outcome, ev.Keys.Device, ev.Level, ev.Time, c.device, c.level, c.at)
		}
	}
}
