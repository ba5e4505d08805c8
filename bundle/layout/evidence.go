package layout

import "fmt"

// Hang evidence: what the manifest records about a child that missed its
// deadline (isolate captures it; analyze and report read it).

// TaskEvidence says where one thread of a hung child was when it was killed.
type TaskEvidence struct {
	TID     int      `json:"tid"`
	Comm    string   `json:"comm,omitempty"`
	State   string   `json:"state,omitempty"`
	Wchan   string   `json:"wchan,omitempty"`
	Syscall string   `json:"syscall,omitempty"`
	Stack   []string `json:"stack,omitempty"`
}

// HangEvidence is what the manifest records about a child that missed its
// deadline: every thread's state, wait channel, syscall and kernel stack, and
// whether the child could be reaped after SIGKILL.
type HangEvidence struct {
	PID   int    `json:"pid"`
	Comm  string `json:"comm,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Blocked summarises the most telling thread: the first in
	// uninterruptible sleep, or else the first not parked in the Go
	// runtime's own waits.
	Blocked  *TaskEvidence   `json:"blocked,omitempty"`
	Tasks    []TaskEvidence  `json:"tasks,omitempty"`
	Children []*HangEvidence `json:"children,omitempty"`
	Unreaped bool            `json:"unreaped,omitempty"`
	Note     string          `json:"note,omitempty"`
}

// String is a one-line summary for logs and error messages.
func (h *HangEvidence) String() string {
	if h == nil {
		return ""
	}
	b := h.Blocked
	if b == nil {
		for _, c := range h.Children {
			if c.Blocked != nil {
				b = c.Blocked
				break
			}
		}
	}
	if b == nil {
		return fmt.Sprintf("pid %d: no thread found blocked", h.PID)
	}
	top := ""
	if len(b.Stack) > 0 {
		top = " in " + b.Stack[0]
	}
	return fmt.Sprintf("pid %d tid %d state %s wchan %s%s", h.PID, b.TID, b.State, b.Wchan, top)
}
