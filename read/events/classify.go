package events

import (
	"strconv"
	"strings"
)

// classify reads a split record for its operation, outcome, keys and
// error.
func (p *Parser) classify(r *record) {
	ev := &r.ev
	text := r.text
	ev.Msg = r.msg
	ev.Kubelet = isKubeletComponent(ev.Component) || strings.Contains(text, "operationExecutor.") || hasKubeletOp(text)
	if ev.Kubelet && ev.Source != "kernel" {
		ev.Source = "kubelet"
	}
	if ev.Source == "" && strings.HasPrefix(r.msg, "kernel: ") {
		ev.Source = "kernel"
	}
	if ev.Source == "kernel" && (fsRecord(r) || blockRecord(r) || p.netfsRecord(r) || zfsPoolRecord(r)) {
		return
	}
	if ev.Source == "multipathd" || ev.Source == "kernel" {
		r.lower = strings.ToLower(text)
		if ev.Source == "multipathd" || operation(text, r.lower, "", "kernel") == OpNone {
			if deviceRecord(r) {
				return
			}
		}
	}
	// The CSI method: named in the record, or the one its request (or
	// the log's last call) was for.
	if m := matchIf(reMethod, text, "csi.v"); m != nil {
		ev.Method = m[1]
		p.remember(r.reqID, m[1])
		if r.reqID == "" && strings.Contains(text, "call") {
			// A new call: the last request's objects are not its.
			p.lastKeys = Keys{}
		}
	} else if m := matchIf(reGRPCMethod, text, "GRPC "); m != nil {
		// "GRPC NodeGetVolumeStats <id>": a call by its method's name.
		ev.Method = m[1]
		p.remember(r.reqID, m[1])
	} else if reCSIMethodName.MatchString(r.fn) {
		// The function its writer logged it from is the call's
		// (Python logging's location): the error that follows in
		// gRPC's own server is this call's.
		ev.Method = r.fn
		p.remember(r.reqID, r.fn)
	} else if r.reqID != "" {
		ev.Method = p.methods[r.reqID]
	} else if strings.Contains(text, "GRPC error") || strings.Contains(text, "GRPC response") ||
		pyGRPCServerFailure(r) && ev.Level >= LevelError {
		// A call's error or response (Python gRPC's server logger
		// "grpc._server" for its failure): the last call's.
		ev.Method = p.last
	}
	if ev.Method == "" {
		for _, m := range []string{"NodeStageVolume", "NodeUnstageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeExpandVolume", "ControllerPublishVolume", "ControllerUnpublishVolume"} {
			if strings.Contains(text, m) {
				ev.Method = m
				if strings.Contains(text, "{") && !strings.Contains(text, "rror") {
					// A driver's own request line ("NodeExpandVolume:
					// called with args {...}"): the error that follows
					// without a method of its own answers it.
					p.remember(r.reqID, m)
				}
				break
			}
		}
	}
	if strings.Contains(text, "GRPC request") || strings.Contains(text, "requests {") || strings.Contains(text, "GRPC call") && strings.Contains(text, "{") ||
		ev.Method != "" && strings.Contains(text, "{") && !strings.Contains(text, "rror") && !strings.Contains(text, "GRPC response") {
		p.request(r)
	} else if ev.Method != "" && ev.Level != LevelUnknown && ev.Level <= LevelInfo && !strings.Contains(text, "rror") && !strings.Contains(text, "fail") && !strings.Contains(text, "GRPC response") {
		// A driver's line announcing its call on an object
		// ("NodePublishVolume on volume \"x\""): the error that follows
		// without an object of its own is about it, and is that call's.
		if _, node := methodOps[ev.Method]; node && r.reqID == "" {
			p.remember("", ev.Method)
		}
		k := keysOf(r)
		if k.Handle == "" && k.PV == "" {
			// A call names its volume by its ID: a UUID that is not the
			// request's own.
			if u := reUUID.FindString(r.msg); u != "" && !strings.Contains(r.reqID, u) && u != k.PodUID && !strings.Contains(k.Path, u) {
				k.Handle = u
			}
		}
		if k != (Keys{}) {
			if r.reqID == "" {
				p.lastKeys = k
			} else {
				p.setKeys(r.reqID, k)
			}
		}
	} else if r.reqID != "" && r.reqVol == "" {
		// A request's own lines (trident's requestID=...): what they
		// name is the request's.
		k := keysOf(r)
		k.Merge(p.keys[r.reqID])
		p.setKeys(r.reqID, k)
	}
	r.lower = strings.ToLower(text)
	ev.Op = operation(text, r.lower, ev.Method, ev.Source)
	if ev.Kubelet && ev.Method == "" {
		if op := kubeletRecordOp(ev.Component, text); op != OpNone {
			ev.Op = op
		}
	}
	if ev.Op == OpNone && ev.Method == "" && pluginConnection(text, r.lower) != "" {
		// A client failing to reach a plugin's socket: the transport,
		// not an operation on a volume.
		ev.Op = OpConnect
	}
	if ev.Op == OpNone && !ev.Kubelet && ev.Source != "kernel" && (strings.Contains(text, "iqn.") || strings.Contains(text, ":3260") || strings.Contains(text, "nqn.") && reNQN.MatchString(text)) {
		// A record about an iSCSI or NVMe-oF target or portal (a
		// driver's, iscsiadm's, nvme's): its operation is the target's
		// login or connect, whatever the verb (discovery, session,
		// node list, connect).
		ev.Op = OpAttach
	}
	if ev.Op == OpNone && !ev.Kubelet && ev.Source != "kernel" && ev.Level >= LevelError &&
		(strings.Contains(text, "pvc-") || reBlockPath.MatchString(text) || strings.Contains(r.lower, "volume") && reUUID.MatchString(text)) {
		// A driver's error about a volume or a device without a verb of
		// its own ("failed to get serial num for disk pvc-... at device
		// path /dev/x"): a failed call on it.
		ev.Op = OpCSICall
	}
	if ev.Op == OpNone && !ev.Kubelet && (strings.Contains(text, "GRPC error") || strings.Contains(text, "rpc error: code =") || ev.Method != "" && ev.Level >= LevelError) {
		// A driver's failed call whose method its log does not say.
		ev.Op = OpCSICall
	}
	ev.Err = errorOf(r)
	ev.Outcome = outcome(r)
	if ev.Outcome == OutcomeFailed && ev.Level == LevelDebug {
		// Its writer logged the failure as a detail (containerd's
		// "failed to delete task" for a task already gone): it
		// expected it.
		ev.Outcome = OutcomeNone
	}
	if ev.Outcome == OutcomeFailed && ev.Op == OpRootfsUnmount && ev.Level == LevelWarning && r.get("error", "err") == "" {
		// A runtime's warning about a container's storage with no
		// error of its own: another record quoted whole in its message
		// (containerd's "cleanup warnings" of a shim's cleanup that
		// went on), not a removal that failed.
		ev.Outcome = OutcomeNone
	}
	if ev.Outcome == OutcomeNone {
		return
	}
	if ev.Outcome == OutcomeSucceeded {
		ev.Err = Error{}
	}
	ev.Keys = keysOf(r)
	if r.reqVol != "" && r.reqVol != "--" {
		ev.Keys.Handle = r.reqVol
	}
	if ev.Keys.Handle == "" && ev.Keys.PV == "" && (ev.Method != "" || ev.Op == OpCSICall) {
		// A driver's call names its volume by its ID: a UUID of the
		// message that is not the pod's is the volume's.
		for _, u := range reUUID.FindAllString(r.msg+" "+r.get("error", "err"), 4) {
			if u != ev.Keys.PodUID && !strings.Contains(ev.Keys.Path, u) {
				ev.Keys.Handle = u
				break
			}
		}
	}
	if ev.Outcome != OutcomeNone {
		// The objects of the request the error (or response) answers.
		switch {
		case r.reqID != "":
			ev.Keys.Merge(p.keys[r.reqID])
		case ev.Method != "" || ev.Op == OpCSICall:
			ev.Keys.Merge(p.lastKeys)
		}
	}
	if ev.Outcome == OutcomeFailed && (ev.Method != "" || ev.Op == OpCSICall || ev.Op == OpMount || ev.Op == OpUnmount || ev.Op == OpAttach || ev.Op == OpFormat || ev.Op == OpStage || ev.Op == OpPublish) && !ev.Kubelet && !ev.Storage() {
		// A driver's failed call that names no object: the records just
		// before it (the mount command it ran, the device it waited
		// for) name it.
		ev.Keys.Merge(p.recentKeys())
	}
}

