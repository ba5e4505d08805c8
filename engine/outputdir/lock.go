package outputdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LockName is the lock file in the output directory. It exists only while a
// run holds it: the holder removes it on release, so a finished run leaves
// the directory holding bundles and nothing else.
const LockName = ".nodesnap.lock"

// ErrLocked is wrapped by the error of a run that found another one
// collecting into the same directory.
var ErrLocked = errors.New("another nodesnap collection is running")

// LockedError says who holds the lock.
type LockedError struct {
	Dir    string
	PID    int // 0 when the holder's pid could not be read
	Waited time.Duration
}

func (e *LockedError) Error() string {
	who := "another nodesnap run"
	if e.PID > 0 {
		who = fmt.Sprintf("another nodesnap run (pid %d)", e.PID)
	}
	waited := ""
	if e.Waited > 0 {
		waited = fmt.Sprintf(" and did not finish within %s (--lock-wait)", e.Waited.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: %s is collecting into %s%s; nothing was collected. Let it finish, or write elsewhere with --output-dir",
		ErrLocked, who, e.Dir, waited)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is one run's hold on an output directory.
type Lock struct {
	f    *os.File
	path string
	// private says the lock is in privateDir, not the output directory.
	private bool
}

// lockPoll is how often a waiting run tries the lock again.
const lockPoll = 100 * time.Millisecond

// Acquire takes the output directory's lock, trying again for up to wait
// while another run holds it. It never blocks in the kernel: flock is
// always asked non-blocking, so a cancelled ctx or the end of wait ends
// the attempt at once.
func Acquire(ctx context.Context, dir string, wait time.Duration) (*Lock, error) {
	p, err := LockPath(dir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	start := time.Now()
	for gone := 0; ; {
		l, holder, err := tryLock(p)
		if errors.Is(err, fs.ErrNotExist) && filepath.Base(p) != LockName && gone < 10 {
			// The private directory was removed by the run that
			// released its lock in it last (Release): made again.
			gone++
			if p, err = LockPath(dir); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if l != nil {
			return l, nil
		}
		if !time.Now().Before(deadline) {
			return nil, &LockedError{Dir: dir, PID: holder, Waited: time.Since(start)}
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("stopped while waiting for the run (pid %d) collecting into %s: %w", holder, dir, ctx.Err())
		case <-t.C:
		}
	}
}

// LockPath is where the lock of the output directory dir lives: in dir
// itself when only this user (or root) can create files there, else (a
// shared directory such as the default /var/tmp, where any local user
// could plant a lock file and stop every run) in a directory private to
// this user, named after dir's device and inode so that every run into
// dir finds the same one.
func LockPath(dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", fmt.Errorf("creating the lock file in %s: %w", dir, &os.PathError{Op: "stat", Path: dir, Err: err})
	}
	euid := uint32(os.Geteuid())
	if st.Mode&0o022 == 0 && (st.Uid == euid || st.Uid == 0) {
		return filepath.Join(dir, LockName), nil
	}
	priv, err := privateDir()
	if err != nil {
		return "", fmt.Errorf("%s is writable by other users, so its lock goes in a directory of this user's own: %w", dir, err)
	}
	return filepath.Join(priv, fmt.Sprintf("out-%d-%d.lock", st.Dev, st.Ino)), nil
}

// privateLockDirs are tried in turn for the locks of shared output
// directories (variables so that tests can point them elsewhere).
var privateLockDirs = func() []string {
	if os.Geteuid() == 0 {
		return []string{"/run/nodesnap", "/var/run/nodesnap"}
	}
	var ds []string
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		ds = append(ds, filepath.Join(x, "nodesnap"))
	}
	return append(ds, filepath.Join(os.TempDir(), fmt.Sprintf("nodesnap-%d", os.Geteuid())))
}

// privateDir returns the first of privateLockDirs that is, or can be made,
// a directory of this user's own that no one else can write to.
func privateDir() (string, error) {
	var errs []error
	for _, d := range privateLockDirs() {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, err)
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			errs = append(errs, &os.PathError{Op: "lstat", Path: d, Err: err})
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) || st.Mode&0o022 != 0 {
			errs = append(errs, fmt.Errorf("%s is not a directory of uid %d that only it can write to", d, os.Geteuid()))
			continue
		}
		return d, nil
	}
	return "", errors.Join(errs...)
}

// tryLock makes one attempt. It returns the lock, or nil and the holder's
// pid when another run holds it, or an error that waiting will not cure.
func tryLock(p string) (*Lock, int, error) {
	for {
		// O_NOFOLLOW: the output directory may be world-writable
		// (/var/tmp); a symlink planted there must not make root open,
		// let alone truncate, another file.
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			if errors.Is(err, syscall.ELOOP) {
				return nil, 0, fmt.Errorf("lock file %s is a symbolic link; remove it", p)
			}
			return nil, 0, fmt.Errorf("creating the lock file in %s: %w", filepath.Dir(p), err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("checking the lock file %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			f.Close()
			return nil, 0, fmt.Errorf("lock file %s is not a regular file; remove it", p)
		}
		if int(st.Uid) != os.Geteuid() {
			// Someone else's file in a shared directory: holding a
			// lock on it would let them stop every run.
			f.Close()
			return nil, 0, fmt.Errorf("lock file %s belongs to uid %d, not to this user; remove it or write elsewhere with --output-dir", p, st.Uid)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			holder := readPID(f)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, holder, nil
			}
			return nil, 0, fmt.Errorf("locking %s: %w", p, err)
		}
		// The previous holder removes the file on release; if it did so
		// between our open and our flock, we hold a lock on a file no
		// one else can find. Start again on the current one.
		var now unix.Stat_t
		if err := unix.Lstat(p, &now); err != nil || now.Ino != st.Ino || now.Dev != st.Dev {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &Lock{f: f, path: p, private: filepath.Base(p) != LockName}, 0, nil
	}
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// SetHolder records pid as the lock's holder in the lock file, in place of
// the pid of the process that took it: a worker takes and holds the lock
// for the run's supervisor, whose pid is the one a waiting run should name.
func (l *Lock) SetHolder(pid int) error {
	if l == nil || l.f == nil {
		return nil
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0)
	return err
}

// Release removes the lock file and drops the lock. Removing before
// unlocking is what makes removal safe: a run that opened the old file
// meanwhile finds, once it gets the lock, that the name no longer leads to
// it, and starts over (see tryLock).
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = os.Remove(l.path)
	_ = l.f.Close()
	l.f = nil
	if l.private {
		// The private directory (/run/nodesnap) was made for the locks
		// of shared output directories: it goes with the last of them.
		// rmdir removes only an empty directory; a run that is about to
		// lock in it makes it again (Acquire).
		_ = os.Remove(filepath.Dir(l.path))
	}
}
