package analyze

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// The kernel's own view of its storage clients (storageclients/state.json):
// which server, OSD, MDS, portal or FUSE daemon does not answer, how many
// requests wait on it, and the pods whose volumes sit on it. A filesystem
// the kernel already shows stuck, whose mounts mountprobe reported hung
// without a probe, is named by the hung-mount finding (see
// storageHungContext); this family names the rest.

// IDs of this family.
const (
	idStorageStuck    = "storage-stuck-in-kernel"
	idNFSServerStuck  = "nfs-server-stuck"
	idCephStuck       = "ceph-requests-stuck"
	idISCSIDown       = "iscsi-session-down"
	idMultipathFailed = "multipath-all-paths-failed"
)

var _ = document(
	RuleDoc{
		ID: idStorageStuck, Severity: "critical",
		Title:    "A FUSE connection or block device stuck in the kernel",
		Meaning:  "Requests wait on a FUSE daemon (fusectl `waiting`) or a block device (`inflight`) in two samples taken apart, none completes in between, and tasks blocked on them did not run: the filesystem or device does not answer. Reported here when no mount of it was found hung (the hung-mount finding carries it otherwise).",
		Evidence: "`storageclients/state.json`: the FUSE connections, block queues, the tasks waiting and the verdict.",
		Fix:      "For FUSE: restart or abort the daemon (`echo 1 > /sys/fs/fuse/connections/N/abort`); for a block device, fix what backs it (a loop file's filesystem, the SAN path, the rbd cluster).",
	},
	RuleDoc{
		ID: idNFSServerStuck, Severity: "critical",
		Title:    "An NFS server does not answer the node's RPCs",
		Meaning:  "The kernel's NFS client has RPCs in flight to a server that do not complete (sunrpc's task list, mountstats' sends without replies), with tasks blocked in NFS code or the kernel logging \"server ... not responding\": every process touching its mounts hangs (hard mounts) or fails after retries (soft).",
		Evidence: "`storageclients/state.json` (mountstats per mount, sunrpc tasks per client), `storageclients/raw/mountstats.txt`, the kernel log.",
		Fix:      "Check the server and the network to it (`rpcinfo -p SERVER`, `showmount -e SERVER`); `umount -f` frees a dead server's mounts; consider `soft,timeo=,retrans=` for volumes whose server may go away.",
	},
	RuleDoc{
		ID: idCephStuck, Severity: "critical",
		Title:    "Ceph kernel client requests stuck on OSDs or an MDS",
		Meaning:  "The kernel ceph client has requests in flight (debugfs osdc, mdsc) that are resent, paused or held while tasks block in ceph code or its mounts hang: the OSDs or MDS named do not answer it (down, blocked, or the client was blocklisted).",
		Evidence: "`storageclients/state.json` (osdc and mdsc per client), `storageclients/raw/ceph/*`.",
		Fix:      "`ceph health detail`, `ceph osd tree` and `ceph fs status` for the OSDs and MDS named; check the client is not blocklisted (`ceph osd blocklist ls`); a leftover mount of a deleted pod can be force-unmounted.",
	},
	RuleDoc{
		ID: idISCSIDown, Severity: "critical",
		Title:    "An iSCSI session is down or in recovery",
		Meaning:  "An iSCSI session is not logged in (FAILED, FREE): its disks are blocked for recovery_tmo seconds and then offline, so I/O to the volumes on them hangs and then fails.",
		Evidence: "`storageclients/state.json`: the session, its connection's portal, its SCSI devices' state.",
		Fix:      "Check the portal's reachability and the target; `iscsiadm -m session -P 3`; after the target is back, `iscsiadm -m session -r SID --rescan` or log in again.",
	},
	RuleDoc{
		ID: idMultipathFailed, Severity: "critical",
		Title:    "A multipath device has lost every path",
		Meaning:  "Every path (SCSI device) under a multipath map is offline, blocked or behind a failed iSCSI session: with queue_if_no_path I/O queues forever, otherwise it fails.",
		Evidence: "`storageclients/state.json`: the dm device, its slaves and their SCSI state. Path states inside the multipath table are not read (DM ioctls).",
		Fix:      "Restore the paths (SAN zoning, the iSCSI portals, cables); `multipath -ll`; if the LUN is gone for good, `dmsetup message MAP 0 fail_if_no_path` lets the blocked I/O fail.",
	},
)

