package openfiles

import (
	"context"
	"fmt"
	"strconv"
)

// Reading every process's maps in batches, before the per-process scan
// needs them. One worker round trip per process (a request encoded, a
// worker woken, the answer decoded) cost more than the kernel's work at a
// thousand processes; a batch serves mapsBatch of them. A batch that
// misses its deadline (a process's mmap lock is held) answers none: its
// processes are read one by one as before, so the one that hangs is named
// with its evidence, and the others are still read.

// mapsBatch is how many processes' maps one worker item reads.
const mapsBatch = 32

type mapsPrefetch struct {
	batchOf map[int]*mapsBatchRun // pid → its batch
}

type mapsBatchRun struct {
	done    chan struct{}
	pids    []int
	results map[int]mapsOne // set once done, nil when the batch failed
}

// prefetchMaps starts reading the maps of pids in batches, at most the
// maps limiter's size at once.
func (s *ofScanner) prefetchMaps(ctx context.Context, pids []int) *mapsPrefetch {
	pf := &mapsPrefetch{batchOf: make(map[int]*mapsBatchRun, len(pids))}
	var batches []*mapsBatchRun
	for lo := 0; lo < len(pids); lo += mapsBatch {
		b := &mapsBatchRun{done: make(chan struct{}), pids: pids[lo:min(lo+mapsBatch, len(pids))]}
		for _, pid := range b.pids {
			pf.batchOf[pid] = b
		}
		batches = append(batches, b)
	}
	go func() {
		for _, b := range batches {
			if s.maps.acquire(ctx) != nil {
				close(b.done)
				continue
			}
			go func() {
				defer close(b.done)
				defer s.maps.release()
				rq := mapsBatchRequest{Max: s.mapsMax}
				for _, pid := range b.pids {
					rq.Paths = append(rq.Paths, s.proc+"/"+strconv.Itoa(pid)+"/maps")
				}
				target := fmt.Sprintf("%s and %d more maps files in one request", rq.Paths[0], len(rq.Paths)-1)
				var res mapsBatchResult
				if err := s.env.Do(ctx, opOpenFilesMapsBatch, target, rq, &res); err != nil || len(res.Results) != len(b.pids) {
					return
				}
				b.results = make(map[int]mapsOne, len(b.pids))
				for i, pid := range b.pids {
					b.results[pid] = res.Results[i]
				}
			}()
		}
	}()
	return pf
}

// get waits for pid's batch and returns its answer; ok is false when the
// batch failed or pid's read did (the caller reads it on its own then).
func (pf *mapsPrefetch) get(ctx context.Context, pid int) (mapsOne, bool) {
	if pf == nil {
		return mapsOne{}, false
	}
	b := pf.batchOf[pid]
	if b == nil {
		return mapsOne{}, false
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return mapsOne{}, false
	}
	r, ok := b.results[pid]
	if !ok || r.Err != "" && !r.Gone {
		return mapsOne{}, false
	}
	return r, true
}
