package journal

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/internal/cliflag"
)

// collect runs data through a window in pieces of the given sizes and
// returns what it keeps, oldest first.
func windowOut(w *entryWindow, data []byte, pieces []int) (string, error) {
	var err error
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(pieces) > 0 {
			n = min(max(pieces[i%len(pieces)], 1), len(data))
		}
		if _, err = w.Write(data[:n]); err != nil {
			break
		}
		data = data[n:]
	}
	w.finish(err == nil)
	var b strings.Builder
	w.each(func(e []byte) bool { b.Write(e); return true })
	return b.String(), err
}

func TestEntryWindowReverseKeepsNewest(t *testing.T) {
	// journalctl --reverse: newest first; continuation lines belong to
	// the entry above them and keep their order.
	in := "t5 e5\nt4 e4 first\n    e4 second\n\te4 third\nt3 e3\nt2 e2\nt1 e1\n"
	for _, pieces := range [][]int{nil, {1}, {3, 7}, {64}} {
		w := newEntryWindow(1<<20, true, true)
		got, err := windowOut(w, []byte(in), pieces)
		if err != nil {
			t.Fatal(err)
		}
		want := "t1 e1\nt2 e2\nt3 e3\nt4 e4 first\n    e4 second\n\te4 third\nt5 e5\n"
		if got != want {
			t.Fatalf("pieces %v: got %q, want %q", pieces, got, want)
		}
		if w.entries() != 5 {
			t.Errorf("entries %d, want 5", w.entries())
		}
	}
	// A budget that holds the two newest entries and not the multi-line
	// third: the producer is told to stop, and the window says it is full.
	w := newEntryWindow(int64(len("t5 e5\n")+len("t4 e4 first\n    e4 second\n\te4 third\n")+3), true, true)
	got, err := windowOut(w, []byte(in), []int{5})
	if err == nil || !w.full {
		t.Fatalf("window did not refuse input past its budget (err %v)", err)
	}
	if want := "t4 e4 first\n    e4 second\n\te4 third\nt5 e5\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if int64(len(got)) > w.budget {
		t.Errorf("kept %d bytes over a budget of %d", len(got), w.budget)
	}
}

func TestEntryWindowForwardDropsOldest(t *testing.T) {
	var in bytes.Buffer
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&in, "line %04d\n", i)
	}
	w := newEntryWindow(100, false, false)
	got, err := windowOut(w, in.Bytes(), []int{7})
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for i := 990; i < 1000; i++ {
		want += fmt.Sprintf("line %04d\n", i)
	}
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if w.dropped != 990 {
		t.Errorf("dropped %d, want 990", w.dropped)
	}
	// Chunks behind the live entries are freed: memory stays bounded.
	live := 0
	for _, c := range w.chunks {
		live += cap(c)
	}
	if live > 4*w.chunkSize {
		t.Errorf("%d bytes of chunks live for a 100-byte window", live)
	}
	// An entry larger than the whole budget is dropped, the rest kept.
	w = newEntryWindow(16, false, false)
	got, _ = windowOut(w, []byte("short 1\n"+strings.Repeat("x", 40)+"\nshort 2\n"), []int{3})
	if got != "short 1\nshort 2\n" {
		t.Errorf("oversized entry: got %q", got)
	}
}

func TestEntryWindowCutStream(t *testing.T) {
	// A producer killed mid-line: the partial line is not kept.
	w := newEntryWindow(1<<10, true, true)
	_, _ = w.Write([]byte("t3 three\nt2 two\nt1 on"))
	w.finish(false)
	var b strings.Builder
	w.each(func(e []byte) bool { b.Write(e); return true })
	if b.String() != "t2 two\nt3 three\n" {
		t.Fatalf("got %q", b.String())
	}
	w.seal()
	if _, err := w.Write([]byte("late\n")); err == nil {
		t.Fatal("a sealed window accepted a write")
	}
}

func FuzzEntryWindow(f *testing.F) {
	f.Add([]byte("a\n b\nc\n"), uint16(4), true, true, uint8(3))
	f.Add([]byte("2026-01-01T00:00:00.000000+0000 h k[1]: x\n  y\n"), uint16(20), false, true, uint8(1))
	f.Add([]byte("no newline at all"), uint16(5), false, false, uint8(2))
	f.Add([]byte("\n0"), uint16(4), true, false, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, budget uint16, reverse, cont bool, piece uint8) {
		w := newEntryWindow(int64(budget)+1, reverse, cont)
		got, _ := windowOut(w, data, []int{int(piece) + 1})
		if int64(len(got)) > w.budget {
			t.Fatalf("kept %d bytes over a budget of %d", len(got), w.budget)
		}
		if w.size != int64(len(got)) {
			t.Fatalf("size %d, but each() yields %d bytes", w.size, len(got))
		}
		// Every kept entry came from the input, whole.
		w.each(func(e []byte) bool {
			if !bytes.Contains(data, e) {
				t.Fatalf("window yields %q, not part of the input", e)
			}
			return true
		})
	})
}

