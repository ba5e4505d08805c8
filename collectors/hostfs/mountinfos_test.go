package hostfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
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
	// refs counts the tables answered by reference.
	refs int
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
		if res, ok := out.(MountinfosResult); ok {
			r.mu.Lock()
			for _, t := range res.Tables {
				if t.SameAs != 0 {
					r.refs++
				}
			}
			r.mu.Unlock()
		}
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

// Tables the same but for their mount IDs cross from the worker once per
// answer, the others by reference, and come back byte for byte: copies
// of one namespace (IDs moved, the root's parent outside), a table of
// other lines, one whose parents differ, one without a final newline.
func TestTaskMountinfosShared(t *testing.T) {
	proc := t.TempDir()
	base := "612 611 0:77 / / rw,relatime - overlay overlay rw,lowerdir=/l\n" +
		"613 612 0:5 / /proc rw - proc proc rw\n" +
		"614 612 0:78 / /dev rw,nosuid - tmpfs tmpfs rw\n" +
		"615 614 0:79 / /dev/pts rw - devpts devpts rw\n"
	copyOf := func(off, root int) string {
		return fmt.Sprintf("%d %d 0:77 / / rw,relatime - overlay overlay rw,lowerdir=/l\n"+
			"%d %d 0:5 / /proc rw - proc proc rw\n"+
			"%d %d 0:78 / /dev rw,nosuid - tmpfs tmpfs rw\n"+
			"%d %d 0:79 / /dev/pts rw - devpts devpts rw\n", 612+off, root, 613+off, 612+off, 614+off, 612+off, 615+off, 614+off)
	}
	tables := []string{
		base,
		copyOf(1000, 611),
		copyOf(2000, 7),
		"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n",
		// /dev/pts under /proc instead of /dev: the same lines, another
		// tree.
		strings.Replace(copyOf(3000, 7), "3615 3614 ", "3615 3613 ", 1),
		strings.TrimSuffix(copyOf(4000, 7), "\n"),
		copyOf(5000, 9),
	}
	nss := make([][]Task, len(tables))
	for i, tb := range tables {
		dir := filepath.Join(proc, strconv.Itoa(100+i), "task", strconv.Itoa(100+i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(tb), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/", filepath.Join(dir, "root")); err != nil {
			t.Fatal(err)
		}
		nss[i] = []Task{{PID: 100 + i, TID: 100 + i}}
	}
	fr := &fakeRunner{}
	f := New(Config{Roots: Roots{Proc: proc}, Run: fr.run})
	var mu sync.Mutex
	got := map[int]string{}
	refs := map[int]int{} // table → the table it was rebuilt from
	f.TaskMountinfos(context.Background(), nss, 0, 1, func(i int, r MountinfoResult) {
		mu.Lock()
		defer mu.Unlock()
		if r.Err != nil {
			t.Errorf("table %d: %v", i, r.Err)
		}
		if r.SameAs != nil {
			if _, ok := got[r.SameAs.Of]; !ok {
				t.Errorf("table %d rebuilt from table %d, not reported before it", i, r.SameAs.Of)
			}
			if !r.SameAs.Fits() {
				t.Errorf("table %d: its numbers %+v do not fit", i, r.SameAs)
			}
			refs[i] = r.SameAs.Of
		}
		got[i] = string(r.Data)
	})
	if want := map[int]int{1: 0, 2: 0, 6: 0}; !reflect.DeepEqual(refs, want) {
		t.Errorf("tables rebuilt from another: %v, want %v", refs, want)
	}
	for i, want := range tables {
		if got[i] != want {
			t.Errorf("table %d came back as\n%q\nwant\n%q", i, got[i], want)
		}
	}
	// 1, 2 and 6 are copies of 0; 4 is not (another tree), nor is 5 (no
	// final newline, which the copy has).
	if fr.refs != 3 || len(fr.singles) != 0 {
		t.Errorf("%d tables by reference and %d read alone, want 3 and 0", fr.refs, len(fr.singles))
	}
}

// The worker reads every table of an answer through one buffer: a table
// longer than the buffer grows it, a cut one stops at max exactly, and no
// table sent in full shares its bytes with the next one read.
func TestMountinfosOpOneBuffer(t *testing.T) {
	dir := t.TempDir()
	var big strings.Builder
	for i := 0; big.Len() < 200<<10; i++ {
		fmt.Fprintf(&big, "%d 1 0:%d / /m%d rw - tmpfs tmpfs rw\n", i+2, i, i)
	}
	files := map[string]string{"big": big.String(), "small": "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n", "empty": ""}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, share := range []bool{false, true} {
		res, err := mountinfosOp(MountinfosRequest{Paths: []string{p("big"), p("small"), p("empty"), p("big")}, Max: 1 << 20, Share: share})
		if err != nil {
			t.Fatal(err)
		}
		tables := res.(MountinfosResult).Tables
		if len(tables) != 4 {
			t.Fatalf("share %v: %d tables, want 4", share, len(tables))
		}
		for j, name := range []string{"big", "small", "empty"} {
			if got := string(tables[j].Data); got != files[name] || tables[j].Truncated || tables[j].Err != "" {
				t.Errorf("share %v: table %d (%s): %d bytes, truncated %v, err %q; want %d bytes", share, j, name, len(got), tables[j].Truncated, tables[j].Err, len(files[name]))
			}
		}
		// The same table again: by reference when shared, else in full.
		if last := tables[3]; share && last.SameAs != 1 || !share && string(last.Data) != files["big"] {
			t.Errorf("share %v: the big table again: same_as %d, %d bytes", share, last.SameAs, len(last.Data))
		}
	}
	res, err := mountinfosOp(MountinfosRequest{Paths: []string{p("big"), p("small")}, Max: 100000})
	if err != nil {
		t.Fatal(err)
	}
	tables := res.(MountinfosResult).Tables
	if got := tables[0]; !got.Truncated || string(got.Data) != files["big"][:100000] {
		t.Errorf("cut at 100000: truncated %v, %d bytes", got.Truncated, len(got.Data))
	}
	if got := tables[1]; got.Truncated || string(got.Data) != files["small"] {
		t.Errorf("after a cut table: truncated %v, %q", got.Truncated, got.Data)
	}
}

// A reference's numbers fit a table when every ID is there once and no
// parent outside the table is one of them.
func TestMountinfoRefFits(t *testing.T) {
	for _, tc := range []struct {
		ref  MountinfoRef
		want bool
	}{
		{MountinfoRef{IDs: [][2]int{{100, 3}, {200, 2}}, Outside: []int{7}}, true},
		{MountinfoRef{IDs: [][2]int{{100, 3}}}, true},
		{MountinfoRef{IDs: [][2]int{{100, 3}, {102, 2}}, Outside: []int{7}}, false},
		{MountinfoRef{IDs: [][2]int{{100, 3}}, Outside: []int{101}}, false},
		{MountinfoRef{IDs: [][2]int{{100, 0}}}, false},
		{MountinfoRef{IDs: [][2]int{{-5, 2}}}, false},
		// Out of order, an outside parent between the runs, or just past
		// one.
		{MountinfoRef{IDs: [][2]int{{200, 2}, {100, 3}}, Outside: []int{150, 103, 99, 202}}, true},
		{MountinfoRef{IDs: [][2]int{{200, 2}, {100, 3}}, Outside: []int{201}}, false},
		{MountinfoRef{IDs: [][2]int{{200, 2}, {100, 3}}, Outside: []int{100}}, false},
		{MountinfoRef{IDs: [][2]int{{200, 2}, {199, 1}}}, true},
		{MountinfoRef{IDs: [][2]int{{200, 2}, {199, 2}}}, false},
	} {
		if got := tc.ref.Fits(); got != tc.want {
			t.Errorf("%+v fits: %v, want %v", tc.ref, got, tc.want)
		}
	}
}
