package analyze

import (
	"strings"
	"testing"
)

// What a goroutine in a system call is doing is read from its frames: the
// mount syscall itself, a process wait under a function named for
// mounting, and not a mount-point check or a wait under anything else.
func TestBlockedMountCall(t *testing.T) {
	const mountSys = "syscall.Syscall6(0xa5, 0xc820ccbac0)\n\t/usr/local/go/src/syscall/asm_linux_amd64.s:44 +0x5\n" +
		"syscall.mount(0xc820d2d430, 0xd)\n\t/usr/local/go/src/syscall/zsyscall_linux_amd64.go:224 +0x18f\n" +
		"syscall.Mount(0xc820d2d430, 0xd)\n\t/usr/local/go/src/syscall/syscall_linux.go:806 +0x151\n" +
		"github.com/docker/docker/pkg/mount.ForceMount(0xc820d2d430)\n\t/src/mount.go:49 +0xbb\n"
	const unixUnmount = "golang.org/x/sys/unix.Unmount({0xc0001, 0x20}, 0x2)\n\tsyscall_linux.go:1 +0x1\n" +
		"example.com/driver.(*nodeServer).cleanup(0xc0)\n\tnode.go:10 +0x1\n"
	// Abridged by hand, each frame's file position on its own line.
	const helperWait = "syscall.Syscall6(0xf7, 0x3, 0xe, ...)\n" +
		"os.(*Process).pidfdWait(...)                      os/pidfd_linux.go:107\n" +
		"os/exec.(*Cmd).Wait(...)                          os/exec/exec.go:930\n" +
		"os/exec.(*Cmd).CombinedOutput(...)                os/exec/exec.go:1047\n" +
		"k8s.io/mount-utils.(*Mounter).Unmount(...)        mount_linux.go:404\n"
	const otherWait = "syscall.wait4(0x1df, 0xc20985ed0c)\n\tzsyscall_linux_amd64.go:124 +0x79\n" +
		"os/exec.(*Cmd).Wait(0xc2086bcdc0)\n\texec.go:364 +0x23c\n" +
		"k8s.io/kubernetes/pkg/util/mount.(*NsenterMounter).IsLikelyNotMountPoint(0xc208036120)\n\tnsenter_mount.go:1 +0x1\n"
	const statCheck = "syscall.fstatat(0xffffffffffffff9c)\n\tzsyscall.go:1 +0x1\nos.Stat(0xc0)\n\tstat.go:13 +0x4d\n" +
		"k8s.io/mount-utils.(*Mounter).IsLikelyNotMountPoint(0xc0)\n\tmount_linux.go:1 +0x1\n"
	cases := []struct {
		name, dump, want string
	}{
		{"mount(2) under a runtime's ForceMount", "goroutine 195 [syscall]:\n" + mountSys, "syscall.mount"},
		{"x/sys/unix's unmount", "goroutine 7 [syscall, 3 minutes]:\n" + unixUnmount, "golang.org/x/sys/unix.Unmount"},
		{"waiting for umount under mount-utils' Unmount, positions inline", "goroutine 2849313 gp=0x20 m=8 [syscall, 18 minutes]:\n" + helperWait, "k8s.io/mount-utils.(*Mounter).Unmount"},
		{"waiting for a helper under a mount-point check", "goroutine 304 [syscall, 5352 minutes]:\n" + otherWait, ""},
		{"a stat under a mount-point check", "goroutine 251 [syscall, 939 minutes]:\n" + statCheck, ""},
		{"the mount syscall's frames but not in a syscall", "goroutine 9 [runnable]:\n" + mountSys, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := parseGoroutines("runtime/docker/goroutine-debug2.txt", strings.NewReader(c.dump))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for i := range d.Kept {
				if s := blockedMountCall(&d.Kept[i]); s != "" {
					got = s
				}
			}
			if got != c.want {
				t.Errorf("blockedMountCall = %q, want %q (kept %d of %d)", got, c.want, len(d.Kept), d.Total)
			}
		})
	}
}

