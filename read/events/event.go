// Package events turns log records into events: what a record says
// happened to which storage object, whatever wrote it and in whatever
// format. A record of the kubelet, a CSI node plugin (klog text or
// structured, JSON lines of zap, logrus or klog, logfmt, Rust tracing,
// Python logging, Go's log stamp, ceph-csi's "ID: n Req-ID: x" prefixes),
// a container runtime, a storage daemon (iscsid, multipathd) or the
// kernel becomes one Event: its time,
// source and component, level, the operation (mount, stage, publish,
// attach, teardown, I/O ...), every object key it carries (pod, volume,
// PV, volume handle, device, path, server, portal, IQN, WWID) and the
// error (gRPC code, errno, exit status, the wrapped message verbatim), or
// that the operation succeeded.
//
// Structure is read first, wording second: the operation comes from gRPC
// method names and the kubelet's operation names before verbs, the
// outcome from the record's level and error fields before words. The
// package is pure (no I/O) and imports nothing of nodesnap but the
// signatures package's object extraction; analyze groups its events by
// object and operation.
package events

import (
	"strings"
	"time"
)

// Level is a record's severity as its writer logged it.
type Level uint8

// Levels, lowest first.
const (
	LevelUnknown Level = iota
	LevelDebug
	LevelInfo
	LevelWarning
	LevelError
	LevelFatal
)

func (l Level) String() string {
	switch l {
	case LevelDebug:
		return "debug"
	case LevelInfo:
		return "info"
	case LevelWarning:
		return "warning"
	case LevelError:
		return "error"
	case LevelFatal:
		return "fatal"
	}
	return "unknown"
}

// Op is the storage operation a record is about.
type Op string

// Operations.
const (
	OpNone          Op = ""
	OpMount         Op = "mount"
	OpStage         Op = "stage"
	OpPublish       Op = "publish"
	OpAttach        Op = "attach"
	OpMap           Op = "map"
	OpUnmount       Op = "unmount"
	OpUnstage       Op = "unstage"
	OpUnpublish     Op = "unpublish"
	OpTeardown      Op = "teardown"
	OpUnmap         Op = "unmap"
	OpDetach        Op = "detach"
	OpFormat        Op = "format"
	OpResize        Op = "resize"
	OpRootfsUnmount Op = "rootfs unmount"
	OpSandboxRemove Op = "sandbox removal"
	OpIO            Op = "I/O"
	// OpCSICall is a CSI driver's call whose method its log does not
	// name.
	OpCSICall Op = "CSI call"
	// OpConnect is a client's connection to a plugin's socket under the
	// kubelet's plugin directories (the kubelet's gRPC channel to a CSI
	// node plugin).
	OpConnect Op = "plugin connection"
	// OpCheck is a check of a volume's mount path (stat, statfs, df,
	// du, NodeGetVolumeStats): one that times out is the plugin's view
	// of a hung mount.
	OpCheck Op = "mount path check"
	// OpMkdir is the creation of a volume's directory (a provisioner's
	// or a plugin's mkdir of the PV's path).
	OpMkdir Op = "volume directory creation"
)

// Outcome says whether a record reports an operation failing or
// succeeding.
type Outcome uint8

// Outcomes.
const (
	OutcomeNone Outcome = iota
	OutcomeFailed
	OutcomeSucceeded
)

func (o Outcome) String() string {
	switch o {
	case OutcomeFailed:
		return "failed"
	case OutcomeSucceeded:
		return "succeeded"
	}
	return ""
}

// Keys are the objects a record names, each "" when it does not.
type Keys struct {
	PodUID string
	// Pod is "namespace/name", or a name alone when the record gives no
	// namespace.
	Pod string
	// Volume is the volume's name in the pod spec or a kubelet's unique
	// volume name; PV a persistent volume's name (pvc-<uuid>); Handle the
	// CSI volume ID (vol-..., csi-vol-<uuid>, 0001-0009-...).
	Volume string
	PV     string
	Handle string
	// Device is a block device (/dev/sdb, /dev/rbd0); Path a mount,
	// target or staging path.
	Device string
	Path   string
	// Server is a remote file system's server ("host:/export", a ceph
	// monitor); Portal an iSCSI portal (ip:3260); IQN an iSCSI target or
	// initiator name; WWID a SCSI WWID or serial.
	Server string
	Portal string
	IQN    string
	WWID   string
	// Map is a device-mapper multipath map's alias ("mpatha") when the
	// record names it by its alias rather than its WWID.
	Map string
	// Pool is a ZFS pool's name, as ZFS names it in its kernel
	// warnings ("Pool 'tank' ...").
	Pool string
	// Sandbox is a runtime's pod sandbox or container ID (64 hex
	// digits), read from a record about a sandbox's removal or a
	// container's rootfs: the object of those operations.
	Sandbox string
}

