package outputdir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLockExcludesSecondHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(context.Background(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Acquire(context.Background(), dir, 300*time.Millisecond)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v, want a LockedError", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("second Acquire gave up after %s, want it to wait about 300ms", waited)
	}
	if le.PID != os.Getpid() {
		t.Errorf("holder pid %d, want %d", le.PID, os.Getpid())
	}
	for _, want := range []string{"another nodesnap run", dir, "--lock-wait", "-o"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %q", err, want)
		}
	}
	l.Release()
	if _, err := os.Lstat(filepath.Join(dir, LockName)); !os.IsNotExist(err) {
		t.Errorf("lock file still there after release: %v", err)
	}
	l2, err := Acquire(context.Background(), dir, 0)
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	l2.Release()
}

// A waiter gets the lock as soon as the holder lets go, well before its
// own wait ends.
func TestLockWaitsForRelease(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(context.Background(), dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		l.Release()
	}()
	l2, err := Acquire(context.Background(), dir, 30*time.Second)
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	l2.Release()
}

// Removing the lock file on release must never let two holders in at
// once: many goroutines (each flock on its own open file, as separate
// processes would) take and drop the lock; at most one holds it at a time.
func TestLockRemovalNeverAdmitsTwo(t *testing.T) {
	dir := t.TempDir()
	var holders, maxHolders, rounds atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				l, err := Acquire(context.Background(), dir, 20*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				n := holders.Add(1)
				for {
					m := maxHolders.Load()
					if n <= m || maxHolders.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(50 * time.Microsecond)
				holders.Add(-1)
				rounds.Add(1)
				l.Release()
			}
		}()
	}
	wg.Wait()
	if m := maxHolders.Load(); m != 1 {
		t.Errorf("%d holders at once, want 1", m)
	}
	if rounds.Load() != 400 {
		t.Errorf("%d rounds, want 400", rounds.Load())
	}
}

func TestLockRefusesSymlinkAndForeignFile(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, LockName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(context.Background(), dir, 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Acquire over a symlink: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("symlink target changed: %q", b)
	}
	if os.Geteuid() != 0 {
		return
	}
	os.Remove(filepath.Join(dir, LockName))
	p := filepath.Join(dir, LockName)
	if err := os.WriteFile(p, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(context.Background(), dir, 0); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("Acquire of another user's lock file: %v, want a refusal", err)
	}
}

func TestLockMissingDir(t *testing.T) {
	_, err := Acquire(context.Background(), filepath.Join(t.TempDir(), "nope"), time.Second)
	if err == nil || errors.Is(err, ErrLocked) || !os.IsNotExist(errors.Unwrap(err)) {
		t.Errorf("Acquire in a missing directory: %v, want a not-exist error (and no waiting)", err)
	}
}