func TestParseKmsgRecord(t *testing.T) {
	boot := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{in: "6,1234,5678901,-;EXT4-fs (loop2): mounted filesystem\n", want: "2026-11-21T09:00:05.678901+0000 kernel: [    5.678901] EXT4-fs (loop2): mounted filesystem\n"},
		{in: "3,7,120000000,-,caller=T12;INFO: task umount:812 blocked for more than 120 seconds.\n SUBSYSTEM=block\n DEVICE=b8:0\n", want: "2026-11-21T09:02:00.000000+0000 kernel: [  120.000000] INFO: task umount:812 blocked for more than 120 seconds.\n"},
		{in: "4,1,2,c;no trailing newline", want: "2026-11-21T09:00:00.000002+0000 kernel: [    0.000002] no trailing newline\n"},
		{in: "garbage", err: true},
		{in: "6,1;short header\n", err: true},
		{in: "x,1,2,-;bad priority\n", err: true},
		{in: "6,1,-2,-;negative time\n", err: true},
	} {
		k, err := ParseKmsgRecord([]byte(tc.in))
		if tc.err {
			if err == nil {
				t.Errorf("%q: no error", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got := string(k.AppendText(nil, boot)); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	k, _ := ParseKmsgRecord([]byte("6,1,1500000,-;no boot time\n"))
	if got := string(k.AppendText(nil, time.Time{})); got != "[    1.500000] no boot time\n" {
		t.Errorf("without a boot time: %q", got)
	}
}

func FuzzParseKmsgRecord(f *testing.F) {
	f.Add([]byte("6,1234,5678901,-;EXT4-fs (loop2): mounted\n SUBSYSTEM=block\n"))
	f.Add([]byte("191,18446744073709551615,18446744073709551615,-;x"))
	f.Add([]byte(";;;"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKmsgRecord(b)
		if err != nil {
			return
		}
		out := k.AppendText(nil, time.Unix(1e9, 0))
		if bytes.Count(out, []byte{'\n'}) != 1 || out[len(out)-1] != '\n' {
			t.Fatalf("rendered record is not one line: %q", out)
		}
	})
}

func TestUnitAndMatchQueries(t *testing.T) {
	q, err := unitQuery("kubelet")
	if err != nil {
		t.Fatal(err)
	}
	// Only fields journald records itself select an entry: the
	// identifier alone is anyone's (logger -t kubelet).
	want := "_SYSTEMD_UNIT=kubelet.service + _PID=1 UNIT=kubelet.service + MESSAGE_ID=" + coredumpMessageID +
		" COREDUMP_UNIT=kubelet.service _EXE=/usr/lib/systemd/systemd-coredump _EXE=/lib/systemd/systemd-coredump + SYSLOG_IDENTIFIER=kubelet _UID=0"
	if got := strings.Join(q.matches, " "); got != want || q.name != "kubelet" {
		t.Errorf("kubelet: %s %q", q.name, got)
	}
	u, ok := unverifiedQuery(q)
	if !ok || u.name != "kubelet.unverified" || strings.Join(u.matches, " ") != "SYSLOG_IDENTIFIER=kubelet" || strings.Join(u.except, " ") != want {
		t.Errorf("kubelet's unverified source: %v %+v", ok, u)
	}
	q, _ = unitQuery("docker.service")
	if got := strings.Join(q.matches, " "); q.name != "docker" || !strings.HasSuffix(got, "+ SYSLOG_IDENTIFIER=docker _UID=0 + SYSLOG_IDENTIFIER=dockerd _UID=0") {
		t.Errorf("docker: %s %q", q.name, got)
	}
	if u, _ := unverifiedQuery(q); strings.Join(u.matches, " ") != "SYSLOG_IDENTIFIER=docker + SYSLOG_IDENTIFIER=dockerd" {
		t.Errorf("docker's unverified source: %+v", u)
	}
	q, _ = unitQuery("rpc-statd")
	if got := strings.Join(q.matches, " "); q.name != "rpc-statd" || !strings.HasSuffix(got, "+ SYSLOG_IDENTIFIER=rpc-statd _UID=0 + SYSLOG_IDENTIFIER=rpc.statd _UID=0 + SYSLOG_IDENTIFIER=sm-notify _UID=0") {
		t.Errorf("rpc-statd: %s %q", q.name, got)
	}
	q, _ = unitQuery("kubepods.slice")
	if got := strings.Join(q.matches, " "); strings.Contains(got, "SYSLOG_IDENTIFIER") || !strings.Contains(got, "_SYSTEMD_UNIT=kubepods.slice") {
		t.Errorf("slice: %q", got)
	}
	if _, ok := unverifiedQuery(q); ok {
		t.Errorf("a slice has an unverified source")
	}
	for _, bad := range []string{"", "-k", "a b", "x=y", "../etc"} {
		if _, err := unitQuery(bad); err == nil {
			t.Errorf("unit %q accepted", bad)
		}
	}
	if q, err := matchQuery("SYSLOG_IDENTIFIER=kubelet"); err != nil || q.matches[0] != "SYSLOG_IDENTIFIER=kubelet" {
		t.Errorf("match: %v %v", q, err)
	}
	for _, bad := range []string{"kubelet", "lower=x", "1FIELD=x", "-F=x", "F=a\nb"} {
		if _, err := matchQuery(bad); err == nil {
			t.Errorf("match %q accepted", bad)
		}
	}
	if got := safeName("match-SYSLOG_IDENTIFIER-a/b c"); got != "match-SYSLOG_IDENTIFIER-a_b_c" {
		t.Errorf("safeName: %q", got)
	}
	if got := safeName(".."); got != "_" {
		t.Errorf("safeName(..): %q", got)
	}
}

func TestJournalSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512KiB": 512 << 10, "32MiB": 32 << 20, "1g": 1 << 30, "2MB": 2e6} {
		n, err := cliflag.ParsePositiveSize(in)
		if err != nil || n != want {
			t.Errorf("%s: %d %v, want %d", in, n, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "x", "1.5MiB", "99999999999GiB"} {
		if _, err := cliflag.ParsePositiveSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	s := cliflag.PositiveSize(32 << 20)
	if s.String() != "32MiB" {
		t.Errorf("String: %s", s.String())
	}
}

// benchJournal is 200,000 kubelet lines as journalctl --reverse prints
// them, one in a thousand with a bearer token.
func benchJournal() []byte {
	var in bytes.Buffer
	for i := 200000; i > 0; i-- {
		if i%1000 == 500 {
			fmt.Fprintf(&in, "2026-11-21T09:08:45.%06d+0000 node-7 kubelet[2211]: I1121 09:08:01.000001 2211 round_trippers.go:466] curl -H \"Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlIn0.sig%d\" https://10.0.0.1:6443/api/v1/nodes/node-7\n", i%1000000, i)
			continue
		}
		fmt.Fprintf(&in, "2026-11-21T09:08:45.%06d+0000 node-7 kubelet[2211]: I1121 09:08:01.000001 2211 reconciler.go:%d] operationExecutor.UnmountVolume started for volume \"pvc-%08d\" pod=\"default/web-%d\"\n", i%1000000, i%500, i, i%97)
	}
	return in.Bytes()
}

// BenchmarkJournalSourceWrite is everything the collector adds to a
// journal source beyond journalctl itself: 200,000 lines into the window,
// then oldest-first through the run's redactor into a bundle file.
func BenchmarkJournalSourceWrite(b *testing.B) {
	data := benchJournal()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		env := collectors.StandaloneEnv("journal", b.TempDir(), collectors.Common{})
		j := &journalRun{env: env}
		w := newEntryWindow(64<<20, true, true)
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
		w.finish(true)
		var s layout.JournalSource
		if err := j.writeWindow(&s, "kubelet.log", w, false); err != nil {
			b.Fatal(err)
		}
		if s.Entries != 200000 {
			b.Fatalf("wrote %d entries", s.Entries)
		}
	}
}

// BenchmarkEntryWindowReverse is the window alone: 200,000 lines read
// newest-first, then walked oldest-first.
func BenchmarkEntryWindowReverse(b *testing.B) {
	data := benchJournal()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		w := newEntryWindow(64<<20, true, true)
		for p := data; len(p) > 0; {
			n := min(len(p), 64<<10)
			if _, err := w.Write(p[:n]); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
		w.finish(true)
		total := 0
		w.each(func(e []byte) bool { total += len(e); return true })
		if total != len(data) {
			b.Fatalf("walked %d of %d bytes", total, len(data))
		}
	}
}

// capMemory: a reverse window keeps the newest entries up to its memory
// cap and counts, without keeping, the older lines its byte budget would
// still have taken; past the budget the producer is stopped.
func TestEntryWindowMemoryCap(t *testing.T) {
	var in bytes.Buffer
	for i := 99; i >= 0; i-- { // newest first, 10 bytes a line
		fmt.Fprintf(&in, "t%02d e%04d\n", i, i)
	}
	for _, tc := range []struct {
		name         string
		budget, keep int64
		kept, cut    int
		full         bool
	}{
		{"cap above the budget: no cut", 400, 1 << 20, 40, 0, true},
		{"cap below the budget", 400, 100, 10, 30, true},
		{"budget above the input", 1 << 20, 250, 25, 75, false},
		{"cap of one line", 1 << 20, 10, 1, 99, false},
	} {
		for _, pieces := range [][]int{nil, {1}, {7}} {
			w := newEntryWindow(tc.budget, true, true)
			w.capMemory(tc.keep)
			got, _ := windowOut(w, in.Bytes(), pieces)
			if w.entries() != tc.kept || w.cut != tc.cut || w.full != tc.full {
				t.Errorf("%s, pieces %v: kept %d cut %d full %v, want %d %d %v", tc.name, pieces, w.entries(), w.cut, w.full, tc.kept, tc.cut, tc.full)
			}
			if int64(len(got)) > tc.keep {
				t.Errorf("%s: kept %d bytes over a memory cap of %d", tc.name, len(got), tc.keep)
			}
			if w.entries() > 0 && !strings.HasSuffix(got, "t99 e0099\n") {
				t.Errorf("%s: the newest line is not kept: %q", tc.name, got)
			}
		}
	}
}
