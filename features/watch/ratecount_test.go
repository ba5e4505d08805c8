package watch

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The hour's count is read back from the bundles already written: a
// restarted watch does not start again at zero.
func TestRateSeededFromBundles(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, n := range []string{
		"nodesnap-node-1-20261128T113000Z.tar.gz",              // 30 min ago: counts
		"nodesnap-node-1-20261128T115900Z.kubelet-down.tar.gz", // counts
		"nodesnap-node-1-20261128T120500Z.tar.gz",              // in the future: counts, as now
		"nodesnap-node-1-20261128T105000Z.tar.gz",              // 70 min ago: does not
		"nodesnap-node-1-20261128T113000Z.tar.gz.sha256",       // not a bundle
		".nodesnap.lock",
	} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var r rateLimit
	if err := r.seed(dir, now); err != nil {
		t.Fatal(err)
	}
	if len(r.starts) != 3 {
		t.Fatalf("counted %d collections in the last hour, want 3: %v", len(r.starts), r.starts)
	}
	if r.allow(now, 3) {
		t.Errorf("a 4th collection allowed with max 3 an hour")
	}
	if !r.allow(now, 4) {
		t.Errorf("a 4th collection refused with max 4 an hour")
	}
	var empty rateLimit
	if err := empty.seed(filepath.Join(dir, "missing"), now); err != nil || len(empty.starts) != 0 {
		t.Errorf("a missing directory: %v, %v", err, empty.starts)
	}
}

// The /metrics listener holds at most its limit of connections: one
// more is closed at once, and a slot freed is taken again.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &limitListener{Listener: inner, sem: make(chan struct{}, 2)}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := dial(), dial()
	defer a.Close()
	defer b.Close()
	first := <-accepted
	<-accepted
	over := dial()
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("a connection over the limit was kept (read %d, %v)", n, err)
	}
	first.Close()
	c := dial()
	defer c.Close()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not taken again")
	}
}
