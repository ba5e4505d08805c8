package isolate_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/engine/isolate"
)

type noteRequest struct {
	Line, Short string
	HoldMS      int
}

func init() {
	// Adds a line to the worker's note, holds it for HoldMS, and answers
	// with the worker's pid.
	isolate.RegisterOp("test-note", isolate.Typed(func(rq noteRequest) (any, error) {
		remove, err := isolate.AddWorkerNote(rq.Line, rq.Short)
		if err != nil {
			return nil, err
		}
		defer remove()
		time.Sleep(time.Duration(rq.HoldMS) * time.Millisecond)
		return os.Getpid(), nil
	}))
}

// noteOf reads a worker's note from its environ, as a later run does.
func noteOf(t *testing.T, pid int) (string, bool) {
	t.Helper()
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	return isolate.WorkerNote(environ)
}

// waitNote waits until the worker's note holds exactly the lines want
// (in any order), or fails after a few seconds.
func waitNote(t *testing.T, pid int, want ...string) {
	t.Helper()
	sort.Strings(want)
	var got []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		note, ok := noteOf(t, pid)
		got = nil
		if ok {
			got = strings.Split(note, "\n")
		}
		sort.Strings(got)
		if slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("worker %d shows note lines %q, want %q", pid, got, want)
}

// Items running at once on one worker each name themselves in its note,
// one line each, readable by another process from its environ; a line
// goes when its item ends.
func TestWorkerNoteVisibleInEnviron(t *testing.T) {
	p := isolate.NewPool(4, 10*time.Second)
	defer p.Close()
	ctx := context.Background()
	var pid int
	if err := p.Do(ctx, "test-pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	lines := []string{"probing /mnt/a", "probing /mnt/b, a longer line", "probing /mnt/c"}
	holds := []int{600, 1500, 1500}
	errs := make(chan error, len(lines))
	for i, l := range lines {
		go func() {
			var got int
			err := p.Do(ctx, "test-note", noteRequest{Line: l, HoldMS: holds[i]}, &got)
			if err == nil && got != pid {
				err = fmt.Errorf("item served by worker %d, not %d: items do not share a worker", got, pid)
			}
			errs <- err
		}()
	}
	waitNote(t, pid, lines...)
	waitNote(t, pid, lines[1:]...)
	for range lines {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if note, ok := noteOf(t, pid); ok {
		t.Errorf("worker %d still shows note %q after its items ended", pid, note)
	}
	if _, err := isolate.AddWorkerNote("not a worker", ""); err == nil {
		t.Errorf("AddWorkerNote outside a pool worker: no error")
	}
}

// Lines that do not fit together are written in their short form; one
// that fits in neither is refused and leaves the note as it was.
func TestWorkerNoteShortFormWhenFull(t *testing.T) {
	p := isolate.NewPool(4, 10*time.Second)
	defer p.Close()
	ctx := context.Background()
	var pid int
	if err := p.Do(ctx, "test-pid", nil, &pid); err != nil {
		t.Fatal(err)
	}
	long := func(c string) string { return "probing /" + strings.Repeat(c, 3000) }
	errs := make(chan error, 2)
	go func() {
		errs <- p.Do(ctx, "test-note", noteRequest{Line: long("a"), Short: "dev a", HoldMS: 1500}, nil)
	}()
	waitNote(t, pid, long("a"))
	go func() {
		errs <- p.Do(ctx, "test-note", noteRequest{Line: long("b"), Short: "dev b", HoldMS: 1500}, nil)
	}()
	// Both cost the same to shorten: the older line gives way.
	waitNote(t, pid, "dev a", long("b"))
	err := p.Do(ctx, "test-note", noteRequest{Line: "probing /" + strings.Repeat("c", isolate.NoteSize)}, nil)
	if err == nil || !strings.Contains(err.Error(), "no room left") {
		t.Errorf("a line that cannot fit: %v, want it refused", err)
	}
	waitNote(t, pid, "dev a", long("b"))
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"two\nlines", "nul\x00", ""} {
		if err := p.Do(ctx, "test-note", noteRequest{Line: bad}, nil); err == nil {
			t.Errorf("note line %q accepted", bad)
		}
	}
}

func TestWorkerNoteParse(t *testing.T) {
	pad := func(s string) string {
		for len(s) < isolate.NoteSize {
			s += " "
		}
		return s
	}
	for _, tc := range []struct {
		name, environ, want string
		ok                  bool
	}{
		{"none", "A=1\x00B=2\x00", "", false},
		{"blank", "A=1\x00" + isolate.WorkerNoteVar + "=" + pad("") + "\x00", "", false},
		{"first", isolate.WorkerNoteVar + "=" + pad("x y") + "\x00A=1\x00", "x y", true},
		{"unterminated", isolate.WorkerNoteVar + "=" + pad("z"), "z", true},
		{"too short for a note", isolate.WorkerNoteVar + "=abc\x00", "", false},
		{"empty", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := isolate.WorkerNote([]byte(tc.environ))
			if got != tc.want || ok != tc.ok {
				t.Errorf("WorkerNote = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzWorkerNote(f *testing.F) {
	f.Add([]byte(isolate.WorkerNoteVar + "=abc\x00"))
	f.Add([]byte("A=1\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := isolate.WorkerNote(b)
		if ok && (got == "" || len(got) > len(b)) {
			t.Errorf("note %q from %d bytes", got, len(b))
		}
	})
}
