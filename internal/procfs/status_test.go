package procfs

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseStatus(t *testing.T) {
	t.Run("kernel thread", func(t *testing.T) {
		got, err := ParseStatus(readFixture(t, "status", "kthreadd.txt"))
		if err != nil {
			t.Fatal(err)
		}
		want := Status{Name: "kthreadd", State: "S", TGID: 2, PID: 2, NStgid: []int{2}, NSpid: []int{2},
			NSpgid: []int{0}, NSsid: []int{0}, Threads: 1, VoluntaryCtxtSwitches: 68,
			Kthread: true, KthreadKnown: true}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
	})
	t.Run("user process", func(t *testing.T) {
		got, err := ParseStatus(readFixture(t, "status", "cat.txt"))
		if err != nil {
			t.Fatal(err)
		}
		want := Status{Name: "cat", State: "R", TGID: 10355, PID: 10355, PPID: 10311,
			NStgid: []int{10355}, NSpid: []int{10355}, NSpgid: []int{10311}, NSsid: []int{3980},
			VmRSS: 1688, Threads: 1, NonvoluntaryCtxtSwitches: 2, KthreadKnown: true}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got  %+v\nwant %+v", got, want)
		}
	})
	t.Run("escaped name", func(t *testing.T) {
		got, err := ParseStatus(readFixture(t, "status", "newline-in-comm.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if want := "x\n) 1 2 (y\\z"; got.Name != want {
			t.Errorf("Name = %q, want %q", got.Name, want)
		}
	})
	t.Run("older kernel without Kthread", func(t *testing.T) {
		in := bytes.ReplaceAll(readFixture(t, "status", "kthreadd.txt"), []byte("Kthread:\t1\n"), nil)
		got, err := ParseStatus(in)
		if err != nil {
			t.Fatal(err)
		}
		if got.Kthread || got.KthreadKnown {
			t.Errorf("Kthread %v, KthreadKnown %v, want false, false", got.Kthread, got.KthreadKnown)
		}
	})
}

func TestParseStatusInline(t *testing.T) {
	in := "Name:\t\tlead \nUmask:\t0022\nState:\tD (disk sleep)\nTgid:\t4242\nPid:\t4250\nPPid:\t4100\n" +
		"TracerPid:\t77\nUid:\t1000\t1001\t1002\t1003\nGid:\t2000\t2001\t2002\t2003\n" +
		"NStgid:\t4242\t1\nNSpid:\t4250\t9\nNSpgid:\t4242\t1\nNSsid:\t4242\t1\n" +
		"VmRSS:\t   20480 kB\nThreads:\t12\nvoluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:\t6\n" +
		"SomethingNew:\twhatever: it is\n"
	got, err := ParseStatus([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Status{Name: "\tlead ", State: "D", TGID: 4242, PID: 4250, PPID: 4100, TracerPID: 77,
		UID:    IDSet{Real: 1000, Effective: 1001, Saved: 1002, FS: 1003},
		GID:    IDSet{Real: 2000, Effective: 2001, Saved: 2002, FS: 2003},
		NStgid: []int{4242, 1}, NSpid: []int{4250, 9}, NSpgid: []int{4242, 1}, NSsid: []int{4242, 1},
		VmRSS: 20480, Threads: 12, VoluntaryCtxtSwitches: 5, NonvoluntaryCtxtSwitches: 6}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseStatusErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
		reason   string
	}{
		{"empty", "", ErrEmpty, "empty"},
		{"no Pid line", "Name:\tsh\nState:\tS (sleeping)\n", ErrMissingField, "Pid"},
		{"bad Uid", "Name:\tsh\nPid:\t1\nUid:\t0\t0\n", ErrMalformed, "Uid"},
		{"bad VmRSS unit", "Name:\tsh\nPid:\t1\nVmRSS:\t12 MB\n", ErrMalformed, "VmRSS"},
		{"bad Kthread", "Name:\tsh\nPid:\t1\nKthread:\tyes\n", ErrMalformed, "Kthread"},
		{"bad NSpid", "Name:\tsh\nPid:\t1\nNSpid:\t1\tx\n", ErrMalformed, "NSpid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStatus([]byte(tt.in))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("err %q does not say %q", err, tt.reason)
			}
		})
	}
}

// A bad line does not cost the good ones.
func TestParseStatusPartial(t *testing.T) {
	got, err := ParseStatus([]byte("Name:\tsh\nPid:\t9\nUid:\tbroken\nThreads:\t3\n"))
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	if got.Name != "sh" || got.PID != 9 || got.Threads != 3 {
		t.Errorf("partial status lost good fields: %+v", got)
	}
}
