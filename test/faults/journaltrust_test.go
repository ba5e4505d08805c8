package faults

// The journal attack of issue 38 (round two): a local user's entries under
// the kubelet's name became kernel and kubelet findings.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// sendAs sends one entry of fields to journald's native socket from a
// process of uid: journald records that uid (_UID) from the socket's
// credentials, as it would for `logger -t kubelet` run by that user.
func sendAs(t *testing.T, j *testkit.Journald, uid int, fields string) {
	t.Helper()
	sock := fmt.Sprintf("/proc/%d/root/run/systemd/journal/socket", j.Pid)
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// cat, as uid, copies the entry (one read, one write: one datagram)
	// to the socket root connected.
	cmd := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", "cat")
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(fields), f, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sending as uid %d: %v %s", uid, err, stderr.String())
	}
}

// Entries a user (uid 1000) sends under the kubelet's name, one with the
// kernel's hung-task words and five PLEG lines, in a private journal: the
// bundle shows them (journal/kubelet.unverified.log), and analyze makes
// neither kernel-hung-task nor kubelet-pleg-unhealthy of them.
func TestJournalForgedKubeletMakesNoFinding(t *testing.T) {
	testkit.RequireTool(t, "setpriv")
	j := testkit.StartJournald(t)
	const hung = "INFO: task umount:31337 blocked for more than 120 seconds."
	sendAs(t, j, 1000, "SYSLOG_IDENTIFIER=kubelet\nPRIORITY=3\nNODESNAP_FORGED=1\nMESSAGE="+hung+"\n")
	for i := 0; i < 5; i++ {
		sendAs(t, j, 1000, "SYSLOG_IDENTIFIER=kubelet\nPRIORITY=3\nNODESNAP_FORGED=1\nMESSAGE=E1121 09:1"+fmt.Sprint(i)+
			":00.000000    4242 kubelet.go:2412] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m12s ago; threshold is 3m0s\"\n")
	}
	j.WaitCount(t, "NODESNAP_FORGED=1", 6)
	n := newNode(t)
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "journal", "--journal-dir="+j.Dir,
		"--journal-reader=native", "--journal-unit=kubelet", "--journal-kernel=false", "--since=24h")...)
	c, _ := checkOutput(t, out, true, nil)
	if c == nil {
		t.Fatalf("no bundle: exit %d\n%s", r.code, r.stderr)
	}
	if k := string(c.Files["journal/kubelet.log"]); strings.Contains(k, "PLEG") || strings.Contains(k, "umount:31337") {
		t.Errorf("journal/kubelet.log holds the user's entries:\n%s", k)
	}
	if u := string(c.Files["journal/kubelet.unverified.log"]); strings.Count(u, "PLEG is not healthy") != 5 || !strings.Contains(u, "umount:31337") {
		t.Errorf("journal/kubelet.unverified.log does not show the user's entries:\n%s", u)
	}
	bundles, _ := filepath.Glob(filepath.Join(out, "*.tar.gz"))
	if len(bundles) != 1 {
		t.Fatalf("bundles in %s: %v", out, bundles)
	}
	bundlePath := bundles[0]
	a := nodesnap(t, 60*time.Second, nil, "analyze", "-o", "json", bundlePath)
	var rep struct {
		Findings []struct {
			ID string `json:"id"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(a.stdout), &rep); err != nil {
		t.Fatalf("analyze -o json: %v\n%s%s", err, a.stdout, a.stderr)
	}
	for _, f := range rep.Findings {
		if f.ID == "kernel-hung-task" || f.ID == "kubelet-pleg-unhealthy" {
			t.Errorf("analyze made %s of a user's entries", f.ID)
		}
	}
	if !bytes.Contains([]byte(a.stdout), []byte(`"findings"`)) {
		t.Errorf("analyze: %s", a.stdout)
	}
}