func ruleStorageClients(st *state, hung []string) {
	if st.storage == nil {
		return
	}
	st.stuckWithoutProbe(hung)
	st.nfsServers()
	st.cephClients()
	st.iscsiSessions()
	st.multipathMaps()
}

// devMountpoints lists where a device is mounted: the host's mounts first,
// then the probe records, then what storageclients saw.
func (st *state) devMountpoints(dev string) []string {
	var out []string
	for _, m := range st.mounts {
		if m.Dev == dev && m.Host && !contains(out, m.MountPoint) {
			out = append(out, m.MountPoint)
		}
	}
	for _, m := range st.mounts {
		if m.Dev == dev && !contains(out, m.MountPoint) {
			out = append(out, m.MountPoint)
		}
	}
	for _, p := range st.probes {
		if p.Dev == dev && !contains(out, p.Mountpoint) {
			out = append(out, p.Mountpoint)
		}
	}
	if st.storage != nil {
		for _, c := range st.storage.FUSE {
			if "0:"+strconv.FormatUint(uint64(c.Conn), 10) == dev {
				for _, mp := range c.Mountpoints {
					if !contains(out, mp) {
						out = append(out, mp)
					}
				}
			}
		}
	}
	return out
}

// podUIDsOfPaths are the pods whose volume directories the paths are.
func podUIDsOfPaths(mps []string) []string {
	var uids []string
	for _, mp := range mps {
		if m := rePodVolumePath.FindStringSubmatch(mp + "/"); m != nil && !contains(uids, m[1]) {
			uids = append(uids, m[1])
		}
	}
	return uids
}

// podsClause is "; volumes of 3 pods (a, b, c)" or "".
func (st *state) podsClause(mps []string) string {
	uids := podUIDsOfPaths(mps)
	if len(uids) == 0 {
		return ""
	}
	names := make([]string, 0, len(uids))
	for _, u := range uids {
		names = append(names, st.podName(u))
	}
	return fmt.Sprintf("; volumes of %s (%s)", plural(len(uids), "pod", "pods"), listOf(names, 3))
}

// fuseDaemon names the process serving a FUSE connection: a holder of
// /dev/fuse. The kernel does not say which descriptor serves which
// connection; the one holder, or the holders whose command line names the
// mountpoint, or else every holder as a candidate.
func (st *state) fuseDaemon(mps []string) string {
	var hs []layout.FUSEDevHolder
	if st.storage != nil {
		hs = st.storage.FUSEHolders
	}
	if len(hs) == 0 {
		hs = st.fuseHolders
	}
	if len(hs) == 0 {
		return ""
	}
	name := func(h layout.FUSEDevHolder) string { return fmt.Sprintf("%s[%d]", h.Comm, h.PID) }
	if len(hs) == 1 {
		return "its daemon " + name(hs[0]) + " (the only process holding /dev/fuse)"
	}
	var named []string
	for _, h := range hs {
		if p := st.procs[h.PID]; p != nil && p.Cmdline != "" {
			for _, mp := range mps {
				if tokenIn(p.Cmdline, mp) {
					named = append(named, name(h))
					break
				}
			}
		}
	}
	if len(named) == 1 {
		return "its daemon " + named[0] + " (holds /dev/fuse; its command line names the mountpoint)"
	}
	var all []string
	for _, h := range hs {
		all = append(all, name(h))
	}
	return "its daemon is one of the /dev/fuse holders " + listOf(all, 4)
}

