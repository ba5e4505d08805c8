// Package storageclients is the storageclients collector: the kernel's own
// live view of its storage clients (NFS and sunrpc, the ceph kernel
// client, rbd mappings, iSCSI sessions and SCSI devices, device-mapper and
// multipath, block queues, FUSE connections, CIFS), each read in a worker
// under the probe deadline. It samples the counters that tell stuck from
// busy twice, and a filesystem whose kernel state already shows stuck
// requests and tasks stuck on it is reported hung from that evidence, so
// that mountprobe, which runs after it, does not send it one more request.
//
// Its files are described in docs/bundle.md (storageclients/).
package storageclients

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "state.json", Holds: "the kernel's live storage-client state, two samples 300 ms apart (`--storageclients-sample-interval`) — NFS mounts from pid 1's mountstats (transport counters, sends without replies, per-op timeouts and retransmissions, age), `/proc/fs/nfsfs` servers and volumes, each sunrpc client's in-flight tasks and server address (debugfs), each ceph client's in-flight OSD and MDS requests, status, monc and caps (debugfs), rbd mappings (`rbd showmapped` without rbd; never `config_info`, which holds the key), iSCSI sessions with portal, state and recovery_tmo, SCSI device states, device-mapper names, UUIDs, slaves and holders, each block device's inflight, stat and queue settings (a loop device's backing file), FUSE connections' waiting, max_background and congestion_threshold with their mountpoints, the processes holding /dev/fuse, the tasks waiting in storage code in both samples (each tied to its device where its system call's descriptor or its thread name says which), and `stuck`: what the kernel already shows stuck (requests waiting and tasks not run between the samples), reported hung to mountprobe"},
	{Name: "raw/", Holds: "mountstats, nfsfs, ceph debugfs files and CIFS DebugData and Stats as read"},
}