// request keeps the objects a driver's request names ("GRPC request:
// {...}", "GRPC call: /csi.v1.Node/X requests {...}") for its error.
func (p *Parser) request(r *record) {
	k := keysOf(r)
	if r.reqID == "" {
		p.lastKeys = k
		return
	}
	p.setKeys(r.reqID, k)
}

func (p *Parser) setKeys(id string, k Keys) {
	if _, ok := p.keys[id]; !ok && len(p.keys) >= maxRequests {
		for old := range p.keys {
			delete(p.keys, old)
			break
		}
	}
	p.keys[id] = k
}

func (p *Parser) remember(id, method string) {
	p.last = method
	if id == "" {
		return
	}
	if _, ok := p.methods[id]; !ok {
		if len(p.order) >= maxRequests {
			delete(p.methods, p.order[0])
			p.order = p.order[1:]
		}
		p.order = append(p.order, id)
	}
	p.methods[id] = method
}

// kubeletFiles are source files of the kubelet (and of the volume
// plugins it links) that log storage operations: a record with a klog
// header from one of them is the kubelet's, whatever process wrote it.
var kubeletFiles = map[string]bool{
	"operation_generator.go": true, "nestedpendingoperations.go": true, "reconciler_common.go": true,
	"reconstruct.go": true, "reconstruct_common.go": true, "volume_manager.go": true, "kubelet.go": true, "kubelet_volumes.go": true,
	"kubelet_pods.go": true, "pod_workers.go": true, "kuberuntime_manager.go": true, "csi_attacher.go": true, "csi_mounter.go": true,
	"csi_client.go": true, "csi_plugin.go": true, "csi_block.go": true,
	"operation_executor.go": true, "desired_state_of_world_populator.go": true, "actual_state_of_world.go": true, "iscsi_util.go": true,
	"rbd_util.go": true, "atomic_writer.go": true, "empty_dir.go": true, "projected.go": true,
}

