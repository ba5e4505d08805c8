package analyze

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/collectors"
)

// Incident 002: an rbd device could not be unmapped (EBUSY) because a
// node_exporter container, started with the host's root mounted with
// propagation None, kept its own copy of the mount after the host had
// unmounted it. lsof on the host showed only the kernel threads rbd3-task
// and jbd2/rbd3. The mounts collector's device index says the device is
// mounted only outside the host's namespace, and by whom.

// IDs of this family.
const idHeldForeign = "mount-held-in-foreign-namespace"

// volumeSigs are the log signatures of a volume or device that will not go
// away.
var volumeSigs = []string{sigUnmountDevice, sigTeardownBusy, sigRmdirBusy, sigOrphanedPod, sigUnlinkatBusy, sigOtherReferences, sigPodNotCleaned, sigByteOutput}

func ruleHeldMounts(st *state) {
	if !st.mountsSeen || st.hostNS == 0 {
		return
	}
	for _, dev := range st.deviceOrder {
		d := st.devices[dev]
		var mounts []mountRec
		for _, n := range d.Namespaces {
			for _, m := range n.Mounts {
				mounts = append(mounts, mountRec{NS: n.Namespace, ID: m.MountID, Dev: d.Dev, Root: m.Root, MountPoint: m.MountPoint,
					FSType: m.FSType, Source: m.Source, Propagation: m.Propagation, Class: d.Class})
			}
		}
		st.heldFinding(d, mounts, d.Major != 0)
	}
}

// heldCandidate reports whether a device mounted only outside the host's
// namespace is worth a finding. A container's own filesystems (its overlay
// root, its /dev tmpfs, its secrets) and a systemd service's private /tmp
// live only in its namespace by design; a block device, or a copy of a
// kubelet or runtime path, does not.
func heldCandidate(d *collectors.MountDevice) bool {
	if !d.OnlyOutsideHostNamespace {
		return false
	}
	if d.Major != 0 {
		return true
	}
	for _, n := range d.Namespaces {
		for _, m := range n.Mounts {
			if m.MountPoint != "/" && (dataPath(m.MountPoint) || dataPath(m.Root)) {
				return true
			}
		}
	}
	return false
}

