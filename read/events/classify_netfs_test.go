package events

import "testing"

// A kernel network file system client's mount failure is a failed mount
// of the share its attempt named, with the errno it returned; the
// attempt alone, and a client's record about anything but a mount, are
// no failure.
func TestNetworkFSClientRecords(t *testing.T) {
	p := NewParser(ref)
	cases := []struct {
		line   string
		failed bool
		server string
		errno  string
	}{
		{`[ 100.000001] CIFS: Attempting to mount //files.example.net/team`, false, "", ""},
		{`[ 100.000002] CIFS: VFS: \\files.example.net Send error in SessSetup = -13`, false, "", ""},
		{`[ 100.000003] CIFS: VFS: cifs_mount failed w/return code = -13`, true, "//files.example.net/team", "EACCES"},
		{`Jan 02 03:04:05 node kernel: CIFS VFS: cifs_mount failed w/return code = -112`, true, "//files.example.net/team", "EHOSTDOWN"},
		{`[ 100.000004] CIFS: VFS: No username specified`, false, "", ""},
		{`[ 100.000005] NFS: Registering the id_resolver key type`, false, "", ""},
	}
	for _, c := range cases {
		ev, _ := p.Parse([]byte(c.line))
		got := ev.Outcome == OutcomeFailed && ev.Op == OpMount
		if got != c.failed {
			t.Errorf("%s: failed mount %v, want %v (%+v)", c.line, got, c.failed, ev)
			continue
		}
		if c.failed && (ev.Keys.Server != c.server || ev.Err.Errno != c.errno) {
			t.Errorf("%s: server %q errno %q, want %q %q", c.line, ev.Keys.Server, ev.Err.Errno, c.server, c.errno)
		}
	}
}
