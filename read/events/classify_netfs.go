package events

import (
	"strconv"
	"strings"
)

// The kernel's network file system clients write a mount in two records
// of one structure: the attempt, naming the share ("CIFS: Attempting to
// mount //host/share"), and, when it fails, the client's own failure
// with the negative errno it returns to mount(2) ("CIFS: VFS: cifs_mount
// failed w/return code = -13", "CIFS VFS: ..."). The share is the object
// and the operation its mount; the failure names the share of the
// attempt before it when it names none itself.

var (
	// reNetFSClient is a kernel network file system client's record.
	reNetFSClient = lazy(`^(?:CIFS|SMB3|NFS|NFSv4|ceph)(?::? VFS)?: (.+)$`)
	// reReturnCode is the negative errno a client returns ("return code
	// = -22", "rc = -13", "error -5").
	reReturnCode = lazy(`(?:return code|rc|error|err)\s*=?\s*-(\d{1,3})\b`)
)

// kernelErrnos names the errnos the kernel's records give as numbers (a
// file system's "error -5", a network client's "return code = -13"), by
// the generic Linux numbering the node's kernel used, whatever machine
// reads the bundle.
var kernelErrnos = map[int]string{2: "ENOENT", 5: "EIO", 6: "ENXIO", 11: "EAGAIN", 12: "ENOMEM", 13: "EACCES", 19: "ENODEV", 22: "EINVAL",
	28: "ENOSPC", 30: "EROFS", 101: "ENETUNREACH", 110: "ETIMEDOUT", 111: "ECONNREFUSED", 112: "EHOSTDOWN", 113: "EHOSTUNREACH", 115: "EINPROGRESS", 117: "EUCLEAN", 126: "ENOKEY"}

// netfsRecord reads a kernel network file system client's record about a
// mount; ok is false when it reports no failure.
func (p *Parser) netfsRecord(r *record) bool {
	m := reNetFSClient.FindStringSubmatch(strings.TrimSpace(r.msg))
	if m == nil {
		return false
	}
	what := m[1]
	if !strings.Contains(strings.ToLower(what), "mount") {
		return false
	}
	rc := reReturnCode.FindStringSubmatch(what)
	if rc == nil {
		return false
	}
	k := keysOf(r)
	ev := &r.ev
	ev.Op = OpMount
	ev.Outcome = OutcomeFailed
	if k.Server == "" {
		// The attempt just before names the share (noteRecent keeps
		// it).
		k.Merge(p.recentKeys())
	}
	ev.Keys = k
	ev.Msg = strings.TrimSpace(r.msg)
	r.lower = strings.ToLower(r.text)
	ev.Err = errorOf(r)
	if ev.Err.Errno == "" {
		n, _ := strconv.Atoi(rc[1])
		ev.Err.Errno = kernelErrnos[n]
	}
	return true
}
