// Package journal is the journal collector: the kubelet's, the container
// runtimes' and the kernel's logs, newest kept under a byte cap and a
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
	{Name: "<source>.log", Holds: "one log per unit and the kernel's; where journald is absent, the kernel's ring buffer (dmesg)"},
	{Name: "files/", Holds: "`/var/log` tails, with rotated parts such as `files/kubelet.log.1` and the decompressed `files/kubelet.log.2` while the cap lasts"},
}
