package mounts

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// A process of one thread is scanned with one readlink of its ns/mnt;
// every process must come out of the scan with the namespaces its tasks
// are in, as reading each task's link says: a single-threaded child (the
// short way), this test's own process (many threads, the long way), and
// every other process on the machine that stays put while it is read.
func TestScanProcessAgreesWithTasks(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	child := cmd.Process.Pid
	// sleep has one thread once it runs (exec replaced the forked Go
	// child); wait for the exec.
	for range 200 {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(child) + "/comm"); err == nil && string(b) == "sleep\n" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	pids, err := hostfs.ListPIDs("/proc")
	if err != nil {
		t.Fatal(err)
	}
	checked := map[int]bool{}
	for _, pid := range pids {
		got := scanProcess("/proc", pid)
		tids, nss, err := hostfs.TaskNamespaces("/proc", pid)
		if err != nil || got.gone > 0 || len(got.tasks) == 0 {
			continue // gone meanwhile, or links we may not read
		}
		want := map[int]uint64{}
		for i, tid := range tids {
			if nss[i] != 0 {
				want[tid] = nss[i]
			}
		}
		if len(want) != len(got.tasks) {
			continue // a thread came or went between the two reads
		}
		for _, task := range got.tasks {
			if ns, ok := want[task.tid]; !ok || ns != task.ns {
				t.Errorf("process %d: task %d in namespace %d by the scan, %d (present %v) by its own link", pid, task.tid, task.ns, ns, ok)
			}
		}
		if got.comm == "" {
			t.Errorf("process %d: no name", pid)
		}
		checked[pid] = true
	}
	for _, pid := range []int{child, os.Getpid()} {
		if !checked[pid] {
			t.Errorf("process %d (this test's own or its child) not scanned", pid)
		}
	}
	if r := scanProcess("/proc", child); len(r.tasks) != 1 || r.tasks[0].tid != child || r.ppid != os.Getpid() || r.comm != "sleep" {
		t.Errorf("the single-threaded child: %+v, want one task %d, parent %d, name sleep", r, child, os.Getpid())
	}
	if r := scanProcess("/proc", os.Getpid()); len(r.tasks) < 2 {
		t.Errorf("this test's process: %d tasks, want each of its threads", len(r.tasks))
	}
}
