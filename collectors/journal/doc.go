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