// A runtime's goroutine in a mount call and a node plugin's Node call in a
// system call are named by their goroutine, their severity from the
// dump's state: a minute or more, warning; no duration, info.
func TestRuleBlockedMountCalls(t *testing.T) {
	const runtimeMount = "goroutine 195 [syscall]:\nsyscall.Mount(0xc820d2d430, 0xd)\n\tsyscall_linux.go:806 +0x151\n"
	const runtimeMountLong = "goroutine 196 [syscall, 12 minutes]:\nsyscall.Mount(0xc820d2d430, 0xd)\n\tsyscall_linux.go:806 +0x151\n"
	const pluginStat = "goroutine 88 [syscall, 40 minutes]:\nsyscall.fstatat(0x1)\n\tz.go:1 +0x1\nos.Stat(0xc0)\n\tstat.go:13 +0x4d\n" +
		"example.com/csi/driver.(*nodeServer).NodeGetVolumeStats(0xc0)\n\tnode.go:1 +0x1\n" +
		"github.com/container-storage-interface/spec/lib/go/csi._Node_NodeGetVolumeStats_Handler(0xc0)\n\tcsi.pb.go:1 +0x1\n"
	const pluginIdle = "goroutine 12 [IO wait]:\nexample.com/csi/driver.(*nodeServer).NodePublishVolume(0xc0)\n\tnode.go:1 +0x1\n" +
		"csi._Node_NodePublishVolume_Handler(0xc0)\n\tcsi.pb.go:1 +0x1\n"
	parse := func(path, text string) *goroutineDump {
		d, err := parseGoroutines(path, strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	st := &state{
		runtimeDump: []*goroutineDump{parse("runtime/docker/goroutine-debug2.txt", runtimeMount+"\n"+runtimeMountLong)},
		pluginDumps: []*goroutineDump{parse("csi/podlogs/kube-system_x-node-1/x/0.log", pluginStat+"\n"+pluginIdle)},
	}
	ruleBlockedMountCalls(st)
	want := map[string]struct {
		id  string
		sev Severity
	}{
		"goroutine 195": {idRuntimeMountBlock, Info},
		"goroutine 196": {idRuntimeMountBlock, Warning},
		"goroutine 88":  {idCSINodeCallHung, Warning},
	}
	if len(st.findings) != len(want) {
		t.Fatalf("%d findings, want %d: %+v", len(st.findings), len(want), st.findings)
	}
	for _, f := range st.findings {
		w, ok := want[f.Subject]
		if !ok || f.ID != w.id || f.Severity != w.sev {
			t.Errorf("finding %s %s %s, want %+v", f.ID, f.Severity, f.Subject, w)
		}
		if f.Title == "" || f.Explanation == "" || len(f.Remediation) == 0 || len(f.Evidence) == 0 {
			t.Errorf("finding %s %s: title %q, %d evidence, %d remediation: want each", f.ID, f.Subject, f.Title, len(f.Evidence), len(f.Remediation))
		}
		if f.Subject == "goroutine 88" && !strings.Contains(f.Summary, "NodeGetVolumeStats") {
			t.Errorf("summary %q does not name the Node call", f.Summary)
		}
	}
}

// Frames abridged with their file position on the same line continue a
// dump; other text does not.
func TestFrameWithPosition(t *testing.T) {
	cases := map[string]bool{
		"os/exec.(*Cmd).Wait(...)                          os/exec/exec.go:930": true,
		"k8s.io/mount-utils.(*Mounter).Unmount(...)\tmount_linux.go:404":        true,
		"os.(*Process).Wait(...)":                                 false,
		"E1025 18:25:43.329220 7 pod_driver.go:491] stat mntPath": false,
		"fatal error: thread exhaustion":                          false,
		"main.run(0x1) main.go:12 extra":                          false,
		"main.run(0x1) main.go:x12":                               false,
	}
	for in, want := range cases {
		if got := frameWithPosition([]byte(in)); got != want {
			t.Errorf("frameWithPosition(%q) = %v, want %v", in, got, want)
		}
	}
}

// A container's log line is read without its CRI prefix, so a goroutine
// dump a node plugin printed to stderr is assembled like a journal's.
func TestLogMessageCRI(t *testing.T) {
	cases := map[string]string{
		"2026-12-08T00:00:00.123456789Z stderr F goroutine 1 [syscall, 3 minutes]:": "goroutine 1 [syscall, 3 minutes]:",
		"2026-12-08T00:00:00.123456789Z stdout P syscall.Mount(0x1)":                "syscall.Mount(0x1)",
		"Sep 20 23:22:02 host dockerd[10917]: goroutine 195 [syscall]:":             "goroutine 195 [syscall]:",
	}
	for in, want := range cases {
		if got := string(logMessage([]byte(in))); got != want {
			t.Errorf("logMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

// Any text read as a dump, and each of its lines as a pasted frame, is
// classified without a panic.
func FuzzMountCallFrames(f *testing.F) {
	f.Add("goroutine 195 [syscall]:\nsyscall.Mount(0x1)\n\tsyscall_linux.go:806 +0x151\n")
	f.Add("goroutine 1 gp=0x2 m=8 [syscall, 18 minutes]:\nos/exec.(*Cmd).Wait(...)   exec.go:930\nk8s.io/mount-utils.(*Mounter).Unmount(...)  m.go:4\ncsi._Node_NodeUnpublishVolume_Handler(...)\n")
	f.Add("x) y.go:\n(\n).\n_Node__Handler(\n")
	f.Fuzz(func(t *testing.T, text string) {
		for _, l := range strings.Split(text, "\n") {
			frameWithPosition([]byte(l))
			callName(l)
			logMessage([]byte(l))
		}
		d, err := parseGoroutines("csi/podlogs/x/y/0.log", strings.NewReader(text))
		if err != nil || d == nil {
			return
		}
		for i := range d.Kept {
			blockedMountCall(&d.Kept[i])
			csiNodeCall(&d.Kept[i])
		}
		st := &state{runtimeDump: []*goroutineDump{d}, pluginDumps: []*goroutineDump{d}}
		ruleBlockedMountCalls(st)
	})
}
