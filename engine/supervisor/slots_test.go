package supervisor

import (
	"testing"
	"time"
)

// A freed place goes to the waiting collector with the longest deadline,
// ties to the one given first; a waiter stopped before its turn leaves
// the queue without taking a place.
func TestSlotsLongestFirst(t *testing.T) {
	s := newSlots(1)
	never := make(chan struct{})
	if !s.acquire(never, time.Second, 0) {
		t.Fatal("the first acquire did not get the free place")
	}
	order := make(chan int, 8)
	waiters := []struct {
		weight time.Duration
		order  int
	}{{10 * time.Second, 1}, {60 * time.Second, 2}, {40 * time.Second, 3}, {60 * time.Second, 4}}
	for _, w := range waiters {
		go func() {
			if s.acquire(never, w.weight, w.order) {
				order <- w.order
			}
		}()
	}
	stop := make(chan struct{})
	stopped := make(chan bool)
	go func() { stopped <- s.acquire(stop, time.Hour, 5) }()
	// Every waiter queued, the stopped one included.
	for {
		s.mu.Lock()
		n := len(s.waiting)
		s.mu.Unlock()
		if n == len(waiters)+1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	if <-stopped {
		t.Fatal("a waiter stopped before its turn got a place")
	}
	var seq []int
	for range waiters {
		s.release()
		seq = append(seq, <-order)
	}
	want := []int{2, 4, 3, 1}
	for i := range want {
		if seq[i] != want[i] {
			t.Fatalf("places went to %v, want %v (longest deadline first, ties in the order given)", seq, want)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free != 0 || len(s.waiting) != 0 {
		t.Errorf("after the last grant: %d free, %d waiting; want 0 and 0", s.free, len(s.waiting))
	}
}
