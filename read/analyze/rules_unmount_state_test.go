package analyze

import "testing"

// An unmount's severity is its error's: ENOENT on every line kept (the
// path is gone) is info, any other error a warning; a line that names no
// path names its runtime object by its 64-hex ID.
func TestUnmountStateAndRuntimeSubject(t *testing.T) {
	hits := func(lines ...string) *keyHits {
		k := &keyHits{Count: len(lines)}
		for i, l := range lines {
			k.First = append(k.First, logHit{Path: "journal/docker.log", Line: Line{N: i + 1, Text: l}})
		}
		return k
	}
	const id = "0d4c1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7"
	cases := []struct {
		k       *keyHits
		sev     Severity
		subject string
	}{
		{hits(`level=warning msg="` + id + ` cleanup: failed to unmount IPC: umount /var/lib/docker/containers/` + id + `/mounts/shm, flags: 0x2: no such file or directory"`), Info, id},
		{hits(`level=warning msg="cleanup: failed to unmount IPC: umount /run/x/shm: no such file or directory"`,
			`level=error msg="failed to unmount /run/x/shm: device or resource busy"`), Warning, ""},
		{hits(`level=error msg="devmapper: Error unmounting device ` + id + `: invalid argument"`), Warning, id},
		{hits(`level=error msg="Error unmounting container 1a2b: not mounted"`), Warning, ""},
	}
	for i, c := range cases {
		if sev, _ := unmountSeverity(c.k); sev != c.sev {
			t.Errorf("case %d: severity %v, want %v", i, sev, c.sev)
		}
		if got := runtimeIDSubject(c.k); got != c.subject {
			t.Errorf("case %d: subject %q, want %q", i, got, c.subject)
		}
	}
}

// A runtime's own journal is told by its file, not by the words of its
// lines.
func TestRuntimeJournal(t *testing.T) {
	for p, want := range map[string]bool{
		"journal/containerd.log": true, "journal/crio.log": true, "journal/docker.log": true,
		"journal/kubelet.log": false, "journal/containerd.unverified.log": false, "journal/files/containerd.log": false,
		"csi/podlogs/kube-system_ebs-csi-node-x/ebs-plugin/0.log": false,
		// k3s and RKE2 run a containerd of their own that logs to a file.
		"journal/files/k3s-containerd.log": true, "journal/files/rke2-containerd.log": true,
		"journal/files/rke2-kubelet.log": false,
	} {
		if got := runtimeJournal(p); got != want {
			t.Errorf("runtimeJournal(%q) = %v, want %v", p, got, want)
		}
	}
}
