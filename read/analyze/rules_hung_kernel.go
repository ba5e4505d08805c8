package analyze

import (
	"fmt"

	"github.com/nodesnap/nodesnap/signatures"
)

// Kernel storage errors that leave mounts hung or read-only: an iSCSI
// connection that fails (its LUNs' I/O waits, then errors) and a
// filesystem that reports errors or remounts itself read-only. Both are
// kernel lines (journal, kern.log, messages, dmesg), keyed by the
// connection or the device they name.

const (
	sigISCSIConnError = "iscsi-connection-error"
	sigFSError        = "filesystem-error"

	idISCSIConn = "iscsi-connection-failed"
	idFSError   = "filesystem-error"
)

var _ = document(
	RuleDoc{
		ID: idISCSIConn, Severity: "warning",
		Title:    "iSCSI connection failed",
		Meaning:  "The kernel's iSCSI initiator reports a connection error or a ping timeout (\"connectionN:M: detected conn error (1020)\", \"ping timeout of 15 secs expired\") and the log shows no recovery after it: I/O to the LUNs behind it waits, then fails, and filesystems on them may go read-only. A connection that recovered is info (storage-event-recovered).",
		Evidence: "Kernel log lines (journal, kern.log, messages, dmesg) naming the connection.",
		Fix:      "Check the network path to the target and the target's health (iscsiadm -m session -P 3); restart the workloads whose volumes went read-only once the session is back.",
	},
	RuleDoc{
		ID: idFSError, Severity: "warning",
		Title:    "Filesystem errors on a device",
		Meaning:  "The kernel reports errors of a filesystem (\"EXT4-fs error (device sdf)\", an aborted journal, XFS corruption or shutdown, buffer I/O errors) or remounts it read-only: pods using a volume on that device fail their writes, and its unmount may hang.",
		Evidence: "Kernel log lines naming the device.",
		Fix:      "Find the volume on the device (lsblk, the mount table), stop its pods, unmount it and check the filesystem (fsck / xfs_repair) and the disk or network block device under it.",
	},
)

// The signatures are the catalogue's (package signatures).
func init() {
	sigWhat[sigISCSIConnError] = "the kernel's or iscsid's iSCSI connection errors"
	sigWhat[sigFSError] = "the kernel's filesystem errors"
}

// ruleKernelStorage reports iSCSI connection errors and filesystem errors
// that no other finding explained.
func ruleKernelStorage(st *state) {
	st.simpleLogFindings(sigISCSIConnError, idISCSIConn, Warning, "iSCSI connection failed",
		func(k *keyHits) (string, string, []string) {
			return fmt.Sprintf("iSCSI %s failed and did not recover in the log (%s)", st.subject(k, signatures.KeyServer), plural(k.Count, "error", "errors")),
				"The kernel's iSCSI initiator lost the connection to its target; I/O to the LUNs behind it waits (up to replacement_timeout), then fails, and filesystems on them may go read-only. " +
					"No \"is operational after recovery\" line follows it in the log.",
				[]string{"Check the target and the network path: iscsiadm -m session -P 3; ping the portal.", "Once the session is back, restart the pods whose volumes went read-only."}
		})
	st.eachUnclaimed(sigFSError, idFSError, func(k *keyHits) {
		if k.Key == "" {
			// A line that names no device (a wrapped message): the
			// keyed lines say it.
			return
		}
		f := Finding{ID: idFSError, Severity: Warning, Title: "Filesystem errors on a device", Subject: k.Key,
			Summary: fmt.Sprintf("the kernel reports filesystem errors on %s (%s)", k.Key, plural(k.Count, "line", "lines")),
			Explanation: "Errors of the filesystem on this device, an aborted journal or a remount read-only: writes of the pods using it fail, and its unmount may hang. " +
				"On a network block device (rbd, iSCSI, nbd) the cause is usually the connection under it.",
			Evidence:    k.evidence(sigWhat[sigFSError]),
			Remediation: []string{"Find what is mounted from /dev/" + k.Key + " (findmnt -S /dev/" + k.Key + "), stop its pods, unmount it and check the filesystem (fsck / xfs_repair)."}}
		st.add(f)
	})
}
