package procfs

import (
	"errors"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, fixture string
		want          Stat
		kthread       bool
	}{{
		name: "kernel thread", fixture: "kthreadd.txt", kthread: true,
		want: Stat{PID: 2, Comm: "kthreadd", State: "S", TPGID: -1, Flags: 2129984,
			Priority: 20, NumThreads: 1, StartTime: 25},
	}, {
		name: "space and colon in comm", fixture: "tmux-server.txt",
		want: Stat{PID: 10314, Comm: "tmux: server", State: "R", PPID: 10311, PGRP: 10311,
			Session: 3980, TPGID: -1, Flags: 4194304, MinFlt: 2906, MajFlt: 0, UTime: 2, STime: 1,
			Priority: 20, NumThreads: 1, StartTime: 53498, VSize: 17289216, RSS: 3428},
	}, {
		name: "parenthesis in comm: it ends at the last one", fixture: "paren-in-comm.txt",
		want: Stat{PID: 10314, Comm: "a) b", State: "R", PPID: 10311, PGRP: 10311,
			Session: 3980, TPGID: -1, Flags: 4194304, MinFlt: 2908, UTime: 2, STime: 1,
			Priority: 20, NumThreads: 1, StartTime: 53498, VSize: 17289216, RSS: 3428},
	}, {
		name: "newline, fake fields and backslash in comm", fixture: "newline-in-comm.txt",
		want: Stat{PID: 10314, Comm: "x\n) 1 2 (y\\z", State: "R", PPID: 10311, PGRP: 10311,
			Session: 3980, TPGID: -1, Flags: 4194304, MinFlt: 2908, UTime: 2, STime: 1,
			Priority: 20, NumThreads: 1, StartTime: 53498, VSize: 17289216, RSS: 3428},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat(readFixture(t, "stat", tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if got.IsKernelThread() != tt.kthread {
				t.Errorf("IsKernelThread() = %v", got.IsKernelThread())
			}
		})
	}
}

func TestParseStatInline(t *testing.T) {
	const tail = " 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0"
	tests := []struct {
		name, in string
		comm     string
	}{
		{"empty comm", "7 () S 1" + tail, ""},
		{"comm of only parentheses", "7 (()) S 1" + tail, "()"},
		{"comm looking like the fields", "7 (1) S 2 3) D 1" + tail, "1) S 2 3"},
		{"no trailing newline or extra fields", "7 (sh) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0", "sh"},
		{"workqueue kworker name longer than 16", "7 (kworker/u8:2-events_unbound) I 2" + tail, "kworker/u8:2-events_unbound"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.in + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got.PID != 7 || got.Comm != tt.comm {
				t.Errorf("pid %d comm %q, want 7 %q", got.PID, got.Comm, tt.comm)
			}
		})
	}
}

func TestParseStatErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
		reason   string
	}{
		{"empty", "", ErrEmpty, "empty"},
		{"blank", " \n", ErrEmpty, "empty"},
		{"no parentheses", "7 sh S 1 0 0", ErrMalformed, "parentheses"},
		{"unclosed comm", "7 (sh S 1 0 0", ErrMalformed, "parentheses"},
		{"pid not a number", "x (sh) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0", ErrMalformed, "pid"},
		{"truncated", "7 (sh) S 1 0 0", ErrMissingField, "4 fields"},
		{"state two letters", "7 (sh) SS 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0", ErrMalformed, "state"},
		{"ppid not a number", "7 (sh) S one 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0", ErrMalformed, "field 4"},
		{"rss negative", "7 (sh) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 -5", ErrMalformed, "field 24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStat([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("err %q does not say %q", err, tt.reason)
			}
		})
	}
}
