package testkit

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// DefaultFUSESubtype is the FUSE subtype of testkit mounts unless
// FUSESubtype says otherwise: they show up in mountinfo with filesystem
// type "fuse.nodesnap-testkit". Leftovers of a crashed test run can be
// found with `grep fuse.nodesnap-testkit /proc/self/mountinfo` and removed
// with `umount -l`.
const DefaultFUSESubtype = "nodesnap-testkit"

// DefaultFUSEFiles is the tree a testkit FUSE mount serves unless
// FUSEFiles says otherwise.
var DefaultFUSEFiles = map[string]string{
	"README":         "nodesnap testkit FUSE mount\n",
	"data/a.txt":     "a\n",
	"data/b.txt":     "bb\n",
	"data/sub/c.txt": "ccc\n",
	"empty/":         "",
}

// FUSEOption configures HungFUSE and DeadFUSE.
type FUSEOption func(*fuseConfig)

type fuseConfig struct {
	files    map[string]string
	loopback string
	hung     bool
	subtype  string
	source   string
}

// FUSEFiles replaces the served tree. Keys are slash-separated paths
// relative to the mount root, values the file contents; a key ending in
// "/" is an (empty) directory. Parent directories are implied.
func FUSEFiles(files map[string]string) FUSEOption {
	return func(c *fuseConfig) { c.files = files }
}

// FUSELoopback serves the directory dir (read-write, as root sees it)
// instead of a fixed tree: a writable FUSE mount, such as an output
// directory on a network filesystem, that Hang makes stop answering in the
// middle of whatever it is doing.
func FUSELoopback(dir string) FUSEOption {
	return func(c *fuseConfig) { c.loopback = dir }
}

// FUSEStartHung makes HungFUSE return a mount that is already hung: the
// mount is set up and the kernel handshake (INIT) done, but every request
// after that blocks.
func FUSEStartHung() FUSEOption {
	return func(c *fuseConfig) { c.hung = true }
}

// FUSESubtype sets the FUSE subtype, so the mount's filesystem type in
// mountinfo is "fuse.<subtype>" (for example FUSESubtype("ceph-fuse")
// gives "fuse.ceph-fuse", like a real ceph-fuse mount).
func FUSESubtype(subtype string) FUSEOption {
	return func(c *fuseConfig) { c.subtype = subtype }
}

// FUSESource sets the mount source shown in mountinfo (default
// "nodesnap-testkit").
func FUSESource(source string) FUSEOption {
	return func(c *fuseConfig) { c.source = source }
}

// FUSE is a FUSE mount served by goroutines of the test process. See
// HungFUSE and DeadFUSE.
type FUSE struct {
	t          testing.TB
	mountpoint string
	mountID    int
	connID     uint32
	created    []string
	ctl        *fusectl
	server     *fuse.Server
	served     chan struct{}
	gate       *gate

	closeOnce sync.Once
	closeErr  error
}

// HungFUSE mounts a FUSE filesystem at mountpoint (created if missing; ""
// means a fresh directory under t.TempDir()) and serves a small tree
// (DefaultFUSEFiles, or FUSEFiles) from goroutines of the test process.
// Entry and attribute caching are off, so every stat(2) reaches the
// server.
//
// After f.Hang() (or from the start, with FUSEStartHung) every request
// (LOOKUP, GETATTR, STATX, STATFS, OPEN, OPENDIR, READDIR, READ, ...)
// blocks forever: any process that stats, statfs()es, opens or lists the
// mount sits in the kernel. A blocked request that the server has
// already read cannot be interrupted, not even by SIGKILL: the caller
// stays in D state until Close. Never touch a hung mount from the test
// process itself; use child processes.
//
// Close (also registered with t.Cleanup) aborts the connection through
// fusectl (blocked callers wake up with an error), releases the blocked
// handlers, stops the server, unmounts (lazily if busy) and verifies that
// the mount is gone from /proc/self/mountinfo.
func HungFUSE(t testing.TB, mountpoint string, opts ...FUSEOption) *FUSE {
	t.Helper()
	f := mountFUSE(t, mountpoint, opts...)
	if f.gate.hungAtStart {
		f.Hang()
	}
	return f
}

// DeadFUSE mounts a FUSE filesystem at mountpoint ("" means a fresh
// directory under t.TempDir()) and then aborts its connection without
// unmounting it, as when a FUSE daemon such as ceph-fuse dies: the mount
// stays in the mount table and every access fails at once with ENOTCONN
// ("Transport endpoint is not connected"). It is unmounted and verified
// gone on cleanup (or Close).
func DeadFUSE(t testing.TB, mountpoint string, opts ...FUSEOption) *FUSE {
	t.Helper()
	f := mountFUSE(t, mountpoint, opts...)
	if err := f.abort(); err != nil {
		t.Fatalf("testkit: DeadFUSE: %v", err)
	}
	select {
	case <-f.served:
	case <-time.After(10 * time.Second):
		t.Fatalf("testkit: DeadFUSE: server still running 10s after abort")
	}
	return f
}

