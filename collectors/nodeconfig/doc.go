// Package nodeconfig is the nodeconfig collector: the kubelet's, the
// runtimes' and the storage clients' configuration files (kubelet config
// and kubeconfig, containerd, fstab, multipath, iSCSI, ceph), redacted,
// including the files named on the running processes' command lines.
//
// Its files are described in docs/bundle.md (nodeconfig/).
package nodeconfig
