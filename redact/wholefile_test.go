package redact

import (
	"strings"
	"testing"
)

// A file that is one token at a path that says secret, or at a known
// secret path, is masked whole; colon credential files lose their last
// field; everything else comes back as it was, for the Writer.
func TestWholeFile(t *testing.T) {
	r := Default()
	for _, c := range []struct {
		path, data string
		rule       string
	}{
		{"/var/lib/rancher/k3s/server/token", "K10abc::server:def0123456789\n", WholeFileRule},
		{"/var/lib/rancher/rke2/server/node-token", "K10abc::node:def0123456789\n", WholeFileRule},
		{"/var/lib/kubelet/pods/0b5e/volumes/kubernetes.io~projected/kube-api-access-x1/token", "plain-opaque-token-value", WholeFileRule},
		{"/etc/ceph/admin.secret", "notbase64butsecret\n", WholeFileRule},
		{"/opt/agent/auth-token", "abcdefgh", WholeFileRule},
		{"/etc/vendor/apiKey", "abcdefgh\n", WholeFileRule},
		{"/etc/passwd-s3fs", "AKIAEXAMPLEKEY:s3fsSecretValue123\nbucket:AKIAOTHER:AnotherSecret99\n", CredentialFileRule},
		{"/root/.pgpass", "db.example:5432:*:postgres:pg\\:pass:word\n", CredentialFileRule},
	} {
		out, counts := r.WholeFile(c.path, []byte(c.data))
		if counts[c.rule] == 0 {
			t.Errorf("%s: not masked (%v): %q", c.path, counts, out)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(c.data), "\n") {
			secret := line
			if c.rule == CredentialFileRule {
				secret = line[lastUnescapedColon([]byte(line))+1:]
			}
			if strings.Contains(string(out), secret) {
				t.Errorf("%s: %q kept: %q", c.path, secret, out)
			}
		}
	}
	for _, c := range []struct{ path, data string }{
		{"/etc/hostname", "node-1\n"},
		{"/etc/iscsi/initiatorname.iscsi", "InitiatorName=iqn.1993-08.org.debian:01:abcdef\n"},
		{"/etc/kubernetes/pki/sa.pub", "abcdefghijkl\n"},
		{"/etc/vendor/token.conf", "token = abc\nurl = https://x\n"},
		{"/var/lib/rancher/k3s/server/token", "short"},
		{"/etc/machine-id", "0123456789abcdef0123456789abcdef\n"},
	} {
		out, counts := r.WholeFile(c.path, []byte(c.data))
		if string(out) != c.data || len(counts) != 0 {
			t.Errorf("%s: changed to %q (%v)", c.path, out, counts)
		}
	}
}

// A command line's arguments are masked as the one line a process table
// shows, so a flag's value in the next argument goes, and the joined
// result is what the line itself becomes.
func TestArgvMatchesLine(t *testing.T) {
	r := Default()
	for _, argv := range [][]string{
		{"iscsiadm", "-m", "node", "-T", "iqn.2001-05.com.example:t1", "-o", "update", "-n", "node.session.auth.password", "-v", "Chap-pw-0123"},
		{"/usr/sbin/tailscaled", "--authkey=tskey-abc-plain0", "--state=/var/lib/tailscale/state"},
		{"mysql", "--password", "Hunter2Hunter2", "-h", "db"},
		{"sh", "-c", "curl -H 'Authorization: Bearer abcdef0123456789abcdef' https://x\nexit 0"},
		{"kubelet", "--config=/var/lib/kubelet/config.yaml"},
	} {
		got, counts := r.Argv(argv)
		if len(got) != len(argv) {
			t.Fatalf("%q: %d arguments back, want %d", argv, len(got), len(argv))
		}
		line, lc := r.String(strings.ReplaceAll(strings.Join(argv, " "), "\n", " "))
		if j := strings.ReplaceAll(strings.Join(got, " "), "\n", " "); j != line {
			t.Errorf("argv %q\n masked as arguments: %q\n masked as a line:    %q", argv, j, line)
		}
		sum := func(m map[string]int) (n int) {
			for _, v := range m {
				n += v
			}
			return
		}
		if sum(counts) != sum(lc) {
			t.Errorf("%q: counts %v, line's %v", argv, counts, lc)
		}
	}
	got, _ := r.Argv([]string{"iscsiadm", "-n", "node.session.auth.password", "-v", "Chap-pw-0123"})
	if got[4] != Marker {
		t.Errorf("iscsiadm's -v value: %q", got[4])
	}
}
