package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Three runs over hung FUSE mounts whose daemon has read the request (the
// probing worker stays in D state, SIGKILL or not) leave one stuck worker
// per mount, not one per mount and run: a later run finds the earlier
// run's worker by its note and does not probe that mount again.
func TestStuckProbesDoNotPileUpAcrossRuns(t *testing.T) {
	testkit.RequireFUSE(t)
	const mounts, runs = 6, 3
	n := newNode(t)
	devs := map[string]bool{}
	for i := 0; i < mounts; i++ {
		f := testkit.HungFUSE(t, filepath.Join(n.root, "var/lib/kubelet/pods", podUID, fmt.Sprintf("volumes/kubernetes.io~csi/pvc-stuck%d/mount", i)), testkit.FUSEStartHung())
		devs[fmt.Sprintf("0:%d", f.ConnID())] = true
	}
	o := outcome{fault: fmt.Sprintf("%d runs over %d hung FUSE mounts", runs, mounts)}
	for i := 0; i < runs; i++ {
		out := t.TempDir()
		r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "mountprobe")...)
		if r.code != 0 && r.code != 3 {
			t.Errorf("run %d: exit %d\nstderr:\n%s", i+1, r.code, r.stderr)
		}
		if _, co := checkOutput(t, out, false, n.secrets); co.failed {
			o.failed = true
		}
	}
	// A worker killed at its deadline takes a moment to show D state.
	var total, most int
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		total, most = stuckProbes(t, devs)
		if total == mounts && most == 1 || time.Now().After(end) {
			break
		}
	}
	t.Logf("after %d runs over %d hung mounts: %d stuck probes, at most %d on one mount", runs, mounts, total, most)
	// Fewer would mean the notes are missing and the count proves nothing.
	if total != mounts || most > 1 {
		t.Errorf("after %d runs over %d hung mounts: %d stuck probes (at most %d on one mount), want one per mount", runs, mounts, total, most)
	}
	if t.Failed() {
		o.failed = true
	}
	o.valid = !o.failed
	record(o)
}

// stuckProbes counts the probes of the binary under test stuck on one of
// devs, and the most on one of them: lines of a worker's note (one per
// probe it runs, cleared when its probe returns) whose thread is in D
// state. Only the binary's own processes are read, through a stuck
// thread (a killed worker's main thread may be gone): a stuck worker
// holds no lock of its memory.
func stuckProbes(t *testing.T, devs map[string]bool) (total, most int) {
	t.Helper()
	bin := filepath.Base(testkit.Binary(t))
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stuck := threadsD(pid)
		if len(stuck) == 0 {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/task/%d", pid, stuck[0])
		exe, err := os.Readlink(dir + "/exe")
		if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != bin {
			continue
		}
		environ, err := os.ReadFile(dir + "/environ")
		if err != nil {
			continue
		}
		note, ok := isolate.WorkerNote(environ)
		if !ok {
			continue
		}
		for _, line := range strings.Split(note, "\n") {
			dev, tid := "", 0
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "dev="); ok {
					dev = v
				}
				if v, ok := strings.CutPrefix(f, "tid="); ok {
					tid, _ = strconv.Atoi(v)
				}
			}
			if devs[dev] && (tid == 0 || slices.Contains(stuck, tid)) {
				per[dev]++
				total++
			}
		}
	}
	for _, c := range per {
		most = max(most, c)
	}
	return total, most
}

// threadsD lists the threads of pid in uninterruptible sleep.
func threadsD(pid int) []int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'D' {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				out = append(out, tid)
			}
		}
	}
	return out
}
