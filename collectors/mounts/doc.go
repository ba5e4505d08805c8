// Package mounts is the mounts collector: the mount table of every mount
// namespace, read once per namespace (found through every task), with an
// index device → namespaces → processes → mountpoints that flags mounts
// held only outside the host's namespace. nodesnap's own namespaces and
// processes are left out of the holders.
//
// Its files are described in docs/bundle.md (mounts/).
package mounts

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "mounts.json", Holds: "namespaces → processes, device → every namespace/process/mountpoint that mounts it, propagation; `nodesnap`: nodesnap's own namespaces and processes, left out of the holders. Format 2 (`\"format\": 2`, since 2026-12-07): `tables` holds each distinct mount table once (tables the same but for their mount IDs are one), named by `hash`; a namespace names its `table`, with its own `mount_ids` (runs `[first, count]`) and `root_parents`. Bundles before have each namespace's `mounts` in it (format 1), still read"},
	{Name: "mountinfo.txt", Holds: "every namespace's raw mountinfo, byte for byte, each after a line `==> mnt:[<inode>] pid=<pid> tid=<tid> [host] <==` (`grep -e '^==>' -e rbd3 mounts/mountinfo.txt`); since mounts.json format 4 (2026-12-07), a table the same as one written before it but for its mount IDs is its header alone, `same-as=<inode> ids=<first>+<count>,... outside=<id>,...`, rebuilt byte for byte from that copy (`layout.RebuildMountinfo`); past the per-file cap it goes on in `mountinfo-2.txt`... Bundles before 2026-11-24 have one `ns/<inode>.mountinfo` per namespace instead, still read"},
}
