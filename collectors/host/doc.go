// Package host is the host collector: hostname, kernel, os-release,
// uptime, load, cpu and memory, cgroup version and boot id, as a summary
// and as the raw /proc and /etc files they come from.
//
// Its files are described in docs/bundle.md (host/); the manifest's host
// section is filled from its summary.
package host
