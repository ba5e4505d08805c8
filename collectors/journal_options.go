package collectors

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// The journal collector's flags and what they accept.

// JournalOptions are the journal collector's flags.
type JournalOptions struct {
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
	DefaultJournalUnits = []string{"kubelet", "containerd", "crio", "docker"}
)

const (
	DefaultJournalMaxBytes = 32 << 20
	DefaultJournalTimeout  = 20 * time.Second
)

var journalOpts = JournalOptions{Units: DefaultJournalUnits, Kernel: true,
	MaxBytes: DefaultJournalMaxBytes, CommandTimeout: DefaultJournalTimeout}

func journalFlags(fs *pflag.FlagSet) {
	o := &journalOpts
	fs.StringSliceVar(&o.Units, "journal-unit", DefaultJournalUnits, "journal: systemd units whose logs are collected (repeatable; replaces the default list)")
	fs.StringArrayVar(&o.Matches, "journal-match", nil, "journal: also collect entries matching FIELD=VALUE, e.g. SYSLOG_IDENTIFIER=kubelet (repeatable, one file each)")
	fs.BoolVar(&o.Kernel, "journal-kernel", true, "journal: collect the kernel log (every boot within --since)")
	fs.StringVar(&o.Dir, "journal-dir", "", "journal: read this journal directory (journalctl -D) instead of the host's journal")
	fs.BoolVar(&o.JSON, "journal-json", false, "journal: also export each source as journal JSON (one object per line)")
	o.MaxBytes = DefaultJournalMaxBytes
	fs.Var((*journalSize)(&o.MaxBytes), "journal-max-bytes", "journal: cap per source (unit, kernel log, file); the newest entries are kept")
	fs.DurationVar(&o.CommandTimeout, "journal-timeout", DefaultJournalTimeout, "journal: deadline of one journalctl or dmesg run, or of reading one source from the journal files")
	fs.StringVar(&o.Reader, "journal-reader", ReaderAuto, "journal: how the journal is read: native (nodesnap reads the journal files itself; no journalctl needed), journalctl, or auto (native; journalctl for --journal-json)")
}

// journalSize is a byte-size flag value: 1048576, 512KiB, 32MiB, 1GiB.
type journalSize int64

func (s *journalSize) String() string {
	n := int64(*s)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n > 0 && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.suf
		}
	}
	return strconv.FormatInt(n, 10)
}

func (s *journalSize) Type() string { return "size" }

func (s *journalSize) Set(v string) error {
	n, err := parseJournalSize(v)
	if err != nil {
		return err
	}
	*s = journalSize(n)
	return nil
}

func parseJournalSize(v string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1000}, {"MB", 1e6}, {"GB", 1e9},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suf)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size (examples: 1048576, 512KiB, 32MiB)", v)
	}
	return n * mult, nil
}
