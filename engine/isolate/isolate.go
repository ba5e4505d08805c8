// Package isolate is nodesnap's isolation layer: the only place that starts
// processes, and the home of every operation that may block forever in the
// kernel (stat, statfs, open or readdir of a path that may live on a hung
// network, FUSE or block-backed filesystem; reads of another process's
// /proc/<pid> files that take its mmap lock).
//
// Work runs in child processes, always the nodesnap binary itself
// re-executed in a hidden mode, each in its own process group, each with a
// deadline. When a deadline passes the child's kernel stack, wchan and
// current syscall are captured as evidence of where it hung, its process
// group is killed, and the caller moves on without waiting for a child the
// kernel may never let die.
package isolate

import (
	"os"
	"path/filepath"
	"sync"
)

// Hidden argv[1] values that put the binary into an internal mode.
const (
	// ModeCollector runs one collector; see the supervisor package.
	ModeCollector = "__nodesnap-collector"
	// ModeWorker serves per-item operations for a Pool.
	ModeWorker = "__nodesnap-worker"
)

var (
	selfOnce sync.Once
	selfPath string
	selfErr  error
)

// Self returns the path of the running executable, resolved once at start
// so that a later replacement of the binary on disk cannot change which
// program the children run.
func Self() (string, error) {
	selfOnce.Do(func() {
		// /proc/self/exe is our own process: reading it cannot block on
		// anyone else's locks.
		p, err := os.Executable()
		if err != nil {
			selfErr = err
			return
		}
		selfPath, selfErr = filepath.EvalSymlinks(p)
	})
	return selfPath, selfErr
}

func init() {
	// Resolve before any test or command changes directory.
	_, _ = Self()
}
