package collectors_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
)

// A collector that is listed says what it needs from the node: Register
// refuses a visible spec without Requires (a programming error, at init).
func TestRegisterWantsRequires(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Register accepted a listed collector without Requires")
		}
		if _, ok := collectors.Lookup("test-no-requires"); ok {
			t.Error("the refused collector is registered")
		}
	}()
	collectors.Register(collectors.Spec{Name: "test-no-requires", DefaultTimeout: time.Second,
		Run: func(context.Context, *collectors.Env) error { return nil }})
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
			t.Errorf("collector %s does not run after %s (After %v)", name, collectors.MountprobeName, s.After)
		}
	}
}
