package isolate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/engine/isolate"
)

// ReadFileTail keeps the end of a file, says where that end starts, and
// refuses what has no end to read (a FIFO, a directory) without blocking.
func TestReadFileTail(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const text = "line1\nline2\nline3\n"
	logPath := write("a.log", []byte(text))
	big := bytes.Repeat([]byte("0123456789abcdef"), (1<<20)/16+1) // 1 MiB + 16 bytes

	for _, tc := range []struct {
		name      string
		path      string
		max       int64
		want      string
		wantLen   int
		size, off int64
		truncated bool
	}{
		{name: "tail", path: logPath, max: 6, want: "line3\n", size: 18, off: 12, truncated: true},
		{name: "mid-line", path: logPath, max: 8, want: "2\nline3\n", size: 18, off: 10, truncated: true},
		{name: "all of it", path: logPath, max: 18, want: text, size: 18},
		{name: "more than it has", path: logPath, max: 1 << 20, want: text, size: 18},
		{name: "empty", path: write("empty.log", nil), max: 10, want: "", size: 0},
		{name: "default 1 MiB", path: write("big.log", big), max: 0, wantLen: 1 << 20, size: int64(len(big)), off: 16, truncated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := isolate.ReadFileTail(tc.path, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantLen == 0 && string(r.Data) != tc.want {
				t.Errorf("data %q, want %q", r.Data, tc.want)
			}
			if tc.wantLen != 0 && (len(r.Data) != tc.wantLen || !bytes.Equal(r.Data, big[tc.off:])) {
				t.Errorf("%d bytes, want the last %d", len(r.Data), tc.wantLen)
			}
			if r.Size != tc.size || r.Offset != tc.off || r.Truncated != tc.truncated {
				t.Errorf("size %d offset %d truncated %v, want %d %d %v", r.Size, r.Offset, r.Truncated, tc.size, tc.off, tc.truncated)
			}
		})
	}

	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := isolate.ReadFileTail(fifo, 10)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("FIFO: %v, want a refusal (EINVAL)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tail of a FIFO without a writer blocked")
	}
	if _, err := isolate.ReadFileTail(dir, 10); !errors.Is(err, syscall.EISDIR) || !errors.Is(err, isolate.ErrNotRegular) {
		t.Errorf("directory: %v, want a refusal (EISDIR)", err)
	}
	if _, err := isolate.ReadFileTail(filepath.Join(dir, "missing"), 10); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing file: %v, want ENOENT", err)
	}
}

// The readfile op reads heads as before and tails when asked, in a
// worker; errors keep their errno across the pipe.
func TestReadFileOpTail(t *testing.T) {
	p := isolate.NewPool(1, 5*time.Second)
	defer p.Close()
	ctx := context.Background()
	f := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(f, []byte("first\nsecond\nthird\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var head isolate.ReadFileResult
	if err := p.Do(ctx, isolate.OpReadFile, isolate.ReadFileRequest{Path: f, Max: 6}, &head); err != nil {
		t.Fatal(err)
	}
	if string(head.Data) != "first\n" || !head.Truncated || head.Size != 0 || head.Offset != 0 {
		t.Errorf("head read: %+v", head)
	}
	var tail isolate.ReadFileResult
	if err := p.Do(ctx, isolate.OpReadFile, isolate.ReadFileRequest{Path: f, Max: 6, Tail: true}, &tail); err != nil {
		t.Fatal(err)
	}
	if string(tail.Data) != "third\n" || !tail.Truncated || tail.Size != 19 || tail.Offset != 13 {
		t.Errorf("tail read: %+v", tail)
	}
	err := p.Do(ctx, isolate.OpReadFile, isolate.ReadFileRequest{Path: f + ".missing", Tail: true}, &tail)
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("tail of a missing file: %v, want ENOENT", err)
	}
}

// Only regular files are read as files: a character device (which gives
// endless bytes), a FIFO (which waits for a writer), a socket and a
// directory named as a file are refused before any is opened for reading,
// and the refusal crosses the worker's pipe with its errno and its words.
func TestReadRegularRefusesOthers(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("plain"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := isolate.NewPool(1, 5*time.Second)
	defer p.Close()
	// A directory is EISDIR (a caller that takes directories, as
	// --config-file does, tells it so); the rest EINVAL.
	for _, tc := range []struct {
		path, kind string
		errno      syscall.Errno
	}{
		{"/dev/zero", "character device", syscall.EINVAL},
		{"/dev/null", "character device", syscall.EINVAL},
		{fifo, "FIFO", syscall.EINVAL},
		{dir, "directory", syscall.EISDIR},
	} {
		if _, err := isolate.ReadRegularLimited(tc.path, 1<<20); !errors.Is(err, isolate.ErrNotRegular) || !errors.Is(err, tc.errno) {
			t.Errorf("%s: %v, want ErrNotRegular and %v", tc.path, err, tc.errno)
		}
		var r isolate.ReadFileResult
		err := p.Do(context.Background(), isolate.OpReadFile, isolate.ReadFileRequest{Path: tc.path, Max: 4 << 20, Regular: true}, &r)
		if err == nil || !errors.Is(err, tc.errno) || !strings.Contains(err.Error(), tc.kind) {
			t.Errorf("%s through a worker: %v (%d bytes), want a refusal naming a %s", tc.path, err, len(r.Data), tc.kind)
		}
	}
	r, err := isolate.ReadRegularLimited(file, 3)
	if err != nil || string(r.Data) != "pla" || !r.Truncated {
		t.Errorf("regular file: %+v, %v", r, err)
	}
}
