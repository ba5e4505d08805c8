package csi

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// The worker's walk of every process's fd links, for an inode nobody
// holds: what one collection pays on this machine per run.
//
//	go test -run '^$' -bench BenchmarkSocketOwners -benchmem ./collectors/csi/
func BenchmarkSocketOwners(b *testing.B) {
	fds := 0
	pids, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	fds = len(pids)
	for b.Loop() {
		r, err := socketOwnersOp(socketOwnersRequest{Proc: "/proc", Inodes: []uint64{1<<63 - 1}})
		if err != nil {
			b.Fatal(err)
		}
		if n := len(r.(socketOwnersResult).Owners); n != 0 {
			b.Fatalf("%d owners of an inode nobody holds", n)
		}
	}
	b.ReportMetric(float64(fds), "fds")
}

// The walk finds this process by a socket it holds.
func TestSocketOwnersFindsSelf(t *testing.T) {
	dir, err := os.MkdirTemp("", "so")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, "s.sock")}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	var ino uint64
	if _, err := fmt.Sscanf(link, "socket:[%d]", &ino); err != nil {
		t.Fatalf("%q: %v", link, err)
	}
	// /proc/net/unix lists it, listening, under its path.
	data, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	socks, _ := ParseNetUnix(data)
	found := false
	for _, s := range socks {
		found = found || s.Inode == ino && s.Listening() && s.Path == filepath.Join(dir, "s.sock")
	}
	if !found {
		t.Errorf("/proc/net/unix has no listening socket %d at %s", ino, filepath.Join(dir, "s.sock"))
	}
	r, err := socketOwnersOp(socketOwnersRequest{Proc: "/proc", Inodes: []uint64{ino}})
	if err != nil {
		t.Fatal(err)
	}
	owners := r.(socketOwnersResult).Owners
	if len(owners) != 1 || owners[0].PID != os.Getpid() || owners[0].Inode != ino {
		t.Errorf("owners of socket %d: %+v, want this process %d", ino, owners, os.Getpid())
	}
}
