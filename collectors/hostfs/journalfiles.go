package hostfs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/internal/inroot"
)

// Finding and opening a host's journal files, shared by the journal
// collector and the watcher's journal signal.

func isJournalFileName(n string) bool {
	return strings.HasSuffix(n, ".journal") || strings.HasSuffix(n, ".journal~")
}

// isMachineID: journald's per-machine directories are named by the
// 128-bit machine id in hex (namespaces, "<id>.<name>", are not read, as
// journalctl does not without --namespace).
func isMachineID(n string) bool {
	if len(n) != 32 {
		return false
	}
	_, err := hex.DecodeString(n)
	return err == nil
}

// ListJournalFiles lists the journal files (*.journal, *.journal~) in dirs and
// their machine-id subdirectories, names only (nothing is stat()ed), at
// most max of them; problems says which directories could not be listed
// (a missing one is none). It reads host directories: call it only in a
// worker.
func ListJournalFiles(dirs []string, max int) ([]string, []string) {
	var files, problems []string
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		l, err := ListDir(dir, 4096)
		if err != nil {
			if !errors.Is(err, syscall.ENOENT) {
				problems = append(problems, err.Error())
			}
			return
		}
		for _, e := range l.Entries { // sorted by the listing
			n := e.Name
			switch {
			case e.MaybeFile() && isJournalFileName(n):
				if len(files) < max {
					files = append(files, path.Join(dir, n))
				}
			case e.IsDir() && depth == 0 && isMachineID(n):
				walk(path.Join(dir, n), 1)
			}
		}
	}
	for _, d := range dirs {
		walk(d, 0)
	}
	return files, problems
}

// OpenRegular opens a regular file without blocking on a FIFO, and says
// its size. It opens a host path: call it only in a worker.
func OpenRegular(p string) (*os.File, int64, error) {
	fd, err := inroot.Process().Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, 0, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, 0, fmt.Errorf("%s is not a regular file", p)
	}
	_ = unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), p), st.Size, nil
}
