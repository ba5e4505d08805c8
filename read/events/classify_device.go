package events

import (
	"strings"
)

// The storage daemons and the kernel write a device's state in one
// structure whatever their wording: multipathd "<map>: <path> - <what>"
// or "<path>: <what>", dev_printk "<driver> <device>: <what>", a block
// driver's "<driver>: <device>: <what>". The device (or the map's WWID)
// is the object; the words of a path's or device's state are the
// outcome; the operation is the device's I/O.

var (
	// reMultipathd is multipathd's record: a map (alias or WWID) or a
	// path, then optionally " <path> - ", then what happened.
	reMultipathd = lazy(`^([\w.:-]+): (?:([a-z]+\d*[a-z]*\d*) - )?(.+)$`)
	// reKernelDev is a kernel record about a block device (dev_printk's
	// "nvme nvme2: ...", "rbd: rbd0: ...", a disk's own "nvme2n1: ...").
	reKernelDev = lazy(`^(?:[\w-]+:? )?((?:sd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+(?:n\d+)?|rbd\d+|nbd\d+|dm-\d+|md\d+|drbd\d+)):? `)
	reWWIDLike  = lazy(`^(?:[0-9a-f]{16,}|(?:eui|naa|wwn|nqn)\.[\w.:-]+)$`)
	reBlockDev  = lazy(`^(?:` + blockDevNames + `)$`)
	// reNegErrno is a kernel's negative errno ("status: -19", ": -13",
	// dev_printk's "failed (-104)", a block driver's "(result -32)").
	reNegErrno = lazy(`(?:[:=(]|\bresult) ?-\d{1,3}\b`)
	// reSCSIDisk is the SCSI disk driver's sdev_printk prefix
	// "sd <host:channel:target:lun>: [sdX] ": the disk is the object.
	reSCSIDisk = lazy(`^sd \d+:\d+:\d+:\d+: \[(sd[a-z]+)\] `)
	// reSenseKey is the sense key of a SCSI command's failure.
	reSenseKey = lazy(`Sense Key ?: ?([A-Za-z ]+?) ?(?:\[|$)`)
	// reSCSIHost is a SCSI host a record names: the midlayer's
	// shost_printk "scsi hostN: ", its error handler "scsi_eh_N", a host
	// bus adapter driver's "... for scsiN" / "scsiN: ", the midlayer's
	// older "host N channel C id I lun L". A host's commands waiting,
	// aborted or reset are its failure.
	// reHBA is a SAS host bus adapter's own name for itself in its
	// records (mpt2sas/mpt3sas "mpt3sas_cm0: ", "mpt2sas0: ").
	reHBA      = lazy(`^(mpt[23]sas(?:_cm)?\d+):? `)
	reSCSIHost = lazy(`\bscsi(?: ?host|_eh_)?(\d+)\b|\bhost (\d+) channel \d+ id \d+`)
)

// blockDevNames are the kernel's names of a whole block device (no
// partition): a SCSI, virtio or Xen disk, an NVMe namespace, a Ceph RBD
// or network block device, a device-mapper or MD device.
const blockDevNames = `sd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+n\d+|rbd\d+|nbd\d+|dm-\d+|md\d+`

// failingSenseKeys are the SCSI sense keys of a command the device
// failed (SPC's sense key table). No Sense, Recovered Error and Unit
// Attention report a state, not a failure; Illegal Request is the
// reply to a command the device does not implement (WRITE SAME, a
// VPD page), which disks answer on every healthy boot.
var failingSenseKeys = map[string]bool{"medium error": true, "hardware error": true, "not ready": true, "aborted command": true, "data protect": true}

// senseFailed tells a SCSI disk record whose sense key says the
// command failed.
func senseFailed(msg string) bool {
	m := reSenseKey.FindStringSubmatch(msg)
	return m != nil && failingSenseKeys[strings.ToLower(strings.TrimSpace(m[1]))]
}

// pathDown and pathUp are the words of a path's or device's state.
var (
	pathDown = []string{"is down", "path down", "state down", "offline", "fail", "faulty", "error", "timeout", "timed out", "not ready", "remaining active paths: 0", "removing"}
	pathUp   = []string{"is up", "path up", "state = up", "reinstate", "is operational"}
	// deviceDown are the kernel's words of a device lost: its driver
	// says much at boot that is no failure ("Shutdown timeout set to",
	// "failed to set APST feature"), so only a device's state (and a
	// negative errno) count.
	deviceDown = []string{"offline", "not ready", "removing", "timeout,", "timed out", "i/o error", "medium error", "dead",
		// A controller's or host's own error handling (the NVMe core's,
		// its fabrics transports' and the SCSI error handler's): a
		// command timed out ("queue 0: timeout cid ..."), recovery or a
		// reset started, a reconnect scheduled or failed, commands a
		// host waits for.
		"timeout cid", "error recovery", "resetting controller", "reset controller", "will reset", "reconnecting in", "failed reconnect",
		"commands to complete", "resetting fusion adapter", "sending diag reset", "attempting host reset", "fault_state"}
	// deviceUp are the kernel's words of a device or controller back:
	// a fabrics controller reconnected, a host's or controller's reset
	// done, a path reinstated.
	deviceUp = []string{"successfully reconnected", "reset successful", "reset complete", "reset: success", "reinstate", "is operational", "is up"}
)

// deviceRecord reads a storage daemon's or the kernel's record about a
// device; ok is false when the record is not one.
func deviceRecord(r *record) bool {
	ev := &r.ev
	msg := strings.TrimSpace(r.msg)
	lower := strings.ToLower(msg)
	var k Keys
	switch {
	case ev.Source == "multipathd":
		m := reMultipathd.FindStringSubmatch(msg)
		if m == nil {
			return false
		}
		obj, path := m[1], m[2]
		switch {
		case path != "":
			k.Device = "/dev/" + path
		case reBlockDev.MatchString(obj):
			k.Device = "/dev/" + obj
		}
		switch {
		case reWWIDLike.MatchString(obj):
			k.WWID = obj
		case !reBlockDev.MatchString(obj):
			k.Map = obj
		}
	case ev.Source == "kernel" || ev.Source == "":
		m := reSCSIDisk.FindStringSubmatch(msg)
		if m == nil {
			m = reKernelDev.FindStringSubmatch(msg)
		}
		switch {
		case m != nil:
			k.Device = "/dev/" + m[1]
		default:
			// No block device: a SCSI host (its adapter's driver and
			// the midlayer's error handler speak of the host).
			if a := reHBA.FindStringSubmatch(msg); a != nil {
				k.Device = a[1]
				break
			}
			h := reSCSIHost.FindStringSubmatch(msg)
			if h == nil {
				return false
			}
			k.Device = "scsi" + h[1] + h[2]
		}
	default:
		return false
	}
	down := containsAny(lower, pathDown...)
	if ev.Source != "multipathd" {
		down = containsAny(lower, deviceDown...) || reNegErrno.MatchString(msg) || senseFailed(msg)
	}
	up := containsAny(lower, pathUp...)
	if ev.Source != "multipathd" {
		up = containsAny(lower, deviceUp...)
	}
	switch {
	case down && !up:
		ev.Outcome = OutcomeFailed
	case up && !down:
		ev.Outcome = OutcomeSucceeded
	default:
		return false
	}
	ev.Op = OpIO
	ev.Keys = k
	ev.Msg = msg
	if ev.Outcome == OutcomeFailed {
		ev.Err = errorOf(r)
	}
	return true
}
