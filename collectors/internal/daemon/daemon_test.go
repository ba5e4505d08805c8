package daemon

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/internal/procfs"
)

// honest is a kubelet as a kubeadm node runs it.
func honest() Facts {
	return Facts{
		UserNS: "user:[4026531837]", InitUserNS: "user:[4026531837]",
		Exe: "/usr/bin/kubelet", ExeMode: 0o100755,
		Dirs: []FileFacts{{Path: "/usr/bin", Mode: 0o40755}, {Path: "/usr", Mode: 0o40755}, {Path: "/", Mode: 0o40755}},
		Unit: "kubelet.service",
	}
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Facts)
		failed string // a word the refusal must hold; "" for trusted
	}{
		{"kubeadm's kubelet", func(*Facts) {}, ""},
		{"an unprivileged user's program", func(f *Facts) { f.UID = procfs.IDSet{Real: 65534, Effective: 65534} }, "uid 65534"},
		{"a setuid binary run by a user", func(f *Facts) { f.UID = procfs.IDSet{Real: 1000, Effective: 0} }, "uid 1000"},
		{"status unreadable", func(f *Facts) { f.StatusErr = "permission denied" }, "status cannot be read"},
		{"root in a user's user namespace", func(f *Facts) { f.UserNS = "user:[4026532999]" }, "user namespace"},
		{"user namespace unknown", func(f *Facts) { f.UserNS = "" }, "cannot be read"},
		{"the node's user namespace unknown", func(f *Facts) { f.InitUserNS = "" }, "cannot be compared"},
		{"no executable link", func(f *Facts) { f.Exe, f.ExeErr = "", "no such file" }, "executable cannot be read"},
		{"executable owned by a user", func(f *Facts) { f.ExeUID = 1000 }, "owned by uid 1000"},
		{"executable writable by others", func(f *Facts) { f.ExeMode = 0o100777 }, "writable"},
		{"executable writable by a non-root group", func(f *Facts) { f.ExeMode, f.ExeGID = 0o100775, 100 }, "writable"},
		{"executable writable by root's group", func(f *Facts) { f.ExeMode = 0o100775 }, ""},
		{"in a user's directory", func(f *Facts) { f.Dirs[0].UID = 1000 }, "directory /usr/bin"},
		{"in a world-writable directory", func(f *Facts) { f.Dirs[0].Mode = 0o41777 }, "writable"},
		{"a directory unreadable", func(f *Facts) { f.Dirs[1].Err = "permission denied" }, "cannot be checked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := honest()
			tc.edit(&f)
			why, failed := Judge(f)
			switch {
			case tc.failed == "" && (failed != "" || why == ""):
				t.Errorf("refused: %s", failed)
			case tc.failed != "" && (failed == "" || why != ""):
				t.Errorf("trusted: %s", why)
			case tc.failed != "" && !strings.Contains(failed, tc.failed):
				t.Errorf("refusal %q does not say %q", failed, tc.failed)
			}
		})
	}
	if why, _ := Judge(honest()); !strings.Contains(why, "kubelet.service") {
		t.Errorf("the unit is not named in %q", why)
	}
}

func TestIsKubelet(t *testing.T) {
	for _, tc := range []struct{ comm, exe, want string }{
		{"kubelet", "kubelet", "kubelet"},
		{"kubelite", "kubelite", "kubelet"},
		{"hyperkube", "hyperkube", "kubelet"},
		{"kubelet-wrapper", "kubelet", "kubelet"}, // renamed, the executable tells
		{"kubectl", "kubectl", ""},
		{"containerd", "containerd", ""},
	} {
		if got := IsKubelet(tc.comm, tc.exe); got != tc.want {
			t.Errorf("IsKubelet(%q, %q) = %q, want %q", tc.comm, tc.exe, got, tc.want)
		}
	}
}

func TestParseArgsFile(t *testing.T) {
	in := "# microk8s args/kubelet\n--kubeconfig=${SNAP_DATA}/credentials/kubelet.config\n" +
		"--config /var/snap/microk8s/current/args/kubelet.yaml\n--node-ip='10.0.0.5'\n\n--fail-swap-on\nnot-a-flag\n"
	want := []string{"--kubeconfig=${SNAP_DATA}/credentials/kubelet.config", "--config=/var/snap/microk8s/current/args/kubelet.yaml",
		"--node-ip=10.0.0.5", "--fail-swap-on"}
	if got := ParseArgsFile(in); !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func FuzzParseArgsFile(f *testing.F) {
	f.Add("--kubeconfig=/a\n--config /b\n# x\n")
	f.Add("--x='\n\"")
	f.Fuzz(func(t *testing.T, s string) {
		for _, a := range ParseArgsFile(s) {
			if !strings.HasPrefix(a, "-") || strings.Contains(a, "\n") {
				t.Fatalf("%q from %q", a, s)
			}
		}
	})
}

func TestUnitOf(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0::/system.slice/kubelet.service\n", "kubelet.service"},
		{"12:pids:/system.slice/k3s-agent.service\n1:name=systemd:/system.slice/snap.microk8s.daemon-kubelite.service\n", "snap.microk8s.daemon-kubelite.service"},
		{"0::/user.slice/user-1000.slice/session-3.scope\n", ""},
		{"0::/kubepods/burstable/podabc/0123\n", ""},
	} {
		if got := unitOf(tc.in); got != tc.want {
			t.Errorf("unitOf(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSnapPaths(t *testing.T) {
	args := []string{"--kubeconfig=${SNAP_DATA}/credentials/kubelet.config", "--root-dir=${SNAP_COMMON}/var/lib/kubelet", "--x=$HOME/y", "--v=2"}
	got := snapPaths(args, "/snap/microk8s/7234/kubelite")
	want := []string{"--kubeconfig=/var/snap/microk8s/7234/credentials/kubelet.config", "--root-dir=/var/snap/microk8s/common/var/lib/kubelet", "--x=${HOME}/y", "--v=2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := snapPaths(args, "/usr/bin/kubelet"); !reflect.DeepEqual(got, args) {
		t.Errorf("not a snap, changed: %q", got)
	}
}

// On the kernel's procfs, what the kernel says of this very process is
// read: its uids, a user namespace comparable with the node's (pid 1's,
// or nodesnap's own where pid 1's is not readable), its executable.
func TestFactsOfThisProcess(t *testing.T) {
	res, err := factsOp(FactsRequest{Proc: "/proc", PID: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	f := res.(Facts)
	if f.StatusErr != "" || f.UID.Real != uint32(os.Getuid()) {
		t.Errorf("status: %q, uid %d, want %d", f.StatusErr, f.UID.Real, os.Getuid())
	}
	if f.UserNS == "" || f.InitUserNS == "" || f.UserNS != f.InitUserNS {
		t.Errorf("user namespaces %q and %q (%s): want both read and equal", f.UserNS, f.InitUserNS, f.NSRef)
	}
	if exe, _ := os.Executable(); f.Exe != exe || f.ExeErr != "" || len(f.Dirs) == 0 {
		t.Errorf("exe %q (%s), dirs %d; want %q", f.Exe, f.ExeErr, len(f.Dirs), exe)
	}
	for _, d := range f.Dirs {
		if d.Err != "" {
			t.Errorf("the directory %s of the executable: %s", d.Path, d.Err)
		}
	}
	if len(f.Args) == 0 {
		t.Errorf("no command line")
	}
}
