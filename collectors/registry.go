// Package collectors holds nodesnap's collectors and the small framework
// they run in.
//
// A collector is its own package under collectors/ that registers a Spec
// from init(), plus one line in collectors/all; the Spec says everything
// the command layer needs (its flags and their completions, what it needs
// from the node, a preparation step). CONTRIBUTING.md has an example.
//
// The supervisor runs each enabled collector in its own child process
// (this binary in a hidden mode) under a deadline; inside that child the
// collector gets an Env, through which every byte it writes is redacted,
// capped and accounted for, and through which it reaches the isolation
// layer for risky per-item work. A collector only gathers.
package collectors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// Spec describes one collector.
type Spec struct {
	// Name is the collector's stable identifier: flag values, bundle
	// directory, manifest key.
	Name string
	// Description says in one line what it gathers.
	Description string
	// DefaultEnabled collectors run unless skipped.
	DefaultEnabled bool
	// DefaultTimeout is the collector's own deadline.
	DefaultTimeout time.Duration
	// After names collectors whose results this one uses: it starts after
	// them when they are part of the run. After "mountprobe" is what makes
	// Env.Host() skip the mounts it found hung: a collector that checks
	// the hung set without declaring it fails loudly in tests.
	After []string
	// Requires says in one line what the collector needs from the node to
	// gather everything it can: root, a credential, a socket. Without it
	// the collector still runs and its status says what was missing.
	// `nodesnap collectors` and the reference print it; Register refuses
	// a spec without it.
	Requires string
	// Prepare, if not nil, runs in the supervisor before anything else of
	// the run when the collector is part of it, before the process opens
	// descriptors of its own: for what only that process can read (a
	// token on an inherited descriptor). It must not block on the host.
	Prepare func(ctx context.Context)
	// Options, if not nil, is a pointer to the collector's options struct.
	// Flags fills it in the supervisor; it reaches the child as JSON.
	Options any
	// Flags registers the collector's own command-line flags.
	Flags func(fs *pflag.FlagSet)
	// Completions lists, per flag of Flags, the values a shell completes.
	Completions map[string][]string
	// Run gathers. It returns nil (ok, or partial if the Env was told of
	// anything missed), an error wrapping ErrUnsupported when the thing it
	// collects is absent on this node, or another error.
	Run func(ctx context.Context, env *Env) error
	// Files says what the collector writes into its directory of the
	// bundle, one entry per file or family of files, in the order a
	// reader meets them. docs/bundle.md's table of what each collector
	// writes is generated from it (a test in cmd/nodesnap keeps the page
	// current); Register refuses a listed collector without it.
	Files []FileDoc
	// Hidden collectors are left out of listings (test fixtures).
	Hidden bool
	// PrestartWorker starts the collector's first isolated worker as
	// its process starts, so that the worker's start overlaps what the
	// collector does before its first item (a scan of /proc): for
	// collectors that always use a worker.
	PrestartWorker bool
}

// FileDoc describes one file, or one family of files, a collector writes.
type FileDoc struct {
	// Name is the path inside the collector's directory ("summary.json");
	// a family is written with its variable parts in angle brackets
	// ("podlogs/<namespace>_<pod>/<container>/<restart>.log") or a
	// trailing "/" for a directory of files read as they are.
	Name string
	// Holds says what it holds, for someone reading the bundle.
	Holds string
}

// ErrUnsupported marks a collector whose subject is absent on this node
// (no journald, no containerd...). Its status is "unsupported", not an error.
var ErrUnsupported = errors.New("not present on this node")

var (
	regMu    sync.Mutex
	registry = map[string]*Spec{}
)

// Register adds a collector. It panics on a programming error (duplicate or
// incomplete spec), at init time, never on user input.
func Register(s Spec) {
	regMu.Lock()
	defer regMu.Unlock()
	if s.Name == "" || s.Run == nil || s.DefaultTimeout <= 0 || (!s.Hidden && (s.Requires == "" || len(s.Files) == 0)) {
		panic(fmt.Sprintf("collectors: incomplete spec %q", s.Name))
	}
	if _, dup := registry[s.Name]; dup {
		panic("collectors: registered twice: " + s.Name)
	}
	registry[s.Name] = &s
}

// All returns every registered collector in name order.
func All() []*Spec {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]*Spec, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds a collector by name.
func Lookup(name string) (*Spec, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	s, ok := registry[name]
	return s, ok
}

// knowsHung reports whether a collector runs after the one that finds hung
// mounts, so that the hung set it is given is complete.
func (s *Spec) knowsHung() bool {
	return s.Name == MountprobeName || slices.Contains(s.After, MountprobeName)
}

// MountprobeName is the collector that finds hung mounts.
const MountprobeName = "mountprobe"
