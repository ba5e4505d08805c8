package isolate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// One worker serves several items at once: how they share it.

type sleepRequest struct {
	S  string
	MS int
}

type sleepAnswer struct {
	S   string
	PID int
}

func init() {
	// Sleeps MS milliseconds, then answers S and the worker's pid.
	isolate.RegisterOp("test-sleep", isolate.Typed(func(rq sleepRequest) (any, error) {
		time.Sleep(time.Duration(rq.MS) * time.Millisecond)
		return sleepAnswer{S: rq.S, PID: os.Getpid()}, nil
	}))
}

// Items run at once in one worker, and each caller gets its own answer
// although they come back in the reverse order of the requests.
func TestPoolConcurrentItemsOneWorkerRoutedByID(t *testing.T) {
	p := isolate.NewPool(16, 10*time.Second)
	defer p.Close()
	const n = 16
	var wg sync.WaitGroup
	answers := make([]sleepAnswer, n)
	errs := make([]error, n)
	order := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The first sent sleeps longest.
			errs[i] = p.Do(context.Background(), "test-sleep", sleepRequest{S: "item" + strconv.Itoa(i), MS: 100 + 50*(n-i)}, &answers[i])
			order <- i
		}()
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	close(order)
	pids := map[int]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("item %d: %v", i, errs[i])
		}
		if want := "item" + strconv.Itoa(i); answers[i].S != want {
			t.Errorf("caller %d got %q, the answer of another item", i, answers[i].S)
		}
		pids[answers[i].PID] = true
	}
	if len(pids) != 1 || p.WorkersStarted() != 1 {
		t.Errorf("%d items were served by workers %v (%d started), want one worker serving them all at once", n, pids, p.WorkersStarted())
	}
	// Had the worker served one item at a time, the first would come
	// back first.
	if first := <-order; first == 0 {
		t.Errorf("the longest item answered first: items did not run at once")
	}
}

// A hung item holds one thread of its worker: the worker answers other
// items meanwhile, and the hang's evidence is the state of that thread.
func TestPoolHungItemDoesNotDelayOthers(t *testing.T) {
	p := isolate.NewPool(8, 10*time.Second)
	defer p.Close()
	ctx := context.Background()
	var pid int
	if err := p.Do(ctx, "test-pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	const hung = 3
	hungErrs := make(chan error, hung)
	for range hung {
		go func() { hungErrs <- p.DoTimeout(ctx, 2*time.Second, "test-block", nil, nil) }()
	}
	for i := range 20 {
		var a sleepAnswer
		if err := p.Do(ctx, "test-sleep", sleepRequest{S: strconv.Itoa(i)}, &a); err != nil || a.S != strconv.Itoa(i) {
			t.Fatalf("item %d beside hung ones: %+v, %v", i, a, err)
		}
		if a.PID != pid {
			t.Errorf("item %d served by pid %d, not the worker %d that holds the hung items", i, a.PID, pid)
		}
		select {
		case err := <-hungErrs:
			t.Fatalf("a hung item ended (%v) before the other items were served: they waited for it", err)
		default:
		}
	}
	tids := map[int]bool{}
	for range hung {
		var he *isolate.HungError
		if err := <-hungErrs; !errors.As(err, &he) {
			t.Fatalf("blocked item: %v, want a HungError", err)
		}
		h := he.Evidence
		if h.PID != pid || len(h.Tasks) != 1 || h.Blocked == nil || h.Blocked.TID != h.Tasks[0].TID {
			t.Fatalf("evidence %+v: want the one thread of worker %d serving the item", h, pid)
		}
		b := h.Blocked
		if !strings.Contains(b.Wchan+" "+strings.Join(b.Stack, " ")+" "+b.Syscall, "pause") && !strings.HasPrefix(b.Syscall, "34 ") {
			t.Errorf("thread %d: wchan %q syscall %q stack %q: not shown in pause()", b.TID, b.Wchan, b.Syscall, b.Stack)
		}
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(b.TID))); err != nil {
			t.Errorf("thread %d is not a thread of worker %d: %v", b.TID, pid, err)
		}
		tids[b.TID] = true
	}
	if len(tids) != hung {
		t.Errorf("%d hung items named threads %v: each runs on its own", hung, tids)
	}
	if !processExists(pid) || p.WorkersStarted() != 1 {
		t.Errorf("worker %d alive %v, %d started: hung items must not cost a worker", pid, processExists(pid), p.WorkersStarted())
	}
}

