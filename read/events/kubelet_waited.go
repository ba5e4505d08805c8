package events

import "strings"

// waitedVolume is the first volume of the volume manager's own error
// when a pod's volumes are not all mounted in time ("unmounted
// volumes=[a b], unattached volumes=[...], failed to process
// volumes=[...]: ..."), "" when text has none. Only the kubelet writes
// that shape, so it names the volume however the record reached the
// bundle: a thread that quotes the error value alone, without the
// kubelet's header or journal prefix, still names what the pod waits
// for.
func waitedVolume(text string) string {
	if !strings.Contains(text, "unattached volumes=[") {
		return ""
	}
	m := reUnmountedVolumes.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	if f := strings.Fields(m[1]); len(f) > 0 {
		return f[0]
	}
	return ""
}
