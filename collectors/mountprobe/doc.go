// Package mountprobe is the mountprobe collector: a stat and a statfs of
// every mount of every mount namespace, each in an isolated worker under
// the probe deadline, the kubelet's, runtimes' and CSI paths first. A
// mount whose probe does not answer is hung: the supervisor hands the
// hung set to every later collector (Spec.After "mountprobe"), which then
// skips it.
//
// Its files are described in docs/bundle.md (mountprobe/).
package mountprobe