// A worker holding the bound of abandoned items takes no new ones, and is
// killed once the items it still runs for a caller have answered.
func TestPoolRetiresWorkerFullOfStuckItems(t *testing.T) {
	defer isolate.SetWorkerBoundsForTest(8, 2)()
	p := isolate.NewPool(8, 10*time.Second)
	defer p.Close()
	ctx := context.Background()
	var pid int
	if err := p.Do(ctx, "test-pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	var slowAnswer sleepAnswer
	go func() { slow <- p.Do(ctx, "test-sleep", sleepRequest{S: "slow", MS: 1500}, &slowAnswer) }()
	time.Sleep(100 * time.Millisecond) // the slow item goes to the first worker
	for range 2 {
		if err := p.DoTimeout(ctx, 200*time.Millisecond, "test-block", nil, nil); !isolate.IsTimeout(err) {
			t.Fatalf("blocked item: %v, want a timeout", err)
		}
	}
	var other int
	if err := p.Do(ctx, "test-pid", nil, &other); err != nil {
		t.Fatal(err)
	}
	if other == pid {
		t.Errorf("a worker holding 2 stuck items (the bound) took a new one")
	}
	if !processExists(pid) {
		t.Errorf("worker %d was killed while it still ran an item for a caller", pid)
	}
	if err := <-slow; err != nil || slowAnswer.S != "slow" || slowAnswer.PID != pid {
		t.Fatalf("the retiring worker's last item: %+v, %v", slowAnswer, err)
	}
	if !waitGone(pid, 5*time.Second) {
		t.Errorf("worker %d, retired, was not killed once its last item answered", pid)
	}
	if !processExists(other) {
		t.Errorf("the new worker %d was killed too", other)
	}
}

// Close kills every worker at once, including one whose threads are
// blocked on a real hung FUSE mount (those stay in the kernel until the
// mount is aborted; nothing else of the worker does), and callers still
// waiting get an error at once.
func TestPoolCloseKillsWorkersOnHungFUSE(t *testing.T) {
	testkit.RequireFUSE(t)
	f := testkit.HungFUSE(t, "", testkit.FUSEStartHung())
	mp := f.Mountpoint()
	p := isolate.NewPool(8, 500*time.Millisecond)
	var pid int
	if err := p.Do(context.Background(), "test-pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	const hung = 3
	for i := range hung {
		err := p.Do(context.Background(), isolate.OpStat, isolate.StatRequest{Path: mp}, nil)
		var he *isolate.HungError
		if !errors.As(err, &he) {
			t.Fatalf("stat %d of a hung FUSE mount: %v, want a HungError", i, err)
		}
		if b := he.Evidence.Blocked; b == nil || !strings.Contains(b.Wchan+" "+strings.Join(b.Stack, " "), "fuse") {
			t.Errorf("evidence does not show the thread waiting on FUSE: %+v", he.Evidence)
		}
	}
	waiting := make(chan error, 1)
	go func() { waiting <- p.DoTimeout(context.Background(), time.Minute, "test-block", nil, nil) }()
	time.Sleep(200 * time.Millisecond)
	p.Close()
	select {
	case err := <-waiting:
		if err == nil || isolate.IsTimeout(err) {
			t.Errorf("an item running at Close: %v, want an error that is not a hang", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("an item running at Close still waits 10 s later")
	}
	// SIGKILL ends every thread not stuck in the kernel: left, if
	// anything, are the ones whose FUSE request the daemon has read.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := liveNotD(pid)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %d: threads %v still run after Close", pid, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Do(context.Background(), "test-pid", nil, nil); err == nil {
		t.Errorf("a closed pool served an item")
	}
	if err := f.Close(); err != nil {
		t.Errorf("aborting the hung mount: %v", err)
	}
	if !waitGone(pid, 5*time.Second) {
		t.Errorf("worker %d outlived the abort of the hung mount", pid)
	}
}

// liveNotD lists the threads of pid that are neither in D state nor
// exited.
func liveNotD(pid int) []string {
	base := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(base, e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			continue
		}
		if st := s[i+2]; st != 'D' && st != 'Z' && st != 'X' {
			out = append(out, fmt.Sprintf("%s(%c)", e.Name(), st))
		}
	}
	return out
}

func waitGone(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !processExists(pid) {
			return true
		}
	}
	return false
}

// A worker that dies (the OOM killer's SIGKILL) while one of its threads
// is stuck uninterruptibly on a hung FUSE mount cannot be reaped, and the
// stuck thread keeps its pipes open: no end of file says it is gone. Items
// in flight must get an error, not wait for their whole deadline to be
// reported as hangs, and later items must go to a live worker.
func TestPoolWorkerDeadWithAThreadStuckInTheKernel(t *testing.T) {
	testkit.RequireFUSE(t)
	f := testkit.HungFUSE(t, "", testkit.FUSEStartHung())
	p := isolate.NewPool(8, 2*time.Second)
	defer p.Close()
	ctx := context.Background()
	var pid int
	if err := p.Do(ctx, "test-pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	// A thread of the worker stuck on the hung mount.
	if err := p.DoTimeout(ctx, 300*time.Millisecond, isolate.OpStat, isolate.StatRequest{Path: f.Mountpoint()}, nil); !isolate.IsTimeout(err) {
		t.Fatalf("stat of a hung FUSE mount: %v, want a timeout", err)
	}
	slow := make(chan error, 1)
	go func() { slow <- p.Do(ctx, "test-sleep", sleepRequest{MS: 1500}, nil) }()
	time.Sleep(200 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-slow; err == nil || isolate.IsTimeout(err) {
		t.Errorf("an item running when its worker was killed: %v, want an error that is not a hang", err)
	}
	var other int
	if err := p.Do(ctx, "test-pid", nil, &other); err != nil || other == pid {
		t.Errorf("an item after its worker was killed: pid %d (the dead worker is %d), %v", other, pid, err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("aborting the hung mount: %v", err)
	}
	if !waitGone(pid, 5*time.Second) {
		t.Errorf("worker %d outlived the abort of the hung mount", pid)
	}
}