// Not the kubelet's alone: k8s.io/mount-utils (mount_linux.go,
// mount_helper_common.go) and controller-runtime's reconciler.go are
// linked by drivers too; reconciler.go counts only with a kubelet
// operation name in the record.

func isKubeletComponent(c string) bool {
	if c == "" {
		return false
	}
	if i := strings.LastIndexByte(c, '/'); i >= 0 {
		// A JSON caller "kubelet/kubelet.go:2406", "volume/csi/csi_attacher.go:1".
		if strings.Contains(c[:i], "kubelet") || strings.Contains(c[:i], "volume") {
			return true
		}
		c = c[i+1:]
	}
	c, _, _ = strings.Cut(c, ":")
	return kubeletFiles[c]
}

// kubeletOps are the kubelet's operation names, in the order they are
// tested (longer first), with the operation each is.
var kubeletOps = []struct {
	name string
	op   Op
}{
	{"UnmountVolume.TearDown", OpTeardown}, {"UnmountVolume.MarkVolumeMountAsUncertain", OpTeardown},
	{"UnmountDevice", OpUnstage}, {"UnmapVolume.UnmapDevice", OpUnmap}, {"UnmapVolume", OpUnmap}, {"UnmapDevice", OpUnmap},
	{"MountVolume.WaitForAttach", OpAttach}, {"WaitForAttach", OpAttach}, {"AttachVolume.Attach", OpAttach},
	{"VerifyControllerAttachedVolume", OpAttach}, {"DetachVolume.Detach", OpDetach},
	{"MountVolume.MountDevice", OpStage}, {"MountVolume.NodeExpandVolume", OpResize}, {"MountVolume.NodeExpand", OpResize},
	{"NodeExpandVolume", OpResize}, {"MountVolume.SetUp", OpMount}, {"MountVolume.Setup", OpMount},
	{"MapVolume.SetUpDevice", OpMap}, {"MapVolume.MapPodDevice", OpMap}, {"MapVolume.WaitForAttach", OpAttach}, {"MapVolume", OpMap},
	{"TearDownAt", OpTeardown}, {"SetUpAt", OpMount},
	{"Unable to attach or mount volumes", OpMount}, {"unmounted volumes=", OpMount}, {"Unable to mount volumes", OpMount},
	{"timeout expired waiting for volumes to attach or mount", OpMount},
}

func hasKubeletOp(text string) bool {
	for _, k := range kubeletOps[:len(kubeletOps)-4] {
		if strings.Contains(text, k.name) {
			return true
		}
	}
	return false
}

