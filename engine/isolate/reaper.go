package isolate

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
)

// ModeReaper runs an external program as the child of a tiny init, pid 1
// of a new PID namespace. See Run.
//
// PR_SET_PDEATHSIG reaches a process's direct children only, and a
// process group only holds processes that do not leave it: a grandchild an
// external command started (a pager of journalctl, a shim started by ctr,
// anything that calls setsid) outlived a supervisor killed with SIGKILL.
// Of the ways to kill a whole tree:
//   - a child subreaper (PR_SET_CHILD_SUBREAPER) collects orphans only
//     while it lives: when it is SIGKILLed they go to init and run on;
//   - a cgroup can be killed whole (cgroup.kill), but only by someone alive
//     to do it, and creating one needs a writable cgroup tree, which a
//     container often lacks;
//   - a PID namespace is torn down by the kernel itself when its pid 1
//     exits or is killed: every process in it gets SIGKILL, whoever started
//     them and whatever session or group they moved to.
//
// So the program runs under a reaper that is pid 1 of its own namespace,
// has PDEATHSIG set to SIGKILL (its parent is the collector child, which
// has it towards the supervisor), reaps what is reparented to it, and
// exits with the program's status when the program exits. The chain
// supervisor → collector → reaper → namespace holds with SIGKILL at any
// link. New PID namespaces need CAP_SYS_ADMIN: without it (not root, a
// container without it) programs run directly in their own process group,
// as before, and the manifest of such a run cannot promise more.
const ModeReaper = "__nodesnap-reaper"

func init() {
	// Dispatched here, before main, so that every binary that can run
	// external programs through this package (nodesnap, its test
	// binaries) can also be their reaper.
	if len(os.Args) > 2 && os.Args[1] == ModeReaper {
		os.Exit(reaperMain(os.Args[2], os.Args[3:]))
	}
}

// pidnsUnavailable is set once creating a PID namespace has failed.
var pidnsUnavailable atomic.Bool

// PIDNamespaces reports whether external programs still run in PID
// namespaces of their own (false once creating one has failed).
func PIDNamespaces() bool { return !pidnsUnavailable.Load() }

// reaperMain starts path with argv (argv[0] first) and reaps until it
// exits, then exits with its status: 128+n if signal n killed it.
func reaperMain(path string, argv []string) int {
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodesnap: starting %s: %v\n", path, err)
		return 127
	}
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 126
		}
		if pid != p.Pid {
			continue // an orphan reparented to us
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
