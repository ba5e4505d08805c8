package openfiles

// The worker side: reading one process's maps, condensed to each mapped file once.

import (
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

const (
	maxHolderUses  = 16
	maxHolderPaths = 8
)

// mapsRequest asks a worker for one process's mapped files.
type mapsRequest struct {
	Path string `json:"path"`
	Max  int64  `json:"max"`
}

// mapsResult is the condensed answer: each mapped file once.
type mapsResult struct {
	Files     []ofMapped `json:"files"`
	Truncated bool       `json:"truncated,omitempty"`
	BadLines  int        `json:"bad_lines,omitempty"`
}

type ofMapped struct {
	Path    string `json:"p"`
	Major   uint32 `json:"ma"`
	Minor   uint32 `json:"mi"`
	Inode   uint64 `json:"i"`
	Deleted bool   `json:"d,omitempty"`
}

// openFilesMapsOp runs in a worker: it reads one maps file (which may block
// on the process's mmap lock) and returns its distinct files, so that only
// a few hundred bytes cross the pipe instead of the whole file.
func openFilesMapsOp(rq mapsRequest) (any, error) {
	r, err := isolate.ReadFileLimited(rq.Path, rq.Max)
	if err != nil {
		return nil, err
	}
	return condenseMaps(r.Data, r.Truncated), nil
}

func condenseMaps(data []byte, truncated bool) mapsResult {
	entries, bad := procfs.ParseMaps(data)
	res := mapsResult{Truncated: truncated, BadLines: len(bad), Files: []ofMapped{}}
	type key struct {
		path         string
		major, minor uint32
		inode        uint64
	}
	seen := map[key]bool{}
	for _, e := range entries {
		if !e.IsFile() {
			continue
		}
		k := key{e.Pathname, e.Major, e.Minor, e.Inode}
		if seen[k] {
			continue
		}
		seen[k] = true
		res.Files = append(res.Files, ofMapped{Path: e.Pathname, Major: e.Major, Minor: e.Minor, Inode: e.Inode, Deleted: e.Deleted})
	}
	return res
}

// opOpenFilesMapsBatch reads and condenses several processes' maps in one
// worker item.
const opOpenFilesMapsBatch = "openfiles.maps.batch"

// mapsBatchRequest asks a worker for the mapped files of the processes
// whose maps files are Paths.
type mapsBatchRequest struct {
	Paths []string `json:"paths"`
	Max   int64    `json:"max"`
}

// mapsBatchResult answers Paths in order.
type mapsBatchResult struct {
	Results []mapsOne `json:"results"`
}

// mapsOne is one process's answer, or why there is none.
type mapsOne struct {
	mapsResult
	Err  string `json:"err,omitempty"`
	Gone bool   `json:"gone,omitempty"` // the process exited meanwhile
}

func openFilesMapsBatchOp(rq mapsBatchRequest) (any, error) {
	res := mapsBatchResult{Results: make([]mapsOne, 0, len(rq.Paths))}
	for _, p := range rq.Paths {
		r, err := isolate.ReadFileLimited(p, rq.Max)
		if err != nil {
			res.Results = append(res.Results, mapsOne{Err: err.Error(), Gone: shared.Gone(err)})
			continue
		}
		res.Results = append(res.Results, mapsOne{mapsResult: condenseMaps(r.Data, r.Truncated)})
	}
	return res, nil
}
