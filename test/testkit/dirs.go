package testkit

import (
	"errors"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// ManySubdirs creates n empty subdirectories of parent, named d0000000,
// d0000001, ... (SubdirName), with one mkdir(2) each: about 40µs per
// directory on ext4, so 70,000 take about 3 s. Use it for the ext4 nlink
// anomaly: with the dir_nlink feature (on by default), a directory with
// more than 64,998 subdirectories reports st_nlink == 1. On a LoopExt4
// filesystem, give it enough inodes (LoopInodes(n + 1000)); with the
// default 1 KiB blocks of a small image each directory also takes one
// block, so 70,000 need about 128 MiB.
//
// On cleanup the directories are removed again (about 25µs each), unless
// parent is on a LoopExt4 or MountTmpfs filesystem of this test, which is
// thrown away whole anyway.
func ManySubdirs(t testing.TB, parent string, n int) {
	t.Helper()
	buf := make([]byte, 0, len(parent)+16)
	made := 0
	t.Cleanup(func() {
		var st unix.Stat_t
		if err := unix.Stat(parent, &st); err != nil || isScratchDev(st.Dev) {
			return
		}
		for i := 0; i < made; i++ {
			if err := unix.Rmdir(subdirPath(buf[:0], parent, i)); err != nil && !errors.Is(err, unix.ENOENT) {
				t.Errorf("testkit: ManySubdirs cleanup: rmdir %s: %v", subdirPath(nil, parent, i), err)
				return
			}
		}
	})
	for i := 0; i < n; i++ {
		p := subdirPath(buf[:0], parent, i)
		if err := unix.Mkdir(p, 0o755); err != nil {
			t.Fatalf("testkit: ManySubdirs: mkdir %s (after %d of %d): %v", p, i, n, err)
		}
		made++
	}
}

// SubdirName returns the name ManySubdirs gives to its i-th directory.
func SubdirName(i int) string {
	return string(appendSubdirName(nil, i))
}

func appendSubdirName(b []byte, i int) []byte {
	b = append(b, 'd')
	s := strconv.Itoa(i)
	for k := len(s); k < 7; k++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

func subdirPath(b []byte, parent string, i int) string {
	b = append(b, parent...)
	b = append(b, '/')
	return string(appendSubdirName(b, i))
}
