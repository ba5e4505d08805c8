// Package journal is the journal collector: the kubelet's, the container
// runtimes', the storage daemons' (multipathd, iscsid, the NFS daemons) and
// the kernel's logs, newest kept under a byte cap and a
// memory cap. It reads journald's files natively (internal/journalfile),
// or through journalctl when asked, and falls back to /var/log tails and
// the kernel ring buffer where journald is absent.
//
// Its files are described in docs/bundle.md (journal/); read/analyze
// tests every line against the signature catalogue (signatures).
package journal

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "sources.json", Holds: "what was read from where, and how much was kept"},
	{Name: "<unit>.log", Holds: "one log per unit, only entries journald's own fields prove the unit's (`_SYSTEMD_UNIT`, systemd's `_PID=1`, its identifier from root); by default the kubelet, containerd, CRI-O, docker, the distributions that run the kubelet in a service of their own (`k3s`, `k3s-agent`, `rke2-server`, `rke2-agent`, `k0sworker`, `k0scontroller`, MicroK8s's `snap.microk8s.daemon-kubelite`, also by its identifier `microk8s.daemon-kubelite`) and the storage daemons — `multipathd`, `iscsid`, `iscsi`, `open-iscsi`, `rpcbind`, `rpc-statd`, `nfs-idmapd`, `nfs-mountd`, `nfs-server`, each also by its programs' syslog identifiers such as `rpc.statd`; a unit with no entries gives no file; `--journal-unit` replaces the list"},
	{Name: "<unit>.unverified.log", Holds: "the entries that claim a unit's identifier without journald's proof (`logger -t kubelet`): shown, never read for a finding"},
	{Name: "kernel.log", Holds: "the kernel's lines (`_TRANSPORT=kernel`); where journald is absent, the kernel's ring buffer (dmesg)"},
	{Name: "files/", Holds: "`/var/log` tails (`messages`, `syslog`, `daemon.log` where syslog keeps the daemons apart, `kern.log`, `kubelet.log`; `rke2-kubelet.log`, RKE2's kubelet log file `/var/lib/rancher/rke2/agent/logs/kubelet.log`, when the kubelet's unit logged nothing; `k3s-containerd.log` and `rke2-containerd.log`, the containerd k3s and RKE2 run, when no containerd unit logged anything), with rotated parts such as `files/kubelet.log.1` and the decompressed `files/kubelet.log.2` while the cap lasts"},
}
