package events

import (
	"strings"

	"github.com/nodesnap/nodesnap/signatures"
)

// The object keys of a record: the volume's handle and PV, the device,
// the path, the iSCSI target and portal, the server, in every writer's
// spelling (fields by name, the call form, a handle's own structure).

var (
	reUUID = lazy(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	// rePV ends at a word's end or at an underscore: a provisioner joins
	// the namespace and claim to the PV's name in its directory
	// ("pvc-<uuid>_ns_claim"), the PV all the same (the "_" is trimmed).
	rePV     = lazy(`pvc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:\b|_)`)
	reHandle = lazy(`\b(?:csi-vol-[0-9a-f-]{36}|vol-[0-9a-f]{8,17}|0001-00[0-9a-f]{2}-[0-9a-zA-Z._-]+-[0-9a-f]{16}-[0-9a-f-]{36})\b`)
	rePortal = lazy(`\b((?:\d{1,3}\.){3}\d{1,3}:3260)\b`)
	reIQN    = lazy(`\b(iqn\.\d{4}-\d\d\.[A-Za-z0-9.:_-]+)`)
	// reNQN is an NVMe-oF subsystem's qualified name, the target an
	// NVMe/TCP or RDMA connect names (an IQN's counterpart).
	reNQN = lazy(`\b(nqn\.\d{4}-\d\d\.[A-Za-z0-9.:_-]+)`)
	// reDevKey is a kernel block device's bare name a driver gives under
	// a device key ("device: dm-2", "dev=sdb").
	reDevKey = lazy(`(?i)\b(?:device|dev|disk)["']?\s*[:=]\s*\\*["']?((?:sd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+n\d+|rbd\d+|nbd\d+|dm-\d+|drbd\d+)(?:p?\d+)?)\b`)
	// rePodKey is a pod a driver names under a pod key in its text
	// ("mountpod: x", "podName=x", "pod_name: \"x\""): a DNS-1123 name.
	rePodKey = lazy(`(?i)\b(?:mount[-_]?pod|pod[-_]?name)["']?\s*[:=]\s*\\*["']?([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)`)
	// reVolUUID is a volume's ID under a "volume" key in a record's text
	// ("mount failed: volume=<uuid>, error=..."): a UUID's shape.
	reVolUUID = lazy(`\bvolume\s*=\s*\\*"?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b`)
	reWWID    = lazy(`\b(?:wwid|WWID|serial)[\s:="']+([0-9A-Za-z_.-]{8,})`)
	reNFSSrv  = lazy(`(?:^|[\s"'=(])((?:\d{1,3}\.){3}\d{1,3}:/[^\s"',;)]*|[A-Za-z0-9][-A-Za-z0-9.]*\.[A-Za-z]{2,}:/[^\s"',;)]*|//[A-Za-z0-9][-A-Za-z0-9.]*/[^\s"',;)]+)`)
	// reDev is a device path: a /dev/disk/by-* link, a device under a
	// directory of /dev (LVM's /dev/<vg>/<lv>, /dev/mapper/<name>, a
	// driver's /dev/<driver>/<volume>) whole, or a device of /dev itself.
	reDev = lazy(`(/dev/(?:disk/[a-z0-9_-]+/[^\s"'\\,;:()\]}]+|[a-z][a-z0-9_.+-]*/[A-Za-z0-9_][A-Za-z0-9_.+-]*|[a-z][a-z0-9_-]*\d[a-z0-9]*|[a-z]{2,}[a-z]\b))`)
	// reVolCall is a volume named in the call form drivers print
	// ("volume(id)", "volumeID(id)", "volume(\"id\")").
	// reHashHandle is a CSI volume handle of csi-lib's drivers (nfs,
	// smb, azurefile, blob): fields joined by '#', one a PV's name.
	reHashHandle = lazy(`[A-Za-z0-9][A-Za-z0-9._/-]*#[A-Za-z0-9._/#-]*pvc-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}[A-Za-z0-9._#-]*`)
	// reARMDisk is an Azure Resource Manager disk's ID, azuredisk's
	// handle.
	reARMDisk = lazy(`/subscriptions/[0-9a-fA-F-]{36}/resource[Gg]roups/[^/\s"()]+/providers/Microsoft\.Compute/disks/[^/\s"()\\,]+`)
	reVolCall = lazy(`\bvolume(?:_?id|ID|Id)?\(\\*"?([^()\s"\\]+)\\*"?\)`)
	// rePyOSError is Python's OSError with its file ("[Errno 2] No such
	// file or directory: '/x'").
	rePyOSError = lazy(`\[Errno \d+\] [^:]+: '(/[^']+)'`)
	reVolID     = lazy(`"?\b(?:volume_?id|volume_?ID|volumeHandle|VolumeId|VolumeID|VOLUME_ID)"?\s*[:=]\s*\\*"?([^\s"\\,}\]]+)`)
	// volIDWords: every match of reVolID holds one.
	volIDWords = []string{"olume_", "olumeid", "olumeI", "olumeHandle", "VOLUME_ID"}
	// rePathField is a path a record gives in a field of its own ("path:
	// /x", "target_path=/x", "\"staging_target_path\":\"/x\""), in any
	// driver's form.
	rePathField = lazy(`(?i)\b(?:staging[-_]?target[-_]?path|target[-_]?path|mount[-_]?path|volume[-_]?path|path)"?\s*[:=]\s*\\*"?(/[^\s"\\,;}\]]{2,})`)
	reSandbox   = lazy(`\b[0-9a-f]{64}\b`)
	reKDev      = lazy(`(?:\bdev |\bdevice |\(|\bon dev )((?:sd[a-z]+|vd[a-z]+|xvd[a-z]+|nvme\d+n\d+|rbd\d+|nbd\d+|dm-\d+|loop\d+|md\d+)\d*)`)
	// volume fields: the handle a driver logs in a field of its own.
	handleFields = []string{"volume_id", "volumeID", "volumeId", "VolumeId", "volumeHandle", "volume", "vol_id", "volid", "volumeid", "volname", "pvName", "pv", "VolumeID",
		// go-kit's hyphenated keys (hcloud's volume-id=, volume-name=)
		"volume-id", "volume-name", "volume_name"}
	// deviceFields: a device a driver logs in a field of its own.
	deviceFields = []string{"device", "devicePath", "device_path", "device-path", "dev", "DevicePath"}
)

// keysOf reads every object key a record names.
func keysOf(r *record) Keys {
	text := r.text
	o := signatures.Extract([]byte(text))
	// A quoted device or path ('/dev/sdd', as Python prints a file)
	// ends at its quote.
	k := Keys{PodUID: o.PodUID, Pod: o.Pod, Volume: o.Volume, Device: strings.TrimRight(o.Device, "'"), Path: wholePath(text, strings.TrimRight(o.Path, "'"))}
	if v := r.getWhole("pod", "podName"); v != "" && k.Pod == "" {
		k.Pod = podObject(v)
	}
	if v := r.getWhole("podUID", "pod_uid", "podUid"); v != "" && k.PodUID == "" {
		k.PodUID = v
	}
	if m := matchIf(reHashHandle, text, "#"); m != nil {
		k.Handle = strings.TrimRight(m[0], ".")
	} else if m := matchIf(reARMDisk, text, "/subscriptions/"); m != nil {
		k.Handle = m[0]
	} else if m := matchIf(reVolCall, text, "olume("); m != nil {
		k.Handle = m[1]
		if strings.Contains(k.Volume, m[1]) || strings.HasSuffix(m[1], k.Volume) {
			k.Volume = ""
		}
	}
	for _, f := range handleFields {
		if k.Handle != "" {
			break
		}
		if v := r.getWhole(f); v != "" && !strings.ContainsAny(v, " {") {
			k.Handle = v
			break
		}
	}
	if i := strings.LastIndexByte(k.Volume, '^'); i >= 0 && k.Handle == "" {
		// kubernetes.io/csi/<driver>^<handle>
		k.Handle = k.Volume[i+1:]
	}
	if m := matchIf(reVolID, text, volIDWords...); m != nil && k.Handle == "" {
		k.Handle = m[1]
	}
	if m := matchIf(reHandle, text, "vol-", "0001-"); m != nil && k.Handle == "" {
		k.Handle = m[0]
	}
	if m := matchIf(rePV, text, "pvc-"); m != nil {
		k.PV = strings.TrimSuffix(m[0], "_")
	}
	if k.Volume == k.PV || k.Volume == k.Handle || strings.HasSuffix(k.Volume, "^"+k.Handle) && k.Handle != "" {
		k.Volume = ""
	}
	if m := matchIf(rePortal, text, ":3260"); m != nil {
		k.Portal = m[1]
	} else if v := r.getWhole("portal", "portalIP", "targetPortal", "portal_ip", "TargetPortal"); v != "" && !strings.ContainsAny(v, " {") {
		k.Portal = v
	}
	if m := matchIf(reIQN, text, "iqn."); m != nil {
		k.IQN = strings.TrimRight(m[1], ".:,")
	} else if m := matchIf(reNQN, text, "nqn."); m != nil {
		k.IQN = strings.TrimRight(m[1], ".:,")
	}
	if k.Handle == "" {
		if m := volUUIDSubmatch(text); m != nil {
			k.Handle = m[1]
		}
	}
	if k.Pod == "" {
		if v := podUnderKey(text); v != "" {
			k.Pod = v
		} else if v := namespacedPod(text); v != "" {
			k.Pod = v
		}
	}
	if m := matchIf(reWWID, text, "wwid", "WWID", "serial"); m != nil {
		k.WWID = m[1]
	}
	if m := matchIf(reNFSSrv, text, ":/", "//"); m != nil {
		k.Server = m[1]
	} else if plausibleServer(o.Server) {
		k.Server = o.Server
	}
	if k.Device == "" {
		for _, f := range deviceFields {
			if v := r.get(f); strings.HasPrefix(v, "/dev/") && reBlockPath.MatchString(v) {
				k.Device = v
				break
			}
		}
	}
	if k.Device == "" {
		if m := matchIf(reDev, text, "/dev/"); m != nil && m[1] != "/dev/null" && m[1] != "/dev/fuse" {
			k.Device = m[1]
		}
	}
	if k.Device == "" {
		if m := devKeySubmatch(text); m != nil {
			k.Device = "/dev/" + m[1]
		} else if d := quotedDeviceName(text); d != "" {
			k.Device = "/dev/" + d
		}
	}
	if m := matchIf(rePyOSError, text, "[Errno"); m != nil && k.Path == "" {
		k.Path = m[1]
	}
	if k.Path == "" {
		if m := matchIf(rePathField, text, "ath:", "ath=", "ath\"", "ath\\", "ath :"); m != nil {
			k.Path = strings.TrimRight(m[1], ".")
		}
	}
	notAnObject(text, &k)
	if r.ev.Kubelet {
		kubeletKeys(r, &k)
	} else if v := waitedVolume(r.text); v != "" && k.Volume == "" {
		k.Volume = v
	}
	if r.ev.Op == OpCheck || r.ev.Op == OpMkdir {
		// The path the check or the mkdir names is the object (a PV's
		// name in it is read above).
		var p string
		if r.ev.Op == OpCheck {
			p, _ = checkPath(r.text, strings.ToLower(r.text), r.ev.Method)
		} else {
			p, _ = mkdirPath(r.text, strings.ToLower(r.text))
		}
		if p != "" {
			k.Path = p
		}
	}
	if r.ev.Op == OpConnect {
		// The socket is the object.
		if s := pluginConnection(r.text, r.lower); s != "" {
			k.Path = s
		}
	}
	if r.ev.Op == OpSandboxRemove || r.ev.Op == OpRootfsUnmount {
		// A runtime names the sandbox or container it removes by its
		// 64-hex ID (CRI's, containerd's, CRI-O's and dockerd's form).
		k.Sandbox = reSandbox.FindString(text)
	}
	if k.Device == "" && (r.ev.Op == OpIO || r.ev.Source == "kernel") {
		if m := matchIf(reKDev, text, "dev"); m != nil {
			k.Device = "/dev/" + m[1]
		}
	}
	return k
}

// plausibleServer says whether a "server ..." a record names can be a
// server: a host with a dot, an address, or host:port ("server msg=",
// "NewServer: create" are not).
func plausibleServer(s string) bool {
	return s != "" && strings.ContainsAny(s, ".:0123456789[")
}

// podUnderKey is the pod a record's text names under a pod key, or "":
// a key left empty ("podName: nodeName:}") does not lend the next key's
// name as its value. The key is read in any case, as rePodKey's (?i)
// reads it ("pOdName=x" too).
func podUnderKey(text string) string {
	m, ok := podKeySubmatchIndex(text)
	low := text
	if !ok {
		// Text outside ASCII: rePodKey on its lowered copy, which no
		// fold leaves without "pod" when a key is there.
		low = strings.ToLower(text)
		if !strings.Contains(low, "pod") {
			return ""
		}
		m = rePodKey.FindStringSubmatchIndex(low)
	}
	if m == nil || m[3] < len(low) && (low[m[3]] == ':' || low[m[3]] == '=') {
		return ""
	}
	return strings.ToLower(low[m[2]:m[3]])
}

// matchIf runs re on s only when s holds one of the words the pattern
// cannot match without (a plain search is far cheaper than the regular
// expression on a long line).
func matchIf(re *lazyRegexp, s string, words ...string) []string {
	for _, w := range words {
		if strings.Contains(s, w) {
			return re.FindStringSubmatch(s)
		}
	}
	return nil
}

func containsAny(s string, words ...string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
