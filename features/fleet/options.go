// Package fleet collects nodesnap bundles from many nodes of a Kubernetes
// cluster through its API: a pod per node (package podspec's, the same as
// deploy/kubernetes), each bundle copied back through exec streaming and
// verified against the sha256 the node computed, a row and a reason per
// node, and everything the run created removed at its end.
package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Defaults of Options.
const (
	DefaultMaxParallel   = 10
	DefaultTimeout       = 30 * time.Minute
	DefaultNodeTimeout   = 5 * time.Minute
	DefaultNotReadyGrace = 30 * time.Second
	// cleanupTimeout bounds the clean-up at the end of a run.
	cleanupTimeout = 2 * time.Minute
)

// Options of a fleet run.
type Options struct {
	Client Client
	// PodIO reads logs and streams exec output (NewPodIO for a real cluster).
	PodIO PodIO
	// Context names the kubeconfig context, for the report.
	Context string
	// Which nodes: Names, or a label Selector, or All.
	Names    []string
	Selector string
	All      bool

	Namespace string
	Image     string
	// NoRBAC uses the nodesnap ServiceAccount of deploy/kubernetes/rbac.yaml
	// in Namespace, which must exist, instead of creating one for the run.
	NoRBAC bool
	// Pprof asks each node's kubelet for its pprof dumps: the node's role
	// then also has get on nodes/proxy for that node, which allows exec
	// into its pods (with NoRBAC: rbac-pprof.yaml's ServiceAccount).
	Pprof bool

	MaxParallel int
	// Timeout is the whole run's deadline; NodeTimeout one node's, from its
	// pod's creation to its bundle saved.
	Timeout, NodeTimeout time.Duration
	// CollectTimeout is collect's own --timeout in the pods (default 2m).
	CollectTimeout time.Duration
	// NotReadyGrace: a pod that no kubelet takes on within it, on a node
	// that is NotReady, is given up (node-not-ready).
	NotReadyGrace time.Duration

	// OutputDir receives one bundle per node and fleet.json (with Store,
	// fleet.json alone).
	OutputDir string
	// Store, when set, is where each node's pod uploads its bundle itself
	// (fleet collect --to): nothing is copied through exec.
	Store   Store
	Version string

	// Progress, when set, is called whenever a node's row changes.
	Progress func(NodeResult)
	// Abandon, closed, stops the clean-up (a second Ctrl-C): what is left
	// is listed in the report.
	Abandon <-chan struct{}

	// Test hooks. TransitHook wraps the stream of a node's bundle between
	// the API and the file (to corrupt it); PodHook edits a node's pod
	// before it is created.
	TransitHook func(node string, w io.Writer) io.Writer
	PodHook     func(node string, pod *corev1.Pod)
}

// ErrNoNodes: the selection matched no node.
var ErrNoNodes = errors.New("no node to collect")

// UsageError is a mistake in the options (exit status 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func (o *Options) defaults() error {
	n := 0
	if len(o.Names) > 0 {
		n++
	}
	if o.Selector != "" {
		n++
	}
	if o.All {
		n++
	}
	if n != 1 {
		return &UsageError{"name the nodes (NODE...), or select them with -l SELECTOR, or use --all: exactly one of the three"}
	}
	if o.Image == "" {
		return &UsageError{"no image: --image names nodesnap's image"}
	}
	if o.OutputDir == "" {
		return &UsageError{"no output directory"}
	}
	o.Namespace = cmp.Or(o.Namespace, "nodesnap")
	o.MaxParallel = cmp.Or(o.MaxParallel, DefaultMaxParallel)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.NodeTimeout = cmp.Or(o.NodeTimeout, DefaultNodeTimeout)
	o.NotReadyGrace = cmp.Or(o.NotReadyGrace, DefaultNotReadyGrace)
	o.CollectTimeout = cmp.Or(o.CollectTimeout, 2*time.Minute)
	switch {
	case o.MaxParallel < 0:
		return &UsageError{"--max-parallel must be positive"}
	case o.Timeout < 0 || o.NodeTimeout < 0 || o.CollectTimeout < 0 || o.NotReadyGrace < 0:
		return &UsageError{"deadlines must be positive"}
	}
	if o.Client == nil || o.PodIO == nil {
		return fmt.Errorf("fleet: no Kubernetes client")
	}
	return nil
}

// ctxAbandon is a context cancelled when abandon closes or parent ends.
func ctxAbandon(parent context.Context, abandon <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	if abandon != nil {
		go func() {
			select {
			case <-abandon:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, cancel
}
