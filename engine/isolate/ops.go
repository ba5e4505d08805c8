package isolate

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/internal/inroot"
)

// Built-in per-item operations. Each one touches exactly one path, so that
// a path on a hung mount costs exactly one item's deadline.
const (
	OpStat     = "stat"
	OpStatfs   = "statfs"
	OpReadFile = "readfile"
	OpReadlink = "readlink"
)

// StatRequest asks for stat (or lstat) of a path.
type StatRequest struct {
	Path   string `json:"path"`
	Follow bool   `json:"follow,omitempty"`
}

// StatResult is the part of struct stat nodesnap uses.
type StatResult struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Mode    uint32 `json:"mode"`
	Nlink   uint64 `json:"nlink"`
	UID     uint32 `json:"uid"`
	GID     uint32 `json:"gid"`
	Rdev    uint64 `json:"rdev"`
	Size    int64  `json:"size"`
	Blocks  int64  `json:"blocks"`
	MtimeNs int64  `json:"mtime_ns"`
}

// StatfsResult is the part of struct statfs nodesnap uses.
type StatfsResult struct {
	Type    int64  `json:"type"`
	Bsize   int64  `json:"bsize"`
	Blocks  uint64 `json:"blocks"`
	Bfree   uint64 `json:"bfree"`
	Bavail  uint64 `json:"bavail"`
	Files   uint64 `json:"files"`
	Ffree   uint64 `json:"ffree"`
	Flags   int64  `json:"flags"`
	Namelen int64  `json:"namelen"`
}

// ReadFileRequest reads at most Max bytes of a file (default 1 MiB): its
// first Max bytes, or with Tail its last Max bytes.
type ReadFileRequest struct {
	Path string `json:"path"`
	Max  int64  `json:"max,omitempty"`
	// Tail reads the end of a regular file (a log): see ReadFileTail.
	Tail bool `json:"tail,omitempty"`
}

// ReadFileResult holds the bytes read.
type ReadFileResult struct {
	Data []byte `json:"data"`
	// Truncated says the file holds more than Data: bytes after it (a
	// head read) or before it (a tail read).
	Truncated bool `json:"truncated,omitempty"`
	// Size is the file's size when it was opened and Offset where Data
	// starts in it; both are set by tail reads only.
	Size   int64 `json:"size,omitempty"`
	Offset int64 `json:"offset,omitempty"`
}

// PathRequest names one path.
type PathRequest struct {
	Path string `json:"path"`
}

// StatFromUnix converts a unix.Stat_t.
func StatFromUnix(st *unix.Stat_t) StatResult {
	return StatResult{
		Dev: st.Dev, Ino: st.Ino, Mode: st.Mode, Nlink: uint64(st.Nlink),
		UID: st.Uid, GID: st.Gid, Rdev: st.Rdev, Size: st.Size, Blocks: st.Blocks,
		MtimeNs: st.Mtim.Nano(),
	}
}

func init() {
	RegisterOp(OpStat, Typed(func(rq StatRequest) (any, error) {
		flags := unix.O_PATH
		if !rq.Follow {
			flags |= unix.O_NOFOLLOW
		}
		fd, err := inroot.Process().Open(rq.Path, flags)
		if err != nil {
			return nil, err
		}
		defer func() { _ = unix.Close(fd) }() // an O_PATH descriptor: nothing to lose
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, &os.PathError{Op: "stat", Path: rq.Path, Err: err}
		}
		return StatFromUnix(&st), nil
	}))
	RegisterOp(OpStatfs, Typed(func(rq PathRequest) (any, error) {
		fd, err := inroot.Process().Open(rq.Path, unix.O_PATH)
		if err != nil {
			return nil, err
		}
		defer func() { _ = unix.Close(fd) }() // an O_PATH descriptor: nothing to lose
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil {
			return nil, &os.PathError{Op: "statfs", Path: rq.Path, Err: err}
		}
		return StatfsResult{Type: st.Type, Bsize: st.Bsize, Blocks: st.Blocks, Bfree: st.Bfree,
			Bavail: st.Bavail, Files: st.Files, Ffree: st.Ffree, Flags: st.Flags, Namelen: st.Namelen}, nil
	}))
	RegisterOp(OpReadFile, Typed(func(rq ReadFileRequest) (any, error) {
		if rq.Tail {
			return ReadFileTail(rq.Path, rq.Max)
		}
		return ReadFileLimited(rq.Path, rq.Max)
	}))
	RegisterOp(OpReadlink, Typed(func(rq PathRequest) (any, error) {
		return inroot.Process().Readlink(rq.Path)
	}))
}

// ReadFileLimited reads at most max bytes (1 MiB when max <= 0) without
// stat()ing first: /proc and /sys files report sizes of 0 or 4096.
// It is for use inside isolated children only.
func ReadFileLimited(path string, max int64) (ReadFileResult, error) {
	if max <= 0 {
		max = 1 << 20
	}
	f, err := inroot.Process().File(path, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return ReadFileResult{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return ReadFileResult{Data: data}, fmt.Errorf("reading %s: %w", path, err)
	}
	r := ReadFileResult{Data: data}
	if int64(len(data)) > max {
		r.Data = data[:max]
		r.Truncated = true
	}
	return r, nil
}

// ReadFileTail reads the last max bytes (1 MiB when max <= 0) of a regular
// file: the newest part of a log, however large the log. The file is
// opened without blocking (a FIFO is refused, never waited on), its size
// taken from fstat of the open file, and the window read with pread, so
// bytes appended meanwhile are not read and a file that shrank gives what
// is left. Anything but a regular file is refused: its size says nothing
// about where its end is. It is for use inside isolated children only.
func ReadFileTail(path string, max int64) (ReadFileResult, error) {
	if max <= 0 {
		max = 1 << 20
	}
	fd, err := inroot.Process().Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return ReadFileResult{}, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return ReadFileResult{}, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ReadFileResult{}, fmt.Errorf("%s is not a regular file, so its end cannot be read: %w", path, unix.EINVAL)
	}
	r := ReadFileResult{Size: st.Size}
	if st.Size > max {
		r.Offset, r.Truncated = st.Size-max, true
	}
	buf := make([]byte, st.Size-r.Offset)
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], r.Offset+int64(n))
		if m > 0 {
			n += m
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ReadFileResult{}, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break // the file shrank after fstat
		}
	}
	r.Data = buf[:n]
	return r, nil
}
