// Package mountprobe is the mountprobe collector: a stat and a statfs of
// every mount of every mount namespace, each in an isolated worker under
// the probe deadline, the kubelet's, runtimes' and CSI paths first. A
// mount whose probe does not answer is hung: the supervisor hands the
// hung set to every later collector (Spec.After "mountprobe"), which then
// skips it.
//
// Its files are described in docs/bundle.md (mountprobe/).
package mountprobe

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "probes.json", Holds: "stat + statfs of every mount: ok, hung, error or unfinished, latency, when each probe started and ended, `first` for the kubelet, runtime and CSI paths probed first; `kernel_stuck` on a mount reported hung without a probe because storageclients found its filesystem already stuck"},
	{Name: "summary.txt", Holds: "the probes as a table"},
}
