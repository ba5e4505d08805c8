package testkit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// LoopOption configures LoopExt4.
type LoopOption func(*loopConfig)

type loopConfig struct {
	inodes   int
	noMount  bool
	imageDir string
}

// LoopImageDir puts the image in dir instead of under t.TempDir(): on a
// FUSE mount, say, to make a block device whose I/O stops when its FUSE
// daemon does (a hung block device in miniature). The image is removed
// on cleanup, after the device is detached.
func LoopImageDir(dir string) LoopOption {
	return func(c *loopConfig) { c.imageDir = dir }
}

// LoopInodes sets the number of inodes (mkfs.ext4 -N n). A directory
// needs one inode, so ManySubdirs(t, dir, n) needs a little more than n.
func LoopInodes(n int) LoopOption {
	return func(c *loopConfig) { c.inodes = n }
}

// LoopNoMount attaches the loop device but does not mount it; Mountpoint
// is then "".
func LoopNoMount() LoopOption {
	return func(c *loopConfig) { c.noMount = true }
}

// Loop is an ext4 filesystem in a sparse image file, attached to a loop
// device and mounted. See LoopExt4.
type Loop struct {
	// Image is the sparse image file, under t.TempDir().
	Image string
	// Device is the loop device, /dev/loopN.
	Device string
	// Major and Minor are the device numbers of Device (major 7), as
	// they appear in mountinfo.
	Major, Minor uint32
	// Mountpoint is the canonical path where the filesystem is mounted
	// in the test's mount namespace ("" with LoopNoMount).
	Mountpoint string
	// MountID is the mount's ID in /proc/self/mountinfo.
	MountID int

	t         testing.TB
	created   []string
	closeOnce sync.Once
	closeErr  error
}

// LoopExt4 creates a sparse image of sizeMiB MiB under t.TempDir(), makes
// an ext4 filesystem in it (mkfs.ext4 -q with default features, plus
// LoopInodes), attaches it with `losetup --find --show`
// and mounts it on a fresh temporary directory.
//
// Cleanup (also Close) unmounts it if it is still mounted in the test's
// namespace (lazily if busy), detaches the loop device with losetup -d
// and verifies that the device is free again. Processes that still
// hold the filesystem (a HoldInPrivateNamespace holder, say) must be
// gone by then; holders created after the Loop are, since cleanups run in
// reverse order.
func LoopExt4(t testing.TB, sizeMiB int, opts ...LoopOption) *Loop {
	t.Helper()
	RequireLoop(t)
	var cfg loopConfig
	for _, o := range opts {
		o(&cfg)
	}
	if sizeMiB <= 0 {
		t.Fatalf("testkit: LoopExt4: size %d MiB", sizeMiB)
	}
	img := filepath.Join(t.TempDir(), "ext4.img")
	if cfg.imageDir != "" {
		img = filepath.Join(cfg.imageDir, "ext4.img")
		t.Cleanup(func() { os.Remove(img) })
	}
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatalf("testkit: LoopExt4: %v", err)
	}
	err = f.Truncate(int64(sizeMiB) << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("testkit: LoopExt4: image: %v", err)
	}

	args := []string{"-q", "-F"}
	if cfg.inodes > 0 {
		args = append(args, "-N", strconv.Itoa(cfg.inodes))
	}
	args = append(args, img)
	if out, err := runTool(2*time.Minute, "mkfs.ext4", args...); err != nil {
		t.Fatalf("testkit: mkfs.ext4 %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	out, err := runTool(time.Minute, "losetup", "--find", "--show", img)
	if err != nil {
		t.Fatalf("testkit: losetup --find --show %s: %v\n%s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
	l := &Loop{Image: img, Device: dev, t: t}
	t.Cleanup(func() { l.Close() })
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		t.Fatalf("testkit: stat %s: %v", dev, err)
	}
	l.Major, l.Minor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
	registerScratchDev(st.Rdev)

	if cfg.noMount {
		return l
	}
	mp, created, err := prepareDir(tempMountpoint(t, "ext4"))
	if err != nil {
		t.Fatalf("testkit: LoopExt4 mountpoint: %v", err)
	}
	l.created = created
	if err := unix.Mount(dev, mp, "ext4", 0, ""); err != nil {
		removeCreated(created)
		l.created = nil
		t.Fatalf("testkit: mount %s at %s: %v", dev, mp, err)
	}
	l.Mountpoint = mp
	m, ok, err := lastMountAt(0, mp, func(m MountEntry) bool { return m.Major == l.Major && m.Minor == l.Minor })
	if err != nil || !ok {
		unix.Unmount(mp, 0)
		t.Fatalf("testkit: %s at %s not found in /proc/self/mountinfo (err=%v)", dev, mp, err)
	}
	l.MountID = m.ID
	return l
}

// Close unmounts the filesystem (if still mounted in the test's
// namespace) and detaches the loop device, verifying both. It is
// idempotent and also run by t.Cleanup; failures are reported with
// t.Errorf and returned.
func (l *Loop) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.close()
		if l.closeErr != nil {
			l.t.Errorf("testkit: closing loop device %s: %v", l.Device, l.closeErr)
		}
	})
	return l.closeErr
}

func (l *Loop) close() error {
	var errs []error
	if l.Mountpoint != "" {
		if err := unmountVerified(l.MountID, l.Mountpoint); err != nil {
			errs = append(errs, err)
		} else {
			removeCreated(l.created)
		}
	}
	unregisterScratchDev(unix.Mkdev(l.Major, l.Minor))
	if err := detachLoop(l.Device, l.Image); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// detachLoop runs losetup -d and waits until the device is really free.
// losetup -d on a device that is still open (a mount in another
// namespace, a lazy unmount not finished) only sets autoclear and
// succeeds; the device is freed when the last user goes away.
func detachLoop(dev, img string) error {
	backing := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	attached := func() bool {
		// The loop directory exists only while a file is attached;
		// if it is another file, our image was detached and the
		// device reused.
		b, err := os.ReadFile(backing)
		return err == nil && strings.TrimSpace(string(b)) == img
	}
	if !attached() {
		// Already detached: a test ran losetup -d itself, which on a
		// busy device sets autoclear, and the last user went away.
		return nil
	}
	if out, err := runTool(time.Minute, "losetup", "-d", dev); err != nil && attached() {
		return fmt.Errorf("losetup -d %s: %v: %s", dev, err, strings.TrimSpace(string(out)))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !attached() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still attached to %s 5s after losetup -d (still mounted or open somewhere?)", dev, img)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func runTool(timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

// scratchDevs are the device numbers of filesystems testkit created and
// throws away whole (loop ext4, tmpfs): ManySubdirs need not remove its
// directories from them one by one.
var scratchDevs sync.Map // uint64 -> struct{}

func registerScratchDev(dev uint64)   { scratchDevs.Store(dev, struct{}{}) }
func unregisterScratchDev(dev uint64) { scratchDevs.Delete(dev) }
func isScratchDev(dev uint64) bool {
	_, ok := scratchDevs.Load(dev)
	return ok
}