// methodOps are CSI methods' operations.
var methodOps = map[string]Op{
	"NodeStageVolume": OpStage, "NodeUnstageVolume": OpUnstage, "NodePublishVolume": OpPublish, "NodeUnpublishVolume": OpUnpublish,
	"NodeExpandVolume": OpResize, "ControllerPublishVolume": OpAttach, "ControllerUnpublishVolume": OpDetach,
}

var (
	reKernelIO = lazy(`I/O error|blk_update_request|print_req_error|EXT4-fs error|XFS \([^)]*\): .*(?:error|shutdown|Corruption)|Buffer I/O|critical medium error|remaining active paths: 0`)
	reVerb     = lazy(`\b(unmount|umount|unstage|unpublish|detach|unmap|mkfs|format|resize2fs|xfs_growfs|resize|expand|attach|login|mount|stage|stag|publish|map)(?:ing|ed|s)?\b`)
	// reCamelVerb is a verb opening a function's name in a driver's own
	// message ("AttachDisk: ...", "formatAndMount failed").
	reCamelVerb = lazy(`\b(?:Unmount|Umount|Unstage|Unpublish|Detach|Unmap|Format|Resize|Expand|Attach|Login|Mount|Stage|Publish|Map|unmount|umount|unstage|unpublish|detach|unmap|format|resize|expand|attach|login|mount|stage|publish)[A-Z]\w*`)
	// verbLiterals: a record whose text in lower case holds none of
	// them matches neither reVerb nor reCamelVerb.
	verbLiterals = []string{"mount", "stag", "publish", "detach", "map", "mkfs", "format", "resize", "xfs_growfs", "expand", "attach", "login"}
)

// operation is the storage operation a record is about: a CSI method
// first, then the kubelet's operation names, the runtime's and the
// kernel's, then a verb.
func operation(text, lower, method, source string) Op {
	if op, ok := methodOps[method]; ok && method != "" {
		return op
	}
	if method == "NodeGetVolumeStats" {
		// A plugin's check of a volume's mount path, whatever its
		// outcome: its success mends an earlier check that timed out.
		return OpCheck
	}
	for _, k := range kubeletOps {
		if strings.Contains(text, k.name) {
			return k.op
		}
	}
	if (strings.Contains(text, "/volumes/kubernetes.io~") || strings.Contains(text, "/volume-subpaths/")) &&
		(strings.Contains(lower, "remove ") || strings.Contains(lower, "unlinkat ") || strings.Contains(lower, "rmdir ")) {
		// Removing a directory of a pod's volume or of a container's
		// subPath of it (the kubelet's layout, whatever its root): the
		// volume's teardown, which cleans the subpaths first.
		return OpTeardown
	}
	if _, ok := checkPath(text, lower, method); ok {
		return OpCheck
	}
	if _, ok := mkdirPath(text, lower); ok {
		return OpMkdir
	}
	if strings.Contains(lower, "rootfs") && (strings.Contains(lower, "unmount") || strings.Contains(lower, "remove") || strings.Contains(lower, "delete") || strings.Contains(lower, "unlinkat")) ||
		runtimeStorage(lower) {
		return OpRootfsUnmount
	}
	if strings.Contains(lower, "netns") || strings.Contains(lower, "network namespace") || strings.Contains(lower, "removepodsandbox") || strings.Contains(lower, "stoppodsandbox") {
		return OpSandboxRemove
	}
	if (strings.Contains(text, "I/O") || strings.Contains(text, "-fs error") || strings.Contains(text, "XFS (") || strings.Contains(text, "active paths") ||
		strings.Contains(text, "medium error")) && reKernelIO.MatchString(text) {
		return OpIO
	}
	if source == "kernel" {
		return OpNone
	}
	if !containsAny(lower, verbLiterals...) {
		// Neither expression below can match.
		return OpNone
	}
	verb := ""
	for _, m := range reVerb.FindAllStringSubmatchIndex(lower, 8) {
		if m[0] > 0 && lower[m[0]-1] == '-' {
			// A command line's flag (--publish-binary, -mount-path): not
			// what the record did.
			continue
		}
		verb = lower[m[2]:m[3]]
		break
	}
	if verb == "" {
		c := camelVerb(text)
		if c == "" {
			return OpNone
		}
		m := reVerb.FindStringSubmatch(strings.ToLower(camelWords(c)))
		if m == nil {
			return OpNone
		}
		verb = strings.ToLower(m[1])
	}
	if verb == "mount" && rePathRemovalError.MatchString(text) {
		// A mount's directory that cannot be removed ("unable to remove
		// mount directory: ... remove <dir>: device or resource busy"):
		// the error is a removal's, the cleanup after an unmount.
		return OpUnmount
	}
	switch verb {
	case "unmount", "umount":
		return OpUnmount
	case "unstage":
		return OpUnstage
	case "stag":
		return OpStage
	case "unpublish":
		return OpUnpublish
	case "detach":
		return OpDetach
	case "unmap":
		return OpUnmap
	case "mkfs", "format":
		return OpFormat
	case "resize2fs", "xfs_growfs", "resize", "expand":
		return OpResize
	case "attach", "login":
		return OpAttach
	case "stage":
		return OpStage
	case "publish":
		return OpPublish
	case "map":
		return OpMap
	}
	return OpMount
}

