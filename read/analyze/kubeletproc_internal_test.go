package analyze

import "testing"

// The process that runs the node's kubelet, known by what it runs: a
// wrapper given the kubelet's binary is the kubelet's process, a process
// that only names the kubelet somewhere in its arguments is not.
func TestIsKubeletProcWrappers(t *testing.T) {
	cases := []struct {
		comm, cmdline string
		want          bool
	}{
		{"kubelet", "/usr/bin/kubelet --config=/var/lib/kubelet/config.yaml", true},
		{"d8-kubelet-forker", "/usr/local/bin/d8-kubelet-forker /usr/bin/kubelet --config=/var/lib/kubelet/config.yaml", true},
		{"kubenswrapper", "/usr/bin/kubenswrapper /usr/bin/kubelet --config=/etc/kubernetes/kubelet.conf", true},
		{"kubelite", "/snap/microk8s/7000/kubelite --scheduler-args-file=/var/snap/microk8s/7000/args/kube-scheduler", true},
		{"k3s-agent", "/usr/local/bin/k3s agent", true},
		{"sh", "/bin/sh -c tail -f /var/log/kubelet.log", false},
		{"grep", "grep kubelet", false},
		{"journalctl", "journalctl -u kubelet", false},
		{"du", "du -sh /var/lib/kubelet", false},
		{"ls", "ls /var/lib/kubelet", false},
	}
	for _, c := range cases {
		if got := isKubeletProc(&procInfo{Comm: c.comm, Cmdline: c.cmdline}); got != c.want {
			t.Errorf("%s %q: isKubeletProc = %v, want %v", c.comm, c.cmdline, got, c.want)
		}
	}
}
