package analyze

import (
	"bytes"
	"fmt"
	"strings"
)

// A goroutine dump of a container runtime or of a CSI node plugin can show
// a goroutine in a system call under a mount or unmount: mount(2) that does
// not return (an NFS export the host cannot reach, a FUSE daemon that does
// not answer), or a wait for a mount or umount child stuck in the kernel.
// A node plugin's gRPC handler (NodePublishVolume, NodeUnstageVolume,
// NodeGetVolumeStats...) in a system call for minutes holds its volume's
// operation lock: every later call for that volume fails or waits, and the
// kubelet's operation on it never completes. What the goroutine is doing
// is read from its frames (the syscall package's mount functions, a
// process wait under a function named for mounting, the generated handler
// of the CSI Node service), whatever the driver or runtime, and its
// severity from the dump's state: still in the call after a minute or
// more, or no duration at all.

const (
	idRuntimeMountBlock = "runtime-mount-blocking"
	idCSINodeCallHung   = "csi-node-call-hung"
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "runtime-mount-blocking", Severity: "info or warning",
		Title:    "A container runtime goroutine blocks in a mount call",
		Meaning:  "The container runtime's goroutine dump shows a goroutine in a system call under a mount or unmount (mount(2) itself, or a wait for a mount helper): the mount of a container's volume does not return, so that container's start (and, while it holds the runtime's locks, others) waits. Warning when the dump says it has waited a minute or more; info when the dump gives no duration.",
		Evidence: "`runtime/*/goroutine*.txt`, or a dump the runtime printed into its log: the blocked goroutine's frames.",
		Fix:      "Find the volume it mounts (an NFS export the node cannot reach, missing client tools such as mount.nfs, a FUSE daemon that does not answer) and fix or remove it; restart the runtime if the call never returns.",
	},
	RuleDoc{
		ID: "csi-node-call-hung", Severity: "info or warning",
		Title:    "A CSI node plugin call waits in a system call",
		Meaning:  "A CSI node plugin's goroutine dump shows one of its Node service calls (NodeStageVolume, NodePublishVolume, NodeUnpublishVolume, NodeGetVolumeStats...) in a system call: a mount, unmount or stat on a filesystem that does not answer. The call holds the volume's operation lock, so every later call for that volume fails (\"operation ... already exists\") or waits, and the kubelet's mount or teardown of it never completes. Warning when the dump says it has waited a minute or more; info when it gives no duration.",
		Evidence: "The node plugin's log holding its goroutine dump (SIGQUIT): the blocked goroutine's frames.",
		Fix:      "Find what the call waits on (`cat /proc/<pid>/stack` of the plugin's threads, the mount it names) and fix the storage it reaches; a mount stuck in the kernel needs `umount -f`/`umount -l` (FUSE: `fusermount -uz`) before the plugin is restarted.",
	},
)

// callName is a frame's function name without package path, receiver or
// arguments: "k8s.io/mount-utils.(*Mounter).Unmount(...)  mount_linux.go:404"
// gives "Unmount".
func callName(frame string) string {
	f := frame
	if i := strings.IndexAny(f, " \t"); i > 0 {
		f = f[:i]
	}
	if strings.HasSuffix(f, ")") {
		if i := strings.LastIndexByte(f, '('); i > 0 && !strings.HasSuffix(f[:i], ")") && !strings.HasSuffix(f[:i], "*") {
			f = f[:i]
		}
	}
	if i := strings.LastIndexByte(f, '.'); i >= 0 {
		f = f[i+1:]
	}
	return f
}

// mountSyscall: the frame is the syscall package's (or x/sys/unix's)
// mount or unmount, the system call itself.
func mountSyscall(frame string) bool {
	if !strings.HasPrefix(frame, "syscall.") && !strings.HasPrefix(frame, "golang.org/x/sys/unix.") && !strings.HasPrefix(frame, "unix.") {
		return false
	}
	n := strings.ToLower(callName(frame))
	return n == "mount" || n == "unmount" || n == "umount" || n == "umount2"
}

