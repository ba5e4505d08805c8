package processes

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirProcesses,
		Description:    "every task: pid, tid, comm, state, wchan, ppid, start time, mount namespace; D-state kernel stacks; kernel threads; command lines (redacted)",
		Requires:       "root: other users' /proc/<pid> files and every kernel stack (/proc/<pid>/stack)",
		DefaultEnabled: true,
		DefaultTimeout: 45 * time.Second,
		Files:          files,
		Run:            collect,
	})
}

// clockTicks is USER_HZ, which is 100 on every Linux architecture that
// Kubernetes runs on (the kernel exports it unchanged to user space).
const clockTicks = 100

func collect(ctx context.Context, env *collectors.Env) error {
	btime := shared.BootTime(env)
	pids, err := hostfs.ListPIDs(env.ProcPath())
	if err != nil {
		return fmt.Errorf("listing processes in %s: %w", env.ProcPath(), err)
	}
	var tasks []layout.Task
	sum := layout.ProcessesSummary{States: map[string]int{}, DState: []int{}}
	nss := map[uint64]bool{}
	// One buffer for every short /proc file: each is parsed before the
	// next is read.
	buf := make([]byte, 64<<10)
	for _, pid := range pids {
		if ctx.Err() != nil {
			env.Partialf("stopped at pid %d of %d: %v", pid, len(pids), ctx.Err())
			break
		}
		pdir := env.ProcPath(strconv.Itoa(pid))
		tids, err := hostfs.ListPIDs(pdir + "/task")
		if err != nil {
			sum.Vanished++
			continue
		}
		sum.Processes++
		var uid int
		var rss uint64
		// hostfs reads inside the root on a proc tree that is not the
		// kernel's (a link there is not followed out).
		if b, err := hostfs.ReadProc(pdir+"/status", buf); err == nil {
			if st, err := procfs.ParseStatus(b); err == nil {
				uid = int(st.UID.Real)
				rss = st.VmRSS
			}
		}
		// /proc/<pid>/cgroup takes no lock of the process (unlike cmdline):
		// read here, as status is.
		var cg procfs.SelfCgroup
		if b, err := hostfs.ReadProc(pdir+"/cgroup", buf); err == nil {
			cg = procfs.ParseSelfCgroup(b)
		}
		for _, tid := range tids {
			tdir := pdir + "/task/" + strconv.Itoa(tid)
			b, err := hostfs.ReadProc(tdir+"/stat", buf)
			if err != nil {
				continue
			}
			st, err := procfs.ParseStat(b)
			if err != nil {
				continue
			}
			t := layout.Task{PID: pid, TID: tid, PPID: st.PPID, Comm: st.Comm, State: st.State,
				StartTicks: st.StartTime, Kernel: st.IsKernelThread(), UID: uid,
				PodUID: cg.PodUID, ContainerID: cg.ContainerID}
			if tid == pid {
				t.RSSKiB = rss
			}
			if !btime.IsZero() {
				t.StartTime = btime.Add(time.Duration(st.StartTime) * time.Second / clockTicks).UTC()
			}
			if w, err := hostfs.ReadProc(tdir+"/wchan", buf); err == nil {
				if ws := strings.TrimSpace(string(w)); ws != "0" {
					t.Wchan = ws
				}
			}
			if ino, err := hostfs.NSInode(tdir + "/ns/mnt"); err == nil {
				t.MountNS = ino
				nss[ino] = true
			}
			sum.Tasks++
			sum.States[t.State]++
			if t.Kernel {
				sum.KernelThreads++
			}
			tasks = append(tasks, t)
		}
	}
	sum.MountNS = len(nss)
	readCmdlines(ctx, env, tasks, &sum)
	readDStacks(ctx, env, tasks, &sum)
	masked := redactCmdlines(env, tasks)

	if err := writeTasks(env, tasks, masked); err != nil {
		return err
	}
	if err := env.WriteJSON(layout.ProcessesSummaryFile, sum); err != nil {
		return err
	}
	return writePS(env, tasks, masked)
}

// redactCmdlines redacts every command line once, as arguments, so that
// ps.txt and tasks.json hold the same masked text (a flag and its value
// in two arguments are seen together in both); it returns the counts,
// which each of the two files reports.
func redactCmdlines(env *collectors.Env, tasks []layout.Task) map[string]int {
	total := map[string]int{}
	for i := range tasks {
		if len(tasks[i].Cmdline) == 0 {
			continue
		}
		var c map[string]int
		tasks[i].Cmdline, c = env.RedactArgv(tasks[i].Cmdline)
		for rule, n := range c {
			total[rule] += n
		}
	}
	return total
}

func countMasked(f *collectors.File, masked map[string]int) {
	for rule, n := range masked {
		f.CountRedactions(rule, n)
	}
}

