package signatures

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Rendering turns a catalogued format into the log lines a node writes
// with it, filled with realistic values, in each log format: the tests
// check every format of every version falls in its class and names its
// object, and the documentation shows examples.

// Forms of a rendered line.
const (
	FormKlog       = "klog"       // glog/klog text: printf message, or "msg" key="value" of a structured call
	FormStructured = "structured" // a structured call wrapping the error: "msg" err="..."
	FormJSON       = "json"       // --logging-format=json
)

// Forms are every form Render writes.
var Forms = []string{FormKlog, FormStructured, FormJSON}

// Values a rendered line is filled with: what the tests expect to find
// as its objects.
const (
	SamplePodUID     = "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"
	SamplePodName    = "web-0"
	SamplePodNS      = "shop"
	SampleVolume     = "pvc-5d1e2f3a-6b7c-4d8e-9f0a-1b2c3d4e5f60"
	SampleUniqueName = "kubernetes.io/csi/rbd.csi.ceph.com^0001-0009-rook-ceph-0000000000000002-4f7c2d1e"
	SampleDevice     = "/dev/rbd3"
	SamplePodPath    = "/var/lib/kubelet/pods/" + SamplePodUID + "/volumes/kubernetes.io~csi/" + SampleVolume + "/mount"
	SampleStaging    = "/var/lib/kubelet/plugins/kubernetes.io/csi/rbd.csi.ceph.com/4c1f0b2a/globalmount"
)

// errorFor is the error a format's %v/%w is filled with: what a line of
// the class wraps (its Needs), else a plain mount error.
func errorFor(c *Class) string {
	if c != nil {
		for _, n := range c.Needs {
			switch {
			case strings.Contains(n, "busy"):
				return "unmount " + SamplePodPath + ": device or resource busy"
			case strings.Contains(n, "not empty"):
				return "remove " + SamplePodPath + ": directory not empty"
			case strings.Contains(n, "DeadlineExceeded"):
				return "rpc error: code = DeadlineExceeded desc = context deadline exceeded"
			}
		}
	}
	return "exit status 32"
}

// reVerb compiles on first use (see KeyRegexp).
var reVerb = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`%[-+# 0-9.*]*[a-zA-Z%]`) })

