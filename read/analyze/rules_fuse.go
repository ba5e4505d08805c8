package analyze

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// FUSE: the daemon behind a mount, a connection whose daemon is gone, and the fusectl abort that works where fusectl is not mounted.

// fusectlDir is where fusectl, the FUSE control filesystem, is mounted
// by convention. Many nodes do not mount it (no systemd unit does on
// minimal images), and then the abort file does not exist.
const fusectlDir = "/sys/fs/fuse/connections"

// fuseAbortFix is the command that aborts FUSE connection conn (the minor
// of the mount's device): it mounts fusectl first where it is not
// mounted, which is harmless (one kernel superblock, read-only knobs
// besides abort and congestion).
func fuseAbortFix(conn string) string {
	return "Wake everything blocked on it by aborting its FUSE connection " + conn + " (fusectl is mounted first where it is not):   " +
		"mountpoint -q " + fusectlDir + " || mount -t fusectl none " + fusectlDir + "; echo 1 > " + fusectlDir + "/" + conn + "/abort"
}

// fuseFixes are the remediation lines for a FUSE mount that hangs: abort
// its connection, or unmount it lazily.
func fuseFixes(ps []layout.MountProbe, mp string) []string {
	var out []string
	for _, p := range ps {
		if p.FUSE != nil && p.Mountpoint == mp {
			out = append(out, fuseAbortFix(strconv.FormatUint(uint64(p.FUSE.Conn), 10)))
			break
		}
	}
	q := shellQuote(mp)
	return append(out, "Or unmount it lazily (it leaves the mount table at once; processes already blocked stay until the connection is aborted): umount -l "+q+"   (or fusermount -uz "+q+")")
}

// fuseServer tells a FUSE daemon's thread waiting for requests (it sleeps
// in FUSE code too, but serves the mount rather than waits on it).
func fuseServer(t *layout.Task) bool {
	if strings.HasPrefix(t.Wchan, "fuse_dev_") {
		return true
	}
	for _, l := range t.Stack {
		if strings.Contains(l, "fuse_dev_do_read") || strings.Contains(l, "fuse_dev_read") {
			return true
		}
	}
	return false
}

// deadFUSE reports FUSE mounts whose daemon is gone: every access fails
// at once with ENOTCONN ("Transport endpoint is not connected"), e.g.
// ceph-fuse mounts after the CSI plugin restarted (ceph-csi#792).
func (st *state) deadFUSE() {
	for _, ps := range st.probesByDevice(func(p layout.MountProbe) bool {
		return p.Result == layout.ProbeError && (p.Errno == "ENOTCONN" || p.Errno == "ECONNABORTED") &&
			(p.Class == "fuse" || strings.HasPrefix(p.FSType, "fuse"))
	}) {
		dev, mps := ps[0].Dev, probeMountpoints(ps)
		f := Finding{
			ID:       idDeadFUSE,
			Severity: Critical,
			Title:    "FUSE mount whose daemon is gone (Transport endpoint is not connected)",
			Subject:  dev,
			Summary:  fmt.Sprintf("%s at %s fails every access with %s: its FUSE daemon exited or its connection was aborted", ps[0].FSType, listOf(mps, 2), ps[0].Errno),
			Explanation: "The mount is still in the mount table but nothing serves it: every stat, open or list fails at once with \"Transport endpoint is not connected\". " +
				"Pods using it see I/O errors, and the kubelet cannot tear it down cleanly. A FUSE daemon such as ceph-fuse dies with the CSI node plugin that started it " +
				"when the plugin is restarted or upgraded (ceph-csi#792).",
		}
		if d := ps[0].Diagnosis; d != "" {
			f.Explanation += " The probe says: " + d + "."
		}
		var ms []mountRec
		for _, p := range ps {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.ProbesPath, What: "the probe failed with " + p.Errno, Record: p})
			for _, ns := range p.Namespaces {
				ms = append(ms, mountRec{NS: ns, ID: p.MountID})
			}
		}
		f.Evidence = append(f.Evidence, st.mountinfoEvidence(ms, "the dead mount in the mount table")...)
		var tokens []string
		for _, mp := range mps {
			tokens = append(tokens, pathTokens(mp)...)
		}
		st.claimLogs(&f, tokens, sigTransportNotConn, sigTeardownBusy, sigOrphanedPod)
		for _, mp := range mps {
			f.Remediation = append(f.Remediation, "Unmount it: fusermount -uz "+shellQuote(mp)+"   (or umount -l "+shellQuote(mp)+")")
		}
		f.Remediation = append(f.Remediation, "Restart the FUSE daemon or the CSI node plugin that runs it, then restart the pods that use the volume so it is mounted afresh.")
		st.add(f)
	}
}
