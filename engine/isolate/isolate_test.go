package isolate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == isolate.ModeWorker {
		os.Exit(isolate.WorkerMain())
	}
	os.Exit(m.Run())
}

func init() {
	// An op that never answers, as a stat of a hung mount would not: the
	// thread sits in a system call (pause), where the kernel names it.
	isolate.RegisterOp("test-block", func(json.RawMessage) (any, error) {
		for {
			_ = unix.Pause()
		}
	})
	isolate.RegisterOp("test-echo", func(raw json.RawMessage) (any, error) {
		var s string
		err := json.Unmarshal(raw, &s)
		return "echo:" + s, err
	})
	isolate.RegisterOp("test-panic", func(json.RawMessage) (any, error) {
		panic("op exploded")
	})
	isolate.RegisterOp("test-pid", func(json.RawMessage) (any, error) {
		return os.Getpid(), nil
	})
}

func TestPoolServesAndSurvivesHungItems(t *testing.T) {
	p := isolate.NewPool(2, 500*time.Millisecond)
	defer p.Close()
	ctx := context.Background()

	var first int
	if err := p.Do(ctx, "test-pid", nil, &first); err != nil {
		t.Fatal(err)
	}
	var again int
	if err := p.Do(ctx, "test-pid", nil, &again); err != nil {
		t.Fatal(err)
	}
	if first != again {
		t.Errorf("an idle worker was not reused: pid %d then %d", first, again)
	}

	start := time.Now()
	err := p.Do(ctx, "test-block", nil, nil)
	var he *isolate.HungError
	if !errors.As(err, &he) || !isolate.IsTimeout(err) {
		t.Fatalf("blocked op returned %v, want a HungError", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("hung op took %s to be abandoned", el)
	}
	if he.Evidence == nil || he.Evidence.Blocked == nil || !strings.Contains(he.Evidence.Blocked.Wchan+strings.Join(he.Evidence.Blocked.Stack, " "), "pause") {
		t.Errorf("evidence does not show the worker blocked in pause(): %+v", he.Evidence)
	}
	if he.Evidence.PID != first || !processExists(first) {
		t.Errorf("hung item's evidence names pid %d; want worker %d, alive: one hung item does not cost a worker", he.Evidence.PID, first)
	}

	var s string
	if err := p.Do(ctx, "test-echo", "x", &s); err != nil || s != "echo:x" {
		t.Fatalf("pool did not serve after a hung item: %q %v", s, err)
	}
	if err := p.Do(ctx, "test-pid", nil, &again); err != nil || again != first {
		t.Errorf("after a hung item, served by pid %d (%v), want the same worker %d", again, err, first)
	}
	if n := p.WorkersStarted(); n != 1 {
		t.Errorf("%d workers started, want 1", n)
	}
}

func TestPoolReportsFailuresWithoutHanging(t *testing.T) {
	p := isolate.NewPool(1, 2*time.Second)
	defer p.Close()
	ctx := context.Background()
	err := p.Do(ctx, isolate.OpStat, isolate.StatRequest{Path: "/nonexistent/nodesnap"}, nil)
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("stat of a missing path: %v, want ENOENT", err)
	}
	err = p.Do(ctx, "test-panic", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "op exploded") {
		t.Errorf("panicking op: %v", err)
	}
	err = p.Do(ctx, "no-such-op", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "unknown operation") {
		t.Errorf("unknown op: %v", err)
	}
	var st isolate.StatResult
	if err := p.Do(ctx, isolate.OpStat, isolate.StatRequest{Path: "/", Follow: true}, &st); err != nil || st.Mode&syscall.S_IFDIR == 0 {
		t.Errorf("stat /: %+v %v", st, err)
	}
}

func TestPoolManyConcurrentHangs(t *testing.T) {
	p := isolate.NewPool(8, 300*time.Millisecond)
	defer p.Close()
	ctx := context.Background()
	errs := make(chan error, 40)
	start := time.Now()
	for i := 0; i < 40; i++ {
		op := "test-echo"
		if i%4 == 0 {
			op = "test-block"
		}
		go func() { errs <- p.Do(ctx, op, "y", nil) }()
	}
	hung := 0
	for i := 0; i < 40; i++ {
		if isolate.IsTimeout(<-errs) {
			hung++
		}
	}
	if hung != 10 {
		t.Errorf("%d items reported hung, want 10", hung)
	}
	t.Logf("40 items, 10 hung, pool of 8, 300ms deadline: %s", time.Since(start))
}

func TestRunKillsAHungCommand(t *testing.T) {
	var out bytes.Buffer
	start := time.Now()
	// The shell's child keeps the output pipe open: the whole process
	// group must die, and Wait must not wait for the pipe.
	res, err := isolate.Run(context.Background(), 500*time.Millisecond, isolate.Spec{Path: "/bin/sh", Args: []string{"-c", "echo started; sleep 60; echo never"}, Stdout: &out})
	if !isolate.IsTimeout(err) || !res.TimedOut {
		t.Fatalf("Run: %+v %v, want a timeout", res, err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Run took %s", el)
	}
	if !strings.Contains(out.String(), "started") || strings.Contains(out.String(), "never") {
		t.Errorf("output %q", out.String())
	}
	if res.Evidence == nil || res.Evidence.Blocked == nil {
		t.Errorf("no evidence for the hung command: %+v", res.Evidence)
	}
}

func TestRunMissingProgramAndExitCode(t *testing.T) {
	_, err := isolate.Run(context.Background(), time.Second, isolate.Spec{Path: "nodesnap-no-such-program"})
	if !errors.Is(err, isolate.ErrNotFound) {
		t.Errorf("missing program: %v", err)
	}
	res, err := isolate.Run(context.Background(), 5*time.Second, isolate.Spec{Path: "/bin/sh", Args: []string{"-c", "exit 4"}})
	if err != nil || res.ExitCode != 4 {
		t.Errorf("exit 4: %+v %v", res, err)
	}
}

func processExists(pid int) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// A zombie is dead for our purposes.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestHeadBufferKeepsTheHead(t *testing.T) {
	h := &isolate.HeadBuffer{Max: 10}
	for _, w := range []string{"panic: ", "boom\n", "goroutine 1 [running]:\n"} {
		if n, err := h.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v: writes must always succeed", w, n, err)
		}
	}
	if got := h.String(); got != "panic: boo" {
		t.Errorf("kept %q, want the first 10 bytes", got)
	}
}

// A caller that gives up (an interrupted run) is not a hang: no
// HungError, no evidence, and the error says the context ended.
func TestPoolCancelledIsNotAHang(t *testing.T) {
	p := isolate.NewPool(1, 10*time.Second)
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	err := p.Do(ctx, "test-block", nil, nil)
	var he *isolate.HungError
	if errors.As(err, &he) || isolate.IsTimeout(err) {
		t.Fatalf("a cancelled item was recorded as hung: %v", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not say the context was cancelled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled item returned after %v", d)
	}
	// The pool still serves, from the same worker.
	var out string
	if err := p.Do(context.Background(), "test-echo", "hi", &out); err != nil || out != "echo:hi" {
		t.Errorf("after a cancelled item: %q, %v", out, err)
	}
	if n := p.WorkersStarted(); n != 1 {
		t.Errorf("%d workers started: a cancelled item cost its worker", n)
	}
}
