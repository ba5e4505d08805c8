package openfiles

// The worker side: reading one process's maps, condensed to each mapped file once.

import (
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

const (
	maxHolderUses  = 16
	maxHolderPaths = 8
)

// ofMapsRequest asks a worker for one process's mapped files.
type ofMapsRequest struct {
	Path string `json:"path"`
	Max  int64  `json:"max"`
}

// ofMapsResult is the condensed answer: each mapped file once.
type ofMapsResult struct {
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
func openFilesMapsOp(rq ofMapsRequest) (any, error) {
	r, err := isolate.ReadFileLimited(rq.Path, rq.Max)
	if err != nil {
		return nil, err
	}
	return condenseMaps(r.Data, r.Truncated), nil
}

func condenseMaps(data []byte, truncated bool) ofMapsResult {
	entries, bad := procfs.ParseMaps(data)
	res := ofMapsResult{Truncated: truncated, BadLines: len(bad), Files: []ofMapped{}}
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
