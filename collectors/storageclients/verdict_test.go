package storageclients

import (
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

func task(tid int, comm, state, wchan string, slices int64, dev string) SampledTask {
	return SampledTask{StorageTask: layout.StorageTask{PID: tid, TID: tid, Comm: comm, State: state, Wchan: wchan, Dev: dev}, Timeslices: slices}
}

func TestVerdicts(t *testing.T) {
	stat := func(reads, writes uint64) []uint64 {
		s := make([]uint64, 17)
		s[statReadIOs], s[statWriteIOs] = reads, writes
		return s
	}
	tests := []struct {
		name          string
		rep           layout.StorageClients
		first, second []SampledTask
		want          map[string][]int // dev → TIDs
	}{{
		name:   "FUSE daemon stopped: requests waiting, reader blocked on its fd, not run",
		rep:    layout.StorageClients{FUSE: []layout.FUSEConn{{Conn: 52, Waiting: 1, Waiting2: 1}, {Conn: 53}}},
		first:  []SampledTask{task(10, "cat", "S", "request_wait_answer", 5, "0:52")},
		second: []SampledTask{task(10, "cat", "S", "request_wait_answer", 5, "0:52")},
		want:   map[string][]int{"0:52": {10}},
	}, {
		name:   "busy FUSE: the waiter ran between the samples",
		rep:    layout.StorageClients{FUSE: []layout.FUSEConn{{Conn: 52, Waiting: 3, Waiting2: 2}}},
		first:  []SampledTask{task(10, "cat", "S", "request_wait_answer", 5, "0:52")},
		second: []SampledTask{task(10, "cat", "S", "request_wait_answer", 9, "0:52")},
	}, {
		name:   "requests waiting but no task seen in both samples",
		rep:    layout.StorageClients{FUSE: []layout.FUSEConn{{Conn: 52, Waiting: 1, Waiting2: 1}}},
		second: []SampledTask{task(10, "cat", "S", "request_wait_answer", 5, "0:52")},
	}, {
		name:   "path-based stat on the only waiting connection: attributed by elimination",
		rep:    layout.StorageClients{FUSE: []layout.FUSEConn{{Conn: 52, Waiting: 2, Waiting2: 2}, {Conn: 60, Waiting: 0}}},
		first:  []SampledTask{task(11, "stat", "S", "request_wait_answer", 3, "")},
		second: []SampledTask{task(11, "stat", "S", "request_wait_answer", 3, "")},
	}, {
		name:   "schedstat unreadable: whether the waiter ran is unknown, so the probe decides",
		rep:    layout.StorageClients{FUSE: []layout.FUSEConn{{Conn: 52, Waiting: 2, Waiting2: 2}}},
		first:  []SampledTask{task(11, "stat", "S", "request_wait_answer", -1, "0:52")},
		second: []SampledTask{task(11, "stat", "S", "request_wait_answer", -1, "0:52")},
	}, {
		name: "two waiting connections: a path-based waiter is not guessed",
		rep:  layout.StorageClients{FUSE: []layout.FUSEConn{{Conn: 52, Waiting: 2, Waiting2: 2}, {Conn: 60, Waiting: 1, Waiting2: 1}}},
		first: []SampledTask{task(11, "stat", "S", "request_wait_answer", 3, ""),
			task(12, "ls", "S", "request_wait_answer", 3, "0:60")},
		second: []SampledTask{task(11, "stat", "S", "request_wait_answer", 3, ""),
			task(12, "ls", "S", "request_wait_answer", 3, "0:60")},
		want: map[string][]int{"0:60": {12}},
	}, {
		name: "loop device on a hung FUSE file: jbd2, the loop worker and a writer",
		rep: layout.StorageClients{
			FUSE:  []layout.FUSEConn{{Conn: 52, Waiting: 1, Waiting2: 1}},
			Block: []layout.BlockQueue{{Name: "loop3", Dev: "7:3", Inflight: [2]int64{0, 4}, Inflight2: [2]int64{0, 4}, Stat: stat(10, 50), Stat2: stat(10, 50)}},
		},
		first: []SampledTask{task(20, "jbd2/loop3-8", "D", "jbd2_journal_commit_transaction", 7, ""),
			task(21, "kworker/u8:1+loop3", "S", "request_wait_answer", 2, ""),
			task(22, "dd", "D", "folio_wait_bit", 9, "7:3")},
		second: []SampledTask{task(20, "jbd2/loop3-8", "D", "jbd2_journal_commit_transaction", 7, ""),
			task(21, "kworker/u8:1+loop3", "S", "request_wait_answer", 2, ""),
			task(22, "dd", "D", "folio_wait_bit", 9, "7:3")},
		want: map[string][]int{"7:3": {20, 21, 22}, "0:52": {21}},
	}, {
		name: "busy disk: requests in flight but completing",
		rep: layout.StorageClients{Block: []layout.BlockQueue{{Name: "sda", Dev: "8:0", Inflight: [2]int64{30, 2}, Inflight2: [2]int64{28, 1},
			Stat: stat(1000, 50), Stat2: stat(1400, 52)}}},
		first:  []SampledTask{task(30, "postgres", "D", "io_schedule", 4, "8:0")},
		second: []SampledTask{task(30, "postgres", "D", "io_schedule", 4, "8:0")},
	}}
	tests[3].want = map[string][]int{"0:52": {11}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rep.SampleIntervalMS = 300
			got := Verdicts(&tt.rep, tt.first, tt.second)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d verdicts, want %d: %+v", len(got), len(tt.want), got)
			}
			for _, s := range got {
				want, ok := tt.want[s.Dev]
				if !ok {
					t.Errorf("unexpected verdict %+v", s)
					continue
				}
				if len(want) != len(s.TIDs) {
					t.Errorf("%s: tids %v, want %v", s.Dev, s.TIDs, want)
					continue
				}
				for i := range want {
					if want[i] != s.TIDs[i] {
						t.Errorf("%s: tids %v, want %v", s.Dev, s.TIDs, want)
					}
				}
				if s.Evidence == nil || s.Evidence.Blocked == nil || s.Reason == "" || s.Requests < 1 {
					t.Errorf("%s: incomplete record %+v", s.Dev, s)
				}
			}
		})
	}
}
