package openfiles

import (
	"os"
	"strconv"
	"testing"
)

// The batch op answers every path in order: this process's maps with its
// own executable among the files, a process that does not exist as gone,
// and a path that is no maps file as an error that is not "gone".
func TestMapsBatchOpAnswersEachPath(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/proc/" + strconv.Itoa(os.Getpid()) + "/maps", "/proc/2147483647/maps", t.TempDir() + "/no-such-file/maps"}
	out, err := openFilesMapsBatchOp(mapsBatchRequest{Paths: paths, Max: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	res := out.(mapsBatchResult).Results
	if len(res) != len(paths) {
		t.Fatalf("%d answers for %d paths", len(res), len(paths))
	}
	found := false
	for _, f := range res[0].Files {
		found = found || f.Path == self
	}
	if res[0].Err != "" || !found {
		t.Errorf("own maps: err %q, %d files, own executable %s among them: %v", res[0].Err, len(res[0].Files), self, found)
	}
	if !res[1].Gone || res[1].Err == "" {
		t.Errorf("a process that does not exist: %+v, want gone", res[1])
	}
	if !res[2].Gone {
		// ENOENT counts as gone too: a pid directory that vanished.
		t.Errorf("a missing file: %+v, want gone (ENOENT)", res[2])
	}
}

// get falls back (ok false) for a pid of a failed batch and for one whose
// own read failed other than by exiting, and answers the others.
func TestMapsPrefetchGet(t *testing.T) {
	done := make(chan struct{})
	close(done)
	ok := &mapsBatchRun{done: done, pids: []int{1, 2, 3}, results: map[int]mapsOne{
		1: {mapsResult: mapsResult{Files: []ofMapped{{Path: "/bin/x"}}}},
		2: {Err: "permission denied"},
		3: {Err: "no such process", Gone: true},
	}}
	failed := &mapsBatchRun{done: done, pids: []int{4}}
	pf := &mapsPrefetch{batchOf: map[int]*mapsBatchRun{1: ok, 2: ok, 3: ok, 4: failed}}
	ctx := t.Context()
	if r, got := pf.get(ctx, 1); !got || len(r.Files) != 1 {
		t.Errorf("pid 1: %+v %v", r, got)
	}
	if _, got := pf.get(ctx, 2); got {
		t.Errorf("pid 2 (its read failed): answered, want a fallback")
	}
	if r, got := pf.get(ctx, 3); !got || !r.Gone {
		t.Errorf("pid 3 (exited): %+v %v, want gone", r, got)
	}
	if _, got := pf.get(ctx, 4); got {
		t.Errorf("pid 4 (its batch failed): answered, want a fallback")
	}
	if _, got := pf.get(ctx, 5); got {
		t.Errorf("pid 5 (in no batch): answered")
	}
}
