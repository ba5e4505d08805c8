package collectors_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
)

// A declared need orders the collector after the one it needs.
func TestNeedsBecomeAfter(t *testing.T) {
	collectors.Register(collectors.Spec{Name: "test-needs", Hidden: true, DefaultTimeout: time.Second,
		After: []string{"host"}, Needs: []string{collectors.MountprobeName},
		Run: func(context.Context, *collectors.Env) error { return nil }})
	s, ok := collectors.Lookup("test-needs")
	if !ok {
		t.Fatal("not registered")
	}
	if !slices.Contains(s.After, "host") || !slices.Contains(s.After, collectors.MountprobeName) {
		t.Errorf("After = %v, want host and %s", s.After, collectors.MountprobeName)
	}
}

// Every collector that reads the host's files under possibly hung mounts
// declares that it needs mountprobe's findings.
func TestHostReadersNeedMountprobe(t *testing.T) {
	for _, name := range []string{"csi", "dirshape", "host", "journal", "kubelet", "nodeconfig", "runtime"} {
		s, ok := collectors.Lookup(name)
		if !ok {
			t.Errorf("collector %s is not registered", name)
			continue
		}
		if !slices.Contains(s.After, collectors.MountprobeName) {
			t.Errorf("collector %s does not run after %s (After %v, Needs %v)", name, collectors.MountprobeName, s.After, s.Needs)
		}
	}
}