// Error is what a failing record says went wrong.
type Error struct {
	// Code is the gRPC status code name ("NotFound", "Internal", ...).
	Code string
	// Errno is the errno the text names ("EIO", "EBUSY", ...).
	Errno string
	// Exit is a command's exit status (0 when none is named).
	Exit int
	// LoginRefused: an iSCSI (or other) login was refused or failed
	// authentication.
	LoginRefused bool
	// Message is the wrapped error verbatim (the err field, or the
	// message), bounded to MaxMessage bytes.
	Message string
}

// MaxMessage bounds an event's error message.
const MaxMessage = 1024

// Event is one record read for what it says about storage.
type Event struct {
	// Time is zero when the record carries no time that parses; Zoned
	// says it carried a UTC offset.
	Time  time.Time
	Zoned bool
	// Source is who wrote the record: the journal or syslog identifier
	// ("kubelet", "containerd", "iscsid", "kernel"), or "kubelet" for a
	// record the kubelet wrote inside another process (k3s, k0s,
	// kubelite, a wrapper), read from its content.
	Source string
	// PID is the journal or syslog prefix's pid (0 when none).
	PID int
	// Component is the writer's own location: a klog file name
	// ("operation_generator.go"), a JSON caller or logger, a tracing
	// target.
	Component string
	// Kubelet says the record's content is the kubelet's (a klog header
	// from a kubelet source file, or a kubelet operation name).
	Kubelet bool
	Level   Level
	Op      Op
	// Method is the CSI gRPC method ("NodeStageVolume") when named.
	Method  string
	Outcome Outcome
	Keys    Keys
	Err     Error
	// Msg is the record's message (without header and fields).
	Msg string
}

// Storage says whether the event is about a storage operation on an
// object: it has an operation, an outcome and a key that names a storage
// object (a pod alone is not one, unless the operation is its volumes'
// mount).
func (e *Event) Storage() bool {
	if e.Op == OpNone || e.Outcome == OutcomeNone {
		return false
	}
	k := e.Keys
	if k.Volume != "" || k.PV != "" || k.Handle != "" || k.Device != "" || k.Path != "" || k.Server != "" || k.Portal != "" || k.IQN != "" || k.WWID != "" || k.Map != "" || k.Pool != "" || k.Sandbox != "" {
		return true
	}
	return e.Op == OpMount && (k.Pod != "" || k.PodUID != "")
}

// Permanent says whether the error is permanent by its nature: waiting
// does not mend it (an I/O error, a missing device, NotFound,
// PermissionDenied, InvalidArgument, a refused login, mount's exit
// status 32).
func (e *Event) Permanent() (bool, string) {
	if e.Outcome != OutcomeFailed {
		return false, ""
	}
	switch e.Err.Errno {
	case "EIO", "ENODEV", "EUCLEAN", "EROFS", "ENXIO":
		return true, e.Err.Errno
	}
	code := e.Err.Code
	if code == "NotFound" && (e.Op == OpRootfsUnmount || e.Op == OpSandboxRemove) {
		// A container or sandbox the runtime cannot find to remove is
		// gone already.
		code = ""
	}
	switch code {
	case "NotFound", "PermissionDenied", "InvalidArgument":
		return true, "gRPC " + e.Err.Code
	}
	if e.Err.LoginRefused {
		return true, "login refused"
	}
	if e.Op == OpMkdir {
		switch e.Err.Errno {
		case "EACCES", "EPERM", "ENOSPC", "ENOTDIR":
			// A directory its writer may not create, or has no room
			// for: the provisioner retries the same mkdir in vain.
			return true, e.Err.Errno
		}
	}
	if e.Err.Exit == 32 && (e.Op == OpMount || e.Op == OpStage || e.Op == OpPublish) {
		return true, "mount exit status 32"
	}
	return false, ""
}

