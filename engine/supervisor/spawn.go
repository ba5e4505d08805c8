package supervisor

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// spawned is a collector child that has been started and told its
// prelude (collectors.ChildPrelude), waiting for its configuration.
type spawned struct {
	child  *isolate.Child
	stdin  *os.File
	stderr *isolate.HeadBuffer
}

// spawn starts the child of collector s and sends it its prelude, so that
// it starts its first worker at once.
func spawn(s *collectors.Spec, common collectors.Common) (*spawned, error) {
	pre, err := json.Marshal(collectors.PreludeOf(s.Name, common))
	if err != nil {
		return nil, fmt.Errorf("encoding its prelude: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating a pipe for a child: %w", err)
	}
	stderr := &isolate.HeadBuffer{Max: 16 << 10}
	child, err := isolate.Start(isolate.Spec{Args: []string{isolate.ModeCollector, s.Name}, Stdin: r, Stderr: stderr, Events: true})
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	// A few hundred bytes: the pipe holds them whether or not the child
	// reads yet. A child already gone makes this fail, and its exit is
	// reported when it is given its configuration.
	_, _ = w.Write(append(pre, '\n'))
	return &spawned{child: child, stdin: w, stderr: stderr}, nil
}

// configure sends the child its configuration and closes its stdin. In the
// background: a child that does not read must never stop the supervisor,
// whose deadline for it runs from now.
func (sp *spawned) configure(cfg []byte) {
	go func() {
		_, _ = sp.stdin.Write(cfg)
		sp.stdin.Close()
	}()
}

// discard kills a child that was never given its configuration.
func (sp *spawned) discard() {
	sp.stdin.Close()
	sp.child.KillWithin(false, time.Second)
	sp.child.Events.Close()
}

// Prestarted holds the children started before the run was ready for
// them: their process starts (each with its first worker) overlap the
// opening of the output directory instead of following it. Run discards
// what it did not use; a caller that never calls Run calls Discard.
type Prestarted struct {
	mu sync.Mutex
	m  map[string]*spawned
}

// Prestart starts, for a run with opts (checked with Validate), the
// children of the collectors it will start first. Give the result to Run
// in Options.Prestarted.
func Prestart(opts Options) *Prestarted {
	specs, err := Select(opts.Only, opts.Skip)
	if err != nil {
		return nil
	}
	return prestartSpecs(specs, opts.Common, opts.Concurrency)
}

// prestartSpecs starts the children of the first collectors the run will start
// at once: those waiting for no other selected collector, up to the
// concurrency limit.
func prestartSpecs(specs []*collectors.Spec, common collectors.Common, limit int) *Prestarted {
	p := &Prestarted{m: map[string]*spawned{}}
	selected := map[string]bool{}
	for _, s := range specs {
		selected[s.Name] = true
	}
	for _, s := range specs {
		if len(p.m) >= limit {
			break
		}
		waits := false
		for _, dep := range s.After {
			waits = waits || selected[dep]
		}
		if waits {
			continue
		}
		// A child that cannot be started now is started (or its error
		// reported) when its turn comes.
		if sp, err := spawn(s, common); err == nil {
			p.m[s.Name] = sp
		}
	}
	return p
}

// add keeps a child started ahead of its collector's turn.
func (p *Prestarted) add(name string, sp *spawned) {
	p.mu.Lock()
	_, had := p.m[name]
	if !had {
		p.m[name] = sp
	}
	p.mu.Unlock()
	if had {
		sp.discard()
	}
}

// take returns the child Prestarted for the named collector, or nil.
func (p *Prestarted) take(name string) *spawned {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sp := p.m[name]
	delete(p.m, name)
	return sp
}

// Discard kills every child not taken. It may be called more than once.
func (p *Prestarted) Discard() {
	if p == nil {
		return
	}
	p.mu.Lock()
	left := p.m
	p.m = map[string]*spawned{}
	p.mu.Unlock()
	for _, sp := range left {
		sp.discard()
	}
}