// Mountpoint returns the canonical path of the mount, as it appears in
// mountinfo.
func (f *FUSE) Mountpoint() string { return f.mountpoint }

// ConnID returns the FUSE connection number: the minor device number of
// the mount (its major is 0), and the name of the connection's directory
// under /sys/fs/fuse/connections.
func (f *FUSE) ConnID() uint32 { return f.connID }

// MountID returns the mount ID (first field of mountinfo) of the mount in
// the test's mount namespace.
func (f *FUSE) MountID() int { return f.mountID }

// Hang makes every later request block until Close. Requests already
// being answered complete normally. Hang is idempotent.
func (f *FUSE) Hang() { f.gate.hung.Store(true) }

// Resume makes the daemon answer again: the requests blocked by Hang
// are served normally (not failed), and so is every later one. A test
// that stacks a filesystem on a hung FUSE mount (a loop device backed by
// a file on it) resumes it before tearing the stack down, so that the
// upper layers see no I/O error. After Resume, Hang has no effect.
func (f *FUSE) Resume() {
	f.gate.resumed.Store(true)
	f.gate.hung.Store(false)
	f.gate.releaseAll()
}

// Blocked returns how many requests are blocked in the server right now.
// Tests can poll it to know that a child process really is in the
// kernel waiting on this mount.
func (f *FUSE) Blocked() int { return int(f.gate.blocked.Load()) }

