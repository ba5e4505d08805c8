package watch

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/naming"
)

// The attacks of issue 38 (round two) on the watch, through the real
// binary: a local user's slowloris against /metrics and /healthz, and
// bundle-shaped names planted in a shared output directory.

// 100 clients each send a request's header a few bytes at a time and
// reconnect as soon as they are closed, while a scraper asks /healthz and
// /metrics 20 times: every scrape is answered (one may fail on a machine
// loaded far past its cores, see below). Before, 16 trickling connections
// held every slot and 19 of 20 scrapes failed (20 of 20 here).
func TestWatchHoldsUnderSlowloris(t *testing.T) {
	w := startWatcher(t, quickConfig)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var opened atomic.Int64
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				c, err := net.DialTimeout("tcp", w.addr, 5*time.Second)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				opened.Add(1)
				// A header that never ends: a byte every 100 ms until
				// the server closes the connection or the test ends.
				for _, b := range []byte("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ") {
					if stop.Load() {
						break
					}
					c.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := c.Write([]byte{b}); err != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				for !stop.Load() {
					c.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := c.Write([]byte("a")); err != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				c.Close()
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	time.Sleep(2 * time.Second) // the slots are taken
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	failed := 0
	for i := 0; i < 20; i++ {
		path := "/healthz"
		if i%2 == 1 {
			path = "/metrics"
		}
		resp, err := client.Get("http://" + w.addr + path)
		if err != nil {
			failed++
			t.Logf("scrape %d (%s): %v", i, path, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			failed++
			t.Logf("scrape %d (%s): HTTP %d", i, path, resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d slow connections opened; %d of 20 scrapes failed", opened.Load(), failed)
	// A client that connects and is then not scheduled to send its
	// request looks, for that while, like the slowloris: on a machine
	// loaded far past its cores one scrape in 20 may lose its slot so
	// (seen once in 9 runs at load 40 on 2 cores before the fresh
	// connection's grace; none since). More is the old behaviour.
	if failed > 1 {
		t.Errorf("%d of 20 scrapes failed under a slowloris of 100 connections", failed)
	}
}

// Four empty bundle-shaped files planted by nobody, dated in the last
// hour, in a shared (1777) output directory, and one dated tomorrow: the
// watch still collects when its trigger fires (max_per_hour 4). Before,
// they counted as four collections of the hour and the watch refused.
func TestWatchIgnoresPlantedBundleNames(t *testing.T) {
	var failing atomic.Bool
	url := kubeletStandIn(t, &failing)
	now := time.Now().UTC()
	w := startWatcherPrepared(t, nil, quickConfig+"max_per_hour: 4\ntriggers: {kubelet-unhealthy: {for: 1s}}\n", func(out string) {
		if err := os.Chmod(out, 0o1777); err != nil {
			t.Fatal(err)
		}
		host, _ := os.Hostname()
		for i, at := range []time.Time{now.Add(-10 * time.Minute), now.Add(-8 * time.Minute), now.Add(-6 * time.Minute), now.Add(-4 * time.Minute), now.Add(24 * time.Hour)} {
			p := filepath.Join(out, naming.Name{Host: host, Time: at, Label: fmt.Sprintf("planted%d", i)}.String())
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
	}, "--triggers", TriggerKubeletUnhealthy, "--kubelet-healthz-url", url)
	failing.Store(true)
	deadline := time.Now().Add(90 * time.Second)
	for {
		var real []string
		for _, b := range w.bundles(t) {
			if fi, err := os.Stat(b); err == nil && fi.Size() > 0 {
				real = append(real, b)
			}
		}
		if len(real) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no collection within 90s with four planted names in the directory; the watcher said:\n%s\nmetrics:\n%s", w.log, w.metrics(t))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
