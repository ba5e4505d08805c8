package events

import (
	"strings"
)

// The kubelet's own records, whatever process wrote them (the kubelet,
// hyperkube, k3s, k0s, RKE2, MicroK8s' kubelite, OpenShift's
// kubenswrapper, CoreOS' kubelet-wrapper): their operation comes from the
// kubelet's operation names in the message, else from the source file
// that logged them; their objects from the kubelet's structured keys
// (pod=, podUID=, volumeName=, volume=, uniqueName=, volumeSpecName=) and
// from its older text forms ("name_namespace(uid)").

// kubeletFileOps are kubelet source files every failure of which is
// about one operation on a pod's volumes, whatever its wording:
// desired_state_of_world_populator.go adds a pod's volumes to what the
// kubelet must mount (a claim not bound, no plugin for a volume: the pod
// cannot mount it); kubelet_volumes.go cleans the volume directories of
// pods that are gone (a directory it cannot read or remove is a teardown
// that does not finish).
var kubeletFileOps = map[string]Op{
	"desired_state_of_world_populator.go": OpMount,
	"kubelet_volumes.go":                  OpTeardown,
}

// kubeletRecordOp is the operation of a kubelet's record that names none
// of the kubelet's operations: its source file's (OpNone when the file
// logs more than one kind of operation).
func kubeletRecordOp(component, text string) Op {
	if hasKubeletOp(text) {
		return OpNone
	}
	// reVolumeMount's every match is also reVolumeMountWord's, and the
	// word itself is the cheap test most records fail.
	if strings.Contains(text, "volumeMount") && reVolumeMountWord.MatchString(text) {
		// A container's volumeMount (the pod spec's own word, with its
		// name quoted in the text form, or its name under
		// volumeMountName= in the structured form): preparing it (its
		// subPath) is mounting the pod's volume into the container.
		return OpMount
	}
	if component == "" {
		return OpNone
	}
	c := component
	if i := strings.LastIndexByte(c, '/'); i >= 0 {
		c = c[i+1:]
	}
	c, _, _ = strings.Cut(c, ":")
	return kubeletFileOps[c]
}

