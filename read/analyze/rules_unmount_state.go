package analyze

import (
	"regexp"
	"strings"
)

// An unmount's state from its error: umount(2) fails with ENOENT ("no
// such file or directory") when the path is gone, so nothing is mounted
// there any more (a runtime's cleanup of a container's IPC mount that
// went with the container, moby's "failed to unmount IPC ...: no such
// file or directory"); the failure is history, not a mount left behind.
// Any other error (EBUSY, EINVAL of a device-mapper device, a hang)
// leaves the mount, and the finding warns.

// unmountSeverity is the severity of an unmount signature's lines: info
// when every line kept says ENOENT, a warning otherwise.
func unmountSeverity(k *keyHits) (Severity, string) {
	hs := k.hits()
	if len(hs) == 0 {
		return Warning, ""
	}
	for _, h := range hs {
		if !strings.Contains(strings.ToLower(h.Line.Text), "no such file or directory") {
			return Warning, ""
		}
	}
	return Info, "every failure is ENOENT (no such file or directory): the path is gone, nothing is left mounted there"
}

// reRuntimeID is a container runtime's 64-hex ID of a container, a
// sandbox or a device-mapper device.
var reRuntimeID = regexp.MustCompile(`\b[0-9a-f]{64}\b`)

// runtimeIDSubject is the object of a runtime's line that names no path:
// the 64-hex ID it names (devicemapper's "Error unmounting device <id>",
// "failed to unmount container \"<id>\""), or "" when it names none.
func runtimeIDSubject(k *keyHits) string {
	for _, h := range k.hits() {
		if id := reRuntimeID.FindString(h.Line.Text); id != "" {
			return id
		}
	}
	return ""
}

// runtimeJournal says whether a bundle file is a container runtime's own
// journal (containerd's, CRI-O's, dockerd's unit, or the log file of the
// containerd k3s and RKE2 run, which logs to no journal): what its lines
// report the runtime did, whatever words a CSI driver shares with it.
func runtimeJournal(p string) bool {
	name, ok := strings.CutPrefix(p, "journal/")
	if !ok {
		return false
	}
	switch name {
	case "files/k3s-containerd.log", "files/rke2-containerd.log":
		return true
	}
	if strings.Contains(name, "/") {
		return false
	}
	switch strings.TrimSuffix(name, ".log") {
	case "containerd", "crio", "cri-o", "docker", "dockerd":
		return true
	}
	return false
}
