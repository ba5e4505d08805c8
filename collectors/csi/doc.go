// Package csi is the csi collector: what the node's CSI drivers know and
// leave behind. It copies the drivers' state files, the kubelet's plugins
// and plugins_registry directories and every pod volume's vol_data.json,
// cross-checks them with the mount table into a pod → volume → mount
// inventory, and keeps the newest container logs of the CSI driver pods
// (found by what their containers mount; current and previous instance)
// and the log of a driver run as a host process, found through its kubelet
// socket. Everything it reads is a host
// path: through hostfs, skipping mounts mountprobe found hung.
//
// Its files are described in docs/bundle.md (csi/); read/analyze's CSI
// rules read them.
package csi

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "inventory.json", Holds: "pod → volume → mount, cross-checked with driver state; `pod_logs` lists every log file of the CSI pods' containers with what was kept of it and why not; `host_drivers` names each process listening on a kubelet CSI socket with its driver, pid, command line, cgroup, fd 1 and 2 and where its log came from (`file`, `journal`, `pod`, `none` for a terminal or `/dev/null`)"},
	{Name: "<driver state files>", Holds: "driver state files and `vol_data.json` of every pod volume"},
	{Name: "podlogs/<namespace>_<pod>/<container>/<restart>.log[.<time>]", Holds: "the newest lines of each container of a CSI driver pod (from `--csi-pod-log-dir`, `/var/log/pods`; a pod is a CSI driver pod by what its containers mount, read from the runtimes' OCI configs under `--csi-bundle-dir`: the kubelet's plugin registration directory, a directory under its `plugins/`, or a `csi.sock`; by its name only where no config says so — `pod_logs[].match` says which), of its current instance and of the one before its last restart, up to `--csi-pod-log-bytes` per container (compressed rotations are listed, not read)"},
	{Name: "hostlogs/<driver>.<pid>.log", Holds: "the newest lines of the file behind the fd 2, else fd 1, of a CSI driver run as a host process, same cap; `hostlogs/<driver>.<pid>.journal.log`: its journal lines, when its output is a pipe or socket"},
}