// Object is the key events are grouped by, with its kind: the sandbox
// of a runtime's removal, else the volume handle, the PV, the volume, the
// device, the path, the portal or IQN, the server, the pod.
func (k Keys) Object() (kind, value string) {
	for _, c := range []struct{ kind, v string }{
		{"sandbox", k.Sandbox},
		{"volume", k.Handle}, {"volume", k.PV}, {"volume", k.podVolume()}, {"device", k.Device}, {"path", k.Path},
		{k.targetKind(), k.IQN}, {"iSCSI portal", k.Portal}, {"WWID", k.WWID}, {"multipath map", k.Map}, {"ZFS pool", k.Pool}, {"server", k.Server},
		{"pod", k.PodUID}, {"pod", k.Pod},
	} {
		if c.v != "" {
			return c.kind, c.v
		}
	}
	return "", ""
}

// targetKind names the kind of a target's name: an NVMe-oF subsystem's
// NQN, else an iSCSI IQN.
func (k Keys) targetKind() string {
	if strings.HasPrefix(k.IQN, "nqn.") {
		return "NVMe-oF target"
	}
	return "iSCSI target"
}

// podVolume is the volume key, qualified by its pod when the name is one
// a pod's spec gives its volume ("data", "config": unique only within
// the pod, so two pods' failures on their own "data" are two objects, and
// one pod's success does not mend another's). A name with a plugin's
// path, a handle's separator or a PV's form is global and stays as is.
func (k Keys) podVolume() string {
	pod := k.Pod
	if pod == "" {
		pod = k.PodUID
	}
	if k.Volume == "" || pod == "" || strings.HasPrefix(k.Volume, "pvc-") || strings.ContainsAny(k.Volume, "/^:#") {
		return k.Volume
	}
	return k.Volume + " of pod " + pod
}

// All returns every key the record names, most specific first, without
// repeats.
func (k Keys) All() []string {
	var out []string
	for _, v := range []string{k.Sandbox, k.Handle, k.PV, k.podVolume(), k.Device, k.Path, k.IQN, k.Portal, k.WWID, k.Map, k.Pool, k.Server, k.Pod, k.PodUID} {
		if v != "" && !contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Merge fills what k lacks from o.
func (k *Keys) Merge(o Keys) {
	fill := func(x *string, y string) {
		if *x == "" {
			*x = y
		}
	}
	fill(&k.PodUID, o.PodUID)
	fill(&k.Pod, o.Pod)
	fill(&k.Volume, o.Volume)
	fill(&k.PV, o.PV)
	fill(&k.Handle, o.Handle)
	fill(&k.Device, o.Device)
	fill(&k.Path, o.Path)
	fill(&k.Server, o.Server)
	fill(&k.Portal, o.Portal)
	fill(&k.IQN, o.IQN)
	fill(&k.WWID, o.WWID)
	fill(&k.Map, o.Map)
	fill(&k.Pool, o.Pool)
	fill(&k.Sandbox, o.Sandbox)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Resolves says whether a success of op ends failures of failed on the
// same object: the same operation, or the kubelet's name and the CSI
// driver's for one step (MountVolume.SetUp is NodePublishVolume); and a
// teardown that succeeded ends whatever failed on the object before it
// (the volume is gone from the node), but an I/O error.
func Resolves(op, failed Op) bool {
	if op == failed {
		return true
	}
	if failed == OpCheck && (op == OpMount || op == OpStage || op == OpPublish) {
		// A mount of the path that succeeded after its check timed out:
		// the mount answers again.
		return true
	}
	switch op {
	case OpUnpublish, OpUnstage, OpTeardown, OpDetach:
		return failed != OpIO
	}
	pair := func(a, b Op) bool { return op == a && failed == b || op == b && failed == a }
	return pair(OpMount, OpPublish) || pair(OpTeardown, OpUnpublish) || pair(OpUnmount, OpTeardown) || pair(OpUnmount, OpUnpublish)
}

// trimMessage bounds a message, on a rune boundary. An escape a writer
// quoted ("\x80" in a klog value) may unquote to a byte that is no
// UTF-8: it is replaced, so a message stays text.
func trimMessage(s string) string {
	s = strings.ToValidUTF8(strings.TrimSpace(s), "\uFFFD")
	if len(s) <= MaxMessage {
		return s
	}
	i := MaxMessage
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}
