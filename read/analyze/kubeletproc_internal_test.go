package analyze

import "testing"

// The process that runs the node's kubelet, known by what it runs: a
// wrapper given the kubelet's binary is the kubelet's process, a process
// that only names the kubelet somewhere in its arguments is not.
func TestIsKubeletProcWrappers(t *testing.T) {
	cases := []struct {
		comm, cmdline string
		uid           int
		want          bool
	}{
		{"kubelet", "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml", 0, true},
		{"d8-kubelet-forker", "/usr/local/bin/d8-kubelet-forker /usr/bin/kubelet --config=/var/lib/kubelet/config.yaml", 0, true},
		{"kubenswrapper", "/usr/bin/kubenswrapper /usr/bin/kubelet --config=/etc/kubernetes/kubelet.conf", 0, true},
		{"kubelite", "/snap/microk8s/7000/kubelite --scheduler-args-file=/var/snap/microk8s/7000/args/kube-scheduler", 0, true},
		{"k3s-agent", "/usr/local/bin/k3s agent", 0, true},
		{"sh", "/bin/sh -c tail -f /var/log/kubelet.log", 0, false},
		{"grep", "grep kubelet", 0, false},
		{"journalctl", "journalctl -u kubelet", 0, false},
		{"du", "du -sh /var/lib/kubelet", 0, false},
		{"ls", "ls /var/lib/kubelet", 0, false},
		// A user's process that calls itself the kubelet is not the
		// node's: its hung thread is no kubelet's.
		{"kubelet", "/home/u/kubelet --config=/var/lib/kubelet/config.yaml", 1000, false},
	}
	for _, c := range cases {
		if got := isKubeletProc(&procInfo{Comm: c.comm, Cmdline: c.cmdline, UID: c.uid}); got != c.want {
			t.Errorf("%s %q: isKubeletProc = %v, want %v", c.comm, c.cmdline, got, c.want)
		}
	}
}
