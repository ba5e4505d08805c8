package faults

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// pidsWith lists the processes whose command line contains s.
func pidsWith(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procStat is a process's parent and start time (clock ticks since boot),
// from /proc/<pid>/stat; ok is false when it is gone.
func procStat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, "", false
	}
	// The command may hold spaces and parentheses: fields start after
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], true
}

// tree is a set of processes, each with its start time (so a reused pid
// is not mistaken for it).
type tree map[int]string

// processTree is root and its descendants now.
func processTree(root int) tree {
	parent := map[int]int{}
	start := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, st, ok := procStat(pid); ok {
			parent[pid], start[pid] = pp, st
		}
	}
	t := tree{}
	for pid := range parent {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				t[pid] = start[pid]
				break
			}
		}
	}
	return t
}

// alive are the processes of t still running whose command line holds s.
func (t tree) alive(s string) []int {
	var pids []int
	for pid, st := range t {
		_, now, ok := procStat(pid)
		if !ok || now != st {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// SIGKILL of the supervisor while external commands run, each of which
// has started a child in its own process group and one in a new session
// (setsid): none of them, and none of nodesnap's own processes, may
// outlive it. PDEATHSIG reaches direct children only; the grandchildren
// used to survive every time.
func TestNoProcessOutlivesTheSupervisor(t *testing.T) {
	testkit.RequireRoot(t)
	bin := testkit.Binary(t)
	for i := 0; i < rounds(1, 3); i++ {
		n := newNode(t)
		token := fmt.Sprintf("nodesnap-orphan-%d-%d", os.Getpid(), time.Now().UnixNano())
		dir := t.TempDir()
		script := "#!/bin/sh\n" +
			"sh -c 'while :; do sleep 1; done' " + token + "-bg &\n" +
			"setsid sh -c 'while :; do sleep 1; done' " + token + "-session &\n" +
			"echo started\nexec sleep 3600\n"
		for _, p := range []string{"journalctl", "crictl", "ctr", "docker", "dmesg"} {
			if err := os.WriteFile(filepath.Join(dir, p), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []string{"run/containerd/containerd.sock", "run/crio/crio.sock"} {
			p := filepath.Join(n.root, s)
			os.MkdirAll(filepath.Dir(p), 0o755)
			testkit.SilentListener(t, "unix", p)
		}
		jdir := filepath.Join(n.root, "var/log/journal/0123456789abcdef0123456789abcdef")
		os.MkdirAll(jdir, 0o755)
		os.WriteFile(filepath.Join(jdir, "system.journal"), []byte("LPKSHHRH"), 0o640)

		cmd := exec.Command(bin, n.args(t.TempDir(), "--journal-dir", filepath.Dir(jdir), "--journal-reader", "journalctl", "--journal-timeout", "25s",
			"--runtime-command-timeout", "25s")...)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Whatever survived, by pid: nothing else is touched.
			for _, pid := range pidsWith(token) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		})
		o := outcome{fault: "SIGKILL of the supervisor (grandchildren of commands)", noBundle: true}
		end := time.Now().Add(20 * time.Second)
		for len(pidsWith(token+"-session")) == 0 || len(pidsWith(token+"-bg")) == 0 {
			if time.Now().After(end) {
				t.Fatalf("the external commands never started their children")
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		// This run's own processes: the supervisor's tree at the kill.
		// Not every process of the binary: an earlier test's worker
		// stuck on a FUSE request it made may still be dying.
		tree := processTree(cmd.Process.Pid)
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		var left, ours []int
		end = time.Now().Add(5 * time.Second)
		for {
			left, ours = pidsWith(token), tree.alive(bin)
			if len(left)+len(ours) == 0 || time.Now().After(end) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("%d process(es) started by external commands outlived the supervisor by 5 s: %v", len(left), left)
		}
		if len(ours) > 0 {
			t.Errorf("%d nodesnap process(es) outlived the supervisor by 5 s: %v", len(ours), ours)
		}
		o.failed = t.Failed()
		record(o)
	}
}