// readCmdlines reads every user process's command line in the isolated
// pool: /proc/<pid>/cmdline takes the process's mmap lock, which a process
// stuck in a page fault on a dead mount holds forever.
// maxCmdline is how much of a command line is read.
const maxCmdline = 128 << 10

func readCmdlines(ctx context.Context, env *collectors.Env, tasks []layout.Task, sum *layout.ProcessesSummary) {
	var idx []int
	for i := range tasks {
		if tasks[i].PID == tasks[i].TID && !tasks[i].Kernel {
			idx = append(idx, i)
		}
	}
	var mu sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	// Two workers keep up: a healthy read takes microseconds, and each
	// worker is a process to start.
	for w := 0; w < min(2, max(1, env.Workers)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				t := &tasks[i]
				res, err := env.Host().Read(ctx, hostfs.Path("/proc/"+strconv.Itoa(t.PID)+"/cmdline"), maxCmdline)
				if err != nil {
					t.CmdlineError = err.Error()
					if isolate.IsTimeout(err) {
						mu.Lock()
						sum.CmdlineHung = append(sum.CmdlineHung, t.PID)
						mu.Unlock()
					}
					continue
				}
				t.Cmdline = procfs.ParseCmdline(res.Data)
				t.CmdlineTruncated = res.Truncated
			}
		}()
	}
	for _, i := range idx {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	sort.Ints(sum.CmdlineHung)
}

// fsWaitPrefixes are wait channels of tasks blocked in a filesystem or the
// block layer while interruptibly asleep: a process stuck on a hung FUSE
// mount is in state S waiting in request_wait_answer, not in D, so state
// alone would miss it.
var fsWaitPrefixes = []string{"request_wait_answer", "fuse_", "nfs", "rpc_wait", "__rpc_", "ceph_", "rbd_", "io_schedule", "folio_wait", "wait_on_page", "jbd2_", "blk_mq_", "scsi_", "iscsi_"}

// needsStack reports whether a task's kernel stack is evidence: it is in
// uninterruptible sleep, or waiting in a filesystem.
func needsStack(t *layout.Task) bool {
	if t.State == "D" {
		return true
	}
	for _, p := range fsWaitPrefixes {
		if strings.HasPrefix(t.Wchan, p) {
			return true
		}
	}
	return false
}

func readDStacks(ctx context.Context, env *collectors.Env, tasks []layout.Task, sum *layout.ProcessesSummary) {
	for i := range tasks {
		t := &tasks[i]
		if !needsStack(t) {
			continue
		}
		if t.State == "D" {
			sum.DState = append(sum.DState, t.TID)
		}
		res, err := env.Host().Read(ctx, hostfs.Path("/proc/"+strconv.Itoa(t.PID)+"/task/"+strconv.Itoa(t.TID)+"/stack"), 64<<10)
		if err != nil {
			t.StackError = err.Error()
			continue
		}
		for _, l := range strings.Split(string(res.Data), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				t.Stack = append(t.Stack, l)
			}
		}
	}
}

// writeTasks writes tasks.json as one JSON array with one task per line:
// readable, greppable, and streamable by the analyzer.
func writeTasks(env *collectors.Env, tasks []layout.Task, masked map[string]int) error {
	f, err := env.Create(layout.TasksFile)
	if err != nil {
		return err
	}
	countMasked(f, masked)
	w := bufio.NewWriterSize(f, 64<<10)
	w.WriteString("[\n")
	for i := range tasks {
		b, err := json.Marshal(&tasks[i])
		if err != nil {
			f.Close()
			return err
		}
		w.Write(b)
		if i < len(tasks)-1 {
			w.WriteByte(',')
		}
		w.WriteByte('\n')
	}
	w.WriteString("]\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writePS(env *collectors.Env, tasks []layout.Task, masked map[string]int) error {
	f, err := env.Create("ps.txt")
	if err != nil {
		return err
	}
	countMasked(f, masked)
	w := bufio.NewWriterSize(f, 64<<10)
	fmt.Fprintf(w, "%7s %7s %7s %1s %-12s %-20s %-24s %s\n", "PID", "TID", "PPID", "S", "MNTNS", "STARTED", "WCHAN", "COMMAND")
	for _, t := range tasks {
		cmd := "[" + t.Comm + "]"
		if len(t.Cmdline) > 0 {
			cmd = strings.Join(t.Cmdline, " ")
		} else if !t.Kernel {
			cmd = t.Comm
		}
		started := ""
		if !t.StartTime.IsZero() {
			started = t.StartTime.Format("2006-01-02T15:04:05Z")
		}
		fmt.Fprintf(w, "%7d %7d %7d %1s %-12d %-20s %-24s %s\n", t.PID, t.TID, t.PPID, t.State, t.MountNS, started, t.Wchan, cmd)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
