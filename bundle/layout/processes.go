package layout

import "time"

// The processes collector's records: processes/tasks.json and processes/summary.json.

// Task is one thread in processes/tasks.json.
type Task struct {
	PID        int       `json:"pid"`
	TID        int       `json:"tid"`
	PPID       int       `json:"ppid"`
	Comm       string    `json:"comm"`
	State      string    `json:"state"`
	Wchan      string    `json:"wchan,omitempty"`
	StartTicks uint64    `json:"start_ticks"`
	StartTime  time.Time `json:"start_time,omitzero"`
	MountNS    uint64    `json:"mnt_ns,omitempty"`
	Kernel     bool      `json:"kernel_thread,omitempty"`
	// PodUID and ContainerID are the Kubernetes pod and the container the
	// process runs in, from its cgroup path (the kubelet's and the
	// runtimes' naming): who a holder or a blocked task is, in the words
	// of a support engineer's first question.
	PodUID      string `json:"pod_uid,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
	UID         int    `json:"uid"`
	RSSKiB      uint64 `json:"rss_kib,omitempty"`
	// Cmdline is set on the thread-group leader only (pid == tid).
	Cmdline      []string `json:"cmdline,omitempty"`
	CmdlineError string   `json:"cmdline_error,omitempty"`
	// CmdlineTruncated says the command line is longer than the
	// maxCmdline bytes read: Cmdline is its beginning.
	CmdlineTruncated bool `json:"cmdline_truncated,omitempty"`
	// Stack is the kernel stack of a task in uninterruptible sleep or
	// waiting in a filesystem (see fsWaitPrefixes).
	Stack      []string `json:"stack,omitempty"`
	StackError string   `json:"stack_error,omitempty"`
}

// ProcessesSummary is processes/summary.json.
type ProcessesSummary struct {
	Processes     int            `json:"processes"`
	Tasks         int            `json:"tasks"`
	KernelThreads int            `json:"kernel_threads"`
	States        map[string]int `json:"states"`
	DState        []int          `json:"d_state_tids"`
	MountNS       int            `json:"mount_namespaces"`
	Vanished      int            `json:"vanished"`
	CmdlineHung   []int          `json:"cmdline_hung_pids,omitempty"`
}
