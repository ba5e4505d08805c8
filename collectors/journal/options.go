package journal

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/internal/cliflag"
)

// The journal collector's flags and what they accept.

// Options are the journal collector's flags.
type Options struct {
	// Units are systemd units (".service" implied) whose logs are kept.
	Units []string `json:"units"`
	// Matches are extra journalctl matches (FIELD=VALUE), one file each.
	Matches []string `json:"matches,omitempty"`
	// Kernel adds the kernel log (_TRANSPORT=kernel, every boot in range).
	Kernel bool `json:"kernel"`
	// Dir reads a journal directory (journalctl -D) instead of the host's.
	Dir string `json:"dir,omitempty"`
	// JSON also exports each source as journal JSON (journalctl -o json).
	JSON bool `json:"json,omitempty"`
	// MaxBytes caps each source; the newest entries are kept.
	MaxBytes int64 `json:"max_bytes"`
	// MemoryCap bounds what the collector holds in memory for one
	// journal source (its newest entries, kept to be written oldest
	// first); older entries the per-source cap would have kept are left
	// out, and the collector says how many.
	MemoryCap int64 `json:"memory_cap"`
	// CommandTimeout bounds one journalctl (or dmesg) run, or the reading
	// of one source by the native reader.
	CommandTimeout time.Duration `json:"command_timeout"`
	// Reader is how the journal is read: native (nodesnap reads the
	// journal files itself), journalctl, or auto (native, unless the JSON
	// export is asked for, which needs journalctl).
	Reader string `json:"reader,omitempty"`
}

// Defaults of the journal collector.
var (
	DefaultJournalUnits = append(append([]string{"kubelet", "containerd", "crio", "docker"}, KubeletDistributionUnits...), StorageDaemonUnits...)
	// KubeletDistributionUnits are the units of distributions that run
	// the kubelet inside their own process or service (k3s and RKE2's
	// servers and agents, k0s's worker and controller, MicroK8s's
	// kubelite): on their nodes no kubelet.service logs anything, and
	// the kubelet's lines are in these. A unit the node does not run
	// gives no file.
	KubeletDistributionUnits = []string{"k3s", "k3s-agent", "rke2-server", "rke2-agent", "k0sworker", "k0scontroller", "snap.microk8s.daemon-kubelite"}
	// StorageDaemonUnits are the daemons of the node's storage stack: a
	// multipath path checker failing, an iSCSI session dropped or refused,
	// an NFS lock or id-mapping daemon gone are the cause of a volume's
	// I/O errors and hung mounts that the kubelet and the kernel only show
	// the effect of. A unit the node does not run gives no file.
	StorageDaemonUnits = []string{
		"multipathd",
		"iscsid", "iscsi", "open-iscsi", // the iSCSI daemon, and its login unit (RHEL's iscsi, Debian's open-iscsi)
		"rpcbind", "rpc-statd", "nfs-idmapd", "nfs-mountd", "nfs-server", // NFS client locking and id mapping, NFS server
	}
)

const (
	DefaultJournalMaxBytes = 32 << 20
	DefaultJournalTimeout  = 20 * time.Second
	// DefaultJournalMemoryCap is above DefaultJournalMaxBytes: with the
	// defaults the byte cap binds first and the memory cap never cuts.
	DefaultJournalMemoryCap = 64 << 20
)

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{Units: DefaultJournalUnits, Kernel: true,
	MaxBytes: DefaultJournalMaxBytes, MemoryCap: DefaultJournalMemoryCap, CommandTimeout: DefaultJournalTimeout,
	Reader: ReaderAuto}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	o := &opts
	fs.StringSliceVar(&o.Units, "journal-unit", o.Units, "journal: systemd units whose logs are collected (repeatable; replaces the default list)")
	fs.StringArrayVar(&o.Matches, "journal-match", o.Matches, "journal: also collect entries matching FIELD=VALUE, e.g. SYSLOG_IDENTIFIER=kubelet (repeatable, one file each)")
	fs.BoolVar(&o.Kernel, "journal-kernel", o.Kernel, "journal: collect the kernel log (every boot within --since)")
	fs.StringVar(&o.Dir, "journal-dir", o.Dir, "journal: read this journal directory (journalctl -D) instead of the host's journal")
	fs.BoolVar(&o.JSON, "journal-json", o.JSON, "journal: also export each source as journal JSON (one object per line)")
	fs.Var((*cliflag.PositiveSize)(&o.MaxBytes), "journal-max-bytes", "journal: cap per source (unit, kernel log, file); the newest entries are kept")
	fs.Var((*cliflag.PositiveSize)(&o.MemoryCap), "journal-memory-cap", "journal: most log bytes held in memory for one journal source (its newest entries, written oldest first); older entries past it are left out and the collector is partial, e.g. --journal-memory-cap 256MiB with --journal-max-bytes 1GiB")
	fs.DurationVar(&o.CommandTimeout, "journal-timeout", o.CommandTimeout, "journal: deadline of one journalctl or dmesg run, or of reading one source from the journal files")
	fs.StringVar(&o.Reader, "journal-reader", o.Reader, "journal: how the journal is read: native (nodesnap reads the journal files itself; no journalctl needed), journalctl, or auto (native; journalctl for --journal-json)")
}
