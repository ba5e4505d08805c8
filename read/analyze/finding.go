package analyze

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Severity ranks a finding. Warning and above make `nodesnap analyze`
// exit non-zero.
type Severity int

// Severities, lowest first.
const (
	Info Severity = iota
	Warning
	Critical
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalJSON writes the severity's name.
func (s Severity) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a severity's name.
func (s *Severity) UnmarshalJSON(b []byte) error {
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	for _, c := range []Severity{Info, Warning, Critical} {
		if c.String() == v {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", v)
}

// Finding is one cause found in a bundle, with the evidence joined from
// every collector that saw it.
type Finding struct {
	// ID names the kind of finding: stable, kebab-case, documented in
	// Rules.
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	// Subject is what this finding is about (a device, a mountpoint, a
	// volume): two findings with one ID differ by subject.
	Subject string `json:"subject,omitempty"`
	// Summary is one line; Explanation says what it means and why.
	Summary     string `json:"summary"`
	Explanation string `json:"explanation"`
	// Evidence points into the bundle: files with the exact lines or
	// records that show it.
	Evidence []Evidence `json:"evidence"`
	// Remediation lists what an operator runs or changes, in order.
	Remediation []string `json:"remediation"`
	// Impact is what the finding hurts, for ranking: "kubelet-sync-loop"
	// (every pod the kubelet should start or stop waits), "pod-volumes"
	// (named pods' volumes), or empty.
	Impact string `json:"impact,omitempty"`
	// Pods are the pods (as the API names them) this finding hurts, and
	// how; only with the cluster collector's view.
	Pods []PodImpact `json:"pods,omitempty"`
	// Members are the findings a grouped finding stands for (one cause,
	// many mounts): each one's subject, summary and fix.
	Members []GroupMember `json:"members,omitempty"`
}

// GroupMember is one finding folded into a grouped one.
type GroupMember struct {
	Subject     string   `json:"subject"`
	Summary     string   `json:"summary"`
	Remediation []string `json:"remediation"`
}

// PodImpact is one pod a finding hurts.
type PodImpact struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	// How says in words what the finding does to the pod.
	How string `json:"how"`
}

// Evidence is one bundle file and what in it shows the finding.
type Evidence struct {
	// Path is the file's path in the bundle.
	Path string `json:"path"`
	// What says in words what this piece of evidence shows.
	What string `json:"what,omitempty"`
	// Lines are lines of a text file, with their line numbers.
	Lines []Line `json:"lines,omitempty"`
	// Record is a JSON record from the file (trimmed to what matters).
	Record any `json:"record,omitempty"`
	// More counts further matching lines or records not listed.
	More int `json:"more,omitempty"`
}

// Line is one line of a bundle file.
type Line struct {
	// N is the 1-based line number.
	N    int    `json:"n"`
	Text string `json:"text"`
	// Decoded is command output that the line carried as a byte array
	// (`output: [114 98 100 ...]`), as text.
	Decoded string `json:"decoded,omitempty"`
	// Truncated is set when the line was longer than what is kept.
	Truncated bool `json:"truncated,omitempty"`
}

// Report is the result of analysing one bundle.
type Report struct {
	// Bundle is the file analysed.
	Bundle      string    `json:"bundle"`
	Hostname    string    `json:"hostname"`
	Kernel      string    `json:"kernel,omitempty"`
	CollectedAt time.Time `json:"collected_at"`
	ToolVersion string    `json:"tool_version"`
	// BundleStatus is the manifest's status (complete or partial).
	BundleStatus string `json:"bundle_status"`
	// KubeletVersion is the running kubelet's version ("v1.34.4") and
	// KubeletVersionFrom where the bundle says so; empty when unknown.
	// Findings whose mechanism depends on it say which they assumed.
	KubeletVersion     string `json:"kubelet_version,omitempty"`
	KubeletVersionFrom string `json:"kubelet_version_from,omitempty"`
	// Counts are the findings per severity.
	Counts   map[string]int `json:"counts"`
	Findings []Finding      `json:"findings"`
	// Signatures counts the log lines of each signature of analyze's
	// catalogue (kubelet, runtime and kernel logs; `nodesnap diff`
	// compares them).
	Signatures map[string]int `json:"signatures,omitempty"`
	// FilesRead counts the bundle's entries; BytesRead their bytes.
	FilesRead int   `json:"files_read"`
	BytesRead int64 `json:"bytes_read"`
	// Pods are the pods bound to the node per the API (cluster
	// collector), each with its symptom and the chain that explains it,
	// or what is missing to explain it.
	Pods []PodReport `json:"pods,omitempty"`
	// ClusterView: the bundle has the API's view (cluster/objects.json).
	ClusterView bool `json:"cluster_view,omitempty"`
	// Facts are set only by an analysis with Options.Facts.
	Facts *Facts `json:"facts,omitempty"`
}

// Worst returns the highest severity among the findings, and false when
// there are none.
func (r *Report) Worst() (Severity, bool) {
	if len(r.Findings) == 0 {
		return Info, false
	}
	w := Info
	for _, f := range r.Findings {
		if f.Severity > w {
			w = f.Severity
		}
	}
	return w, true
}

// AtLeast reports whether any finding has severity s or higher.
func (r *Report) AtLeast(s Severity) bool {
	w, ok := r.Worst()
	return ok && w >= s
}

// Impacts of a finding, most harmful first.
const (
	ImpactSyncLoop   = "kubelet-sync-loop"
	ImpactPodVolumes = "pod-volumes"
)

func impactRank(s string) int {
	switch s {
	case ImpactSyncLoop:
		return 0
	case ImpactPodVolumes:
		return 1
	}
	return 2
}

// sortFindings orders findings by severity (worst first), then by what
// they hurt (the kubelet's sync loop, then pods' volumes, then the rest;
// more pods first), then ID and subject, so the output is stable.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Severity != b.Severity {
			return a.Severity > b.Severity
		}
		if ia, ib := impactRank(a.Impact), impactRank(b.Impact); ia != ib {
			return ia < ib
		}
		if len(a.Pods) != len(b.Pods) {
			return len(a.Pods) > len(b.Pods)
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Subject < b.Subject
	})
}

// plural returns "1 thing" or "n things".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// listOf joins up to max items, adding "and N more".
func listOf(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:max], ", ") + fmt.Sprintf(" and %d more", len(items)-max)
}
