package analyze

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Incident 002: an rbd device could not be unmapped (EBUSY) because a
// node_exporter container, started with the host's root mounted with
// propagation None, kept its own copy of the mount after the host had
// unmounted it. lsof on the host showed only the kernel threads rbd3-task
// and jbd2/rbd3. The mounts collector's device index says the device is
// mounted only outside the host's namespace, and by whom.

// IDs of this family.
const (
	idHeldForeign  = "mount-held-in-foreign-namespace"
	idSelfExcluded = "nodesnap-own-namespace-excluded"
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "mount-held-in-foreign-namespace", Severity: "warning",
		Title:    "A mount held only outside the host's mount namespace",
		Meaning:  "A device, or a kubelet or runtime mount, is mounted only in another process's mount namespace (a container that mounted the host's /var/lib with private propagation): the host has unmounted it, but it stays busy, so the volume cannot be detached or removed (EBUSY) until that namespace lets go.",
		Evidence: "`mounts/mounts.json` (device to namespaces, processes and mountpoints), `mounts/mountinfo.txt` (older bundles: `mounts/ns/*.mountinfo`), `openfiles/holders.json`.",
		Fix:      "Restart, or stop, the process that holds the namespace (named in the finding), or unmount the path inside it (`nsenter -t PID -m umount PATH`); mount host paths into containers with rslave or rshared propagation.",
		Incident: "incident 002, moby#22260",
	},
	RuleDoc{
		ID: "nodesnap-own-namespace-excluded", Severity: "info",
		Title:    "nodesnap ran in a mount namespace of its own",
		Meaning:  "nodesnap ran in a pod or container with its own mount namespace; that namespace and its processes are left out of the holder analysis, so nodesnap never reports itself as the holder of a mount.",
		Evidence: "`manifest.json` (`self`) and the mounts collector's notes.",
		Fix:      "Nothing: it is context.",
	},
)

// volumeSigs are the log signatures of a volume or device that will not go
// away.
var volumeSigs = []string{sigUnmountDevice, sigTeardownBusy, sigRmdirBusy, sigOrphanedPod, sigUnlinkatBusy, sigOtherReferences, sigPodNotCleaned, sigByteOutput}

func ruleHeldMounts(st *state) {
	if !st.mountsSeen || st.hostNS == 0 {
		return
	}
	self := st.selfNamespaces()
	excluded := 0
	for _, dev := range st.deviceOrder {
		d := st.devices[dev]
		// nodesnap's own namespaces (its container's copy of the node's
		// mounts, its pod's other containers) are never holders.
		if len(self) > 0 {
			kept := d.Namespaces[:0:0]
			for _, n := range d.Namespaces {
				if self[n.Namespace] == "" || n.Host {
					kept = append(kept, n)
				}
			}
			if len(kept) < len(d.Namespaces) {
				c := *d
				c.Namespaces = kept
				if !heldCandidate(&c.MountDevice) || len(kept) == 0 {
					excluded++
					if len(st.selfOnlyDevs) < layout.MaxExcludedDevices {
						st.selfOnlyDevs = append(st.selfOnlyDevs, d.Dev)
					}
					continue
				}
				d = &c
			}
		}
		var mounts []mountRec
		for _, n := range d.Namespaces {
			for _, m := range n.Mounts {
				mounts = append(mounts, mountRec{NS: n.Namespace, ID: m.MountID, Dev: d.Dev, Root: m.Root, MountPoint: m.MountPoint,
					FSType: m.FSType, Source: m.Source, Propagation: m.Propagation, Class: d.Class})
			}
		}
		st.heldFinding(d, mounts, d.Major != 0)
	}
	st.selfOnlyN += excluded
	st.selfExcludedFinding(self)
}

// selfNamespaces are nodesnap's own mount namespaces other than the host's:
// those mounts.json marks, and the supervisor's from the manifest (a
// bundle whose mounts collector did not mark it).
func (st *state) selfNamespaces() map[uint64]string {
	out := map[uint64]string{}
	for ns, k := range st.selfNS {
		out[ns] = k
	}
	if st.manifest != nil && st.manifest.Self != nil {
		if ns := st.manifest.Self.MountNamespace; ns != 0 && out[ns] == "" {
			out[ns] = layout.NodesnapOwn
		}
	}
	if st.selfMounts != nil {
		if ns := st.selfMounts.MountNamespace; ns != 0 && out[ns] == "" {
			out[ns] = layout.NodesnapOwn
		}
		for _, ns := range st.selfMounts.Namespaces {
			if out[ns] == "" {
				out[ns] = layout.NodesnapPod
			}
		}
	}
	delete(out, st.hostNS)
	delete(out, 0)
	return out
}

