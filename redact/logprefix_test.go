package redact

import "testing"

// logPrefixCases: lines as node logs write them, and where their text
// starts.
var logPrefixCases = []struct {
	line, text string
}{
	{"2026-11-23T09:23:13.000013000Z stderr F   password: x", "  password: x"},
	{"2026-11-23T09:23:13.000013000Z stdout P partial", "partial"},
	{"2026-11-23T09:23:13.000013000Z stderr F I1123 09:20:11.000000       1 config.go:50] private-key: x", "private-key: x"},
	{"2026-11-23T19:34:46.570985+0000 node-1 kubelet[2231]: I1123 09:21:02.000000    2231 kubelet.go:400] daemon", "daemon"},
	{"2026-11-23T19:34:46+00:00 node-1 containerd[987]: time=\"x\" level=info", "time=\"x\" level=info"},
	{"Nov 23 09:20:11 node-1 kernel: nfs: server not responding", "nfs: server not responding"},
	{"Nov  3 09:20:11 node-1 systemd[1]: Started x.", "Started x."},
	{"I1123 09:20:11.000000       1 main.go:42] marker", "marker"},
	{"E1123 09:20:11.123456   22231 kuberuntime_image.go:55] \"Failed\"", "\"Failed\""},
	// Not prefixes: the text is the whole line.
	{"password: x", "password: x"},
	{"2026-11-23 is a date", "2026-11-23 is a date"},
	{"2026-11-23T09:23:13Z stdin F x", "2026-11-23T09:23:13Z stdin F x"},
	{"Nov 23 09:20:11 node-1 two words: x", "Nov 23 09:20:11 node-1 two words: x"},
	{"I1123 is not klog", "I1123 is not klog"},
	{"", ""},
}

func TestLogPrefixLen(t *testing.T) {
	for _, tc := range logPrefixCases {
		n := logPrefixLen([]byte(tc.line))
		if got := tc.line[n:]; got != tc.text {
			t.Errorf("%q: text %q, want %q", tc.line, got, tc.text)
		}
	}
}
