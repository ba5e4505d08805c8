package hostfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// fakeRunner runs the mountinfo ops in this process, through the wire
// encoding, and counts the requests; hangBatch makes every batch request
// miss its deadline, budget overrides the batch's byte budget.
type fakeRunner struct {
	mu        sync.Mutex
	batches   []int // tables asked for, per batch request
	singles   []string
	hangBatch bool
	budget    int64
	// failOne makes the first table of the first batch fail to read (its
	// task exited between the batch's making and its reading).
	failOne bool
}

func (r *fakeRunner) run(ctx context.Context, _ time.Duration, op, target string, req, resp any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var out any
	var err error
	switch op {
	case OpMountinfos:
		rq := req.(MountinfosRequest)
		r.mu.Lock()
		r.batches = append(r.batches, len(rq.Paths))
		r.mu.Unlock()
		if r.hangBatch {
			return &isolate.HungError{Op: op, Timeout: time.Second}
		}
		if r.budget > 0 {
			rq.Budget = r.budget
		}
		if r.failOne && len(r.batches) == 1 {
			rq.Paths = append([]string{"/proc/nonexistent/mountinfo"}, rq.Paths[1:]...)
		}
		out, err = mountinfosOp(rq)
	case isolate.OpReadFile:
		rq := req.(isolate.ReadFileRequest)
		r.mu.Lock()
		r.singles = append(r.singles, rq.Path)
		r.mu.Unlock()
		out, err = isolate.ReadFileLimited(rq.Path, rq.Max)
	default:
		return fmt.Errorf("unexpected op %s", op)
	}
	if err != nil {
		return &isolate.OpError{Op: op, Msg: err.Error()}
	}
	raw, err := isolate.MarshalWire(out)
	if err != nil {
		return err
	}
	return isolate.UnmarshalWire(raw, resp)
}

func TestTaskMountinfos(t *testing.T) {
	self := Task{PID: os.Getpid(), TID: os.Getpid()}
	gone := Task{PID: 1 << 30, TID: 1 << 30}
	for _, tc := range []struct {
		name      string
		n         int
		parallel  int
		hangBatch bool
		budget    int64
		goneFirst bool // every namespace's first task has exited
		failOne   bool
		// wantBatches is the number of batch requests, wantSingles of
		// reads of one table.
		wantBatches, wantSingles int
	}{
		{"one batch per worker", 10, 2, false, 0, false, false, 2, 0},
		{"batches of at most 64", 200, 2, false, 0, false, false, 4, 0},
		{"a batch that hangs: each table alone", 10, 1, true, 0, false, false, 1, 10},
		{"an answer held to its budget: asked again", 6, 1, false, 1, false, false, 6, 0},
		{"a task gone before the batch: the next one in it", 5, 1, false, 0, true, false, 1, 0},
		{"a task gone during the batch: read again alone", 5, 1, false, 0, false, true, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := &fakeRunner{hangBatch: tc.hangBatch, budget: tc.budget, failOne: tc.failOne}
			f := New(Config{Roots: Roots{Proc: "/proc"}, Run: fr.run})
			nss := make([][]Task, tc.n)
			for i := range nss {
				nss[i] = []Task{self}
				if tc.goneFirst {
					nss[i] = []Task{gone, self}
				}
			}
			var mu sync.Mutex
			got := map[int]MountinfoResult{}
			calls := 0
			f.TaskMountinfos(context.Background(), nss, 0, tc.parallel, func(i int, r MountinfoResult) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				got[i] = r
			})
			if calls != tc.n || len(got) != tc.n {
				t.Fatalf("%d calls for %d namespaces, want one each", calls, len(got))
			}
			for i, r := range got {
				if r.Err != nil {
					t.Fatalf("namespace %d: %v", i, r.Err)
				}
				if ms, bad := procfs.ParseMountInfo(r.Data); len(ms) == 0 || len(bad) > 0 || r.From != self || r.Root != "" {
					t.Errorf("namespace %d: %d mounts, %d bad lines, from %+v root %q", i, len(ms), len(bad), r.From, r.Root)
				}
			}
			if len(fr.batches) != tc.wantBatches || len(fr.singles) != tc.wantSingles {
				t.Errorf("%d batch requests %v and %d single reads, want %d and %d", len(fr.batches), fr.batches, len(fr.singles), tc.wantBatches, tc.wantSingles)
			}
			for _, n := range fr.batches {
				if n > mountinfoBatch {
					t.Errorf("a batch of %d tables", n)
				}
			}
		})
	}
}

// A namespace none of whose tasks is left is reported with the error; one
// the context ended before is not reported at all.
func TestTaskMountinfosErrors(t *testing.T) {
	fr := &fakeRunner{}
	f := New(Config{Roots: Roots{Proc: "/proc"}, Run: fr.run})
	gone := []Task{{PID: 1 << 30, TID: 1 << 30}}
	var got []MountinfoResult
	f.TaskMountinfos(context.Background(), [][]Task{gone}, 0, 1, func(_ int, r MountinfoResult) { got = append(got, r) })
	if len(got) != 1 || got[0].Err == nil || !errors.Is(got[0].Err, os.ErrNotExist) {
		t.Errorf("a namespace with no task left: %+v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got = nil
	self := []Task{{PID: os.Getpid(), TID: os.Getpid()}}
	f.TaskMountinfos(ctx, [][]Task{self, self}, 0, 1, func(_ int, r MountinfoResult) { got = append(got, r) })
	if len(got) != 0 {
		t.Errorf("reported after the context ended: %+v", got)
	}
}

func TestMountinfosOp(t *testing.T) {
	p := "/proc/self/mountinfo"
	res, err := mountinfosOp(MountinfosRequest{Paths: []string{p, "/proc/nonexistent/mountinfo", p}, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	r := res.(MountinfosResult)
	if len(r.Tables) != 3 || len(r.Tables[0].Data) != 10 || !r.Tables[0].Truncated || r.Tables[1].Err == "" || r.Tables[1].Data != nil || len(r.Tables[2].Data) != 10 {
		t.Errorf("%+v", r)
	}
	// The budget stops before a file, never before the first.
	res, _ = mountinfosOp(MountinfosRequest{Paths: []string{p, p, p}, Max: 10, Budget: 15})
	if n := len(res.(MountinfosResult).Tables); n != 2 {
		t.Errorf("%d tables under a 15-byte budget of 10-byte tables, want 2", n)
	}
}
