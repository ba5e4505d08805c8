package layout

import "time"

// The journal collector's record: journal/sources.json.

// JournalSources is journal/sources.json: where the collector looked, what
// it used, and what it kept of each source.
type JournalSources struct {
	// Backend is "journald" when the logs came from the journal, "files"
	// when journald was absent or unusable and /var/log files and the
	// kernel ring buffer were read instead.
	Backend        string          `json:"backend"`
	FallbackReason string          `json:"fallback_reason,omitempty"`
	Journald       JournaldStatus  `json:"journald"`
	Since          time.Time       `json:"since"`
	MaxBytes       int64           `json:"max_bytes_per_source"`
	Sources        []JournalSource `json:"sources"`
}

// JournaldStatus is what the collector found out about journald.
type JournaldStatus struct {
	// Reader is what read the journal: "native" (nodesnap's own reader of
	// the journal files) or "journalctl".
	Reader string `json:"reader,omitempty"`
	// Journalctl is the program run, Version the first line of its
	// --version.
	Journalctl string `json:"journalctl,omitempty"`
	Version    string `json:"version,omitempty"`
	// Directory is --journal-dir; Root the --root passed to journalctl.
	Directory string `json:"directory,omitempty"`
	Root      string `json:"root,omitempty"`
	// JournalFiles counts *.journal files found; Socket says whether
	// journald's socket exists.
	JournalFiles int  `json:"journal_files"`
	Socket       bool `json:"socket"`
	Usable       bool `json:"usable"`
	// Problem says why journald could not be used, or what went wrong.
	Problem string `json:"problem,omitempty"`
}

// JournalSource is one log source the collector read.
type JournalSource struct {
	// Name is the unit, "kernel", the match or the file.
	Name string `json:"name"`
	// Kind is journal, journal-json, boots, file, dmesg or kmsg.
	Kind string `json:"kind"`
	// File is the bundle file, relative to the collector's directory.
	File string `json:"file,omitempty"`
	// Command is the program run (journal, dmesg); Path the host file read.
	Command []string `json:"command,omitempty"`
	// Reader is "native" for a journal source read from the journal files
	// by nodesnap itself.
	Reader string `json:"reader,omitempty"`
	Path   string `json:"path,omitempty"`
	// Status: ok, empty, missing, skipped, timeout or error.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Problems are the journal files the native reader could not read,
	// or not to their end, and why.
	Problems []string `json:"problems,omitempty"`
	// Entries and Bytes are what was kept (Bytes before redaction).
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	// Truncated: older entries were left out to respect MaxBytes (or the
	// run's caps), or reading stopped early (timeout).
	Truncated bool `json:"truncated"`
	// SourceBytes is the size of a file source (compressed, for a
	// compressed rotated part).
	SourceBytes int64 `json:"source_bytes,omitempty"`
	// RotatedFrom is the current log (host path) a rotated part of a file
	// source belongs to; Rotation its place among the parts, 1 for the
	// newest rotated one.
	RotatedFrom string `json:"rotated_from,omitempty"`
	Rotation    int    `json:"rotation,omitempty"`
	// Compression is "gzip" for a part decompressed in the worker;
	// InflatedBytes how many decompressed bytes it went through, and
	// InflateCapped that it stopped at the decompression cap (a gzip bomb,
	// or a part larger than the cap) before the part's end.
	Compression   string `json:"compression,omitempty"`
	InflatedBytes int64  `json:"inflated_bytes,omitempty"`
	InflateCapped bool   `json:"inflate_capped,omitempty"`
	// Oldest and Newest are the timestamps of the first and last entry
	// kept, as printed.
	Oldest          string  `json:"oldest,omitempty"`
	Newest          string  `json:"newest,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// Source statuses in sources.json.
const (
	JournalOK      = "ok"
	JournalEmpty   = "empty"
	JournalMissing = "missing"
	JournalSkipped = "skipped"
	JournalTimeout = "timeout"
	JournalError   = "error"
)
