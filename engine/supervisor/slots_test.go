package supervisor

import (
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
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

func started(b *blockedWaiter) bool {
	select {
	case <-b.start:
		return true
	default:
		return false
	}
}

// A place that no ready collector takes starts the child of a collector
// still waiting for others: the nearest to its turn first, then the
// longest deadline; never a place a first collector is still to take,
// and never more early children than free places.
func TestSlotsEarlyStartOnFreePlaces(t *testing.T) {
	s := newSlots(2)
	s.expect(2)
	mountprobe := s.block(1, 20*time.Second, 2)
	dirshape := s.block(2, 60*time.Second, 3)
	host := s.block(2, 15*time.Second, 4)
	if started(mountprobe) || started(dirshape) || started(host) {
		t.Fatal("an early start took a place the first collectors have not asked for yet")
	}
	never := make(chan struct{})
	for i := range 2 {
		if !s.acquireAs(never, time.Second, i, nil) {
			t.Fatal("a first collector did not get its place")
		}
	}
	if started(mountprobe) || started(dirshape) || started(host) {
		t.Fatal("an early start with no place free")
	}
	s.release()
	if !started(mountprobe) || started(dirshape) || started(host) {
		t.Fatalf("one place free: started mountprobe=%v dirshape=%v host=%v; want mountprobe alone (fewest ahead of it)",
			started(mountprobe), started(dirshape), started(host))
	}
	s.release()
	if !started(dirshape) || started(host) {
		t.Fatalf("two places free: dirshape started=%v host=%v; want dirshape (the longest deadline) alone", started(dirshape), started(host))
	}
	// mountprobe is ready: it takes a place; its early child no longer
	// counts, and the one place left is dirshape's.
	if !s.acquireAs(never, 20*time.Second, 2, mountprobe) {
		t.Fatal("mountprobe did not get a free place")
	}
	if started(host) {
		t.Fatal("host started early although the free place is held by dirshape's early child")
	}
	s.release() // mountprobe done
	if !started(host) {
		t.Fatal("a place free again and host, still waiting, not started early")
	}
	for _, b := range []*blockedWaiter{dirshape, host} {
		if !s.acquireAs(never, time.Second, 3, b) {
			t.Fatal("a collector started early did not get its place")
		}
	}
	s.release()
	s.release()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.early != 0 || len(s.blocked) != 0 || s.free != 2 {
		t.Errorf("at the end: early %d, blocked %d, free %d; want 0, 0, 2", s.early, len(s.blocked), s.free)
	}
}

func TestDepths(t *testing.T) {
	specs := []*collectors.Spec{
		{Name: "a"}, {Name: "b", After: []string{"a"}}, {Name: "c", After: []string{"b", "a", "unselected"}}, {Name: "d", After: []string{"unselected"}},
	}
	got := depths(specs)
	want := map[string]int{"a": 0, "b": 1, "c": 2, "d": 0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("depth of %s = %d, want %d", k, got[k], v)
		}
	}
}
