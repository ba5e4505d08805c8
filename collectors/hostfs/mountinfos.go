package hostfs

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// Reading the mount tables of many namespaces in few worker round trips.
// A node with one task per container has as many mount namespaces as
// containers; a round trip per table (a request encoded, a worker woken,
// the answer decoded) cost more than the kernel's work of printing the
// table. One request asks a worker for a batch of tables; if the batch
// misses its deadline (a namespace whose mount lock a stuck mount
// operation holds), each table of the batch is read again on its own, so
// the namespace that hangs is found and named and the others are still
// read: a hung table costs two deadlines instead of one. Within one
// answer, a table that is an earlier one's renumbered (copies of one
// namespace) is sent as a reference to it with its own mount IDs, once
// the worker has rebuilt it byte for byte (answerShare).

// OpMountinfos reads several tasks' mountinfo files in one worker item.
const OpMountinfos = "hostfs.mountinfos"

func init() {
	isolate.RegisterOp(OpMountinfos, isolate.Typed(mountinfosOp))
}

// MountinfosRequest asks for the mountinfo files at Paths (as nodesnap
// sees them), each cut at Max bytes. The worker stops before a file once
// the answer holds Budget bytes; the caller asks again for the rest.
type MountinfosRequest struct {
	Paths  []string `json:"paths"`
	Max    int64    `json:"max"`
	Budget int64    `json:"budget"`
	// Share asks for a table the same as an earlier one of the answer but
	// for its mount IDs to be answered by reference (MountinfoTable.SameAs).
	Share bool `json:"share,omitempty"`
}

// MountinfosResult answers Paths in order; it may be shorter (Budget).
type MountinfosResult struct {
	Tables []MountinfoTable `json:"tables"`
}

