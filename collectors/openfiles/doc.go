// Package openfiles is the openfiles collector: an lsof built from
// readlink alone (file descriptors with their fdinfo, cwd, root, exe and
// mapped files of every process), aggregated into holders per device and
// per mountpoint, and the kernel threads working on a device. Reads of
// other processes' /proc files run in isolated workers.
//
// Its files are described in docs/bundle.md (openfiles/).
package openfiles

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "processes.jsonl", Holds: "fds, cwd, root, exe, mapped files per process"},
	{Name: "holders.json", Holds: "holders per device and mountpoint"},
}