// fill replaces each verb of a printf format by a value chosen from the
// words before it.
func fill(format string, errText string) string {
	var b strings.Builder
	prev := 0
	for _, ix := range reVerb().FindAllStringIndex(format, -1) {
		b.WriteString(format[prev:ix[0]])
		verb := format[ix[0]:ix[1]]
		prev = ix[1]
		if verb == "%%" {
			b.WriteString("%")
			continue
		}
		v := valueFor(strings.ToLower(format[:ix[0]]), verb, errText)
		if strings.HasSuffix(verb, "q") {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	b.WriteString(format[prev:])
	return b.String()
}

// valueKinds are the words that say what a verb's value is, by the value.
var valueKinds = []struct {
	words []string
	value string
}{
	{[]string{"container ", "sandbox ", "layer ", "task ", "container: "}, "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a"},
	{[]string{"orphaned pod ", "uid", "from pod ", "poduid"}, SamplePodUID},
	{[]string{"pod ", "pod: "}, SamplePodName + "_" + SamplePodNS + "(" + SamplePodUID + ")"},
	{[]string{"device ", "device path", "devicepath", "spec ", "device: "}, SampleDevice},
	{[]string{"staging", "device mount path", "stagingtarget", "globalmount"}, SampleStaging},
	{[]string{"target", "path", "dir", "directory", "unmount ", "unmounting ", "at ", "mount ", "arguments: ", "point ", "mountpoint"}, SamplePodPath},
	{[]string{"volume ", "volume: ", "volume id ", "volumeid", "vol "}, SampleVolume},
}

// valueFor picks a value for a verb by the last word before it that says
// what it is.
func valueFor(before, verb, errText string) string {
	last := verb[len(verb)-1]
	switch last {
	case 'd':
		return "3"
	case 'f':
		return "30.000000"
	case 't':
		return "true"
	}
	tail := before
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	if strings.HasSuffix(tail, ": ") || strings.HasSuffix(tail, "err: ") || strings.HasSuffix(tail, "error: ") || last == 'w' {
		return errText
	}
	best, at := errText, -1
	for _, k := range valueKinds {
		for _, w := range k.words {
			if i := strings.LastIndex(tail, w); i >= 0 && i+len(w) > at {
				best, at = k.value, i+len(w)
			}
		}
	}
	return best
}

// volumeOp renders the kubelet's detailed volume-operation error
// (GenerateError's "<prefix> for volume %q (UniqueName: %q) pod %q (UID:
// %q) : <err>").
func volumeOp(prefix, errText string) string {
	return fmt.Sprintf("%s for volume %q (UniqueName: %q) pod %q (UID: %q) : %s", prefix, SampleVolume, SampleUniqueName, SamplePodName, SamplePodUID, errText)
}

// Message is the text of a format filled with sample values, as the call
// produces it, wrapping the error a line of class as carries.
func Message(f Format, as *Class) string {
	errText := errorFor(as)
	if f.Kind == "volume-op" {
		return volumeOp(f.Format, errText)
	}
	return fill(f.Format, errText)
}

// Render writes one line of a format in a form, as a line of class as
// writes it (its own class, or a variant whose Needs the wrapped error
// then carries). The second result is false when the form does not apply
// (a log call has no form of an error logged by a structured call).
func Render(f Format, as *Class, form string) (string, bool) {
	msg := Message(f, as)
	errText := errorFor(as)
	head := "E0102 03:04:05.678901    1234 operation_generator.go:123] "
	var keys [][2]string
	for _, k := range strings.Split(f.Keys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, [2]string{k, keyValue(k)})
		}
	}
	structuredCall := f.Kind == "log" && f.Keys != "" || f.Kind == "log" && !strings.Contains(f.Format, "%")
	switch form {
	case FormKlog:
		if structuredCall {
			var b strings.Builder
			b.WriteString(head + strconvQuote(msg))
			for _, kv := range keys {
				fmt.Fprintf(&b, " %s=%s", kv[0], strconvQuote(kv[1]))
			}
			fmt.Fprintf(&b, " err=%s", strconvQuote(errText))
			return b.String(), true
		}
		if f.Kind == "volume-op" {
			return head + `Operation for "{volumeName:` + SampleUniqueName + ` podName:` + SamplePodUID + ` nodeName:}" failed. No retries permitted until 2024-01-02 03:05:07.678901 +0000 UTC m=+120.1 (durationBeforeRetry 1m4s). Error: ` + msg, true
		}
		return head + msg, true
	case FormStructured:
		if f.Kind == "log" {
			return "", false
		}
		// An error logged by a structured call: klog quotes it.
		return head + `"Error syncing pod, skipping" err=` + strconvQuote(msg) + ` pod="` + SamplePodNS + "/" + SamplePodName + `" podUID="` + SamplePodUID + `"`, true
	case FormJSON:
		m := map[string]any{"ts": 1704164645.678901, "caller": "operationexecutor/operation_generator.go:123", "v": 0}
		if structuredCall || f.Kind == "log" {
			m["msg"] = msg
			for _, kv := range keys {
				if kv[0] == "pod" {
					m["pod"] = map[string]string{"name": SamplePodName, "namespace": SamplePodNS}
					continue
				}
				m[kv[0]] = kv[1]
			}
			if structuredCall {
				m["err"] = errText
			}
		} else {
			m["msg"] = "Error syncing pod, skipping"
			m["err"] = msg
			m["pod"] = map[string]string{"name": SamplePodName, "namespace": SamplePodNS}
			m["podUID"] = SamplePodUID
		}
		b, _ := json.Marshal(m)
		return string(b), true
	}
	return "", false
}

// keyValue is a sample value for a structured call's key.
func keyValue(k string) string {
	switch strings.ToLower(k) {
	case "pod":
		return SamplePodNS + "/" + SamplePodName
	case "poduid", "uid":
		return SamplePodUID
	case "path", "dir", "target", "targetpath", "volumepath", "podvolumepath":
		return SamplePodPath
	case "volumename", "volume", "volumeid", "volume_id", "volumehandle":
		return SampleUniqueName
	case "device", "devicepath":
		return SampleDevice
	}
	return "x"
}

// strconvQuote quotes as klog does a structured value.
func strconvQuote(s string) string { return strconv.Quote(s) }
