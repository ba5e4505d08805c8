// Package owndesc reads a file given as one of nodesnap's own descriptors
// (/dev/stdin, /dev/fd/N, /proc/self/fd/N: what a shell's <(...) and a
// pipe give) in the supervising process, with a deadline. An isolated
// worker cannot: opening /dev/fd/63 there opens its own descriptor 63, and
// its /dev/stdin is its request pipe. A descriptor is the user's input,
// not a host path, but a pipe whose writer never writes must still not
// hold the run.
package owndesc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Parse reports whether p names one of the reading process's own
// descriptors, and which.
func Parse(p string) (int, bool) {
	p = path.Clean(p)
	if p == "/dev/stdin" {
		return 0, true
	}
	for _, prefix := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(p, prefix); ok {
			fd, err := strconv.Atoi(n)
			if err != nil || fd < 0 || fd > 1<<20 || strconv.Itoa(fd) != n {
				return 0, false
			}
			return fd, true
		}
	}
	return 0, false
}

// ErrNotOpen is a descriptor that is not open in this process.
var ErrNotOpen = errors.New("descriptor not open in nodesnap")

// FilePath is the path of the regular file a descriptor was opened on (a
// shell's 3<file), "" for a pipe, socket, terminal or deleted file: such a
// file is a host path, to be read where every path is read, in a worker.
func FilePath(fd int) (string, error) {
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", fmt.Errorf("descriptor %d: %w", fd, ErrNotOpen)
	}
	if strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "/dev/") && !strings.HasSuffix(target, " (deleted)") {
		return target, nil
	}
	return "", nil
}

// Read reads up to max bytes from descriptor fd until EOF, within timeout
// (or ctx's deadline, if earlier). It opens the descriptor anew (a
// description of its own, so a shell's terminal is not left
// non-blocking), or, for a socket that cannot be reopened, reads a
// duplicate.
func Read(ctx context.Context, fd int, timeout time.Duration, max int64) ([]byte, error) {
	link := "/proc/self/fd/" + strconv.Itoa(fd)
	f, err := os.OpenFile(link, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		nfd, derr := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if derr != nil {
			return nil, err
		}
		if derr := unix.SetNonblock(nfd, true); derr != nil {
			_ = unix.Close(nfd)
			return nil, err
		}
		f = os.NewFile(uintptr(nfd), link)
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := f.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("it cannot be read with a deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	defer stop()
	data, err := io.ReadAll(io.LimitReader(f, max))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("nothing was written to it within %s (the command writing it may be waiting or failed)", timeout)
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}
