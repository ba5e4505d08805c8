// Package processes is the processes collector: every task's pid, tid,
// comm, state, wait channel, parent, start time and mount namespace, the
// pod and container its cgroup names, the kernel stacks of tasks in D
// state or waiting in a filesystem, and command lines (redacted).
//
// Its files are described in docs/bundle.md (processes/).
package processes
