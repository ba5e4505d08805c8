// Package outputdir looks after the directory nodesnap writes bundles to
// when it runs unattended (cron, a systemd timer, a Kubernetes pod): a lock
// so two runs never collect into it at once, a free-space check before a
// run starts, and retention of the newest bundles of this host.
//
// The output directory is the user's own choice of a local directory, the
// one place the supervisor writes; touching it directly (flock, statfs,
// readdir) is the same exception the supervisor already makes for it.
package outputdir

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
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
			ErrLowSpace, dir, human(free), human(min))
	}
	return nil
}

func human(n uint64) string {
	f := float64(n)
	for _, u := range []string{"B", "KiB", "MiB", "GiB", "TiB"} {
		if f < 1024 || u == "TiB" {
			if u == "B" {
				return fmt.Sprintf("%d B", n)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
		f /= 1024
	}
	return ""
}
