package analyze

import (
	"fmt"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// NFS servers, ceph clients, iSCSI sessions and multipath maps, from the
// kernel's storage-client state.

var nfsMarkers = []string{"nfs", "rpc_wait", "__rpc_", "xprt"}

// nfsServers names each NFS server with RPCs in flight that do not
// complete.
func (st *state) nfsServers() {
	type server struct {
		name      string
		mps       []string
		inflight  int64
		rpcTasks  int
		timeouts  uint64
		retrans   uint64
		xprtsSeen map[string]bool
		mounts    []layout.NFSMount
	}
	servers := map[string]*server{}
	var order []string
	for _, m := range st.storage.NFSMounts {
		s := servers[m.Server]
		if s == nil {
			s = &server{name: m.Server, xprtsSeen: map[string]bool{}}
			servers[m.Server] = s
			order = append(order, m.Server)
		}
		s.mps = append(s.mps, m.Mountpoint)
		s.timeouts += m.Timeouts
		s.retrans += m.Retransmits
		s.mounts = append(s.mounts, m)
		// Mounts of one server share its transport: its counters once.
		if x := m.Xprt; x != nil {
			key := fmt.Sprintf("%s/%d", x.Proto, x.Port)
			if !s.xprtsSeen[key] {
				s.xprtsSeen[key] = true
				s.inflight += x.InFlight
			}
		}
	}
	// The sunrpc clients name the server by address; a mount may name it
	// by host name, with its address in the addr= (or mountaddr=) option.
	byAddr := map[string]*server{}
	for _, name := range order {
		s := servers[name]
		byAddr[name] = s
		for _, m := range s.mounts {
			for _, k := range []string{"addr", "mountaddr"} {
				if a := m.Opts[k]; a != "" && byAddr[a] == nil {
					byAddr[a] = s
				}
			}
		}
	}
	counted := map[string]bool{}
	for _, c := range st.storage.RPCClients {
		if s := byAddr[c.Addr]; s != nil && !counted[c.ID] {
			counted[c.ID] = true
			s.rpcTasks += len(c.Tasks)
		}
	}
	waiting, keys := st.tasksIn(nfsMarkers)
	for _, name := range order {
		s := servers[name]
		inFlight := max(int64(s.rpcTasks), s.inflight)
		if inFlight == 0 {
			continue
		}
		f := Finding{ID: idNFSServerStuck, Severity: Critical, Title: "NFS server does not answer", Subject: "nfs:" + s.name}
		logs := st.claimLogs(&f, []string{s.name}, sigNFSNotResponding)
		hung := st.hungProbeUnder(s.mps)
		if logs == 0 && !hung && len(waiting) == 0 {
			continue // RPCs in flight on a healthy server
		}
		f.Summary = fmt.Sprintf("NFS server %s: %s in flight", s.name, plural(int(inFlight), "RPC", "RPCs"))
		var why []string
		if logs > 0 {
			why = append(why, "the kernel logs it not responding")
		}
		if hung {
			why = append(why, "a probe of its mount hung")
		}
		if len(waiting) > 0 {
			why = append(why, fmt.Sprintf("%s blocked in NFS code (%s)", plural(len(waiting), "task", "tasks"), listOf(waiting, 3)))
		}
		f.Summary += "; " + strings.Join(why, ", ")
		st.blockedForTokens(&f, keys)
		f.Summary += st.podsClause(s.mps)
		f.Explanation = fmt.Sprintf("The node's NFS client has %s to %s that are not answered (sunrpc tasks in flight: %d; sends without replies on its transport: %d); %s of its requests timed out and %d were retransmitted since mount. Its mounts: %s. Processes touching them wait (hard mounts, the default, wait forever).",
			plural(int(inFlight), "RPC", "RPCs"), s.name, s.rpcTasks, s.inflight, plural(int(s.timeouts), "major timeout", "major timeouts"), s.retrans, listOf(s.mps, 4))
		f.Evidence = append(f.Evidence, Evidence{Path: layout.StorageClientsPath, What: "mountstats of its mounts (transport counters, per-op timeouts)", Record: trimNFS(s.mounts)})
		for _, c := range st.storage.RPCClients {
			if byAddr[c.Addr] == s && len(c.Tasks) > 0 {
				f.Evidence = append(f.Evidence, Evidence{Path: layout.StorageClientsPath, What: "sunrpc tasks in flight to it", Record: c})
			}
		}
		st.claimTraceLogs(&f, nfsMarkers)
		f.Remediation = append(f.Remediation, "Check the server and the network path to it: rpcinfo -p "+shellQuote(s.name)+"; showmount -e "+shellQuote(s.name))
		for _, mp := range s.mps {
			f.Remediation = append(f.Remediation, "If the server is gone for good: umount -f "+shellQuote(mp)+"   (then umount -l if still busy)")
			if len(f.Remediation) > 4 {
				break
			}
		}
		st.add(f)
	}
}

// trimNFS keeps what the finding shows of mountstats (not every op).
func trimNFS(ms []layout.NFSMount) []layout.NFSMount {
	out := make([]layout.NFSMount, 0, len(ms))
	for _, m := range ms {
		m.Ops = nil
		m.Opts = nil
		out = append(out, m)
	}
	return out
}

var cephMarkers = []string{"ceph_", "libceph", "rbd_"}

// cephClients names the OSDs and MDS a kernel ceph client waits on.
func (st *state) cephClients() {
	var cephMounts []string
	for _, m := range st.mounts {
		if m.Host && m.FSType == "ceph" && !contains(cephMounts, m.MountPoint) {
			cephMounts = append(cephMounts, m.MountPoint)
		}
	}
	waiting, keys := st.tasksIn(cephMarkers)
	for _, c := range st.storage.Ceph {
		if len(c.OSDRequests) == 0 && len(c.MDSRequests) == 0 {
			continue
		}
		osds, mdss := map[string]int{}, map[string]int{}
		resent, paused := 0, 0
		for _, r := range c.OSDRequests {
			if r.Linger {
				continue
			}
			osds[fmt.Sprintf("osd%d", r.OSD)]++
			if r.Attempts > 1 {
				resent++
			}
			if r.Paused {
				paused++
			}
		}
		for _, r := range c.MDSRequests {
			if r.MDS < 0 {
				mdss["no MDS session"]++
			} else {
				mdss[fmt.Sprintf("mds%d", r.MDS)]++
			}
		}
		// Its mounts: cephfs mounts (one client per fsid and mount
		// options: with one client, all of them) and its rbd images'.
		var mps []string
		if len(st.storage.Ceph) == 1 {
			mps = append(mps, cephMounts...)
		}
		client := c.Dir
		if i := strings.LastIndex(c.Dir, ".client"); i >= 0 {
			client = c.Dir[i+1:]
		}
		for _, r := range st.storage.RBD {
			if r.ClientID != "" && strings.HasSuffix(c.Dir, "."+r.ClientID) {
				mps = append(mps, st.devMountpoints(r.Major+":"+r.Minor)...)
			}
		}
		hung := st.hungProbeUnder(mps)
		if len(waiting) == 0 && !hung && resent == 0 && paused == 0 {
			continue // requests in flight on a client that is moving
		}
		f := Finding{ID: idCephStuck, Severity: Critical, Title: "Ceph kernel client requests stuck", Subject: "ceph:" + c.Dir}
		var parts []string
		if n := len(c.OSDRequests); n > 0 {
			parts = append(parts, fmt.Sprintf("%s in flight (%s)", plural(n, "OSD request", "OSD requests"), listOf(sortedCounts(osds), 4)))
		}
		if n := len(c.MDSRequests); n > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s)", plural(n, "MDS request", "MDS requests"), listOf(sortedCounts(mdss), 3)))
		}
		f.Summary = fmt.Sprintf("ceph %s: %s", client, strings.Join(parts, ", "))
		var why []string
		if resent > 0 {
			why = append(why, plural(resent, "request resent", "requests resent"))
		}
		if paused > 0 {
			why = append(why, plural(paused, "request paused (full or paused cluster)", "requests paused (full or paused cluster)"))
		}
		if len(waiting) > 0 {
			why = append(why, fmt.Sprintf("%s blocked in ceph code (%s)", plural(len(waiting), "task", "tasks"), listOf(waiting, 3)))
		}
		if hung {
			why = append(why, "a probe of its mount hung")
		}
		f.Summary += "; " + strings.Join(why, ", ")
		st.blockedForTokens(&f, keys)
		f.Summary += st.podsClause(mps)
		f.Explanation = "The kernel ceph client " + c.Dir + " waits on the OSDs and MDS named: their requests stay in flight (debugfs osdc and mdsc). " +
			"Tasks touching its cephfs mounts or rbd devices block until those daemons answer or the client is evicted."
		if bl := c.Status["blocklisted"]; bl == "true" {
			f.Explanation += " The client is blocklisted by the cluster: it will never be answered; only a remount (or unmap and map) helps."
		}
		rec := c
		if len(rec.OSDRequests) > 20 {
			rec.OSDRequests = rec.OSDRequests[:20]
		}
		f.Evidence = append(f.Evidence, Evidence{Path: layout.StorageClientsPath, What: "the client's in-flight OSD and MDS requests", Record: rec})
		st.claimAll(&f, sigCephSessionLost)
		st.claimTraceLogs(&f, cephMarkers)
		f.Remediation = append(f.Remediation, "On the cluster: ceph health detail; ceph osd tree; ceph fs status; ceph osd blocklist ls")
		for _, mp := range mps {
			f.Remediation = append(f.Remediation, "A mount of a deleted pod nothing needs: umount -f "+shellQuote(mp))
			if len(f.Remediation) > 3 {
				break
			}
		}
		st.add(f)
	}
}

