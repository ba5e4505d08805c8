package owndesc_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/internal/owndesc"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fd   int
		want bool
	}{
		{"/dev/stdin", 0, true},
		{"/dev/fd/63", 63, true},
		{"/dev/fd/0", 0, true},
		{"/proc/self/fd/7", 7, true},
		{"/proc/thread-self/fd/9", 9, true},
		{"/dev//fd/./63", 63, true},
		{"/dev/fd/063", 0, false}, // not how a shell names a descriptor
		{"/dev/fd/-1", 0, false},
		{"/dev/fd/99999999999999999999", 0, false},
		{"/dev/fd/", 0, false},
		{"/dev/fd/63/x", 0, false},
		{"/var/run/secrets/token", 0, false},
		{"dev/fd/3", 0, false}, // relative: a file of that name
		{"/host/dev/fd/3", 0, false},
		{"", 0, false},
	} {
		fd, ok := owndesc.Parse(tc.in)
		if ok != tc.want || fd != tc.fd {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", tc.in, fd, ok, tc.fd, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"/dev/stdin", "/dev/fd/63", "/proc/self/fd/1", "/dev/fd/+1", "/dev/fd/1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fd, ok := owndesc.Parse(s)
		if !ok {
			if fd != 0 {
				t.Fatalf("%q: fd %d without ok", s, fd)
			}
			return
		}
		if fd < 0 || fd > 1<<20 {
			t.Fatalf("%q: fd %d out of range", s, fd)
		}
		if !strings.HasPrefix(s, "/") {
			t.Fatalf("%q: a relative path taken for a descriptor", s)
		}
	})
}

// A pipe is read to EOF; one whose writer never writes ends at the
// deadline with an error saying so, instead of holding the caller.
func TestReadPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	fd := int(r.Fd())
	if p, err := owndesc.FilePath(fd); err != nil || p != "" {
		t.Errorf("FilePath of a pipe = %q, %v; want \"\" (not a host file)", p, err)
	}
	if _, err := w.WriteString("rules: []\n"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := owndesc.Read(context.Background(), fd, 2*time.Second, 1<<20)
	if err != nil || string(data) != "rules: []\n" {
		t.Errorf("Read = %q, %v; want the pipe's contents", data, err)
	}

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r2.Close() }()
	defer func() { _ = w2.Close() }() // open and silent: a writer that never writes
	start := time.Now()
	_, err = owndesc.Read(context.Background(), int(r2.Fd()), 200*time.Millisecond, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "nothing was written to it within") {
		t.Errorf("Read of a silent pipe: %v; want the deadline's error", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("Read of a silent pipe returned after %s", el)
	}
}

// A descriptor opened on a regular file is named by its path, to be read
// in a worker like any host path.
func TestFilePath(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "rules")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if p, err := owndesc.FilePath(int(f.Fd())); err != nil || p != f.Name() {
		t.Errorf("FilePath = %q, %v; want %q", p, err, f.Name())
	}
	if _, err := owndesc.FilePath(1 << 19); err == nil {
		t.Error("FilePath of a descriptor that is not open: no error")
	}
}
