package events

import (
	"fmt"
	"testing"
)

// A kernel driver's record about a controller or host says a failure
// (a command timed out, error recovery or a reset started, a reconnect
// scheduled or failed, commands waited for) or a recovery (reconnected,
// reset done): the lines are generated from the printk formats of the
// NVMe core and its PCI, TCP and RDMA transports (drivers/nvme/host)
// and of an HBA driver's host reset (megaraid_sas), so a driver's other
// wording of the same state is read alike.
func TestDeviceControllerState(t *testing.T) {
	stamp := "[40950.767822] "
	cases := []struct {
		format  string
		args    []any
		outcome Outcome
		device  string
	}{
		// tcp.c / rdma.c: an admin or I/O command's timeout, recovery.
		{"nvme nvme%d: queue %d: timeout cid %#x type %d opcode %#x (%s)", []any{2, 0, 0xb001, 4, 0x18, "Admin Cmd"}, OutcomeFailed, "/dev/nvme2"},
		{"nvme nvme%d: starting error recovery", []any{3}, OutcomeFailed, "/dev/nvme3"},
		{"nvme nvme%d: Reconnecting in %d seconds...", []any{0, 10}, OutcomeFailed, "/dev/nvme0"},
		{"nvme nvme%d: Failed reconnect attempt %d/%d", []any{1, 3, 30}, OutcomeFailed, "/dev/nvme1"},
		{"nvme nvme%d: Successfully reconnected (%d attempt)", []any{0, 1}, OutcomeSucceeded, "/dev/nvme0"},
		{"nvme nvme%d: Successfully reconnected (%d attempts)", []any{4, 2}, OutcomeSucceeded, "/dev/nvme4"},
		// pci.c: a command's timeout, aborted or the controller reset.
		{"nvme nvme%d: I/O tag %d (%04x) opcode %#x (%s) QID %d timeout, aborting", []any{0, 59, 0x303b, 1, "Write", 25}, OutcomeFailed, "/dev/nvme0"},
		{"nvme nvme%d: I/O %d QID %d timeout, reset controller", []any{5, 0, 0}, OutcomeFailed, "/dev/nvme5"},
		{"nvme nvme%d: controller is down; will reset: CSTS=%#x, PCI_STATUS=%#x", []any{0, 0xffffffff, 0xffff}, OutcomeFailed, "/dev/nvme0"},
		// the SCSI midlayer's error handler: a device offlined, I/O
		// to it refused, named by its host.
		{"scsi: Device offlined - not ready after error recovery: host %d channel %d id %d lun %d", []any{1, 0, 6, 0}, OutcomeFailed, "scsi1"},
		{"scsi%d (%d:%d): rejecting I/O to offline device", []any{1, 6, 0}, OutcomeFailed, "scsi1"},
		// megaraid_sas: a host's outstanding commands, its reset.
		{"megaraid_sas 0000:5a:00.0: [%d]waiting for %d commands to complete for scsi%d", []any{30, 65, 0}, OutcomeFailed, "scsi0"},
		{"megaraid_sas 0000:5a:00.0: resetting fusion adapter scsi%d.", []any{1}, OutcomeFailed, "scsi1"},
		{"megaraid_sas 0000:5a:00.0: Reset successful for scsi%d.", []any{1}, OutcomeSucceeded, "scsi1"},
		// mpt3sas: the adapter faulted, reset by its driver.
		{"mpt3sas_cm%d: fault_state(%#x)!", []any{0, 0x2666}, OutcomeFailed, "mpt3sas_cm0"},
		{"mpt3sas_cm%d: sending diag reset !!", []any{0}, OutcomeFailed, "mpt3sas_cm0"},
		{"mpt2sas_cm%d: attempting host reset! scmd(0x%x)", []any{0, 0x8734b0f9}, OutcomeFailed, "mpt2sas_cm0"},
		{"mpt3sas_cm%d: diag reset: SUCCESS", []any{0}, OutcomeSucceeded, "mpt3sas_cm0"},
		{"mpt2sas%d: diag reset: SUCCESS", []any{0}, OutcomeSucceeded, "mpt2sas0"},
	}
	for _, c := range cases {
		line := stamp + fmt.Sprintf(c.format, c.args...)
		if !mayMatter([]byte(line)) {
			t.Errorf("%s: dropped by the prefilter", line)
			continue
		}
		ev, ok := NewParser(ref).Parse([]byte(line))
		if !ok || ev.Outcome != c.outcome || ev.Op != OpIO || ev.Keys.Device != c.device {
			t.Errorf("%s: ok=%v outcome=%v op=%q device=%q, want %v %q %q", line, ok, ev.Outcome, ev.Op, ev.Keys.Device, c.outcome, OpIO, c.device)
		}
	}
	// A controller's or host's records of a healthy boot say no state.
	for _, line := range []string{
		stamp + "nvme nvme0: creating 48 I/O queues.",
		stamp + "nvme nvme0: mapped 48/0/0 default/read/poll queues.",
		stamp + "scsi host0: megaraid_sas",
		stamp + "megaraid_sas 0000:5a:00.0: FW now in Ready state",
		// an orderly disconnect (a volume unstaged), not a failure
		stamp + "nvme nvme0: Removing ctrl: NQN \"nqn.2019-05.io.openebs:vol\"",
		stamp + "mpt3sas_cm0: LSISAS3008: FWVersion(16.00.01.00), ChipRevision(0x02), BiosVersion(08.37.00.00)",
		stamp + "nvme nvme1: new ctrl: NQN \"nqn.2019-05.io.openebs:vol\", addr 10.0.0.5:8420",
	} {
		if ev, ok := NewParser(ref).Parse([]byte(line)); ok && ev.Outcome != OutcomeNone {
			t.Errorf("%s: outcome %v, want none", line, ev.Outcome)
		}
	}
}
