package processes

import (
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

func TestNeedsStack(t *testing.T) {
	for _, tc := range []struct {
		state, wchan string
		want         bool
	}{
		{"D", "", true},
		{"S", "request_wait_answer", true},
		{"S", "rpc_wait_bit_killable", true},
		{"S", "folio_wait_bit_common", true},
		{"S", "do_epoll_wait", false},
		{"S", "futex_wait_queue", false},
		{"R", "", false},
	} {
		if got := needsStack(&layout.Task{State: tc.state, Wchan: tc.wchan}); got != tc.want {
			t.Errorf("state %s wchan %s: %v, want %v", tc.state, tc.wchan, got, tc.want)
		}
	}
}