// WaitBlocked waits until at least n requests are blocked in the server,
// or fails the test after timeout.
func (f *FUSE) WaitBlocked(n int, timeout time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for f.Blocked() < n {
		if time.Now().After(deadline) {
			f.t.Fatalf("testkit: %d requests blocked on %s after %v, want %d", f.Blocked(), f.mountpoint, timeout, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Waiting returns the kernel's count of requests waiting on this
// connection (the "waiting" file of the connection in fusectl): requests
// queued for the server plus requests the server has read but not
// answered.
func (f *FUSE) Waiting() (int, error) {
	b, err := os.ReadFile(filepath.Join(f.ctl.dir, strconv.FormatUint(uint64(f.connID), 10), "waiting"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Close aborts the connection, releases blocked requests, stops the
// server, unmounts the filesystem and checks that it is gone. Close is
// idempotent and is also run by t.Cleanup; failures are reported with
// t.Errorf and returned.
func (f *FUSE) Close() error {
	f.closeOnce.Do(func() {
		f.closeErr = f.close()
		if f.closeErr != nil {
			f.t.Errorf("testkit: closing FUSE mount %s: %v", f.mountpoint, f.closeErr)
		}
	})
	return f.closeErr
}

func (f *FUSE) close() error {
	var errs []error
	// 1. Abort: every request waiting on the connection, queued or
	// already read by the server, completes with an error, so
	// processes stuck in the mount wake up.
	if err := f.abort(); err != nil {
		errs = append(errs, err)
	}
	// 2. Release the server's blocked handlers; their replies fail
	// because the connection is gone, and the readers see ENODEV.
	f.gate.releaseAll()
	select {
	case <-f.served:
	case <-time.After(10 * time.Second):
		errs = append(errs, errors.New("FUSE server still running 10s after abort"))
	}
	// Processes that testkit killed while they were stuck in this mount
	// can be reaped now.
	waitOrphans(5 * time.Second)
	// 3. Unmount and verify.
	if err := unmountVerified(f.mountID, f.mountpoint); err != nil {
		errs = append(errs, err)
	} else {
		removeCreated(f.created)
	}
	if err := f.ctl.release(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// abort writes to the connection's abort file. A connection that is
// already gone (the filesystem was unmounted and released) is fine.
func (f *FUSE) abort() error {
	p := filepath.Join(f.ctl.dir, strconv.FormatUint(uint64(f.connID), 10), "abort")
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("abort FUSE connection %d: %w", f.connID, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("1")); err != nil {
		return fmt.Errorf("abort FUSE connection %d: %w", f.connID, err)
	}
	return nil
}

func mountFUSE(t testing.TB, mountpoint string, opts ...FUSEOption) *FUSE {
	t.Helper()
	RequireFUSE(t)
	cfg := fuseConfig{files: DefaultFUSEFiles, subtype: DefaultFUSESubtype, source: DefaultFUSESubtype}
	for _, o := range opts {
		o(&cfg)
	}
	if mountpoint == "" {
		mountpoint = tempMountpoint(t, "fuse")
	}
	mp, created, err := prepareDir(mountpoint)
	if err != nil {
		t.Fatalf("testkit: FUSE mountpoint: %v", err)
	}
	ctl, err := acquireFusectl()
	if err != nil {
		removeCreated(created)
		t.Fatalf("testkit: fusectl: %v", err)
	}

	g := &gate{release: make(chan struct{}), hungAtStart: cfg.hung}
	zero := time.Duration(0)
	discard := log.New(io.Discard, "", 0)
	var root fs.InodeEmbedder = &treeRoot{files: cfg.files}
	if cfg.loopback != "" {
		lr, err := fs.NewLoopbackRoot(cfg.loopback)
		if err != nil {
			ctl.release()
			removeCreated(created)
			t.Fatalf("testkit: FUSE loopback of %s: %v", cfg.loopback, err)
		}
		root = lr
	}
	raw := fs.NewNodeFS(root, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		Logger:          discard,
	})

	// Open /dev/fuse close-on-exec and mount it ourselves, then hand
	// the fd to go-fuse with its /dev/fd/N convention. (go-fuse's own
	// DirectMount leaves the fd inheritable, so every child process the
	// tests start would hold /dev/fuse open.)
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		ctl.release()
		removeCreated(created)
		t.Fatalf("testkit: open /dev/fuse: %v", err)
	}
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount(cfg.source, mp, "fuse."+cfg.subtype, unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		ctl.release()
		removeCreated(created)
		t.Fatalf("testkit: mount fuse.%s at %s: %v", cfg.subtype, mp, err)
	}
	f := &FUSE{t: t, mountpoint: mp, created: created, ctl: ctl, gate: g, served: make(chan struct{})}
	m, ok, err := lastMountAt(0, mp, func(m MountEntry) bool { return m.FSType == "fuse."+cfg.subtype && m.Major == 0 })
	if err != nil || !ok {
		// Without the connection number we cannot abort; the server
		// is not running, so a plain unmount cannot hang.
		unix.Unmount(mp, unix.MNT_DETACH)
		unix.Close(fd)
		ctl.release()
		t.Fatalf("testkit: FUSE mount at %s not found in /proc/self/mountinfo (err=%v)", mp, err)
	}
	f.mountID, f.connID = m.ID, m.Minor

	server, err := fuse.NewServer(&hungFS{RawFileSystem: raw, g: g}, fmt.Sprintf("/dev/fd/%d", fd), &fuse.MountOptions{
		Name:   cfg.subtype,
		FsName: cfg.source,
		Logger: discard,
	})
	if err != nil {
		// NewServer closed fd on failure; the connection is dead.
		f.abort()
		close(f.served)
		f.gate.releaseAll()
		unmountVerified(f.mountID, mp)
		ctl.release()
		t.Fatalf("testkit: FUSE server: %v", err)
	}
	f.server = server
	go func() {
		defer close(f.served)
		server.Serve()
	}()
	t.Cleanup(func() { f.Close() })

	if _, err := os.Stat(filepath.Join(ctl.dir, strconv.FormatUint(uint64(f.connID), 10), "abort")); err != nil {
		t.Fatalf("testkit: FUSE connection %d has no abort file in fusectl: %v", f.connID, err)
	}
	// go-fuse's poll hack (what Server.WaitMount does for ordinary
	// mountpoints): make the kernel send one POLL, which go-fuse answers
	// ENOSYS, so the kernel never sends POLL again. Otherwise a POLL
	// triggered by the Go runtime's epoll registration of a file on this
	// mount could deadlock the server. The lookup of this magic name is
	// answered by go-fuse itself, never by the (possibly hung) tree.
	if hfd, err := unix.Open(filepath.Join(mp, ".go-fuse-epoll-hack"), unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Poll([]unix.PollFd{{Fd: int32(hfd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0)
		unix.Close(hfd)
	}
	return f
}

// fusectl is a mount of the fusectl filesystem: the host's at
// /sys/fs/fuse/connections when it is mounted there, or else a private
// one that testkit mounts in a temporary directory for the lifetime of
// one FUSE fixture (fusectl has a single superblock, so every mount of it
// shows every connection).
type fusectl struct {
	dir     string
	private bool
	mountID int
	tmp     string
}

func acquireFusectl() (*fusectl, error) {
	ms, err := ReadMountinfo(0)
	if err != nil {
		return nil, err
	}
	// Only the system's mount at its standard place is used: a fusectl
	// mount elsewhere may be another test's private one that can go
	// away under us, and then a missing abort file would wrongly look
	// like a connection that is already gone.
	for _, m := range ms {
		if m.FSType == "fusectl" && m.Mountpoint == "/sys/fs/fuse/connections" {
			return &fusectl{dir: m.Mountpoint}, nil
		}
	}
	tmp, err := os.MkdirTemp("", "nodesnap-testkit-fusectl-")
	if err != nil {
		return nil, err
	}
	dir, err := filepath.EvalSymlinks(tmp)
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if err := unix.Mount("fusectl", dir, "fusectl", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("mount fusectl at %s: %w", dir, err)
	}
	m, ok, err := lastMountAt(0, dir, func(m MountEntry) bool { return m.FSType == "fusectl" })
	if err != nil || !ok {
		unix.Unmount(dir, unix.MNT_DETACH)
		os.Remove(tmp)
		return nil, fmt.Errorf("fusectl mount at %s not in mountinfo (err=%v)", dir, err)
	}
	return &fusectl{dir: dir, private: true, mountID: m.ID, tmp: dir}, nil
}

func (c *fusectl) release() error {
	if !c.private || c.tmp == "" {
		return nil
	}
	err := unmountVerified(c.mountID, c.dir)
	if err == nil {
		os.Remove(c.tmp)
	}
	c.tmp = ""
	return err
}
