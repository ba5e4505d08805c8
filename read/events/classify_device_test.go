package events

import "testing"

// A storage daemon's or the kernel's record about a device is read by
// its structure: the device (or map WWID) is the object, the state's
// words the outcome, whatever the checker or driver wrote.
func TestDeviceRecords(t *testing.T) {
	cases := []struct {
		line    string
		ok      bool
		outcome Outcome
		keys    Keys
	}{
		{`Nov 21 09:10:01 node1 multipathd[900]: mpatha: sdc - frobcheck reports path is down`, true, OutcomeFailed, Keys{Device: "/dev/sdc", Map: "mpatha"}},
		{`Nov 21 09:10:01 node1 multipathd[900]: 3600a098038303634722b4d59614c6f41: sdd - path offline`, true, OutcomeFailed, Keys{Device: "/dev/sdd", WWID: "3600a098038303634722b4d59614c6f41"}},
		{`Nov 21 09:10:01 node1 multipathd[900]: 3600a098038303634722b4d59614c6f41: failed in domap for addition of new path sdd`, true, OutcomeFailed, Keys{WWID: "3600a098038303634722b4d59614c6f41"}},
		{`Nov 21 09:10:01 node1 multipathd[900]: sdd: state down, checker not called`, true, OutcomeFailed, Keys{Device: "/dev/sdd"}},
		{`Nov 21 09:10:09 node1 multipathd[900]: mpatha: sdc - frobcheck reports path is up`, true, OutcomeSucceeded, Keys{Device: "/dev/sdc"}},
		{`Nov 21 09:10:09 node1 multipathd[900]: sdc: reinstated`, true, OutcomeSucceeded, Keys{Device: "/dev/sdc"}},
		{`Nov 21 09:10:01 node1 multipathd[900]: sdc: add path (uevent)`, false, OutcomeNone, Keys{}},
		{`Nov 21 09:10:01 node1 multipathd[900]: path checkers start up`, false, OutcomeNone, Keys{}},
		{`[11508.697971] nvme nvme4: Removing after probe failure status: -19`, true, OutcomeFailed, Keys{Device: "/dev/nvme4"}},
		{`[  406.733605] rbd: rbd3: failed to acquire lock: -13`, true, OutcomeFailed, Keys{Device: "/dev/rbd3"}},
		{`Nov 21 09:10:01 node1 kernel: nvme nvme0: 8/0/0 default/read/poll queues`, false, OutcomeNone, Keys{}},
		{`[    2.000000] sd 2:0:0:0: [sdb] Attached SCSI removable disk`, false, OutcomeNone, Keys{}},
		{`[    1.500000] nvme nvme0: Shutdown timeout set to 8 seconds`, false, OutcomeNone, Keys{}},
		{`[    1.500000] nvme nvme0: failed to set APST feature (2)`, false, OutcomeNone, Keys{}},
		{`[11457.533097] nvme nvme5: I/O 0 QID 0 timeout, reset controller`, true, OutcomeFailed, Keys{Device: "/dev/nvme5"}},
	}
	for _, c := range cases {
		ev, ok := NewParser(ref).Parse([]byte(c.line))
		if ok != c.ok || ev.Outcome != c.outcome {
			t.Errorf("%s: ok=%v outcome=%v, want %v %v (%+v)", c.line, ok, ev.Outcome, c.ok, c.outcome, ev)
			continue
		}
		if c.ok && ev.Op != OpIO {
			t.Errorf("%s: op %q, want %q", c.line, ev.Op, OpIO)
		}
		for _, kv := range [][2]string{{c.keys.Device, ev.Keys.Device}, {c.keys.WWID, ev.Keys.WWID}, {c.keys.Map, ev.Keys.Map}} {
			if kv[0] != "" && kv[0] != kv[1] {
				t.Errorf("%s: key %q, want %q (%+v)", c.line, kv[1], kv[0], ev.Keys)
			}
		}
	}
}
