// Package bundle defines a nodesnap bundle: its manifest, how it is written
// (atomically, manifest first) and how it is read back safely (no entry
// may escape, claim absurd sizes, or be anything but a regular file).
package bundle

import (
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// SchemaVersion of manifest.json this code writes. It reads every version
// from MinSchemaVersion: version 1 is version 2 without ManifestSHA256;
// version 3 is version 2 whose mounts/mounts.json may be of format 2
// (each distinct mount table once, layout.MountsFormat), which a reader
// of version 2 would read as namespaces without mounts.
const SchemaVersion = 3

// MinSchemaVersion is the oldest manifest this code reads.
const MinSchemaVersion = 1

// ManifestName is the first entry of every bundle.
const ManifestName = "manifest.json"

// Manifest accounts for every collector and every byte in a bundle.
type Manifest struct {
	SchemaVersion int       `json:"schema_version"`
	Tool          Tool      `json:"tool"`
	CommandLine   []string  `json:"command_line"`
	Host          Host      `json:"host"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
	// DurationSeconds is the wall time of the collection.
	DurationSeconds float64 `json:"duration_seconds"`
	// Status is "complete" when every collector that ran ended ok,
	// unsupported or skipped; otherwise "partial".
	Status      string     `json:"status"`
	Interrupted *Interrupt `json:"interrupted,omitempty"`
	// Trigger is why `nodesnap watch` started this collection; absent
	// for a collection run by hand, cron or a Job.
	Trigger    *Trigger          `json:"trigger,omitempty"`
	Settings   Settings          `json:"settings"`
	Collectors []CollectorResult `json:"collectors"`
	Files      []FileEntry       `json:"files"`
	Redaction  RedactionSummary  `json:"redaction"`
	HungMounts []HungItem        `json:"hung_mounts"`
	Omitted    []Omitted         `json:"omitted"`
	// Warnings are run-wide caveats a reader must know (not running as
	// root, say).
	Warnings []string `json:"warnings,omitempty"`
	// Resources is what the run itself cost the node.
	Resources *Resources `json:"resources,omitempty"`
	// Self is nodesnap's own run: its processes, mount namespace and pod
	// are never evidence against the node.
	Self *Self `json:"self,omitempty"`
	// ManifestSHA256 is the sha256 of manifest.json's own bytes with this
	// value's 64 digits written as zeros (SealManifest); every reader
	// checks it (VerifyManifest). Required from schema version 2.
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
}

// Self identifies nodesnap's own run, as its supervisor saw itself.
type Self struct {
	// PID is the supervisor's pid in its own pid namespace (the host's
	// when PIDNamespace is the host's: a pod with hostPID).
	PID          int    `json:"pid"`
	PIDNamespace uint64 `json:"pid_namespace,omitempty"`
	// MountNamespace is the inode of the supervisor's mount namespace
	// (/proc/self/ns/mnt), which its collectors and workers share. In a
	// pod it differs from the host's.
	MountNamespace uint64 `json:"mount_namespace,omitempty"`
	// Cgroup is the supervisor's cgroup (v2, or v1's first hierarchy that
	// names a pod or container), as /proc/self/cgroup shows it.
	Cgroup string `json:"cgroup,omitempty"`
	// ContainerID is the container's ID where the cgroup names one.
	ContainerID string `json:"container_id,omitempty"`
	// Pod is the pod nodesnap runs in, when it runs in one.
	Pod *SelfPod `json:"pod,omitempty"`
}

// SelfPod is the pod nodesnap runs in.
type SelfPod struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Source says where the UID came from: "env" (the manifests set
	// NODESNAP_POD_UID from the downward API), "cgroup" or "mountinfo"
	// (the kubelet's pod directory behind a bind mount such as
	// /etc/hosts).
	Source string `json:"source"`
}

// Resources are the run's own peak memory figures.
type Resources struct {
	SupervisorMaxRSSKiB   int64 `json:"supervisor_max_rss_kib"`
	LargestChildMaxRSSKiB int64 `json:"largest_child_max_rss_kib"`
}

// Tool identifies the nodesnap build that wrote the bundle.
type Tool struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
}

// Host identifies the node.
type Host struct {
	Hostname  string `json:"hostname"`
	Kernel    string `json:"kernel,omitempty"`
	BootID    string `json:"boot_id,omitempty"`
	MachineID string `json:"machine_id,omitempty"`
}

// Interrupt records that a signal stopped collection early and the bundle
// was finished with what had been gathered.
type Interrupt struct {
	Signal string    `json:"signal"`
	At     time.Time `json:"at"`
}

// Trigger is the signal of `nodesnap watch` that fired, and its evidence:
// what the watcher saw, a line each (a hung mountpoint, a kernel log line,
// the kubelet's healthz answer). Evidence is redacted like every file.
type Trigger struct {
	Name     string    `json:"name"`
	FiredAt  time.Time `json:"fired_at"`
	Summary  string    `json:"summary"`
	Evidence []string  `json:"evidence,omitempty"`
}

// Settings are the limits the run worked under.
type Settings struct {
	Root                string  `json:"root"`
	TimeoutSeconds      float64 `json:"timeout_seconds"`
	ProbeTimeoutSeconds float64 `json:"probe_timeout_seconds"`
	MaxFileBytes        int64   `json:"max_file_bytes"`
	MaxCollectorBytes   int64   `json:"max_collector_bytes"`
	MaxBundleBytes      int64   `json:"max_bundle_bytes"`
	Concurrency         int     `json:"concurrency"`
	SinceSeconds        float64 `json:"since_seconds"`
	Compression         string  `json:"compression"`
}

// A bundle's status (Manifest.Status).
const (
	// BundleComplete: every collector that ran ended ok, unsupported or
	// skipped.
	BundleComplete = "complete"
	// BundlePartial: some collector timed out, failed or was cut short.
	BundlePartial = "partial"
)

// Collector statuses.
const (
	StatusOK          = "ok"
	StatusPartial     = "partial"
	StatusTimeout     = "timeout"
	StatusError       = "error"
	StatusSkipped     = "skipped"
	StatusUnsupported = "unsupported"
)

// CollectorResult is one collector's account.
type CollectorResult struct {
	Name            string               `json:"name"`
	Status          string               `json:"status"`
	StartedAt       *time.Time           `json:"started_at,omitempty"`
	DurationSeconds float64              `json:"duration_seconds"`
	TimeoutSeconds  float64              `json:"timeout_seconds"`
	Error           string               `json:"error,omitempty"`
	Notes           []string             `json:"notes,omitempty"`
	ExitCode        *int                 `json:"exit_code,omitempty"`
	Stderr          string               `json:"stderr,omitempty"`
	HangEvidence    *layout.HangEvidence `json:"hang_evidence,omitempty"`
	HungItems       []HungItem           `json:"hung_items,omitempty"`
	MaxRSSKiB       int64                `json:"max_rss_kib,omitempty"`
	Files           []string             `json:"files"`
	// Remedies name evidence the collector could not gather for want of
	// something the operator can give (a credential), and how to give it.
	Remedies []Remedy `json:"remedies,omitempty"`
}

// Remedy is evidence a collector left out and the commands that would let
// the next run gather it. Fix lines are the collector's own fixed text, so
// they are shown as written (a redactor would take the $(...) of
// "NODESNAP_KUBELET_TOKEN=$(kubectl ...)" for a secret); Missing and
// Reason went through the redactor.
type Remedy struct {
	Missing []string `json:"missing"`
	Reason  string   `json:"reason"`
	Fix     []string `json:"fix"`
}

// HungItem is one operation (a probe of a mount, a command) that missed its
// deadline, with where it was blocked.
type HungItem struct {
	Op        string               `json:"op"`
	Target    string               `json:"target"`
	Collector string               `json:"collector,omitempty"`
	Evidence  *layout.HangEvidence `json:"evidence,omitempty"`
}

// File kinds.
const (
	KindText   = "text"
	KindBinary = "binary"
)

// FileEntry accounts for one file in the bundle.
type FileEntry struct {
	Path         string `json:"path"`
	Collector    string `json:"collector"`
	Size         int64  `json:"size"`
	SHA256       string `json:"sha256"`
	Kind         string `json:"kind"`
	BinaryReason string `json:"binary_reason,omitempty"`
	Truncated    bool   `json:"truncated"`
	// Incomplete files were still being written when their collector was
	// stopped; what they hold was redacted, but may end mid-record.
	Incomplete bool           `json:"incomplete,omitempty"`
	Redactions map[string]int `json:"redactions,omitempty"`
}

// RedactionSummary totals redactions per rule over the bundle.
type RedactionSummary struct {
	Rules map[string]int `json:"rules"`
	Total int            `json:"total"`
	// Obfuscated names the value classes replaced by consistent tokens.
	Obfuscated []string `json:"obfuscated,omitempty"`
	// Rewrites are the times `nodesnap redact` re-redacted this bundle.
	Rewrites []time.Time `json:"rewrites,omitempty"`
}

// Omitted is something deliberately left out of the bundle, and why.
type Omitted struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}
