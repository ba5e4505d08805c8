// Package mounts is the mounts collector: the mount table of every mount
// namespace, read once per namespace (found through every task), with an
// index device → namespaces → processes → mountpoints that flags mounts
// held only outside the host's namespace. nodesnap's own namespaces and
// processes are left out of the holders.
//
// Its files are described in docs/bundle.md (mounts/).
package mounts
