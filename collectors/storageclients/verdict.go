package storageclients

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Verdicts: which filesystems and devices are already stuck in the
// kernel. A FUSE connection is stuck when requests wait on its daemon in
// both samples and at least one task waiting on it did not run between
// them; a block device when requests are in flight in both samples, none
// completed in between, and a task waiting on it did not run. A busy
// filesystem completes requests and wakes its waiters within the
// interval; a stuck one does neither. Anything less (requests waiting
// but no task known to wait on them, or tasks but no requests) is left
// to the probe.

// fuseMarkers and blockMarkers are kernel functions a task waits in on a
// FUSE request and on block I/O.
var (
	fuseMarkers  = []string{"request_wait_answer", "fuse_"}
	blockMarkers = []string{"io_schedule", "folio_wait", "wait_on_page", "jbd2_", "blk_mq_", "wait_on_buffer", "bit_wait_io", "submit_bio_wait", "blkdev_"}
)

func waitsIn(t *layout.StorageTask, markers []string) bool {
	has := func(s string) bool {
		if strings.Contains(s, "fuse_dev_") {
			return false
		}
		for _, m := range markers {
			if strings.Contains(s, m) {
				return true
			}
		}
		return false
	}
	if has(t.Wchan) {
		return true
	}
	for _, l := range t.Stack {
		if has(l) {
			return true
		}
	}
	return false
}

// Verdicts decides from the report's counters (both samples filled in)
// and the two task samples; it also sets rep.Tasks to the tasks found
// waiting in both samples, each tied to its device where the evidence
// says which.
func Verdicts(rep *layout.StorageClients, first, second []SampledTask) []layout.KernelStuck {
	if rep.SampleIntervalMS <= 0 {
		// One sample: what waits is listed, nothing is judged stuck.
		for _, t := range second {
			rep.Tasks = append(rep.Tasks, t.StorageTask)
		}
		return nil
	}
	prev := make(map[int]SampledTask, len(first))
	for _, t := range first {
		prev[t.TID] = t
	}
	byName := map[string]*layout.BlockQueue{}
	byDev := map[string]*layout.BlockQueue{}
	for i := range rep.Block {
		d := &rep.Block[i]
		byName[d.Name] = d
		if d.Dev != "" {
			byDev[d.Dev] = d
		}
	}
	var fuseStuck []*layout.FUSEConn
	for i := range rep.FUSE {
		if f := &rep.FUSE[i]; f.Waiting > 0 && f.Waiting2 > 0 {
			fuseStuck = append(fuseStuck, f)
		}
	}
	var blockStuck []*layout.BlockQueue
	for i := range rep.Block {
		d := &rep.Block[i]
		if d.Inflight[0]+d.Inflight[1] > 0 && d.Inflight2[0]+d.Inflight2[1] > 0 && d.Stat != nil && d.Stat2 != nil &&
			completions(d.Stat) == completions(d.Stat2) {
			blockStuck = append(blockStuck, d)
		}
	}

	var tasks []layout.StorageTask
	for _, t := range second {
		p, ok := prev[t.TID]
		if !ok || p.Wchan != t.Wchan || p.Comm != t.Comm {
			continue
		}
		st := t.StorageTask
		st.NotRun = t.Timeslices >= 0 && t.Timeslices == p.Timeslices
		if st.Dev == "" && p.Dev != "" {
			st.Dev, st.Via = p.Dev, p.Via
		}
		if st.Dev == "" {
			attributeByName(&st, byName)
		}
		if st.Dev == "" && waitsIn(&st, fuseMarkers) && len(fuseStuck) == 1 {
			st.Dev, st.Via = fuseDev(fuseStuck[0].Conn), "the only FUSE connection with requests waiting"
		}
		if st.Dev == "" && waitsIn(&st, blockMarkers) && len(blockStuck) == 1 && byDev[blockStuck[0].Dev] != nil {
			st.Dev, st.Via = blockStuck[0].Dev, "the only block device with requests in flight and none completed"
		}
		tasks = append(tasks, st)
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].TID < tasks[j].TID })
	rep.Tasks = tasks

	var out []layout.KernelStuck
	for _, f := range fuseStuck {
		dev := fuseDev(f.Conn)
		var on []layout.StorageTask
		for _, t := range tasks {
			// A task blocked in FUSE code for a device that is not a FUSE
			// connection (a loop device's worker writing its backing
			// file) waits on the FUSE daemon too, when only one
			// connection has requests waiting.
			if t.Dev == dev || (len(fuseStuck) == 1 && !strings.HasPrefix(t.Dev, "0:") && waitsIn(&t, fuseMarkers)) {
				on = append(on, t)
			}
		}
		if !anyNotRun(on) {
			continue
		}
		name := "FUSE connection " + strconv.FormatUint(uint64(f.Conn), 10)
		if len(f.Mountpoints) > 0 {
			name += " (" + f.Mountpoints[0] + ")"
		}
		reason := fmt.Sprintf("%d request(s) waiting on its FUSE daemon in both samples %d ms apart, and %s blocked on it without running",
			f.Waiting2, rep.SampleIntervalMS, plural(len(on), "task", "tasks"))
		out = append(out, stuckRecord(dev, layout.StuckFUSE, name, f.Waiting2, reason, on))
	}
	for _, d := range blockStuck {
		var on []layout.StorageTask
		for _, t := range tasks {
			if t.Dev == d.Dev {
				on = append(on, t)
			}
		}
		if !anyNotRun(on) || d.Dev == "" {
			continue
		}
		n := int(d.Inflight2[0] + d.Inflight2[1])
		reason := fmt.Sprintf("%d request(s) in flight in both samples %d ms apart with none completed, and %s blocked on it without running",
			n, rep.SampleIntervalMS, plural(len(on), "task", "tasks"))
		out = append(out, stuckRecord(d.Dev, layout.StuckBlock, "block device "+d.Name, n, reason, on))
	}
	return out
}

