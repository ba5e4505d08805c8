package events

import "testing"

// The block layer's bio_check_eod record ("attempt to access beyond end
// of device") is a failed I/O on the device it names, whatever the log's
// level; the same words elsewhere without a device are not an object.
func TestKernelAccessBeyondEndOfDevice(t *testing.T) {
	cases := []struct {
		name, line, device string
	}{
		{name: "journal, one line", device: "/dev/sdb",
			line: `Apr 30 09:03:34 worker-1 kernel: blkid: attempt to access beyond end of device sdb: rw=524288, sector=20971392, nr_sectors = 8 limit=0`},
		{name: "dmesg, older kernels' form", device: "/dev/dm-1",
			line: `[39092.681982] attempt to access beyond end of device dm-1: rw=0, want=41943048, limit=41943040`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if !ok {
				t.Fatalf("not parsed")
			}
			if ev.Op != OpIO || ev.Outcome != OutcomeFailed {
				t.Fatalf("op %q outcome %v, want I/O failed", ev.Op, ev.Outcome)
			}
			if ev.Keys.Device != c.device {
				t.Errorf("device %q, want %q", ev.Keys.Device, c.device)
			}
		})
	}
	// The record's first line alone, its device on a continuation line
	// that was not joined: no object, no event.
	if ev, ok := NewParser(ref).Parse([]byte(`[39092.681982] blkid: attempt to access beyond end of device`)); ok {
		t.Errorf("an event without a device: %+v", ev)
	}
}
