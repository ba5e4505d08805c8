// Package shared holds what the collectors that scan every process share:
// the boot time tasks' start times count from, the host's mount namespace,
// telling a process that went away from an error, reading /proc with a
// few goroutines, the filesystem magic numbers, and milliseconds as
// reports write them. Block devices are package blockdev, streamed JSON
// jsonlines, byte-size flags internal/cliflag. A collector's own helpers
// stay in its package.
package shared

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

func BootTime(env *collectors.Env) time.Time {
	b, err := hostfs.ReadProc(env.ProcPath("stat"), nil)
	if err != nil {
		return time.Time{}
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("btime ")); ok {
			if s, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}

func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// FSMagic names the statfs f_type values most often seen on nodes.
var FSMagic = map[int64]string{
	0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
	0x794C7630: "overlay", 0x6969: "nfs", 0x65735546: "fuse", 0x00C36400: "ceph",
	0xFF534D42: "cifs", 0xFE534D42: "smb2", 0x9FA0: "proc", 0x62656572: "sysfs",
	0x63677270: "cgroup2", 0x27E0EB: "cgroup", 0x1CD1: "devpts", 0x73717368: "squashfs",
	0x2FC12FC1: "zfs", 0x858458F6: "ramfs", 0x6E736673: "nsfs", 0x19800202: "mqueue",
	0xCAFE4A11: "bpf", 0x74726163: "tracefs", 0x64626720: "debugfs",
}

// HostNamespace returns the host's mount namespace: pid 1's, or when
// that cannot be read (a sandbox that hides its init), kthreadd's (pid 2):
// kernel threads live in the initial mount namespace, which is pid 1's on
// any ordinary host.
func HostNamespace(env *collectors.Env) (uint64, error) {
	ns, err := hostfs.NSInode(env.ProcPath("1", "ns", "mnt"))
	if err == nil {
		return ns, nil
	}
	if ns2, err2 := hostfs.NSInode(env.ProcPath("2", "ns", "mnt")); err2 == nil && isKthreadd(env.ProcPath("2")) {
		return ns2, nil
	}
	return 0, fmt.Errorf("cannot tell the host's mount namespace: %w", err)
}

// isKthreadd reports whether the process at dir is kthreadd.
func isKthreadd(dir string) bool {
	return hostfs.ReadComm(dir+"/comm") == "kthreadd"
}

// Gone reports whether err means the process or task went away while being
// read (an ordinary race, not worth a note).
func Gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// MaxNSCandidates bounds the tasks remembered per namespace for reading
// its mountinfo: the first one nearly always works.
const MaxNSCandidates = 16

// Parallel calls fn(i) for i in [0, n) on up to workers goroutines,
// stopping early when ctx ends.
func Parallel(ctx context.Context, n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
