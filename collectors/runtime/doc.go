// Package runtime is the runtime collector: the container runtimes' own
// view of the node. It asks containerd and CRI-O over the CRI API and
// dockerd over its API for pods, containers (with their mounts), images
// and status, each call under its own deadline, takes goroutine dumps
// from their debug endpoints, and runs ctr, crictl and docker listings
// where those programs are installed.
//
// Its files are described in docs/bundle.md (runtime/).
package runtime
