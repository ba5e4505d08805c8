// Package skip is the one way a nodesnap test skips, so that a skip always
// says why and CI never passes a test that did not run.
//
//   - Missing: the machine lacks something CI provides (root, /dev/fuse, a
//     tool .ci/run installs). The test skips here and fails when CI is set.
//   - Short: a long test, skipped under go test -short (the unit tier).
//   - OptIn: a test that runs only when asked (a benchmark kept as a test,
//     sample pages, the e2e cluster), skipped unless its variable is set.
//   - Because: the test means nothing on this machine (it runs in a pod,
//     a file it would plant exists), or is a helper process of another test.
//
// A bare t.Skip anywhere else fails test/arch's TestNoBareSkip.
package skip

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// InCI reports whether the tests run in CI: the environment variable CI
// holds a true value ("true", "1", ...).
func InCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Missing skips the test, or fails it in CI, because the machine lacks
// something the test needs.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI is set, so this fails instead of skipping)", msg)
	}
	t.Skipf("%s; skipping (set CI=true to make this a failure)", msg)
}

// Short skips the test under go test -short, saying what makes it long.
func Short(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s", what)
	}
}

// OptIn skips the test unless the environment variable env is set, and
// returns its value.
func OptIn(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		t.Skipf("%s: runs only with %s set", what, env)
	}
	return v
}

// Because skips the test for a reason of this machine or this process
// that CI does not share.
func Because(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Skipf(format, args...)
}