// stuckOf is the storageclients verdict about a device, if any.
func (st *state) stuckOf(dev string) *layout.KernelStuck {
	if st.storage == nil {
		return nil
	}
	for i := range st.storage.Stuck {
		if st.storage.Stuck[i].Dev == dev {
			return &st.storage.Stuck[i]
		}
	}
	return nil
}

// blockOf is the block queue record of a device.
func (st *state) blockOf(dev string) *layout.BlockQueue {
	if st.storage == nil || dev == "" {
		return nil
	}
	for i := range st.storage.Block {
		if st.storage.Block[i].Dev == dev {
			return &st.storage.Block[i]
		}
	}
	return nil
}

// backingClause says what backs a loop device and whether that is stuck:
// "block device loop0, backed by /mnt/f/ext4.img on FUSE mount /mnt/f
// (connection 52, stuck: its daemon go-test[12] ...)".
func (st *state) backingClause(dev string) string {
	b := st.blockOf(dev)
	if b == nil {
		return ""
	}
	s := "block device " + b.Name
	if b.BackingFile == "" {
		return s
	}
	s += ", backed by " + b.BackingFile
	// The mount the backing file is on: the longest host mountpoint
	// prefix of its path.
	best := mountRec{}
	for _, m := range st.mounts {
		if m.Host && (b.BackingFile == m.MountPoint || strings.HasPrefix(b.BackingFile, strings.TrimSuffix(m.MountPoint, "/")+"/")) && len(m.MountPoint) > len(best.MountPoint) {
			best = m
		}
	}
	if best.MountPoint == "" {
		return s
	}
	s += " on " + best.FSType + " mount " + best.MountPoint
	if ks := st.stuckOf(best.Dev); ks != nil {
		s += " (itself stuck: " + ks.Reason
		if ks.Kind == layout.StuckFUSE {
			if d := st.fuseDaemon([]string{best.MountPoint}); d != "" {
				s += "; " + d
			}
		}
		s += ")"
	}
	return s
}

// storageHungContext adds to a hung-mount finding what the kernel's own
// state says: the verdict that made it hung without a probe, the FUSE
// daemon, the device and what backs it.
func (st *state) storageHungContext(f *Finding, g *hungFS, mps []string) {
	var extra []string
	fuse := strings.HasPrefix(g.fstype, "fuse") || g.class == "fuse"
	if fuse {
		if d := st.fuseDaemon(mps); d != "" {
			extra = append(extra, d+" does not answer")
		}
	}
	if c := st.backingClause(g.dev); c != "" && !fuse {
		extra = append(extra, "on "+c)
	}
	if len(extra) > 0 {
		f.Summary += "; " + strings.Join(extra, "; ")
		f.Explanation += " " + upperFirst(strings.Join(extra, "; ")) + "."
	}
	if ks := st.stuckOf(g.dev); ks != nil && st.storage != nil {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.StorageClientsPath, What: "the kernel's own state: requests waiting and tasks blocked on it in two samples", Record: ks})
		st.blockedFor(f, ks.TIDs)
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// reBlockedFor reads the kernel's hung-task report.
var reBlockedFor = regexp.MustCompile(`blocked for more than (\d+) seconds`)

// blockedFor claims the kernel's hung-task reports of the tasks and says
// how long the longest has been blocked: the kernel's counters do not
// date requests, its hung-task detector does.
func (st *state) blockedFor(f *Finding, tids []int) {
	var tokens []string
	for _, tid := range tids {
		for i := range st.storage.Tasks {
			if t := st.storage.Tasks[i]; t.TID == tid {
				tokens = append(tokens, t.Comm+":"+strconv.Itoa(t.TID))
			}
		}
	}
	st.blockedForTokens(f, tokens)
}

