package events

import "testing"

// The SCSI disk driver names its disk in brackets after the SCSI
// address, and says a command failed by its sense key; dev_printk and
// block drivers put a negative errno in parentheses. Each is read by
// that structure, whatever the words around it.
func TestDeviceRecordShapes(t *testing.T) {
	cases := []struct {
		name    string
		line    string
		ok      bool
		outcome Outcome
		device  string
	}{
		{"sense key medium error names the bracketed disk", `[130128.749865] sd 15:0:0:1: [sdn] tag#4 Sense Key : Medium Error [current]    `, true, OutcomeFailed, "/dev/sdn"},
		{"sense key hardware error", `Jun  5 16:24:16 cdn1 kernel: [171728.061570] sd 13:0:0:1: [sdg] tag#22 Sense Key : Hardware Error [current] `, true, OutcomeFailed, "/dev/sdg"},
		{"an unsupported command's illegal request is no failure", `[    3.100000] sd 2:0:0:0: [sdb] tag#0 Sense Key : Illegal Request [current] error`, false, OutcomeNone, ""},
		{"a recovered error is no failure", `[    3.100000] sd 2:0:0:0: [sdb] tag#0 Sense Key : Recovered Error [current] error`, false, OutcomeNone, ""},
		{"an attached disk is no failure", `[    2.000000] sd 2:0:0:0: [sdb] Attached SCSI disk`, false, OutcomeNone, ""},
		{"parenthesized negative errno of dev_printk", `[Mon Dec 26 06:14:36 2022] nvme nvme0: rdma connection establishment failed (-104)`, true, OutcomeFailed, "/dev/nvme0"},
		{"a block driver's result errno", `[  151.366971] block nbd0: Receive control failed (result -104)`, true, OutcomeFailed, "/dev/nbd0"},
		{"a positive status in parentheses is no errno", `[    1.500000] nvme nvme0: failed to set APST feature (2)`, false, OutcomeNone, ""},
	}
	for _, c := range cases {
		ev, ok := NewParser(ref).Parse([]byte(c.line))
		if ok != c.ok || ev.Outcome != c.outcome {
			t.Errorf("%s: ok=%v outcome=%v, want %v %v (%+v)", c.name, ok, ev.Outcome, c.ok, c.outcome, ev)
			continue
		}
		if c.ok && (ev.Op != OpIO || ev.Keys.Device != c.device) {
			t.Errorf("%s: op %q device %q, want %q %q", c.name, ev.Op, ev.Keys.Device, OpIO, c.device)
		}
	}
}
