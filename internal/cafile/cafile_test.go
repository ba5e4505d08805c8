package cafile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A CA file is read when it holds a certificate; a file without one, and
// a FIFO that nobody writes, are errors in words (the FIFO within the
// timeout, not never).
func TestRead(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(good, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(good, time.Second); err != nil || !strings.Contains(string(b), "BEGIN CERTIFICATE") {
		t.Errorf("Read(%s) = %q, %v", good, b, err)
	}
	bad := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(bad, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(bad, time.Second); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("Read(%s) error %v, want no PEM certificate", bad, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(fifo, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "could not be read within") {
		t.Errorf("Read(FIFO) error %v, want a timeout", err)
	}
	// Let the blocked open return before the directory goes.
	if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
		_ = f.Close()
	}
}
