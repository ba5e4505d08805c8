package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
)

func TestParseJournalCursor(t *testing.T) {
	for _, tc := range []struct {
		in      string
		seqnum  uint64
		rt      uint64
		wantErr string
	}{
		{in: "s=0123456789abcdef0123456789abcdef;i=1a;b=0123456789abcdef0123456789abcdef;m=ff;t=5f00;x=9", seqnum: 0x1a, rt: 0x5f00},
		{in: "t=10", rt: 16},
		{in: "s=0123;i=1;t=2", wantErr: "128-bit"},
		{in: "s=0123456789abcdef0123456789abcdef;i=zz;t=2", wantErr: "hex number"},
		{in: "s=0123456789abcdef0123456789abcdef;i=1", wantErr: "no time"},
		{in: "garbage", wantErr: "KEY=VALUE"},
	} {
		c, err := parseJournalCursor(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || c.seqnum != tc.seqnum || c.realtime != tc.rt {
			t.Errorf("%q = %+v, %v; want seqnum %d, time %d", tc.in, c, err, tc.seqnum, tc.rt)
		}
	}
}

// The native reader follows a real journal from its end: each round gets
// exactly the entries written since the last, through a rotation (the
// entries of the archived file are not read again) and a vacuum (the
// archived file deleted).
func TestReadJournalNativeFollows(t *testing.T) {
	j := testkit.StartJournald(t)
	rq := JournalRequest{Dir: j.Dir, Units: []string{"kubelet"}, Since: time.Now().Add(-time.Second), Max: 100, Timeout: 10 * time.Second}
	round := func(name string, want ...string) {
		t.Helper()
		r, err := readJournalNative(rq)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, e := range r.Entries {
			if e.Identifier != "kubelet" {
				t.Errorf("%s: entry of %q read, only kubelet's asked", name, e.Identifier)
			}
			got = append(got, e.Message)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("%s: read %q, want %q", name, got, want)
		}
		if len(want) > 0 && r.Cursor == rq.After {
			t.Fatalf("%s: the cursor did not move", name)
		}
		rq.After = r.Cursor
	}
	send := func(n *int, k int) []string {
		var out []string
		for i := 0; i < k; i++ {
			*n++
			m := fmt.Sprintf("line %d", *n)
			j.Native(t, "kubelet", m)
			out = append(out, m)
		}
		j.Native(t, "containerd-not-asked", "noise")
		j.WaitCount(t, "MESSAGE="+out[len(out)-1], 1)
		return out
	}
	n := 0
	round("first, after the journal's start", send(&n, 3)...)
	round("nothing new")
	round("after 2 more", send(&n, 2)...)

	// SIGUSR2 makes journald rotate: the file is archived under a new
	// name and a new one started.
	if err := syscall.Kill(j.Pid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	archived := waitArchived(t, j.Dir)
	round("after the rotation", send(&n, 2)...)
	for _, p := range archived {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	round("after the archived file was vacuumed", send(&n, 1)...)
	round("nothing new again")

	// The cursor is journalctl's: journalctl resumes from it.
	want := send(&n, 2)
	v, err := readJournal(rq) // journalctl is on the PATH here
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range v.(JournalResult).Entries {
		got = append(got, e.Message)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("journalctl --after-cursor with the native reader's cursor read %q, want %q", got, want)
	}
}

func waitArchived(t *testing.T, dir string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		files, err := filepath.Glob(filepath.Join(dir, "*", "*@*.journal"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) > 0 {
			return files
		}
		if time.Now().After(deadline) {
			t.Fatalf("journald did not rotate its file within 10s (SIGUSR2)")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without journal files the reader says where it looked.
func TestReadJournalNativeNoFiles(t *testing.T) {
	dir := t.TempDir()
	_, err := readJournalNative(JournalRequest{Dir: dir, Units: []string{"kubelet"}, Max: 10, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %v, want one naming %s", err, dir)
	}
}

// The cost of one idle round of the native reader (nothing new since the
// cursor: what the watcher's worker pays every journal.interval on a quiet
// node) on a journal of 20,000 entries.
func BenchmarkReadJournalNative(b *testing.B) {
	j := testkit.StartJournald(b)
	for i := 0; i < 20000; i++ {
		j.Native(b, []string{"kubelet", "containerd", "sshd", "cron"}[i%4], fmt.Sprintf("line %d of the journal before the watcher", i))
	}
	j.WaitCount(b, "MESSAGE=line 19999 of the journal before the watcher", 1)
	rq := JournalRequest{Dir: j.Dir, Units: []string{"kubelet", "containerd"}, Since: time.Now().Add(-time.Hour), Max: 5000, Timeout: 10 * time.Second}
	r, err := readJournalNative(rq)
	if err != nil || len(r.Entries) != 5000 {
		b.Fatalf("first round: %d entries, %v", len(r.Entries), err)
	}
	rq.After = r.Cursor
	b.Run("idle", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if r, err := readJournalNative(rq); err != nil || len(r.Entries) != 0 {
				b.Fatalf("%d entries, %v", len(r.Entries), err)
			}
		}
	})
}