// MountinfoTable is one file's bytes, or why it could not be read.
type MountinfoTable struct {
	Data      []byte `json:"data,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Err       string `json:"err,omitempty"`
	// SameAs, when not 0, says the table is table SameAs-1 of the answer
	// renumbered with IDs and Outside (layout.RebuildMountinfo), which
	// the worker checked byte for byte; Data is then empty.
	SameAs  int      `json:"same_as,omitempty"`
	IDs     [][2]int `json:"ids,omitempty"`
	Outside []int    `json:"outside,omitempty"`
}

// Defaults of a batch: the number of tables per request and the bytes an
// answer may hold (the worker's memory and the pipe's load).
const (
	mountinfoBatch  = 64
	mountinfoBudget = 16 << 20
)

func mountinfosOp(rq MountinfosRequest) (any, error) {
	budget := rq.Budget
	if budget <= 0 {
		budget = mountinfoBudget
	}
	max := rq.Max
	if max <= 0 {
		max = 1 << 20
	}
	var res MountinfosResult
	var total int64
	var share *answerShare
	if rq.Share {
		share = newAnswerShare()
	}
	// One buffer for every read of the answer: a table is copied out of
	// it only when it is sent in full (a reference sends none of its
	// bytes), where reading each into a slice of its own grew five
	// times from 512 bytes and faulted in as many pages.
	var buf []byte
	for i, p := range rq.Paths {
		if i > 0 && total >= budget {
			break
		}
		data, truncated, err := readKernelLimited(p, max, &buf)
		t := MountinfoTable{Data: data, Truncated: truncated}
		switch {
		case err != nil:
			t = MountinfoTable{Err: err.Error()}
		case share != nil && !t.Truncated:
			share.add(&t, i)
		default:
			t.Data = bytes.Clone(data)
		}
		total += int64(len(t.Data))
		res.Tables = append(res.Tables, t)
	}
	return res, nil
}

// readKernelLimited reads the file at p (as nodesnap sees it) into *buf,
// grown as needed and kept for the next read, and gives at most max of
// its bytes, truncated when there were more. The returned bytes are
// *buf's: the next read overwrites them. On the kernel's own procfs the
// path is opened as it is (openKernel, as the collector's fast readers
// do), anywhere else inside the boundary.
func readKernelLimited(p string, max int64, buf *[]byte) (data []byte, truncated bool, err error) {
	fd, err := openKernel(p, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	limit := max + 1
	if len(*buf) == 0 {
		*buf = make([]byte, min(limit, 64<<10))
	}
	n := 0
	for int64(n) < limit {
		if n == len(*buf) {
			grown := make([]byte, min(limit, 2*int64(len(*buf))))
			copy(grown, (*buf)[:n])
			*buf = grown
		}
		end := min(int64(len(*buf)), limit)
		m, err := unix.Read(fd, (*buf)[n:end])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false, &os.PathError{Op: "read", Path: p, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	if int64(n) > max {
		return (*buf)[:max], true, nil
	}
	return (*buf)[:n], false, nil
}

// answerShare finds, within one answer, the tables that are an earlier
// one's renumbered: at a thousand namespaces copied from one, most of
// the bytes a worker sends (and its caller decodes) are the same table.
// The key is a hash of the table's lines without their IDs (each parent
// given as a line of the table), seeded for the answer; a table is sent
// by reference only once the earlier one rebuilds it byte for byte, so a
// collision costs nothing but the check.
type answerShare struct {
	seed  maphash.Seed
	first map[uint64]sentTable // key → the table sent in full
}

type sentTable struct {
	i    int
	base *layout.MountinfoBase
}

func newAnswerShare() *answerShare {
	return &answerShare{seed: maphash.MakeSeed(), first: map[uint64]sentTable{}}
}

// add makes t (table i of the answer, before it is appended to tables) a
// reference when an earlier table of the answer rebuilds it; otherwise
// t.Data becomes a copy of its bytes (they may be the read buffer's),
// which a later table of its shape is rebuilt from.
func (a *answerShare) add(t *MountinfoTable, i int) {
	key, ids, outside, ok := a.shape(t.Data)
	if !ok {
		t.Data = bytes.Clone(t.Data)
		return
	}
	first, seen := a.first[key]
	if seen && first.base.Rebuilds(t.Data, ids, outside) {
		*t = MountinfoTable{SameAs: first.i + 1, IDs: ids, Outside: outside}
		return
	}
	t.Data = bytes.Clone(t.Data)
	if !seen {
		if b, err := layout.NewMountinfoBase(t.Data); err == nil {
			a.first[key] = sentTable{i, b}
		}
	}
}

// shape is data's key, its mount IDs as runs and the parents outside it;
// ok is false for an empty table or one with a line without two IDs or
// an ID twice (never shared).
func (a *answerShare) shape(data []byte) (key uint64, runs [][2]int, outside []int, ok bool) {
	if len(data) == 0 {
		return 0, nil, nil, false
	}
	var h maphash.Hash
	h.SetSeed(a.seed)
	ids, outside, ok := layout.MountinfoShape(data, &h)
	if !ok {
		return 0, nil, nil, false
	}
	return h.Sum64(), layout.MountIDRuns(ids), outside, true
}

// MountinfoResult is the mount table of one namespace (see TaskMountinfo).
type MountinfoResult struct {
	isolate.ReadFileResult
	// From is the task it was read from, Root that task's root when it
	// is not "/".
	From Task
	Root string
	Err  error
	// SameAs, when not nil, says Data was rebuilt from the table of
	// namespace SameAs.Of, reported before it by the same call of done
	// on the same goroutine, renumbered with SameAs.IDs and
	// SameAs.Outside: the worker found the two the same but for their
	// mount IDs and checked the rebuilt bytes against the kernel's. A
	// caller that has hashed that table's shape may take it as this
	// one's (see SameAs.Fits).
	SameAs *MountinfoRef
}

// MountinfoRef is the table a result was rebuilt from and its numbers.
type MountinfoRef struct {
	Of      int
	IDs     [][2]int
	Outside []int
}

// Fits says whether the numbers are a table's own shape: every ID once,
// no outside parent among them. Then the table rebuilt with them has the
// shape of the table it was rebuilt from (layout.MountinfoShape: the same
// lines, each parent inside or outside the table as there), and IDs and
// Outside are what MountinfoShape would return for it.
func (r *MountinfoRef) Fits() bool {
	// Sorted by first ID, runs that do not overlap hold every ID once;
	// an outside parent is then looked for in the run that would hold it.
	runs := slices.Clone(r.IDs)
	slices.SortFunc(runs, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	for i, run := range runs {
		if run[1] <= 0 || run[0] < 0 || i > 0 && run[0] < runs[i-1][0]+runs[i-1][1] {
			return false
		}
	}
	for _, p := range r.Outside {
		// The last run starting at or before p.
		k, _ := slices.BinarySearchFunc(runs, p+1, func(run [2]int, v int) int { return cmp.Compare(run[0], v) })
		if k > 0 && p < runs[k-1][0]+runs[k-1][1] {
			return false
		}
	}
	return true
}

// TaskMountinfos reads the mount table of each namespace, given as its
// candidate tasks (see TaskMountinfo), in batches run on up to parallel
// workers at once: each namespace's first task whose root is "/" is read
// in a batch request, and a namespace the batch could not answer falls
// back to TaskMountinfo. done is called once per namespace read, possibly
// from several goroutines at once; namespaces not reached before ctx ends
// are not reported.
func (f *FS) TaskMountinfos(ctx context.Context, namespaces [][]Task, max int64, parallel int, done func(i int, r MountinfoResult)) {
	if max <= 0 {
		max = 32 << 20
	}
	parallel = max1(parallel)
	proc := f.Seen("/proc")
	// fallback reads one namespace on its own, trying all its tasks.
	fallback := func(i int) {
		if ctx.Err() != nil {
			return
		}
		r, from, root, err := f.TaskMountinfo(ctx, namespaces[i], max)
		if err != nil && ctx.Err() != nil {
			return
		}
		done(i, MountinfoResult{ReadFileResult: r, From: from, Root: root, Err: err})
	}
	// Batches small enough to keep every worker busy, large enough that
	// a round trip serves many tables.
	size := min(mountinfoBatch, max1((len(namespaces)+parallel-1)/parallel))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, len(namespaces)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				lo := int(next.Add(int64(size))) - size
				if lo >= len(namespaces) {
					return
				}
				f.mountinfoBatch(ctx, proc, namespaces, lo, min(lo+size, len(namespaces)), max, fallback, done)
			}
		}()
	}
	wg.Wait()
}

// mountinfoBatch reads the tables of namespaces[lo:hi].
func (f *FS) mountinfoBatch(ctx context.Context, proc string, namespaces [][]Task, lo, hi int, max int64,
	fallback func(int), done func(int, MountinfoResult)) {
	var idx []int
	var tasks []Task
	for i := lo; i < hi; i++ {
		if t, ok := firstRootedTask(proc, namespaces[i]); ok {
			idx, tasks = append(idx, i), append(tasks, t)
		} else {
			// No task with "/" as its root: TaskMountinfo says which.
			fallback(i)
		}
	}
	for len(idx) > 0 && ctx.Err() == nil {
		rq := MountinfosRequest{Paths: make([]string, len(idx)), Max: max, Budget: mountinfoBudget, Share: true}
		for j, t := range tasks {
			rq.Paths[j] = proc + "/" + taskDir(t) + "/mountinfo"
		}
		var res MountinfosResult
		target := rq.Paths[0]
		if len(idx) > 1 {
			target = fmt.Sprintf("%s and %d more mount tables in one request", rq.Paths[0], len(idx)-1)
		}
		err := f.run(ctx, 0, OpMountinfos, target, rq, &res)
		if err != nil || len(res.Tables) == 0 || len(res.Tables) > len(idx) {
			// The batch hung or failed as a whole: each table again on
			// its own, under its own deadline, which names the one
			// that hangs.
			for _, i := range idx {
				fallback(i)
			}
			return
		}
		bases := map[int]*layout.MountinfoBase{} // the tables referred to, read once
		for j, t := range res.Tables {
			var ref *MountinfoRef
			if t.SameAs != 0 {
				// Rebuilt from the table it names, as the worker
				// checked; a reference that does not rebuild (it
				// cannot, but it came over a pipe) is read again.
				if t.SameAs-1 >= j || res.Tables[t.SameAs-1].SameAs != 0 || res.Tables[t.SameAs-1].Err != "" || res.Tables[t.SameAs-1].Truncated {
					fallback(idx[j])
					continue
				}
				base := bases[t.SameAs-1]
				if base == nil {
					var err error
					if base, err = layout.NewMountinfoBase(res.Tables[t.SameAs-1].Data); err != nil {
						fallback(idx[j])
						continue
					}
					bases[t.SameAs-1] = base
				}
				b, err := base.Rebuild(t.IDs, t.Outside)
				if err != nil {
					fallback(idx[j])
					continue
				}
				t.Data = b
				ref = &MountinfoRef{Of: idx[t.SameAs-1], IDs: t.IDs, Outside: t.Outside}
			}
			if t.Err != "" {
				// The task may have exited; the namespace's other
				// tasks may still be there.
				fallback(idx[j])
				continue
			}
			done(idx[j], MountinfoResult{ReadFileResult: isolate.ReadFileResult{Data: t.Data, Truncated: t.Truncated}, From: tasks[j], SameAs: ref})
		}
		idx, tasks = idx[len(res.Tables):], tasks[len(res.Tables):]
	}
}

func max1(n int) int { return max(n, 1) }

// MountinfoReaders is how many workers a collector reading every
// namespace's table should give TaskMountinfos: the kernel prints a table
// on the reader's CPU, so more workers than CPUs (or than 4) only add
// worker start-ups (2 instead of 4 on a 2-CPU node: 40 ms less CPU at
// 1,000 namespaces).
func MountinfoReaders() int {
	return max(1, min(4, runtime.GOMAXPROCS(0)))
}

// firstRootedTask is the first of cands whose root is "/" (readlink of
// /proc/<pid>/task/<tid>/root touches no filesystem but procfs).
func firstRootedTask(proc string, cands []Task) (Task, bool) {
	for _, t := range cands {
		if l, err := os.Readlink(proc + "/" + taskDir(t) + "/root"); err == nil && l == "/" {
			return t, true
		}
	}
	return Task{}, false
}

func taskDir(t Task) string {
	return strconv.Itoa(t.PID) + "/task/" + strconv.Itoa(t.TID)
}
