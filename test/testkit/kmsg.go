package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Kmsg is a private stand-in for /dev/kmsg: a FIFO that a reader opens
// like the device (O_RDONLY|O_NONBLOCK) and reads one record per read,
// with EAGAIN once it has read everything, as from the device. Tests write
// their kernel lines here, never into the machine's real kernel log, which
// a later real collection of the machine would report as its history.
type Kmsg struct {
	Path string
	mu   sync.Mutex
	w    *os.File
	seq  uint64
}

// StartKmsg makes the FIFO and holds its write end open for the test's
// life (so a reader sees EAGAIN, not end of file, when nothing is queued).
// A first record is written at once, so that a reader's first pass learns
// a sequence number, as it does from the real device's ring.
func StartKmsg(t testing.TB) *Kmsg {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kmsg")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatalf("making the kernel-log stand-in: %v", err)
	}
	w, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("opening the kernel-log stand-in: %v", err)
	}
	k := &Kmsg{Path: p, w: w, seq: 100}
	t.Cleanup(func() { _ = w.Close() })
	k.Write(t, 6, "Linux version stand-in (the test's private kernel log)")
	return k
}

// Write queues one record with the next sequence number, at the given
// priority (0 emerg … 7 debug). Write one record at a time and let the
// reader take it before the next: a pipe, unlike the device, would hand
// two queued records to one read.
func (k *Kmsg) Write(t testing.TB, prio int, msg string) uint64 {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.seq++
	if _, err := fmt.Fprintf(k.w, "%d,%d,%d,-;%s\n", prio, k.seq, k.seq*1000, msg); err != nil {
		t.Fatalf("writing to the kernel-log stand-in: %v", err)
	}
	return k.seq
}
