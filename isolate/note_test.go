package isolate_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/isolate"
)

func init() {
	// Sets the worker's note and answers with what /proc/self/environ
	// then shows, as another process reads it.
	isolate.RegisterOp("test-note", func(raw json.RawMessage) (any, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if err := isolate.SetWorkerNote(s); err != nil {
			return nil, err
		}
		return os.Getpid(), nil
	})
}

// A worker's note is read from its environ by another process, replaced,
// and cleared.
func TestWorkerNoteVisibleInEnviron(t *testing.T) {
	p := isolate.NewPool(1, 5*time.Second)
	defer p.Close()
	ctx := context.Background()
	for _, note := range []string{"probing /mnt/a", "second, longer note than the first one", ""} {
		var pid int
		if err := p.Do(ctx, "test-note", note, &pid); err != nil {
			t.Fatalf("setting note %q: %v", note, err)
		}
		environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.Fatal(err)
		}
		got, ok := isolate.WorkerNote(environ)
		if got != note || ok != (note != "") {
			t.Errorf("worker %d shows note %q (%v), want %q", pid, got, ok, note)
		}
	}
	if err := isolate.SetWorkerNote("not a worker"); err == nil {
		t.Errorf("SetWorkerNote outside a pool worker: no error")
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
