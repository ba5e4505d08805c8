// Package testkit provides real-kernel fixtures for nodesnap tests: FUSE
// mounts that hang or whose daemon is dead, ext4 filesystems on loop
// devices, processes that hold a mount in a private mount namespace or
// through an open file or a working directory, tmpfs mounts, directories
// with tens of thousands of subdirectories, and the nodesnap binary itself.
//
// The fixtures need root and real kernel facilities (/dev/fuse, loop
// devices, unshare, mkfs.ext4). When a facility is missing the test is
// skipped with a message saying what is missing; when the environment
// variable CI is true (CI=true, CI=1) the test fails instead, so that CI
// can never silently skip the tests that exercise the kernel.
//
// Every fixture registers its cleanup with t.Cleanup and verifies it:
// mounts are checked to be gone from /proc/self/mountinfo, loop devices
// to be detached, and processes the fixture started are killed by their
// pid (never by name) and reaped. A cleanup that cannot be verified is
// reported with t.Errorf, so leaks fail the test that caused them.
//
// Hung mounts are dangerous for the test process itself: a stat(2),
// statfs(2), open(2) or directory listing of a path on a hung FUSE mount
// blocks the calling thread in the kernel until the connection is aborted.
// Tests must probe hung mounts only from child processes (which is what
// nodesnap itself does). Create hung mounts under t.TempDir(): the cleanups
// run in reverse order of registration, so the mount is aborted and
// unmounted before the temporary directory is removed.
//
// Processes left blocked on a hung FUSE mount are woken up with an error
// when the FUSE fixture is closed: the request they wait on fails with
// ECONNABORTED ("Software caused connection abort"), and any request
// made after the abort with ENOTCONN ("Transport endpoint is not
// connected"); a path walk that revalidates a cached entry can report
// either.
package testkit