var (
	// reKubeletPod is the kubelet's text form of a pod before structured
	// logging: pod "name_namespace" (with "(uid)" after it from 1.5 on).
	// A static pod's UID is the hash of its manifest, 32 hex digits
	// without dashes.
	reKubeletPod = lazy(`\bpod \\?"([a-z0-9][-a-z0-9.]*)_([a-z0-9][-a-z0-9]*)(?:\(([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})\))?\\?"`)
	// kubeletPodWords: every match of reKubeletPod starts with one.
	kubeletPodWords = []string{`pod "`, `pod \"`}
	// reVolumeMount is a container's volumeMount named in a kubelet's
	// message: volumeMount "data", volumeMount 'data'.
	reVolumeMount = lazy(`\bvolumeMount ["']([^"']+)["']`)
	// reVolumeMountWord is the pod spec's word as a structured record's
	// message says it ("Failed to prepare subPath for volumeMount of the
	// container"), its name in a key of its own.
	reVolumeMountWord = lazy(`\bvolumeMounts?\b`)
	// reUnmountedVolumes is the list of a pod's volumes not mounted yet
	// in the kubelet's sync error, in every version's form:
	// "unmounted volumes=[a b]", "list of unmounted volumes=[a]",
	// "list of unattached/unmounted volumes=[a b]".
	reUnmountedVolumes = lazy(`unmounted volumes=\[([^\]]*)\]`)
	// reUIDPrefix is the pod UID a unique volume name of a pod's own
	// volume starts with: kubernetes.io/configmap/<uid>-<name>.
	reUIDPrefix = lazy(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-(.+)$`)
)

// reKObj is klog's JSON form of an object reference (klog.KObj):
// {"name":"web-0","namespace":"shop"}.
var reKObj = lazy(`^\{\s*"name"\s*:\s*"([^"]+)"\s*,\s*"namespace"\s*:\s*"([^"]*)"\s*\}$`)

// podObject is a pod field's value as "namespace/name": klog's text form
// already is; its JSON form is an object.
func podObject(v string) string {
	if m := reKObj.FindStringSubmatch(strings.TrimSpace(v)); m != nil {
		if m[2] == "" {
			return m[1]
		}
		return m[2] + "/" + m[1]
	}
	return v
}

// rePluginSocket is a plugin's socket in the kubelet's plugin
// directories (plugins/, plugins_registry/, a distribution's
// csi-plugins/), as the kubelet's gRPC client names it; a driver names
// its own socket inside its container (/csi/csi.sock), not this.
var rePluginSocket = lazy(`(/[^\s"'{},]*/(?:plugins|plugins_registry|csi-plugins)/[^\s"'{},]*\.sock)\b`)

// pluginConnection is the socket of a record about connecting to a
// plugin's socket, "" when it is not one.
func pluginConnection(text, lower string) string {
	if !strings.Contains(lower, ".sock") || !strings.Contains(lower, "connect") {
		return ""
	}
	if s := rePluginSocket.FindString(text); s != "" {
		return s
	}
	// A CSI sidecar's client (csi-lib-utils: node-driver-registrar,
	// the provisioner, the attacher) names the driver's socket as it is
	// mounted in its pod, by its address: "Lost connection to
	// unix:///csi/csi.sock". A driver's own listener is not written as
	// an address to connect to.
	if m := reUnixSocketAddr.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}

var reUnixSocketAddr = lazy(`\bunix://(/[^\s"'{},]*\.sock)\b`)

// kubeletKeys reads the objects of a kubelet's record from its own keys.
func kubeletKeys(r *record, k *Keys) {
	if k.Pod == "" {
		if m := kubeletPodSubmatch(r.text); m != nil {
			k.Pod = m[2] + "/" + m[1]
			if k.PodUID == "" {
				k.PodUID = m[3]
			}
		}
	}
	if m := matchIf(reVolumeMount, r.text, "volumeMount "); m != nil && k.Volume == "" {
		k.Volume = m[1]
	}
	if v := r.getWhole("volumeMountName"); v != "" && k.Volume == "" {
		// The structured form's name of the container's volumeMount: the
		// pod's volume it mounts.
		k.Volume = v
	}
	if m := reUnmountedVolumes.FindStringSubmatch(r.text); m != nil && k.Volume == "" {
		// The volumes a pod waits for (its sync's error): the first
		// one is the object with the pod; the list is in the message.
		if f := strings.Fields(m[1]); len(f) > 0 {
			k.Volume = f[0]
		}
	}
	uniq := r.getWhole("uniqueName", "volume", "volumeName")
	if uniq == "" && strings.HasPrefix(k.Volume, "kubernetes.io/") {
		// The text form's (UniqueName: "kubernetes.io/<plugin>/...").
		uniq = k.Volume
	}
	if spec := r.getWhole("volumeSpecName", "outerVolumeSpecName", "innerVolumeSpecName"); spec != "" {
		k.Volume = spec
	}
	if uniq == "" {
		return
	}
	if k.Handle == uniq {
		// handleFields took the unique name for a CSI volume's ID.
		k.Handle = ""
	}
	if !strings.Contains(uniq, "/") {
		if k.Volume == "" {
			k.Volume = uniq
		}
		return
	}
	// A unique name: kubernetes.io/csi/<driver>^<handle>, or
	// kubernetes.io/<plugin>/<pod uid>-<name> for a pod's own volume.
	if i := strings.LastIndexByte(uniq, '^'); i >= 0 {
		if k.Handle == "" {
			k.Handle = uniq[i+1:]
		}
		return
	}
	last := uniq[strings.LastIndexByte(uniq, '/')+1:]
	if m := reUIDPrefix.FindStringSubmatch(last); m != nil {
		if k.PodUID == "" {
			k.PodUID = m[1]
		}
		last = m[2]
	}
	if k.Volume == "" || k.Volume == uniq {
		k.Volume = last
	}
}

// kubeletPodSubmatch is reKubeletPod.FindStringSubmatch(text), tried only
// where a match can start: at each of kubeletPodWords after a byte \b
// tells from a word's (a non-word byte, or none), the expression anchored
// there; the first place it matches is where the leftmost match starts.
// A kubelet's volume records name pod "name" (no namespace, no match) far
// into a long line, where the expression, with no literal to start from,
// was tried at every byte.
func kubeletPodSubmatch(text string) []string {
	for from := 0; ; {
		i := strings.Index(text[from:], "pod ")
		if i < 0 {
			return nil
		}
		i += from
		from = i + 1
		if i > 0 && isWordByte(text[i-1]) {
			continue
		}
		if rest := text[i+4:]; !strings.HasPrefix(rest, `"`) && !strings.HasPrefix(rest, `\"`) {
			continue
		}
		if m := reKubeletPodAt.FindStringSubmatch(text[i:]); m != nil {
			return m
		}
	}
}

// reKubeletPodAt is reKubeletPod anchored at the start of its input.
var reKubeletPodAt = lazy(`^(?:` + reKubeletPod.String() + `)`)
