package fleet

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Status is what became of one node.
type Status string

// A node's final status. Only ok and partial come with a bundle.
const (
	StatusOK            Status = "ok"                 // the bundle is complete and verified
	StatusPartial       Status = "partial"            // verified, but some collectors timed out or failed
	StatusUnschedulable Status = "unschedulable"      // the node refused the pod (resources, selector, admission)
	StatusImagePull     Status = "image-pull-failure" // the node could not get the image
	StatusTimeout       Status = "timeout"            // the per-node or global deadline passed first
	StatusNotReady      Status = "node-not-ready"     // the node is NotReady and never started the pod
	StatusFailed        Status = "failed"             // anything else: the reason says what
	StatusInterrupted   Status = "interrupted"        // the run was interrupted first
)

// HasBundle says whether a node with this status has its bundle saved.
func (s Status) HasBundle() bool { return s == StatusOK || s == StatusPartial }

// Phases of a node still in progress (NodeResult.Phase).
const (
	PhaseWaiting    = "waiting"    // for a free slot (--max-parallel)
	PhaseCreating   = "creating"   // the pod
	PhasePending    = "pending"    // the pod exists, not started yet
	PhaseCollecting = "collecting" // the collect container runs
	PhaseCopying    = "copying"    // the bundle streams back
	PhaseDone       = "done"
)

// NodeResult is one node's row of fleet.json.
type NodeResult struct {
	Node   string `json:"node"`
	Status Status `json:"status,omitempty"`
	// Reason says why, for every status but ok.
	Reason string `json:"reason,omitempty"`
	// Phase is where the node is while the run goes on.
	Phase string `json:"-"`
	Pod   string `json:"pod,omitempty"`
	// Bundle is the bundle's file name in the output directory; NodePath
	// its path on the node.
	Bundle string `json:"bundle,omitempty"`
	// Object is where the node's pod uploaded its bundle (fleet collect
	// --to), once the store holds it: s3://bucket/prefix/run/node.tar.gz,
	// its sha256 beside it (.sha256).
	Object   string `json:"object,omitempty"`
	NodePath string `json:"node_path,omitempty"`
	Size     int64  `json:"size,omitempty"`
	// SHA256 is the node's own checksum of the bundle, which the copy
	// matched.
	SHA256 string `json:"sha256,omitempty"`
	// Missing is what a partial bundle lacks and why (from collect).
	Missing   []string  `json:"missing,omitempty"`
	Started   time.Time `json:"started"`
	Durations Durations `json:"durations"`
}

// Durations of one node's steps, in seconds.
type Durations struct {
	// Total from the pod's creation to the end (copied or given up).
	Total float64 `json:"total"`
	// PodStart until the collect container ran (scheduling, image).
	PodStart float64 `json:"pod_start,omitempty"`
	// Collect is the collect container's run.
	Collect float64 `json:"collect,omitempty"`
	// Copy is the copy-back through the API, verification included.
	Copy float64 `json:"copy,omitempty"`
}

// Report is fleet.json: the run and every node's row.
type Report struct {
	Version   string `json:"version"`
	RunID     string `json:"run_id"`
	Context   string `json:"context,omitempty"`
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	// ServiceAccount the pods ran as: the run's own, named as the run and
	// allowed the run's nodes' kubelets alone (one per node, named as its
	// pod, with --kubelet-pprof), or deploy/kubernetes/rbac.yaml's
	// (rbac-pprof.yaml's) with --no-rbac.
	ServiceAccount string    `json:"service_account,omitempty"`
	Selection      string    `json:"selection"`
	Started        time.Time `json:"started"`
	Ended          time.Time `json:"ended"`
	// Interrupted is set when the run was stopped (Ctrl-C, SIGTERM).
	Interrupted bool         `json:"interrupted,omitempty"`
	Nodes       []NodeResult `json:"nodes"`
	// Counts per status.
	Counts map[Status]int `json:"counts"`
	// Leftovers are the objects the run created that are still in the
	// cluster (clean-up abandoned or failed): "kind namespace/name".
	Leftovers []string `json:"leftovers,omitempty"`
	// Swept are objects of earlier runs, past their expiry, that this
	// run removed before it started (their client had died).
	Swept []string `json:"swept,omitempty"`
	// APIRequests is the number of requests the run sent to the API
	// server through its client (a watch counts once; exec's streams,
	// each on a connection of its own, are not counted).
	APIRequests int64 `json:"api_requests,omitempty"`
	ExitStatus  int   `json:"exit_status"`
}

// Exit statuses of a fleet run.
const (
	ExitAllOK   = 0 // every node's bundle is complete
	ExitPartial = 3 // some nodes failed or are partial, at least one bundle
	ExitNone    = 1 // no bundle at all
)

// finish fills the counts and the exit status.
func (r *Report) finish() {
	r.Counts = map[Status]int{}
	bundles, ok := 0, 0
	for _, n := range r.Nodes {
		r.Counts[n.Status]++
		if n.Status.HasBundle() {
			bundles++
		}
		if n.Status == StatusOK {
			ok++
		}
	}
	switch {
	case len(r.Nodes) > 0 && ok == len(r.Nodes) && len(r.Leftovers) == 0 && !r.Interrupted:
		r.ExitStatus = ExitAllOK
	case bundles > 0:
		r.ExitStatus = ExitPartial
	default:
		r.ExitStatus = ExitNone
	}
}

// ReportFile is the report's name in the output directory.
const ReportFile = "fleet.json"

// writeReport writes fleet.json atomically.
func writeReport(dir string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", ReportFile, err)
	}
	return writeAtomic(dir, ReportFile, append(b, '\n'))
}

// writeAtomic writes data under a temporary name in dir, syncs it and
// renames it into place.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp) // nothing half-written is left
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// ReadReport reads a fleet.json.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s is not a fleet report: %w", path, err)
	}
	return &r, nil
}
