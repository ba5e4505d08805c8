package analyze

import (
	"slices"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/signatures"
)

// Which records may make a finding of which source (issue 38, round two):
// a local user's `logger -t kubelet "INFO: task umount:31337 blocked for
// more than 120 seconds."` was read as the kernel's hung-task report, and
// five forged PLEG lines as the kubelet's. The journal collector now puts
// in a unit's file only the entries journald's own fields prove the
// unit's, and the rest that claim its name in <unit>.unverified.log; here
// a record's source is what its file and its prefix can prove.

// unverifiedLog says whether a bundle file holds a unit's unverified
// entries: shown in the bundle, never read for a finding.
func unverifiedLog(name string) bool {
	return strings.HasPrefix(name, layout.DirJournal+"/") && strings.HasSuffix(name, ".unverified.log")
}

// mayMatch says whether a record of the file at p, whose prefix says m,
// may make a finding of class c. A class only the kernel writes (a hung
// task, libceph, NFS) matches in the journal's files no record whose
// journal or syslog prefix names another program and its pid
// ("node kubelet[31337]: INFO: task ..."): the kernel's own lines carry
// "kernel:" and no pid (journalctl -k, _TRANSPORT=kernel; syslog), or no
// prefix at all (dmesg, the kernel ring). A program's line quoting the
// kernel, or claiming to be it, is that program's.
func mayMatch(c *signatures.Class, p string, m *logMeta) bool {
	if !strings.HasPrefix(p, layout.DirJournal+"/") {
		return true
	}
	if kernelOnly(c) {
		return m.PID == 0 || m.Ident == "kernel"
	}
	if daemonsOnly(c) {
		// A class the kernel and a storage daemon write (iSCSI
		// connection errors: the kernel's and iscsid's): the line is
		// the kernel's, or that daemon's by its own prefix.
		return m.PID == 0 || m.Ident == "kernel" || m.Ident != "" && slices.Contains(c.Sources, m.Ident)
	}
	return true
}

// daemonsOnly tells a class only the kernel and the storage daemons
// write.
func daemonsOnly(c *signatures.Class) bool {
	if len(c.Sources) == 0 {
		return false
	}
	for _, s := range c.Sources {
		if s != "kernel" && !storageDaemons[s] {
			return false
		}
	}
	return true
}

func kernelOnly(c *signatures.Class) bool {
	return len(c.Sources) == 1 && c.Sources[0] == "kernel"
}
