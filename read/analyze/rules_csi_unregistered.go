package analyze

import (
	"regexp"
	"strings"
)

// reCSIUnregistered is the kubelet's CSI client error when the driver a
// volume names has no node plugin registered with this kubelet
// (pkg/volume/csi/csi_client.go, the same words in every release since
// 1.10). Any kubelet volume operation can wrap it: MountDevice, SetUp,
// MapPodDevice, TearDown, UnmountDevice.
var reCSIUnregistered = regexp.MustCompile(`driver name ([A-Za-z0-9][A-Za-z0-9._-]*) not found in the list of registered CSI drivers`)

// unregisteredDriver is the CSI driver a key's lines say is not
// registered with the kubelet, or "".
func (k *keyHits) unregisteredDriver() string {
	for _, h := range k.hits() {
		if !strings.Contains(h.Line.Text, "registered CSI drivers") {
			continue
		}
		if m := reCSIUnregistered.FindStringSubmatch(h.Line.Text); m != nil {
			return m[1]
		}
	}
	return ""
}

// withUnregisteredDriver names the cause of a kubelet volume finding
// whose lines carry the kubelet's "not registered" error: the operation
// failed before it reached the driver, because the driver's node plugin
// is not registered with this kubelet. Other findings are returned as
// they are. It takes a finding's text as its text functions return it:
// withUnregisteredDriver(k)(text(k)).
func withUnregisteredDriver(k *keyHits) func(summary, expl string, rem []string) (string, string, []string) {
	return func(summary, expl string, rem []string) (string, string, []string) {
		return unregisteredText(k.unregisteredDriver(), summary, expl, rem)
	}
}

// unregisteredText is a finding's text with driver d named as its cause
// (unchanged when d is "").
func unregisteredText(d, summary, expl string, rem []string) (string, string, []string) {
	if d == "" {
		return summary, expl, rem
	}
	summary += ": CSI driver " + d + " is not registered with this kubelet"
	expl = "The kubelet has no node plugin registered for the CSI driver " + d + ", so the operation fails before it reaches the driver: " +
		"the driver's node plugin (its DaemonSet's pod on this node) is not running, has not registered again since the kubelet or the node restarted, " +
		"or registered under another kubelet root directory. The kubelet retries; the operation goes on once the plugin registers. " + expl
	rem = append([]string{"Check the driver's node plugin on this node: its pod's state and its node-driver-registrar container's log; " +
		"the kubelet's plugins_registry directory must hold the driver's registration socket, and the node's CSINode object (kubectl get csinode <node> -o yaml) lists the drivers the kubelet has registered."},
		rem...)
	return summary, expl, rem
}