// blockMountpoints are the mountpoints of a block device and of the
// devices stacked on it (dm holders).
func (st *state) blockMountpoints(name string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(n string)
	walk = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, b := range st.storage.Block {
			if b.Name == n {
				out = append(out, st.devMountpoints(b.Dev)...)
				for _, h := range b.Holders {
					walk(h)
				}
			}
		}
	}
	walk(name)
	return out
}

// iscsiSessions names sessions that are not logged in.
func (st *state) iscsiSessions() {
	for _, s := range st.storage.ISCSISessions {
		connDown := s.ConnState != "" && s.ConnState != "up"
		if s.State == "LOGGED_IN" && !connDown {
			continue
		}
		var devs, mps []string
		for _, d := range st.storage.SCSIDevices {
			if d.Session == s.Name {
				devs = append(devs, fmt.Sprintf("%s (%s)", orUnknown(d.Block), d.State))
				if d.Block != "" {
					mps = append(mps, st.blockMountpoints(d.Block)...)
				}
			}
		}
		portal := s.Address
		if s.Port != "" {
			portal += ":" + s.Port
		}
		f := Finding{ID: idISCSIDown, Severity: Critical, Title: "iSCSI session down or in recovery", Subject: "iscsi:" + s.Name}
		f.Summary = fmt.Sprintf("iSCSI %s to %s at portal %s is %s", s.Name, orUnknown(s.TargetName), orUnknown(portal), orUnknown(s.State))
		if connDown {
			f.Summary += " (connection " + s.ConnState + ")"
		}
		if s.RecoveryTMO != "" {
			f.Summary += ", recovery_tmo " + s.RecoveryTMO + " s"
		}
		if len(devs) > 0 {
			f.Summary += "; disks " + listOf(devs, 4)
		}
		f.Summary += st.podsClause(mps)
		f.Explanation = "The session is not logged in: the kernel blocks its disks while it tries to recover (recovery_tmo seconds), then takes them offline; I/O to the volumes on them waits, then fails."
		f.Evidence = append(f.Evidence, Evidence{Path: layout.StorageClientsPath, What: "the session, its portal and its disks' SCSI state", Record: s})
		f.Remediation = append(f.Remediation, "Check the portal "+orUnknown(portal)+" and the target; iscsiadm -m session -P 3",
			"Once the target answers: iscsiadm -m session -r "+strings.TrimPrefix(s.Name, "session")+" --rescan (or log in again: iscsiadm -m node -T "+shellQuote(s.TargetName)+" -l)")
		st.add(f)
	}
}

