// Package nodeconfig is the nodeconfig collector: the kubelet's, the
// runtimes' and the storage clients' configuration files (kubelet config
// and kubeconfig, containerd, fstab, multipath, iSCSI, ceph), redacted,
// including the files named on the command lines of the running kubelet
// and runtimes the kernel vouches for (root in the node's user namespace,
// a root-owned executable: see collectors/internal/daemon); a process
// that only calls itself kubelet is refused with a note.
//
// Its files are described in docs/bundle.md (nodeconfig/).
package nodeconfig

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "files.json", Holds: "every configuration file looked for: its host path, whether it was collected or why not, truncated or not, and the running process whose command line named it"},
	{Name: "files/<host path>", Holds: "each file as read (redacted), under its host path: `files/etc/containerd/config.toml`"},
}
