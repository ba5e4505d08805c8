// Package kubelet is the kubelet collector: the kubelet's healthz,
// goroutine dumps, heap (and optional CPU) profile, metrics, configz and
// pods, over its authenticated port. It finds a credential (a
// ServiceAccount token, a client certificate) and says in the manifest's
// remedies what it could not get without one; its Prepare step reads a
// token given on a descriptor of the supervisor.
//
// Its files are described in docs/bundle.md (kubelet/).
package kubelet

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "healthz.txt", Holds: "`/healthz?verbose`"},
	{Name: "goroutine-debug1.txt", Holds: "the goroutine dump, grouped (`debug=1`)"},
	{Name: "goroutine-debug2.txt", Holds: "every goroutine with its wait time (`debug=2`)"},
	{Name: "heap.pb.gz", Holds: "the heap profile (binary: pprof protobufs cannot be redacted)"},
	{Name: "metrics.txt", Holds: "`/metrics`"},
	{Name: "configz.json", Holds: "`/configz`"},
	{Name: "pods.json", Holds: "`/pods`"},
	{Name: "requests.json", Holds: "what was asked, on which port, how it went; `token_source` and `credential_source` say what the kubelet was shown, never the token or key"},
}