// selfPIDs are nodesnap's own processes, as the mounts collector found
// them.
func (st *state) selfPIDs() map[int]bool {
	out := map[int]bool{}
	if st.selfMounts != nil {
		for _, p := range st.selfMounts.PIDs {
			out[p] = true
		}
	}
	return out
}

// selfExcludedFinding says what was left out because it was nodesnap's
// own, when nodesnap ran in a mount namespace of its own (a pod).
func (st *state) selfExcludedFinding(self map[uint64]string) {
	if len(self) == 0 {
		return
	}
	var own []string
	pods := 0
	for _, ns := range sortedNS(self) {
		if self[ns] == layout.NodesnapOwn {
			own = append(own, strconv.FormatUint(ns, 10))
		} else {
			pods++
		}
	}
	where := "its own mount namespace " + strings.Join(own, ", ")
	if len(own) == 0 {
		where = fmt.Sprintf("%d mount namespace(s) of its pod", pods)
	} else if pods > 0 {
		where += fmt.Sprintf(" and %d of its pod's other containers", pods)
	}
	pod := ""
	if m := st.manifest; m != nil && m.Self != nil && m.Self.Pod != nil {
		pod = " (pod " + m.Self.Pod.UID
		if m.Self.Pod.Name != "" {
			pod += ", " + m.Self.Pod.Namespace + "/" + m.Self.Pod.Name
		}
		pod += ")"
	}
	f := Finding{
		ID:       idSelfExcluded,
		Severity: Info,
		Title:    "nodesnap's own mount namespace not counted as evidence",
		Summary: fmt.Sprintf("nodesnap ran outside the host's mount namespace%s; %s was left out of the mount-holder analysis: %d device(s) mounted outside the host's namespace only there were not flagged",
			pod, where, st.selfOnlyN),
		Explanation: "A container's mount namespace starts as a copy of the mounts it was given (the node's root at /host). nodesnap's own " +
			"copy is not evidence against the node: it exists because nodesnap runs, and goes away with its pod. Where the node's root was " +
			"mounted without propagation, that copy holds every mount the node had when the pod started, until the pod is deleted.",
	}
	if st.selfMounts != nil {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.MountsPath, What: "nodesnap itself in the mount index", Record: st.selfMounts})
	}
	if m := st.manifest; m != nil && m.Self != nil {
		f.Evidence = append(f.Evidence, Evidence{Path: bundle.ManifestName, What: "who nodesnap was", Record: m.Self})
	}
	if len(st.selfOnlyDevs) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.MountsPath, What: "devices mounted outside the host's namespace only in nodesnap's", Record: st.selfOnlyDevs})
	}
	f.Remediation = []string{"Delete nodesnap's pod once its bundle is copied out (kubectl debug leaves its pod behind too): until then its mount namespace holds what it was given."}
	st.add(f)
}

func sortedNS(m map[uint64]string) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// heldCandidate reports whether a device mounted only outside the host's
// namespace is worth a finding. A container's own filesystems (its overlay
// root, its /dev tmpfs, its secrets) and a systemd service's private /tmp
// live only in its namespace by design; a block device, or a copy of a
// kubelet or runtime path, does not.
func heldCandidate(d *layout.MountDevice) bool {
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
	if h := st.devHolders[d.Dev]; h != nil {
		if hs := st.withoutSelf(h.Holders); len(hs) > 0 {
			fmt.Fprintf(&b, " Processes with files open on it: %s.", listOf(holderNames(hs), 6))
		}
	}
	f.Explanation = b.String()

	f.Evidence = append(f.Evidence, Evidence{Path: layout.MountsPath, What: "the device index: mounted only outside the host's namespace, and by whom", Record: d.MountDevice})
	f.Evidence = append(f.Evidence, st.mountinfoEvidence(mounts, "the mount in that namespace's mount table")...)
	if h := st.devHolders[d.Dev]; h != nil {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.HoldersPath, What: "open files and kernel threads on the device", Record: h})
	} else if len(kthreads) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.TasksPath, What: "kernel threads named after the device", Record: kthreads})
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
	// A line about the device's name written before its current instance
	// (the name of a loop device detached and attached again) is about
	// another device.
	st.setAsideStale(blockName(d), st.deviceSince(blockName(d)), tokens, volumeSigs...)
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

// withoutSelf drops nodesnap's own processes from a list of holders.
func (st *state) withoutSelf(hs []layout.FileHolder) []layout.FileHolder {
	self := st.selfPIDs()
	if len(self) == 0 {
		return hs
	}
	out := hs[:0:0]
	for _, h := range hs {
		if !self[h.PID] {
			out = append(out, h)
		}
	}
	return out
}
