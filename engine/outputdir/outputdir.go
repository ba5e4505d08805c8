// Package outputdir owns the directory nodesnap writes bundles to: its
// checks (made 0700 when missing), the lock so that two runs never collect
// into it at once, the free-space check, the staging directory (there or
// in --tmp-dir), the bundle's name (by bundle/naming), writing the bundle and its
// .sha256 sidecar without ever replacing a file, encryption to
// --encrypt-to keys, the obfuscation mapping, and retention of this host's
// newest bundles.
//
// The output directory is a path like any other: it may sit on a mount
// that stops answering. So the supervisor never touches it: every
// operation runs in a worker process under a deadline (Output, Open). The
// functions of this file and of lock.go and retention.go are what those
// workers run.
package outputdir

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/internal/human"
)

// ErrLowSpace is wrapped when the output filesystem has less free space
// than asked for.
var ErrLowSpace = errors.New("not enough free space in the output directory")

// Free returns the bytes an unprivileged writer may still use on the
// filesystem holding dir. Root may dip into the reserved blocks too, but a
// bundle that fills a node's disk to the last reserved block would make a
// sick node sicker, so the smaller figure is the one that counts.
func Free(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("checking free space in %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// CheckFree refuses, with a message a customer can act on, when the
// filesystem holding dir has less than min bytes available.
func CheckFree(dir string, min uint64) error {
	if min == 0 {
		return nil
	}
	free, err := Free(dir)
	if err != nil {
		return err
	}
	if free < min {
		return fmt.Errorf("%w: %s has %s free, nodesnap needs at least %s (--min-free); free some space, or write elsewhere with --output-dir",
			ErrLowSpace, dir, human.Bytes(int64(free)), human.Bytes(int64(min)))
	}
	return nil
}
