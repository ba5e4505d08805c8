// Package processes is the processes collector: every task's pid, tid,
// comm, state, wait channel, parent, start time and mount namespace, the
// pod and container its cgroup names, the kernel stacks of tasks in D
// state or waiting in a filesystem, and command lines (redacted).
//
// Its files are described in docs/bundle.md (processes/).
package processes

import "github.com/nodesnap/nodesnap/collectors"

// files is what the collector writes into its directory of the bundle
// (Spec.Files): docs/bundle.md's table is generated from it.
var files = []collectors.FileDoc{
	{Name: "tasks.json", Holds: "every task: state, wait channel, mount namespace, and the pod UID and container ID its cgroup names; kernel stacks of tasks in D state or waiting in a filesystem"},
	{Name: "ps.txt", Holds: "the same tasks as a ps-style table"},
	{Name: "summary.json", Holds: "counts by state and the tasks in D state"},
}