func TestRetain(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// This host's bundles, oldest first (two in the same second).
	mine := []string{
		"nodesnap-node-1-20260101T000000Z.tar.gz",
		"nodesnap-node-1-20260102T000000Z.tar.zst",
		"nodesnap-node-1-20260103T000000Z.tar.gz",
		"nodesnap-node-1-20260103T000000Z-2.tar.gz",
	}
	for _, n := range mine {
		write(n)
	}
	current := write("nodesnap-node-1-20260104T000000Z.tar.gz")
	others := []string{
		"nodesnap-node-10-20250101T000000Z.tar.gz", // another host, older
		"nodesnap-node-20250101T000000Z.tar.gz",    // host "node"
		"nodesnap-node-1-20250101T000000Z.tar.gz.sha256",
		"notes.txt",
		".nodesnap.lock",
	}
	for _, n := range others {
		write(n)
	}
	// A link and a directory named like old bundles are not ours to touch.
	if err := os.Symlink("notes.txt", filepath.Join(dir, "nodesnap-node-1-20200101T000000Z.tar.gz")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "nodesnap-node-1-20200102T000000Z.tar.gz"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := Retain(dir, "node-1", 3, current)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	want := []string{filepath.Join(dir, mine[0]), filepath.Join(dir, mine[1])}
	if strings.Join(removed, ",") != strings.Join(want, ",") {
		t.Errorf("removed %v, want %v", removed, want)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	wantLeft := append([]string{mine[2], mine[3], filepath.Base(current),
		"nodesnap-node-1-20200101T000000Z.tar.gz", "nodesnap-node-1-20200102T000000Z.tar.gz"}, others...)
	sort.Strings(wantLeft)
	if strings.Join(left, ",") != strings.Join(wantLeft, ",") {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
}

// The bundle just written is kept even when the clock went backwards and
// its name looks older than the rest.
func TestRetainKeepsCurrentWhateverItsName(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"nodesnap-h-20300101T000000Z.tar.gz", "nodesnap-h-20300102T000000Z.tar.gz"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cur := filepath.Join(dir, "nodesnap-h-20200101T000000Z.tar.gz")
	if err := os.WriteFile(cur, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := Retain(dir, "h", 1, cur)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v; want the two others", removed, err)
	}
	if _, err := os.Stat(cur); err != nil {
		t.Errorf("current bundle removed: %v", err)
	}
}

// Host names with characters a file name cannot carry are matched the way
// the supervisor names them.
func TestRetainSanitisedHost(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "nodesnap-we_ird_host-20260101T000000Z.tar.gz")
	cur := filepath.Join(dir, "nodesnap-we_ird_host-20260102T000000Z.tar.gz")
	for _, p := range []string{old, cur} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := Retain(dir, "we/ird host", 1, cur)
	if err != nil || len(removed) != 1 || removed[0] != old {
		t.Errorf("removed %v, %v; want %s", removed, err, old)
	}
}

func TestCheckFree(t *testing.T) {
	dir := t.TempDir()
	if err := CheckFree(dir, 1); err != nil {
		t.Errorf("1 byte: %v", err)
	}
	err := CheckFree(dir, 1<<62)
	if !errors.Is(err, ErrLowSpace) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "--min-free") {
		t.Errorf("4 EiB: %v, want a low-space refusal naming the directory and the flag", err)
	}
	if _, err := Free(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("Free of a missing directory succeeded")
	}
}

func BenchmarkLockAcquireRelease(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		l, err := Acquire(context.Background(), dir, 0)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

// BenchmarkRetainScan: what --keep costs on a shared directory of 2,000
// files, 500 of them this host's bundles, when none is due for removal (the
// listing, parsing and ordering; removing is one unlink per bundle).
func BenchmarkRetainScan(b *testing.B) {
	dir := b.TempDir()
	var cur string
	for j := 0; j < 2000; j++ {
		name := fmt.Sprintf("other-%d.txt", j)
		if j%4 == 0 {
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(j) * time.Minute)
			name = "nodesnap-h-" + at.Format("20060102T150405Z") + ".tar.gz"
			cur = name
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		removed, err := Retain(dir, "h", 1000, filepath.Join(dir, cur))
		if err != nil || len(removed) != 0 {
			b.Fatalf("removed %d, %v", len(removed), err)
		}
	}
}

// In a directory any user can write to (the default /var/tmp), the lock
// lives in a directory of this user's own: a lock file planted in the
// shared directory stops no run, and two runs still exclude each other.
func TestLockInSharedDirIsPrivate(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	priv := filepath.Join(t.TempDir(), "locks")
	old := privateLockDirs
	privateLockDirs = func() []string { return []string{priv} }
	defer func() { privateLockDirs = old }()
	planted := filepath.Join(shared, LockName)
	if err := os.WriteFile(planted, []byte("1\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(planted, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	p, err := LockPath(shared)
	if err != nil || filepath.Dir(p) != priv {
		t.Fatalf("LockPath(shared) = %q, %v; want a file in %s", p, err, priv)
	}
	l, err := Acquire(context.Background(), shared, 0)
	if err != nil {
		t.Fatalf("a planted lock file stopped the run: %v", err)
	}
	if _, err := Acquire(context.Background(), shared, 0); !errors.Is(err, ErrLocked) {
		t.Errorf("a second run was not excluded: %v", err)
	}
	if st, err := os.Stat(priv); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("private lock directory: %v, %v", st, err)
	}
	// Two shared directories lock in the same private one: it stays while
	// either holds its lock and goes with the last (nothing is left in
	// /run after a run), and the next run makes it again.
	other := t.TempDir()
	if err := os.Chmod(other, 0o1777); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(context.Background(), other, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := os.Stat(priv); err != nil {
		t.Errorf("the private directory went while another lock was in it: %v", err)
	}
	l2.Release()
	if _, err := os.Stat(priv); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the private lock directory is left behind after the last lock: %v", err)
	}
	if l, err = Acquire(context.Background(), shared, 0); err != nil {
		t.Fatalf("after the private directory went: %v", err)
	}
	l.Release()
	// A private directory someone else could write to is refused.
	if err := os.MkdirAll(priv, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(priv, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := LockPath(shared); err == nil {
		t.Errorf("a world-writable lock directory was used")
	}
}
