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