// upperCamel writes a code's upper snake name in CamelCase ("NOT_FOUND"
// is "NotFound").
func upperCamel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(strings.ToLower(s), "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// camelWords spaces a CamelCase name into its words ("AttachDisk" is
// "Attach Disk").
func camelWords(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && c >= 'A' && c <= 'Z' {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

var (
	reCode = lazy(`code = (\w+)`)
	// reBlockPath is a block device's path (not /dev/null, /dev/kmsg,
	// /dev/shm, a terminal).
	reBlockPath = lazy(`/dev/(?:sd[a-z]|vd[a-z]|xvd|nvme\d|rbd\d|nbd\d|dm-\d|mapper/|disk/|md\d|drbd\d|longhorn/|loop\d)`)
	// reGRPCMethod is a CSI method named after "GRPC" without its
	// service path.
	reGRPCMethod = lazy(`\bGRPC ((?:Node|Controller)[A-Z]\w+)`)
	// reCodeUpper is a gRPC code as Python's grpc.StatusCode names it
	// ("with NOT_FOUND").
	reCodeUpper = lazy(`\b(NOT_FOUND|PERMISSION_DENIED|INVALID_ARGUMENT|DEADLINE_EXCEEDED|ALREADY_EXISTS|FAILED_PRECONDITION|RESOURCE_EXHAUSTED|UNAVAILABLE|INTERNAL|ABORTED|UNIMPLEMENTED|UNAUTHENTICATED|DATA_LOSS|OUT_OF_RANGE)\b`)
	reExit      = lazy(`(?:exit status|exit code|exited with|exit code:|status code) ?(\d+)`)
	// errnos are the phrases that name an errno, as strerror and the
	// kernel write them.
	errnos = []struct{ phrase, errno string }{
		{"input/output error", "EIO"}, {"i/o error", "EIO"}, {"no such device or address", "ENXIO"}, {"no such device", "ENODEV"},
		{"no such file or directory", "ENOENT"}, {"device or resource busy", "EBUSY"}, {"target is busy", "EBUSY"},
		{"permission denied", "EACCES"}, {"operation not permitted", "EPERM"}, {"read-only file system", "EROFS"},
		{"transport endpoint is not connected", "ENOTCONN"}, {"stale file handle", "ESTALE"}, {"stale nfs file handle", "ESTALE"},
		{"connection refused", "ECONNREFUSED"}, {"connection timed out", "ETIMEDOUT"}, {"no space left on device", "ENOSPC"},
		{"directory not empty", "ENOTEMPTY"}, {"invalid argument", "EINVAL"}, {"structure needs cleaning", "EUCLEAN"},
		{"no route to host", "EHOSTUNREACH"}, {"file exists", "EEXIST"}, {"not a directory", "ENOTDIR"}, {"too many levels of symbolic links", "ELOOP"},
		// mount(8)'s own wording of EBUSY for its source or target.
		{"already mounted or mount point busy", "EBUSY"},
	}
	reLoginRefused = lazy(`login (?:failed|refused|authentication failed)|authentication fail|authorization fail|iscsiadm: .*(?:login|session).*(?:fail|error)|(?:fail|unable)[^.]{0,40}\blog ?in\b`)
)

// grpcCodes are the gRPC code names, and numbers as older drivers write
// them ("code = 5").
var grpcCodes = map[string]string{"0": "OK", "1": "Canceled", "2": "Unknown", "3": "InvalidArgument", "4": "DeadlineExceeded", "5": "NotFound",
	"6": "AlreadyExists", "7": "PermissionDenied", "8": "ResourceExhausted", "9": "FailedPrecondition", "10": "Aborted", "11": "OutOfRange",
	"12": "Unimplemented", "13": "Internal", "14": "Unavailable", "15": "DataLoss", "16": "Unauthenticated"}

// errorOf reads the error a record carries.
func errorOf(r *record) Error {
	var e Error
	text := r.text
	if m := matchIf(reCode, text, "code ="); m != nil {
		e.Code = m[1]
		if name, ok := grpcCodes[m[1]]; ok {
			e.Code = name
		}
	}
	if e.Code == "" && r.ev.Method != "" {
		if m := reCodeUpper.FindStringSubmatch(text); m != nil {
			e.Code = upperCamel(m[1])
		}
	}
	lower := r.lower
	e.Errno = errnoOf(lower)
	if m := matchIf(reExit, r.lower, "exit", "status code"); m != nil {
		e.Exit, _ = strconv.Atoi(m[1])
	}
	e.LoginRefused = (strings.Contains(lower, "log") || strings.Contains(lower, "auth")) && reLoginRefused.MatchString(lower)
	msg := r.get("err", "error", "errmsg", "fullerror", "reason")
	if msg == "" || msg == "null" || msg == `""` {
		msg = r.msg
		if i := strings.Index(msg, "GRPC error: "); i >= 0 {
			msg = msg[i+len("GRPC error: "):]
		}
	} else if r.msg != "" && !strings.Contains(r.msg, msg) {
		// The error field's value, unless the message holds it
		// already (a klog text line's "err=..." read as a field).
		msg = r.msg + ": " + msg
	} else if r.msg != "" {
		msg = r.msg
	}
	e.Message = trimMessage(msg)
	return e
}

var (
	// reEmptyGRPCError is a gRPC call logged with its result and no error
	// (csi-driver-host-path's gRPCCall: {"Method":...,"Error":"",...}).
	reEmptyGRPCError = lazy(`"Error":\s*"",`)
	reGRPCError      = lazy(`"Error":\s*"[^"]`)
	reSuccess        = lazy(`\bsucceeded\b|\bsuccessfully\b|\bsuccess\b|\bgrpc response\b|\bis operational again\b|returns successfully|\bcompleted\b|\bhas been (?:un)?mounted\b`)
	// reNoOp is an operation its writer skipped as already done: an
	// idempotent call, not a failure.
	reNoOp    = lazy(`\b(?:un)?(?:mount|publish|stage)\w* skipped\b|\bskipp(?:ed|ing) (?:un)?(?:mount|publish|stage)|nothing to do|\balready (?:un)?mounted\b|\bnot mounted, skip|\bis not a mountpoint, deleting`)
	reFailure = lazy(`\bfail(?:ed|s|ure)?\b|wrong fs type|bad superblock|\bdid not find\b|\bdoes not exist\b|\berror\b|\berr=|\bunable to\b|\bcannot\b|\bcan't\b|\bcould not\b|\btimed out\b|\brefused\b|\bdenied\b|\bbusy\b|\bnot found\b|\bexit status [1-9]`)
	// failureLiterals: each match of reFailure holds one of them (the
	// expression runs only on a record that does).
	failureLiterals = []string{"fail", "err", "not ", "wrong fs", "bad super", "unable", "cannot", "can't", "timed out", "refused", "denied", "busy", "exit status"}
)

// successStarts are the words every match of reSuccess starts with.
var successStarts = []string{"succe", "grpc response", "is operational again", "returns successfully", "completed", "has been "}

// successMatch is reSuccess.MatchString(lower), run from the byte before
// the first place a match can start (every match starts with one of
// successStarts; the byte kept before it gives \b its context and starts
// none), and not at all when lower holds none of them: a kubelet's
// "MountVolume.SetUp succeeded" record is long, and the expression has no
// literal to start from.
func successMatch(lower string) bool {
	from := len(lower)
	for _, w := range successStarts {
		if i := strings.Index(lower[:min(len(lower), from+len(w))], w); i >= 0 {
			from = min(from, i)
		}
	}
	if from == len(lower) {
		return false
	}
	return reSuccess.MatchString(lower[max(from-1, 0):])
}

// errnoGrams files each phrase of errnos under its first two bytes (0:
// none; else 1 + its place in errnoByGram), so that one pass over a
// record finds every phrase it holds.
var (
	errnoGrams  [1 << 16]uint8
	errnoByGram = [][]int{nil}
)

func init() {
	for k, x := range errnos {
		g := uint16(x.phrase[0])<<8 | uint16(x.phrase[1])
		if errnoGrams[g] == 0 {
			errnoGrams[g] = uint8(len(errnoByGram))
			errnoByGram = append(errnoByGram, nil)
		}
		errnoByGram[errnoGrams[g]] = append(errnoByGram[errnoGrams[g]], k)
	}
}

// errnoOf is the errno of the first phrase of errnos (in the list's
// order) that lower holds, found in one pass over lower: the same as
// asking each phrase in turn, which cost two dozen searches of every
// record read for its outcome.
func errnoOf(lower string) string {
	best := len(errnos)
	for i := 0; i+1 < len(lower); i++ {
		g := errnoGrams[uint16(lower[i])<<8|uint16(lower[i+1])]
		if g == 0 {
			continue
		}
		for _, k := range errnoByGram[g] {
			if k < best && strings.HasPrefix(lower[i:], errnos[k].phrase) {
				best = k
			}
		}
	}
	if best == len(errnos) {
		return ""
	}
	return errnos[best].errno
}

// outcome says whether a record reports its operation failing or
// succeeding: its error fields and level first, then its words.
func outcome(r *record) Outcome {
	if r.ev.Op == OpNone {
		return OutcomeNone
	}
	text := r.text
	if r.ev.Method != "" && strings.Contains(text, `"Error":`) {
		switch {
		case reEmptyGRPCError.MatchString(text) || strings.Contains(text, `"Error":""}`):
			return OutcomeSucceeded
		case reGRPCError.MatchString(text):
			return OutcomeFailed
		}
	}
	if r.ev.Err.Code != "" && r.ev.Err.Code != "OK" || strings.Contains(text, "GRPC error") {
		return OutcomeFailed
	}
	lower := r.lower
	if containsAny(lower, "skip", "nothing to do", "already", "not a mountpoint") && reNoOp.MatchString(lower) && r.ev.Err.Errno != "EBUSY" {
		// An operation its writer skipped as done, unless the record
		// names the busy device or mount point that stopped it
		// (mount(8)'s "already mounted or mount point busy").
		return OutcomeSucceeded
	}
	if e := r.get("err", "error"); e != "" && e != "null" && e != "<nil>" && e != `""` {
		return OutcomeFailed
	}
	succ := successMatch(lower) && !strings.Contains(lower, "unsuccess")
	if r.ev.Level >= LevelError && !succ && !strings.Contains(text, "GRPC call") && !strings.Contains(text, "GRPC request") {
		return OutcomeFailed
	}
	failWords := containsAny(lower, failureLiterals...) && reFailure.MatchString(lower)
	if !failWords && (r.ev.Level >= LevelError || r.ev.Err.Errno != "") && r.ev.Op == OpIO {
		return OutcomeFailed
	}
	if succ && (!failWords || r.ev.Level <= LevelInfo && r.ev.Level != LevelUnknown && !strings.Contains(text, "failed")) {
		return OutcomeSucceeded
	}
	if r.ev.Level >= LevelError && !strings.Contains(text, "GRPC call") && !strings.Contains(text, "GRPC request") {
		return OutcomeFailed
	}
	if failWords && (r.ev.Level >= LevelWarning || r.ev.Level == LevelUnknown || r.ev.Err.Errno != "" || r.ev.Err.Exit != 0 || strings.Contains(text, " failed")) {
		return OutcomeFailed
	}
	if r.ev.Err.Errno != "" && r.ev.Level != LevelDebug && rePathRemovalError.MatchString(text) {
		// A removal's error as Go writes it ("remove <path>: directory
		// not empty"), quoted without a failure word or a level: the
		// removal did not happen.
		return OutcomeFailed
	}
	return OutcomeNone
}

// rePathRemovalError is Go's *os.PathError of a removal, as its Error()
// writes it: the syscall, the path, then strerror's text.
var rePathRemovalError = lazy(`\b(?:remove|unlinkat|rmdir) /[^\s:"]+: [a-z]`)
