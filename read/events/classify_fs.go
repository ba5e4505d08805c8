package events

import (
	"strconv"
	"strings"
)

// The kernel's file systems write their records in one structure
// whatever they say: "<FS>[-fs][:] [<level>] ([device ]<dev>): <what>".
// ext4's "EXT4-fs error (device sdf): ...", "EXT4-fs (vdb): error count
// since last fsck: 26", "EXT4-fs warning (device vdb): ... error reading
// directory block"; btrfs's "BTRFS error (device dm-0): bdev ... errs:
// ...", "BTRFS warning (device dm-0): direct IO failed ..."; XFS's "XFS
// (sdb6): log I/O error -5"; f2fs's, fat's, jfs's the same. The device is
// the object, the operation its I/O; the level the file system gives the
// record says the outcome, and a record without one (or a warning) fails
// when it reports an error, a failure, a corruption or a negative errno.

var (
	// reFSRecord is a file system's record about a block device.
	reFSRecord = lazy(`(?:^|[\s\]])([A-Z][A-Z0-9]{1,7}(?:-fs)?):? (?:(emerg|alert|crit|critical|error|err|warning|warn|notice|info|debug) )?\((?:device )?((?:sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+)\d*|nvme\d+n\d+(?:p\d+)?|mmcblk\d+(?:p\d+)?|(?:dm|md|rbd|nbd|loop|drbd|zd|sr)-?\d+(?:p\d+)?)\):? (.+)$`)
	// reFSFailure are a file system's words of an error it met.
	reFSFailure = lazy(`(?i)\berror\b|\berrors\b|\bfail(?:ed|ure|s)?\b|\bcorrupt|\bshut(?:ting)? ?down\b|\baborting\b|\babort\b|\bI/O\b|\bbad (?:tree|block|superblock|entry|header|magic)`)
	// reFSMended are its words of an error it mended (a scrub's "fixed
	// up error", a "read error corrected"): no failure left.
	reFSMended = lazy(`(?i)fixed up|\bcorrected\b|\brepaired\b|ending clean mount|mounted filesystem`)
	// reFSErrno is a negative errno a file system writes ("error -5",
	// "errno=-5", "returned -117").
	reFSErrno = lazy(`(?:error|errno=|returned|err) ?(-\d{1,3})\b`)
)

// fsRecord reads a kernel file system's record about its device when
// it reports a failure; ok is false otherwise (the record is read as any
// other).
func fsRecord(r *record) bool {
	msg := strings.TrimSpace(r.msg)
	if !strings.Contains(msg, " (") {
		return false
	}
	m := reFSRecord.FindStringSubmatch(msg)
	if m == nil {
		return false
	}
	level, dev, what := m[2], m[3], m[4]
	switch level {
	case "info", "notice", "debug":
		return false
	}
	if reFSMended.MatchString(what) {
		return false
	}
	failed := level != "" && level != "warning" && level != "warn"
	if !failed && !reFSFailure.MatchString(what) {
		return false
	}
	ev := &r.ev
	ev.Op = OpIO
	ev.Outcome = OutcomeFailed
	ev.Keys = Keys{Device: "/dev/" + dev}
	ev.Msg = msg
	r.lower = strings.ToLower(r.text)
	ev.Err = errorOf(r)
	if ev.Err.Errno == "" {
		if e := reFSErrno.FindStringSubmatch(what); e != nil {
			n, _ := strconv.Atoi(e[1][1:])
			ev.Err.Errno = kernelErrnos[n]
		}
	}
	return true
}

// The block layer reports a request that failed in one structure
// whatever its status: "<status> error, dev <dev>, sector <n>"
// (blk_print_req_error, blk_update_request before it: "I/O", "critical
// target", "critical medium", "timeout", "recoverable transport",
// "critical nexus", "protection"...). The device is the object, its I/O
// the operation.
var reBlockError = lazy(`\b([a-z][a-z/ ]{0,40}) error, dev ([a-z][\w-]{1,31}), sector \d+`)

// blockRecord reads the block layer's report of a failed request; ok is
// false when the record is not one.
func blockRecord(r *record) bool {
	if !strings.Contains(r.msg, " error, dev ") {
		return false
	}
	m := reBlockError.FindStringSubmatch(r.msg)
	if m == nil {
		return false
	}
	ev := &r.ev
	ev.Op = OpIO
	ev.Outcome = OutcomeFailed
	ev.Keys = Keys{Device: "/dev/" + m[2]}
	ev.Msg = strings.TrimSpace(r.msg)
	r.lower = strings.ToLower(r.text)
	ev.Err = errorOf(r)
	return true
}