// blockedForTokens is blockedFor with the hung-task keys ("comm:tid").
func (st *state) blockedForTokens(f *Finding, tokens []string) {
	before := len(f.Evidence)
	if st.claimLogs(f, tokens, sigHungTask) == 0 {
		return
	}
	longest := 0
	for _, e := range f.Evidence[before:] {
		for _, l := range e.Lines {
			if m := reBlockedFor.FindStringSubmatch(l.Text); m != nil {
				if n, _ := strconv.Atoi(m[1]); n > longest {
					longest = n
				}
			}
		}
	}
	if longest > 0 {
		f.Summary += fmt.Sprintf("; blocked for more than %s (kernel hung-task report)", humanSeconds(longest))
	}
}

func humanSeconds(n int) string {
	switch {
	case n >= 3600:
		return fmt.Sprintf("%d h %d min", n/3600, n%3600/60)
	case n >= 60:
		return fmt.Sprintf("%d min", n/60)
	}
	return fmt.Sprintf("%d s", n)
}

// stuckWithoutProbe reports verdicts about devices no hung-mount finding
// names (hung: not mounted, or mountprobe did not run).
func (st *state) stuckWithoutProbe(hung []string) {
	for _, ks := range st.storage.Stuck {
		if slices.Contains(hung, ks.Dev) {
			continue
		}
		mps := st.devMountpoints(ks.Dev)
		f := Finding{ID: idStorageStuck, Severity: Critical, Title: "FUSE connection or block device stuck in the kernel", Subject: ks.Dev}
		f.Summary = fmt.Sprintf("%s: %s", ks.Name, ks.Reason)
		if ks.Kind == layout.StuckFUSE {
			if d := st.fuseDaemon(mps); d != "" {
				f.Summary += "; " + d + " does not answer"
			}
		} else if c := st.backingClause(ks.Dev); c != "" {
			f.Summary += "; " + c
		}
		if len(mps) > 0 {
			f.Summary += "; mounted at " + listOf(mps, 2)
		}
		f.Summary += st.podsClause(mps)
		f.Explanation = "The kernel's own counters show it stuck: " + ks.Reason + ". Every process that touches it blocks the same way."
		f.Evidence = append(f.Evidence, Evidence{Path: layout.StorageClientsPath, What: "the verdict, with where the tasks are blocked", Record: ks})
		st.blockedFor(&f, ks.TIDs)
		if ks.Kind == layout.StuckFUSE {
			conn := strings.TrimPrefix(ks.Dev, "0:")
			f.Remediation = append(f.Remediation, fuseAbortFix(conn))
		}
		f.Remediation = append(f.Remediation, "Fix or restart what serves it, then restart the pods that use it.")
		st.add(f)
	}
}

// sortedCounts renders "osd5: 3, osd8: 3" most first.
func sortedCounts(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d", k, m[k]))
	}
	return out
}

// tasksIn are the tasks of the bundle (processes' D-state and waiting
// tasks, and storageclients' own samples) sleeping in code with a marker:
// their names ("comm[tid]") and their keys in hung-task reports
// ("comm:tid").
func (st *state) tasksIn(markers []string) (names, keys []string) {
	seen := map[int]bool{}
	add := func(comm string, tid int) {
		seen[tid] = true
		names = append(names, fmt.Sprintf("%s[%d]", comm, tid))
		keys = append(keys, comm+":"+strconv.Itoa(tid))
	}
	for i := range st.tasks {
		if t := &st.tasks[i]; !seen[t.TID] && taskOn(t, markers) {
			add(t.Comm, t.TID)
		}
	}
	for _, t := range st.storage.Tasks {
		lt := layout.Task{Wchan: t.Wchan, Stack: t.Stack}
		if !seen[t.TID] && taskOn(&lt, markers) {
			add(t.Comm, t.TID)
		}
	}
	return names, keys
}

// hungProbeUnder reports whether a probe of one of the mountpoints hung.
func (st *state) hungProbeUnder(mps []string) bool {
	for _, p := range st.probes {
		if p.Result == layout.ProbeHung && contains(mps, p.Mountpoint) {
			return true
		}
	}
	return false
}
