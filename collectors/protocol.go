package collectors

import (
	"encoding/json"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/redact"
)

// Common settings every collector child receives.
type Common struct {
	// Root is the host's root as nodesnap sees it ("/" on the host,
	// "/host" in a container with the host mounted). Proc and Sys default
	// to Root/proc and Root/sys.
	Root string `json:"root"`
	Proc string `json:"proc"`
	Sys  string `json:"sys"`
	// Since bounds how far back logs go.
	Since time.Duration `json:"since"`
	// MaxFileBytes caps one file; MaxCollectorBytes all of a collector's.
	MaxFileBytes      int64 `json:"max_file_bytes"`
	MaxCollectorBytes int64 `json:"max_collector_bytes"`
	// ProbeTimeout bounds one risky per-item operation; Workers is how many
	// run at once.
	ProbeTimeout time.Duration `json:"probe_timeout"`
	Workers      int           `json:"workers"`
	// HungMounts are mountpoints found hung earlier in this run: no
	// collector may enter them.
	HungMounts []string `json:"hung_mounts,omitempty"`
	// Stuck are filesystems and devices whose kernel state showed stuck
	// requests and tasks earlier in this run (the storageclients
	// collector): mountprobe reports their mounts hung without a probe.
	Stuck []layout.KernelStuck `json:"stuck,omitempty"`
	// NoBinary drops artifacts that cannot be redacted.
	NoBinary bool `json:"no_binary,omitempty"`
	// Redaction is the redaction configuration, as JSON, given to
	// NewRedactor in the child.
	Redaction json.RawMessage `json:"redaction,omitempty"`
	// SpreadKey, when set, makes the child's redactor record what it
	// masks as keyed hashes (redact.Redactor.RecordMasked), sent to the
	// supervisor in "masked" events for the bundle-wide last pass.
	SpreadKey *redact.SpreadKey `json:"spread_key,omitempty"`
	// Self is nodesnap's own run (its supervisor's pid, namespaces and
	// pod): never evidence against the node.
	Self *bundle.Self `json:"self,omitempty"`
}

// ChildPrelude is the first document on a collector child's stdin, sent
// the moment the child is started: what it needs to start its first
// worker (its collector, the root boundary, the worker settings) while the
// supervisor is still opening the output directory. The ChildConfig
// follows; the prelude's fields must agree with it.
type ChildPrelude struct {
	Prelude      bool          `json:"prelude"`
	Collector    string        `json:"collector"`
	Root         string        `json:"root"`
	Proc         string        `json:"proc"`
	Sys          string        `json:"sys"`
	ProbeTimeout time.Duration `json:"probe_timeout"`
	Workers      int           `json:"workers"`
}

// PreludeOf is the prelude of a child that will run collector with c.
func PreludeOf(collector string, c Common) ChildPrelude {
	return ChildPrelude{Prelude: true, Collector: collector, Root: c.Root, Proc: c.Proc, Sys: c.Sys, ProbeTimeout: c.ProbeTimeout, Workers: c.Workers}
}

// ChildConfig is what the supervisor sends a collector child on stdin,
// after a ChildPrelude.
type ChildConfig struct {
	Collector string          `json:"collector"`
	Dir       string          `json:"dir"`
	Deadline  time.Time       `json:"deadline"`
	Common    Common          `json:"common"`
	Options   json.RawMessage `json:"options,omitempty"`
}

// Event kinds a child sends on its event pipe (fd 3), one JSON object per
// line.
const (
	EventFile      = "file"
	EventNote      = "note"
	EventHungMount = "hung_mount"
	EventHungItem  = "hung_item"
	EventFact      = "fact"
	EventDone      = "done"
	EventMappings  = "mappings"
	EventRemedy    = "remedy"
	EventStuck     = "stuck"
	EventMasked    = "masked"
)

// FileRecord is what a child knows about a file it finished writing.
type FileRecord struct {
	// Path is relative to the collector's directory.
	Path         string         `json:"path"`
	Binary       bool           `json:"binary,omitempty"`
	BinaryReason string         `json:"binary_reason,omitempty"`
	Truncated    bool           `json:"truncated,omitempty"`
	Omitted      string         `json:"omitted,omitempty"`
	Redactions   map[string]int `json:"redactions,omitempty"`
}

// HungItem is one per-item operation that missed its deadline.
type HungItem struct {
	Op       string               `json:"op"`
	Target   string               `json:"target"`
	Evidence *layout.HangEvidence `json:"evidence,omitempty"`
}

// Event is one message from a collector child.
type Event struct {
	Type   string      `json:"type"`
	File   *FileRecord `json:"file,omitempty"`
	Text   string      `json:"text,omitempty"`
	Item   *HungItem   `json:"item,omitempty"`
	Key    string      `json:"key,omitempty"`
	Value  string      `json:"value,omitempty"`
	Status string      `json:"status,omitempty"`
	Error  string      `json:"error,omitempty"`
	// PeakRSSKiB is the child's own peak memory, sent with "done".
	PeakRSSKiB int64 `json:"peak_rss_kib,omitempty"`
	// Mappings are obfuscation tokens and the values they stand for.
	Mappings map[string]string `json:"mappings,omitempty"`
	// Remedy is sent with "remedy".
	Remedy *bundle.Remedy `json:"remedy,omitempty"`
	// Stuck is sent with "stuck".
	Stuck *layout.KernelStuck `json:"stuck,omitempty"`
	// Masked, sent with "masked", are the keyed hashes of values the
	// child's redactor masked (never the values).
	Masked []redact.ValueHash `json:"masked,omitempty"`
}

// Collector statuses, as in the manifest (defined there).
const (
	StatusOK          = bundle.StatusOK
	StatusPartial     = bundle.StatusPartial
	StatusTimeout     = bundle.StatusTimeout
	StatusError       = bundle.StatusError
	StatusSkipped     = bundle.StatusSkipped
	StatusUnsupported = bundle.StatusUnsupported
)
