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
