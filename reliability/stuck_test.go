package reliability

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/internal/testkit"
	"github.com/nodesnap/nodesnap/isolate"
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
	t.Logf("after %d runs over %d hung mounts: %d stuck probe workers, at most %d on one mount", runs, mounts, total, most)
	// Fewer would mean the notes are missing and the count proves nothing.
	if total != mounts || most > 1 {
		t.Errorf("after %d runs over %d hung mounts: %d stuck probe workers (at most %d on one mount), want one per mount", runs, mounts, total, most)
	}
	if t.Failed() {
		o.failed = true
	}
	o.valid = !o.failed
	record(o)
}

// stuckProbes counts the processes of the binary under test whose worker
// note names one of devs (a note is cleared when its probe returns: one
// left is a probe that never did), and the most on one of them. Only the
// binary's own processes are read: a stuck worker holds no lock of its
// memory.
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
		dir := "/proc/" + strconv.Itoa(pid)
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
		for _, f := range strings.Fields(note) {
			if d, ok := strings.CutPrefix(f, "dev="); ok && devs[d] {
				per[d]++
				total++
			}
		}
	}
	for _, c := range per {
		most = max(most, c)
	}
	return total, most
}
