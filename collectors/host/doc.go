// Package host is the host collector: hostname, kernel, os-release,
// uptime, load, cpu and memory, cgroup version and boot id, as a summary
// and as the raw /proc and /etc files they come from.
//
// Its files are described in docs/bundle.md (host/); the manifest's host
// section is filled from its summary.
package host

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "summary.json", Holds: "hostname, kernel, os-release, uptime, load, cpu and memory, cgroup version, boot id and machine id (the manifest's host section comes from it)"},
	{Name: "os-release", Holds: "the raw /etc/os-release"},
	{Name: "proc/", Holds: "the raw /proc files the summary comes from (version, cmdline, uptime, loadavg, meminfo, cpuinfo, pressure, diskstats, vmstat, ...)"},
}