func (st *state) heldFinding(d *deviceRec, mounts []mountRec, block bool) {
	name := d.Dev
	devNode := ""
	if d.Block != nil && d.Block.Name != "" {
		name = d.Block.Name + " (" + d.Dev + ")"
		devNode = "/dev/" + d.Block.Name
	}
	var holders []string
	var pids []int
	var nsList []string
	for _, n := range d.Namespaces {
		var ps []string
		for _, p := range n.Processes {
			ps = append(ps, st.procName(p.PID, p.Comm))
			pids = append(pids, p.PID)
		}
		if n.ProcessCount > len(n.Processes) {
			ps = append(ps, fmt.Sprintf("and %d more", n.ProcessCount-len(n.Processes)))
		}
		holders = append(holders, ps...)
		nsList = append(nsList, strconv.FormatUint(n.Namespace, 10))
	}
	var points []string
	for _, m := range mounts {
		points = append(points, fmt.Sprintf("%s (namespace %d, %s)", m.MountPoint, m.NS, m.Propagation))
	}
	kthreads := st.kernelThreadsOn(d.Dev, blockName(d))
	what := "Filesystem " + d.Dev
	if block {
		what = "Block device " + name
	}
	f := Finding{
		ID:       idHeldForeign,
		Severity: Warning,
		Title:    "Mount held only in a non-host mount namespace",
		Subject:  d.Dev,
		Summary: fmt.Sprintf("%s is mounted only in mount namespace %s (%s), not on the host: the host cannot unmount or detach it",
			what, strings.Join(nsList, ", "), listOf(holders, 3)),
	}
	var b strings.Builder
	backing := ""
	if d.Block != nil && d.Block.BackingFile != "" {
		backing = " (a loop device backed by " + d.Block.BackingFile + ")"
	}
	fmt.Fprintf(&b, "%s%s, %s from %s, is not mounted in the host's mount namespace, only at %s. ", what, backing, strings.Join(d.FSTypes, "/"),
		strings.Join(d.Sources, ", "), listOf(points, 4))
	b.WriteString("A process whose namespace got a private copy of the host's mounts (a container with the host root mounted with " +
		"mountPropagation None, a service with PrivateMounts) keeps that copy after the host unmounts it, so the filesystem stays " +
		"in use: unmap/detach fails with \"device or resource busy\" and lsof on the host finds only kernel threads (incident 002). ")
	fmt.Fprintf(&b, "Processes in that namespace: %s.", listOf(holders, 8))
	if len(kthreads) > 0 {
		fmt.Fprintf(&b, " Kernel threads still working for the device: %s.", strings.Join(kthreadNames(kthreads), ", "))
	}
	if h := st.devHolders[d.Dev]; h != nil && len(h.Holders) > 0 {
		fmt.Fprintf(&b, " Processes with files open on it: %s.", listOf(holderNames(h.Holders), 6))
	}
	f.Explanation = b.String()

	f.Evidence = append(f.Evidence, Evidence{Path: "mounts/mounts.json", What: "the device index: mounted only outside the host's namespace, and by whom", Record: d.MountDevice})
	f.Evidence = append(f.Evidence, st.mountinfoEvidence(mounts, "the mount in that namespace's mount table")...)
	if h := st.devHolders[d.Dev]; h != nil {
		f.Evidence = append(f.Evidence, Evidence{Path: "openfiles/holders.json", What: "open files and kernel threads on the device", Record: h})
	} else if len(kthreads) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: "processes/tasks.json", What: "kernel threads named after the device", Record: kthreads})
	}
	f.Evidence = append(f.Evidence, st.processEvidence(pids, "the processes in the namespace that holds the mount")...)

	tokens := []string{devNode}
	if d.Block != nil {
		tokens = append(tokens, d.Block.RBDImage)
		if d.Block.DMName != "" {
			tokens = append(tokens, "/dev/mapper/"+d.Block.DMName)
		}
	}
	for _, s := range d.Sources {
		if strings.HasPrefix(s, "/dev/") {
			tokens = append(tokens, s)
		}
	}
	for _, m := range mounts {
		tokens = append(tokens, pathTokens(m.MountPoint)...)
	}
	correlated := st.claimLogs(&f, tokens, volumeSigs...)
	if block || correlated > 0 {
		f.Severity = Critical
	}
	if correlated > 0 {
		f.Summary += "; the kubelet's unmount/detach of it keeps failing"
	}

	seen := map[string]bool{}
	for _, n := range d.Namespaces {
		pid := 0
		if len(n.Processes) > 0 {
			pid = n.Processes[0].PID
		}
		for _, m := range n.Mounts {
			cmd := fmt.Sprintf("nsenter -t %d -m umount %s", pid, shellQuote(m.MountPoint))
			if pid == 0 {
				cmd = fmt.Sprintf("nsenter --mount=/proc/<pid>/ns/mnt umount %s   # any process of namespace %d", shellQuote(m.MountPoint), n.Namespace)
			}
			if !seen[cmd] {
				seen[cmd] = true
				f.Remediation = append(f.Remediation, "Unmount the copy inside the holder's namespace: "+cmd)
			}
		}
	}
	f.Remediation = append(f.Remediation,
		"Or restart the holder ("+listOf(holders, 3)+"); if it is a pod that mounts the host's root (node_exporter, a log or monitoring agent), set mountPropagation: HostToContainer on that volume so host unmounts reach it.")
	switch {
	case d.Block != nil && strings.HasPrefix(d.Block.Name, "rbd"):
		f.Remediation = append(f.Remediation, "Then unmap the device if the kubelet does not: rbd unmap "+devNode)
	case d.Block != nil && strings.HasPrefix(d.Block.Name, "loop"):
		f.Remediation = append(f.Remediation, "Then detach the device if nothing else does: losetup -d "+devNode)
	default:
		f.Remediation = append(f.Remediation, "The kubelet retries the unmount and detach by itself once the copy is gone.")
	}
	st.add(f)
}

func blockName(d *deviceRec) string {
	if d.Block != nil {
		return d.Block.Name
	}
	return ""
}

// shellQuote quotes a path for a shell command when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		safe := r == '/' || r == '.' || r == '-' || r == '_' || r == '~' || r == ':' || r == '+' || r == '@' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		return !safe
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
