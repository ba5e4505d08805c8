package isolate

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

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
	// Regular refuses anything but a regular file (a device, FIFO or
	// socket named where a file is meant), before it is opened for
	// reading: see OpenRegular.
	Regular bool `json:"regular,omitempty"`
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
		if rq.Regular {
			return ReadRegularLimited(rq.Path, rq.Max)
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
	return readLimited(f, path, max)
}

// ReadRegularLimited is ReadFileLimited for a regular file only: a device,
// FIFO or socket is refused before it is opened for reading (see
// OpenRegular). It is for use inside isolated children only.
func ReadRegularLimited(path string, max int64) (ReadFileResult, error) {
	if max <= 0 {
		max = 1 << 20
	}
	fd, err := OpenRegular(path, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return ReadFileResult{}, err
	}
	return readLimited(os.NewFile(uintptr(fd), path), path, max)
}

func readLimited(f *os.File, path string, max int64) (ReadFileResult, error) {
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
	fd, err := OpenRegular(path, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return ReadFileResult{}, err
	}
	defer func() { _ = unix.Close(fd) }() // read-only: nothing to lose
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return ReadFileResult{}, &os.PathError{Op: "stat", Path: path, Err: err}
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

// ErrNotRegular is a path named as a file that is a device, FIFO, socket
// or directory: only regular files are read as files.
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path inside the process's boundary with flags, only
// if it is a regular file. The file is first opened with O_PATH (which
// opens no device, waits on no FIFO) and its type asked of that
// descriptor; the regular file is then reopened through the kernel's
// /proc/self/fd link, so the file read is the one checked. Where this
// process has no /proc, it is opened again by name, without blocking, and
// kept only if it is the same file.
func OpenRegular(path string, flags int) (int, error) {
	pfd, err := inroot.Process().Open(path, unix.O_PATH)
	if err != nil {
		return -1, err
	}
	defer func() { _ = unix.Close(pfd) }() // an O_PATH descriptor: nothing to lose
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return -1, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return -1, &os.PathError{Op: "read", Path: path, Err: &notRegular{kind: fileKind(st.Mode), dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}}
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), flags|unix.O_CLOEXEC, 0)
	if err == nil {
		return fd, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return -1, &os.PathError{Op: "open", Path: path, Err: err}
	}
	fd, err = inroot.Process().Open(path, flags|unix.O_NONBLOCK)
	if err != nil {
		return -1, err
	}
	var again unix.Stat_t
	if err := unix.Fstat(fd, &again); err != nil || again.Dev != st.Dev || again.Ino != st.Ino {
		_ = unix.Close(fd)
		return -1, &os.PathError{Op: "read", Path: path, Err: &notRegular{kind: "a file that changed while it was opened"}}
	}
	return fd, nil
}

// notRegular says what a path named as a file is instead; it is
// ErrNotRegular and, across a worker's pipe, EISDIR for a directory (a
// caller that takes directories, as --config-file does, tells it so) and
// EINVAL for the rest.
type notRegular struct {
	kind string
	dir  bool
}

func (e *notRegular) Error() string {
	return "it is " + e.kind + ", not a regular file, so it is not read (a device gives endless bytes, a FIFO waits for a writer)"
}
func (e *notRegular) Is(target error) bool { return target == ErrNotRegular }
func (e *notRegular) Unwrap() error {
	if e.dir {
		return unix.EISDIR
	}
	return unix.EINVAL
}

// fileKind words a file type for a customer.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFIFO:
		return "a FIFO (named pipe)"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "not a file"
}