// mountingCall: the frame's function is named for mounting or unmounting
// (Mount, ForceMount, MountSensitive, Unmount, doUnmount...), not for
// checking a mount (IsLikelyNotMountPoint, GetMountRefs).
func mountingCall(frame string) bool {
	n := strings.ToLower(callName(frame))
	for _, p := range []string{"mount", "unmount", "umount"} {
		if strings.HasPrefix(n, p) || strings.HasSuffix(n, p) {
			return true
		}
	}
	return false
}

// processWait: the frame waits for a child process to exit.
func processWait(frame string) bool {
	for _, p := range []string{"os/exec.(*Cmd).Wait", "os.(*Process).Wait", "os.(*Process).wait", "os.(*Process).blockUntilWaitable", "os.(*Process).pidfdWait", "syscall.Wait4", "syscall.wait4"} {
		if strings.HasPrefix(frame, p) {
			return true
		}
	}
	return false
}

// blockedMountCall says what mount call a goroutine in a system call is
// in: the mount syscall's frame, or the mounting function that waits for
// its helper; "" when it is in none.
func blockedMountCall(g *goroutine) string {
	if g.State != "syscall" {
		return ""
	}
	return mountCallOf(g.Frames)
}

// mountCallOf is the mount call frames (innermost first) are in: the
// mount syscall's frame, or the mounting function above a wait for a
// child process (its helper); "" when none.
func mountCallOf(frames []string) string {
	waits := false
	for _, f := range frames {
		if mountSyscall(f) {
			return frameFunc(f)
		}
		if processWait(f) {
			waits = true
			continue
		}
		if waits && mountingCall(f) {
			return frameFunc(f)
		}
	}
	return ""
}

// csiNodeCall names the CSI Node service call a goroutine serves, from the
// generated gRPC handler's frame ("csi._Node_NodeUnpublishVolume_Handler"),
// or "".
func csiNodeCall(g *goroutine) string {
	for _, f := range g.Frames {
		n := callName(f)
		if rest, ok := strings.CutPrefix(n, "_Node_"); ok {
			if call, ok := strings.CutSuffix(rest, "_Handler"); ok && call != "" {
				return call
			}
		}
	}
	return ""
}

// frameFunc is a frame's function as its dump prints it, without the
// arguments or what the dump's author appended.
func frameFunc(frame string) string {
	f := frame
	if i := strings.IndexAny(f, " \t"); i > 0 {
		f = f[:i]
	}
	return strings.TrimSuffix(f, "(...)")
}

// waitedSeverity is a blocked call's severity from the dump's state: a
// minute or more still in the call is a warning; no duration, info.
func waitedSeverity(g *goroutine) Severity {
	if g.Minutes >= 1 {
		return Warning
	}
	return Info
}

func waitedFor(g *goroutine) string {
	if g.Minutes >= 1 {
		return fmt.Sprintf("for %d minutes", g.Minutes)
	}
	return "at the dump's time (the dump gives no duration)"
}

// blockedGoroutineFinding is the part of a finding about one goroutine
// blocked in a system call that both rules of this file share: its
// severity from how long the dump says it waited, the goroutine as the
// subject, and its frames as the evidence.
func blockedGoroutineFinding(g *goroutine, id, evidence string) Finding {
	return Finding{
		ID:       id,
		Severity: waitedSeverity(g),
		Subject:  fmt.Sprintf("goroutine %d", g.ID),
		Evidence: goroutineEvidence([]goroutine{*g}, evidence),
	}
}