func anyNotRun(ts []layout.StorageTask) bool {
	for _, t := range ts {
		if t.NotRun {
			return true
		}
	}
	return false
}

func fuseDev(conn uint32) string { return "0:" + strconv.FormatUint(uint64(conn), 10) }

// attributeByName ties kernel threads to the block device in their name:
// jbd2/<dev>-8 (ext4's journal), and workqueue workers running a
// device's work ("kworker/u9:1+loop0").
func attributeByName(t *layout.StorageTask, byName map[string]*layout.BlockQueue) {
	if rest, ok := strings.CutPrefix(t.Comm, "jbd2/"); ok {
		name := rest
		if i := strings.LastIndexByte(rest, '-'); i > 0 {
			name = rest[:i]
		}
		if d := byName[name]; d != nil && d.Dev != "" {
			t.Dev, t.Via = d.Dev, "the journal thread of "+name
		}
		return
	}
	if strings.HasPrefix(t.Comm, "kworker/") {
		if i := strings.IndexAny(t.Comm, "+-"); i > 0 {
			name := t.Comm[i+1:]
			if d := byName[name]; d != nil && d.Dev != "" {
				t.Dev, t.Via = d.Dev, "a worker running "+name+"'s work"
			}
		}
	}
}

// stuckRecord builds the verdict with its evidence: where the tasks
// waiting on it are blocked.
func stuckRecord(dev, kind, name string, requests int, reason string, on []layout.StorageTask) layout.KernelStuck {
	s := layout.KernelStuck{Dev: dev, Kind: kind, Name: name, Requests: requests, Reason: reason}
	ev := &layout.HangEvidence{Phase: "kernel state", Note: "tasks already blocked on it, seen by storageclients (no probe was sent)"}
	for i, t := range on {
		s.TIDs = append(s.TIDs, t.TID)
		if i >= 8 {
			continue
		}
		te := layout.TaskEvidence{TID: t.TID, Comm: t.Comm, State: t.State, Wchan: t.Wchan, Syscall: t.Syscall, Stack: t.Stack}
		ev.Tasks = append(ev.Tasks, te)
		if ev.Blocked == nil {
			ev.PID, ev.Comm = t.PID, t.Comm
			b := te
			ev.Blocked = &b
		}
	}
	s.Evidence = ev
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