// failedSCSI are SCSI device states in which no I/O gets through.
var failedSCSI = map[string]bool{"offline": true, "blocked": true, "transport-offline": true, "cancel": true, "deleted": true}

// multipathMaps names multipath maps all of whose paths failed.
func (st *state) multipathMaps() {
	scsi := map[string]layout.SCSIDevice{}
	for _, d := range st.storage.SCSIDevices {
		if d.Block != "" {
			scsi[d.Block] = d
		}
	}
	sessions := map[string]layout.ISCSISession{}
	for _, s := range st.storage.ISCSISessions {
		sessions[s.Name] = s
	}
	for _, dm := range st.storage.DM {
		if !dm.Multipath || len(dm.Slaves) == 0 {
			continue
		}
		var paths []string
		failed := 0
		for _, sl := range dm.Slaves {
			d, ok := scsi[sl]
			state := "unknown"
			bad := false
			if ok {
				state = d.State
				bad = failedSCSI[d.State]
				if s, ok := sessions[d.Session]; ok && s.State != "" && s.State != "LOGGED_IN" {
					state += ", iSCSI " + s.State
					bad = true
				}
			}
			if bad {
				failed++
			}
			paths = append(paths, sl+" ("+state+")")
		}
		if failed < len(dm.Slaves) {
			continue
		}
		mps := st.blockMountpoints(dm.Block)
		f := Finding{ID: idMultipathFailed, Severity: Critical, Title: "Multipath device with every path failed", Subject: orUnknown(dm.Dev)}
		f.Summary = fmt.Sprintf("multipath %s (%s): all %s failed: %s", orUnknown(dm.Name), dm.Block, plural(len(dm.Slaves), "path", "paths"), listOf(paths, 4))
		if len(mps) > 0 {
			f.Summary += "; mounted at " + listOf(mps, 2)
		}
		f.Summary += st.podsClause(mps)
		f.Explanation = "Every SCSI device under the multipath map is offline or blocked: with queue_if_no_path, I/O to it queues forever and its users hang in D state; otherwise it fails. The paths' states inside the multipath table (active/failed) are not read by nodesnap; the SCSI devices' states are."
		f.Evidence = append(f.Evidence, Evidence{Path: layout.StorageClientsPath, What: "the map, its slaves and their SCSI state", Record: dm})
		f.Remediation = append(f.Remediation, "Restore the paths (portals, zoning, cables), then: multipath -ll; multipathd reconfigure",
			"If the LUN is gone for good, let the queued I/O fail: dmsetup message "+shellQuote(orUnknown(dm.Name))+" 0 fail_if_no_path")
		st.add(f)
	}
}
