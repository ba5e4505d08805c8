package isolate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/engine/isolate"
)

type spinRequest struct{ MS int }

func init() {
	// Spins on a CPU for MS milliseconds (forever when MS is 0): a thread
	// in state R, as a worker on a loaded node is while it waits for a
	// CPU, not for a file system.
	isolate.RegisterOp("test-spin", isolate.Typed(func(rq spinRequest) (any, error) {
		end := time.Now().Add(time.Duration(rq.MS) * time.Millisecond)
		n := 0
		for rq.MS == 0 || time.Now().Before(end) {
			n++
		}
		return n, nil
	}))
}

// TestRunningItemIsSlowNotHung: an item whose thread is running when its
// deadline passes gets up to two more deadlines; one that sleeps in a
// system call (as a stat of a hung mount does) gets none; and one that
// runs on past three deadlines is cut there. The deadline an error states
// is the whole time waited.
func TestRunningItemIsSlowNotHung(t *testing.T) {
	const d = 300 * time.Millisecond
	p := isolate.NewPool(3, d)
	defer p.Close()
	// A first item, so the worker has started before any deadline runs.
	if err := p.Do(context.Background(), "test-echo", "x", nil); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := p.Do(context.Background(), "test-spin", spinRequest{MS: 450}, &n); err != nil {
		t.Errorf("an item running 450 ms under a 300 ms deadline, on a CPU all along: %v", err)
	}
	var he *isolate.HungError
	err := p.Do(context.Background(), "test-block", nil, nil)
	if !errors.As(err, &he) {
		t.Fatalf("a blocked item: %v, want a HungError", err)
	}
	if he.Timeout != d {
		t.Errorf("a blocked item was given %s, want its deadline alone (%s): %v", he.Timeout, d, err)
	}
	err = p.Do(context.Background(), "test-spin", spinRequest{MS: 0}, nil)
	if !errors.As(err, &he) {
		t.Fatalf("an item spinning forever: %v, want a HungError", err)
	}
	if he.Timeout != 3*d {
		t.Errorf("an item spinning forever was given %s, want three deadlines (%s): %v", he.Timeout, 3*d, err)
	}
}
