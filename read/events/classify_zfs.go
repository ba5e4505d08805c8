package events

import (
	"strings"
)

// ZFS writes its kernel warnings about a pool in one structure whatever
// they say: "[SPLError: ...] WARNING: Pool '<name>' <what>" (the pool
// suspended on an uncorrectable I/O failure, its vdevs lost). The pool is
// the object, its I/O the operation; the record fails when it reports an
// error, a failure or the pool suspended.

var (
	// reZFSPool is ZFS's name of a pool in its warnings.
	reZFSPool = lazy(`\bPool '([^'\s]{1,255})' (.+)$`)
	// reZFSFailure are its words of a pool that stopped: a suspended
	// pool, and a file system's words of an error (reFSFailure).
	reZFSFailure = lazy(`(?i)\bsuspended\b`)
)

// zfsPoolRecord reads a ZFS kernel warning about a pool when it reports
// a failure; ok is false otherwise.
func zfsPoolRecord(r *record) bool {
	if !strings.Contains(r.msg, "Pool '") {
		return false
	}
	m := reZFSPool.FindStringSubmatch(r.msg)
	if m == nil || !reZFSFailure.MatchString(m[2]) && !reFSFailure.MatchString(m[2]) {
		return false
	}
	ev := &r.ev
	ev.Op = OpIO
	ev.Outcome = OutcomeFailed
	ev.Keys = Keys{Pool: m[1]}
	ev.Msg = strings.TrimSpace(r.msg)
	r.lower = strings.ToLower(r.text)
	ev.Err = errorOf(r)
	if ev.Err.Errno == "" && strings.Contains(r.lower, "i/o failure") {
		ev.Err.Errno = "EIO"
	}
	return true
}
