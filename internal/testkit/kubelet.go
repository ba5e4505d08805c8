package testkit

import (
	"net/http"
	"net/http/pprof"
	"testing"
)

// cleanupOrphanedPodDirs stands in for the kubelet's housekeeping stuck on
// a dead cephfs path (incident 003): a goroutine parks here, so goroutine
// dumps served by KubeletMux show this frame.
//
//go:noinline
func cleanupOrphanedPodDirs(stuck <-chan struct{}, parked chan<- struct{}) {
	close(parked)
	<-stuck
}

// KubeletMux returns a mux serving this test process's real net/http/pprof
// handlers (/debug/pprof/...) while one of its goroutines is parked in a
// function named cleanupOrphanedPodDirs, released when the test ends.
// Callers add the kubelet's other endpoints (healthz, metrics, configz,
// pods) and its authentication around it.
func KubeletMux(t testing.TB) *http.ServeMux {
	t.Helper()
	stuck, parked := make(chan struct{}), make(chan struct{})
	go cleanupOrphanedPodDirs(stuck, parked)
	<-parked
	t.Cleanup(func() { close(stuck) })
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}
