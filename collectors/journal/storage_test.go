package journal_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
)

// The storage stack's daemons are collected without a flag: multipathd,
// iscsid and the NFS daemons, found by their units or by the programs'
// own syslog identifiers (rpc.statd logs as itself, not as rpc-statd);
// a daemon of no storage unit is not, and a unit the node does not run
// gives no file.
func TestJournalStorageDaemonsByDefault(t *testing.T) {
	j := startJournald(t)
	id := nonce(t)
	lines := map[string]string{
		"multipathd": "mpatha: sdc - tur checker reports path is down " + id,
		"iscsid":     "Kernel reported iSCSI connection 1:0 error (1022 - ISCSI_ERR_NOP_TIMEDOUT: A NOP has timed out) state (3) " + id,
		"rpc.statd":  "Failed to open directory sm: Permission denied " + id,
		"rpc.idmapd": "nss_getpwnam: name 'user@example.org' does not map into domain 'localdomain' " + id,
		"sshd":       "Accepted publickey for admin " + id,
	}
	for ident, l := range lines {
		j.cat(t, ident, []string{l})
		j.waitFor(t, "SYSLOG_IDENTIFIER="+ident, l)
	}
	journalFlags(t, "--journal-dir="+j.Dir)
	c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
	if r := journalResult(t, c); r.Status != bundle.StatusOK {
		t.Fatalf("journal status %q (%s)", r.Status, r.Error)
	}
	for file, ident := range map[string]string{"multipathd.log": "multipathd", "iscsid.log": "iscsid",
		"rpc-statd.log": "rpc.statd", "nfs-idmapd.log": "rpc.idmapd"} {
		if got := string(c.Files["journal/"+file]); !strings.Contains(got, lines[ident]) {
			t.Errorf("journal/%s lacks %s's line: %q", file, ident, got)
		}
	}
	for name, data := range c.Files {
		if strings.Contains(string(data), lines["sshd"]) {
			t.Errorf("%s holds sshd's line, which is no storage daemon's", name)
		}
	}
	if _, ok := c.Files["journal/nfs-server.log"]; ok {
		t.Errorf("journal/nfs-server.log exists, yet no NFS server ran")
	}
}

// The distributions that run the kubelet inside a service of their own
// (k3s, MicroK8s's kubelite under its snap's app name) are collected
// without a flag: their journal is the kubelet's.
func TestJournalKubeletDistributionsByDefault(t *testing.T) {
	j := startJournald(t)
	id := nonce(t)
	lines := map[string]string{
		"k3s":                      `E1121 09:10:01.000000    3936 reconciler_common.go:158] "operationExecutor.UnmountVolume failed" ` + id,
		"microk8s.daemon-kubelite": `E1121 09:10:02.000000    2636 nestedpendingoperations.go:348] Operation for volume failed ` + id,
	}
	for ident, l := range lines {
		j.cat(t, ident, []string{l})
		j.waitFor(t, "SYSLOG_IDENTIFIER="+ident, l)
	}
	journalFlags(t, "--journal-dir="+j.Dir)
	c, _ := collectJournal(t, []string{"journal"}, collectors.Common{})
	if r := journalResult(t, c); r.Status != bundle.StatusOK {
		t.Fatalf("journal status %q (%s)", r.Status, r.Error)
	}
	for file, ident := range map[string]string{"k3s.log": "k3s", "snap.microk8s.daemon-kubelite.log": "microk8s.daemon-kubelite"} {
		if got := string(c.Files["journal/"+file]); !strings.Contains(got, lines[ident]) {
			t.Errorf("journal/%s lacks %s's line: %q", file, ident, got)
		}
	}
	if _, ok := c.Files["journal/rke2-server.log"]; ok {
		t.Errorf("journal/rke2-server.log exists, yet no RKE2 ran")
	}
}
