package testkit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// MountEntry is one line of /proc/<pid>/mountinfo (see proc_pid_mountinfo(5)).
// It is a deliberately small, independent parser, so that tests of
// nodesnap's own mount-table code have an oracle that does not share
// its bugs.
type MountEntry struct {
	ID, ParentID int
	Major, Minor uint32
	Root         string   // root of the mount within its filesystem
	Mountpoint   string   // unescaped
	Options      string   // per-mount options
	Optional     []string // optional fields: shared:N, master:N, propagate_from:N, unbindable
	FSType       string
	Source       string // unescaped
	SuperOptions string
}

// ReadMountinfo parses /proc/<pid>/mountinfo; pid 0 means the calling
// process (/proc/self). Reading mountinfo never touches the mounted
// filesystems, so it is safe with hung mounts.
func ReadMountinfo(pid int) ([]MountEntry, error) {
	p := "/proc/self/mountinfo"
	if pid > 0 {
		p = fmt.Sprintf("/proc/%d/mountinfo", pid)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return parseMountinfo(b)
}

func parseMountinfo(b []byte) ([]MountEntry, error) {
	var out []MountEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 10 || sep < 0 || len(f) < sep+4 {
			return nil, fmt.Errorf("malformed mountinfo line %q", line)
		}
		var e MountEntry
		var err error
		if e.ID, err = strconv.Atoi(f[0]); err != nil {
			return nil, fmt.Errorf("mountinfo line %q: %v", line, err)
		}
		if e.ParentID, err = strconv.Atoi(f[1]); err != nil {
			return nil, fmt.Errorf("mountinfo line %q: %v", line, err)
		}
		maj, min, ok := strings.Cut(f[2], ":")
		if !ok {
			return nil, fmt.Errorf("mountinfo line %q: bad device %q", line, f[2])
		}
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo line %q: bad device %q", line, f[2])
		}
		e.Major, e.Minor = uint32(ma), uint32(mi)
		e.Root = unescapeMountinfo(f[3])
		e.Mountpoint = unescapeMountinfo(f[4])
		e.Options = f[5]
		e.Optional = append([]string(nil), f[6:sep]...)
		e.FSType = f[sep+1]
		e.Source = unescapeMountinfo(f[sep+2])
		e.SuperOptions = f[sep+3]
		out = append(out, e)
	}
	return out, sc.Err()
}

// unescapeMountinfo undoes the kernel's octal escaping (\040 for space,
// \011, \012, \134) of paths in mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lastMountAt returns the topmost mount at mountpoint in pid's mount
// namespace for which match returns true (match may be nil).
func lastMountAt(pid int, mountpoint string, match func(MountEntry) bool) (MountEntry, bool, error) {
	ms, err := ReadMountinfo(pid)
	if err != nil {
		return MountEntry{}, false, err
	}
	var found MountEntry
	ok := false
	for _, m := range ms {
		if m.Mountpoint == mountpoint && (match == nil || match(m)) {
			found, ok = m, true
		}
	}
	return found, ok, nil
}

// mountIDPresent reports whether the mount with the given ID (at the
// given mountpoint, to be robust against ID reuse) is in our namespace.
func mountIDPresent(id int, mountpoint string) (bool, error) {
	ms, err := ReadMountinfo(0)
	if err != nil {
		return false, err
	}
	for _, m := range ms {
		if m.ID == id && m.Mountpoint == mountpoint {
			return true, nil
		}
	}
	return false, nil
}

// unmountVerified unmounts the mount (id at mountpoint) if it is still in
// our namespace, falling back to a lazy unmount when it is busy, and
// checks that it is gone from /proc/self/mountinfo. It never stats the
// mountpoint.
func unmountVerified(id int, mountpoint string) error {
	present, err := mountIDPresent(id, mountpoint)
	if err != nil {
		return err
	}
	if !present {
		return nil
	}
	var lazy bool
	err = unix.Unmount(mountpoint, unix.UMOUNT_NOFOLLOW)
	for i := 0; errors.Is(err, unix.EBUSY) && i < 20; i++ {
		// Something (a process we just killed, the kernel finishing a
		// request) may still hold a reference for a moment.
		time.Sleep(10 * time.Millisecond)
		err = unix.Unmount(mountpoint, unix.UMOUNT_NOFOLLOW)
	}
	if errors.Is(err, unix.EBUSY) {
		lazy = true
		err = unix.Unmount(mountpoint, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("umount %s: %w", mountpoint, err)
	}
	present, err = mountIDPresent(id, mountpoint)
	if err != nil {
		return err
	}
	if present {
		return fmt.Errorf("mount %d at %s is still in /proc/self/mountinfo after umount (lazy=%v)", id, mountpoint, lazy)
	}
	return nil
}

// prepareDir creates dir (and missing parents) and returns its canonical
// path, which is how the kernel will print it in mountinfo, plus the
// directories it created, deepest first, for removeCreated. dir must not
// be on a hung mount: this stats it.
func prepareDir(dir string) (string, []string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	var created []string
	for p := abs; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", nil, err
		}
		created = append(created, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", nil, err
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", nil, err
	}
	return canon, created, nil
}

// removeCreated removes the (empty) directories prepareDir created,
// deepest first. It uses rmdir only, never a recursive removal.
func removeCreated(created []string) {
	for _, d := range created {
		if err := unix.Rmdir(d); err != nil {
			return
		}
	}
}

// tempMountpoint returns a fresh directory for a mount under t.TempDir().
func tempMountpoint(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(t.TempDir(), name)
}