// ruleBlockedMountCalls names the runtime goroutines blocked in a mount
// call and the CSI node plugin calls waiting in a system call.
func ruleBlockedMountCalls(st *state) {
	for _, d := range st.runtimeDump {
		for i := range d.Kept {
			g := &d.Kept[i]
			call := blockedMountCall(g)
			if call == "" {
				continue
			}
			who := runtimeOfPath(d.Path)
			f := blockedGoroutineFinding(g, idRuntimeMountBlock, "the goroutine in the mount call, and for how long")
			f.Title = "A container runtime goroutine blocks in a mount call"
			f.Summary = fmt.Sprintf("%s: goroutine %d has been in a system call under %s %s", who, g.ID, call, waitedFor(g))
			f.Explanation = "The runtime's goroutine dump shows this goroutine in a system call under a mount: the mount of a container's volume has not returned, so that " +
				"container's start waits, and any lock the call holds stops the runtime's other calls behind it. A mount that does not return usually reaches a server the node " +
				"cannot reach (an NFS export), lacks a client helper, or waits on a FUSE daemon that does not answer."
			f.Remediation = []string{
				"Find the volume it mounts (the runtime's log around the container's start names it) and check the node can reach what it mounts: mount it by hand with a timeout (timeout 10 mount ...).",
				"Fix or remove the volume; restart the runtime (systemctl restart " + who + ") if the call never returns.",
			}
			st.add(f)
		}
	}
	for _, d := range st.pluginDumps {
		for i := range d.Kept {
			g := &d.Kept[i]
			call := csiNodeCall(g)
			if call == "" || g.State != "syscall" {
				continue
			}
			what := "a system call"
			if m := blockedMountCall(g); m != "" {
				what = "a system call under " + m
			} else if g.inMountCheck() {
				what = "a stat of its volume's path"
			}
			f := blockedGoroutineFinding(g, idCSINodeCallHung, "the node plugin's goroutine, and for how long")
			f.Title = "A CSI node plugin call waits in a system call"
			f.Summary = fmt.Sprintf("the node plugin's %s (goroutine %d) has been in %s %s", call, g.ID, what, waitedFor(g))
			f.Explanation = "The node plugin's goroutine dump shows its " + call + " call in a system call: a mount, unmount or stat on a filesystem that does not answer. " +
				"The call holds the volume's operation lock, so later calls for that volume fail or wait and the kubelet's operation on it does not complete."
			f.Remediation = []string{
				"Read what the plugin's threads wait on: cat /proc/<plugin pid>/task/*/stack; a task in D state under a filesystem names the mount.",
				"Fix the storage it reaches, then force the stuck mount off (umount -f, then umount -l; FUSE: fusermount -uz) and restart the node plugin.",
			}
			st.add(f)
		}
	}
}

// keepForMountCall: a goroutine worth keeping from a dump for this file's
// rule: in the mount syscall, waiting for a helper under a mounting
// function, or serving a CSI Node call.
func keepForMountCall(frames []string) bool {
	if mountCallOf(frames) != "" {
		return true
	}
	for _, f := range frames {
		if strings.Contains(f, "_Node_") && strings.Contains(f, "_Handler") {
			return true
		}
	}
	return false
}

// pluginLogPath: a bundle path of a CSI driver's log (a node plugin
// container's, or a driver run as a host process).
func pluginLogPath(p string) bool {
	return strings.HasPrefix(p, "csi/podlogs/") || strings.HasPrefix(p, "csi/hostlogs/")
}

// frameWithPosition tells a frame abridged with its file position on the
// same line, as people paste dumps: "os.(*Process).Wait(...)   os/exec.go:930"
// (a function with its arguments, spaces, then a file.go:N).
func frameWithPosition(b []byte) bool {
	t := bytes.TrimSpace(b)
	sp := bytes.IndexAny(t, " \t")
	if sp <= 0 || t[sp-1] != ')' || bytes.IndexByte(t[:sp], '(') <= 0 || bytes.IndexByte(t[:sp], '.') <= 0 {
		return false
	}
	pos := bytes.TrimSpace(t[sp:])
	if bytes.ContainsAny(pos, " \t") {
		return false
	}
	i := bytes.LastIndex(pos, []byte(".go:"))
	if i <= 0 || i+4 >= len(pos) {
		return false
	}
	for _, c := range pos[i+4:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
