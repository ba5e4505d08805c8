package watch

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The hour's count is read back from the bundles this host wrote: a
// restarted watch does not start again at zero, and files that only look
// like bundles (planted in a shared directory, a copy renamed) or that
// are dated in the future do not count.
func TestRateSeededFromBundles(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(hhmm string) time.Time {
		tm, err := time.Parse("20060102T1504Z", "20261128T"+hhmm+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, b := range []struct {
		name, host, start string
	}{
		{"nodesnap-node-1-20261128T113000Z.tar.gz", "node-1", "1130"},              // 30 min ago: counts
		{"nodesnap-node-1-20261128T115900Z.kubelet-down.tar.gz", "node-1", "1159"}, // counts
		{"nodesnap-node-1-20261128T120500Z.tar.gz", "node-1", "1205"},              // in the future: does not
		{"nodesnap-node-1-20261128T105000Z.tar.gz", "node-1", "1050"},              // 70 min ago: does not
		{"nodesnap-node-1-20261128T114000Z.tar.gz", "node-1", "1130"},              // a copy renamed: its manifest says 11:30
		{"nodesnap-node-2-20261128T114500Z.tar.gz", "node-9", "1145"},              // its manifest names another host
	} {
		writeBundleAt(t, filepath.Join(dir, b.name), b.host, at(b.start))
	}
	for _, n := range []string{
		"nodesnap-node-1-20261128T115000Z.tar.gz", // bundle-shaped, empty
		"nodesnap-node-1-20261128T113000Z.tar.gz.sha256",
		".nodesnap.lock",
	} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "nodesnap-node-1-20261128T113000Z.tar.gz"), filepath.Join(dir, "nodesnap-node-1-20261128T115500Z.tar.gz")); err != nil {
		t.Fatal(err)
	}
	// A FIFO named as a bundle of the hour: not a bundle, not waited on.
	if err := syscall.Mkfifo(filepath.Join(dir, "nodesnap-node-1-20261128T115100Z.tar.gz"), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := seedPool(t, seedTimeout)
	var r rateLimit
	if err := r.seed(context.Background(), pool, dir, now); err != nil {
		t.Fatal(err)
	}
	if len(r.starts) != 2 {
		t.Fatalf("counted %d collections in the last hour, want 2: %v", len(r.starts), r.starts)
	}
	if r.allow(now, 2) {
		t.Errorf("a 3rd collection allowed with max 2 an hour")
	}
	if !r.allow(now, 3) {
		t.Errorf("a 3rd collection refused with max 3 an hour")
	}
	var empty rateLimit
	if err := empty.seed(context.Background(), pool, filepath.Join(dir, "missing"), now); err != nil || len(empty.starts) != 0 {
		t.Errorf("a missing directory: %v, %v", err, empty.starts)
	}
}

func seedPool(t *testing.T, timeout time.Duration) *isolate.Pool {
	pool := isolate.NewPool(1, timeout)
	t.Cleanup(pool.Close)
	return pool
}

// seedReturns runs seed and fails the test if it has not returned after
// a minute: the old seed, in the watcher's own process, never returned.
func seedReturns(t *testing.T, pool *isolate.Pool, dir string, now time.Time) (rateLimit, error) {
	t.Helper()
	type result struct {
		r   rateLimit
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r rateLimit
		err := r.seed(context.Background(), pool, dir, now)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-time.After(time.Minute):
		t.Fatalf("reading the output directory %s blocked the watcher", dir)
	}
	return rateLimit{}, nil
}

// The output directory is a hung mount (a FUSE server that stopped
// answering, an NFS server gone): listing it waits for ever, and the old
// seed listed it in the watcher's own process, which never got further.
// Read by a worker under a deadline, the watch goes on, its hour's count
// from 0, and says why.
func TestRateSeedHungOutputDir(t *testing.T) {
	f := testkit.HungFUSE(t, "", testkit.FUSEStartHung())
	r, err := seedReturns(t, seedPool(t, 2*time.Second), f.Mountpoint(), time.Now())
	if err == nil || !strings.Contains(err.Error(), "did not finish within") {
		t.Fatalf("seed of a hung directory: %v, want an error saying it did not finish", err)
	}
	if len(r.starts) != 0 {
		t.Errorf("counted %v from a hung directory", r.starts)
	}
}

// A hung FUSE mount planted in the output directory under a bundle's
// name: lstat(2) of it waits for ever, and the old seed made it in the
// watcher. The directory's own listing says it is a directory, which is
// no bundle, so it is not even looked at; the real bundle beside it
// still counts.
func TestRateSeedHungMountInOutputDir(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC().Truncate(time.Second)
	host, _ := os.Hostname()
	real := naming.Name{Host: naming.SafeHost(host), Time: now.Add(-10 * time.Minute)}
	writeBundleAt(t, filepath.Join(dir, real.String()), host, real.Time)
	planted := naming.Name{Host: naming.SafeHost(host), Time: now.Add(-5 * time.Minute)}
	testkit.HungFUSE(t, filepath.Join(dir, planted.String()), testkit.FUSEStartHung())
	r, err := seedReturns(t, seedPool(t, 10*time.Second), dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.starts) != 1 || !r.starts[0].Equal(real.Time) {
		t.Fatalf("counted %v, want the one real bundle at %v", r.starts, real.Time)
	}
}

// writeBundleAt writes at p a bundle of no files whose manifest names
// host and start.
func writeBundleAt(t *testing.T, p, host string, start time.Time) {
	t.Helper()
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Tool: bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		Host: bundle.Host{Hostname: host}, StartedAt: start, FinishedAt: start, Status: bundle.BundleComplete,
		Collectors: []bundle.CollectorResult{}, Files: []bundle.FileEntry{}, HungMounts: []bundle.HungItem{}, Omitted: []bundle.Omitted{},
		Redaction: bundle.RedactionSummary{Rules: map[string]int{}}}
	if _, err := bundle.Write(context.Background(), p, bundle.Gzip, m, t.TempDir(), start); err != nil {
		t.Fatal(err)
	}
}

// The /metrics listener holds at most its limit of connections: past
// it, a connection waiting for a request gives its slot to the new one
// (the client holding the most slots first), one answering a request
// never does, and when every slot is answering the new one is closed.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(inner, 2)
	defer ln.Close()
	accepted := make(chan *limitConn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.(*limitConn)
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(make([]byte, 1))
		return n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}
	a := dial()
	ac := <-accepted
	b := dial()
	bc := <-accepted
	ac.answering(true) // a is being answered; b waits
	c := dial()
	<-accepted
	if !closed(b) {
		t.Fatalf("the waiting connection kept its slot past the limit")
	}
	_ = bc
	ac.answering(false)
	ac.answering(true)
	// a answering, c waiting: d takes c's slot; with both answering, e is closed.
	d := dial()
	dc := <-accepted
	if !closed(c) {
		t.Fatalf("the waiting connection kept its slot past the limit")
	}
	dc.answering(true)
	e := dial()
	if !closed(e) {
		t.Fatalf("a connection past the limit was kept while every slot answered")
	}
	ac.Close()
	dial()
	select {
	case got := <-accepted:
		got.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("a freed slot was not taken again")
	}
	_ = a
	_ = d
}
