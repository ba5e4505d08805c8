// Package kubelet is the kubelet collector: the kubelet's healthz,
// goroutine dumps, heap (and optional CPU) profile, metrics, configz and
// pods, over its authenticated port. It finds a credential (a
// ServiceAccount token, a client certificate) and says in the manifest's
// remedies what it could not get without one; its Prepare step reads a
// token given on a descriptor of the supervisor.
//
// Its files are described in docs/bundle.md (kubelet/).
package kubelet
