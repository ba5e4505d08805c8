package skip

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingFailsInCI runs a test that lacks something, in a child test
// process, with and without CI set: it fails in CI and skips elsewhere.
func TestMissingFailsInCI(t *testing.T) {
	if os.Getenv("SKIP_TEST_CHILD") == "1" {
		Missing(t, "no such facility")
		return
	}
	for _, c := range []struct {
		ci, want string
		fails    bool
	}{
		{"true", "CI is set, so this fails instead of skipping", true},
		{"", "--- SKIP", false},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingFailsInCI$", "-test.v")
		cmd.Env = append(os.Environ(), "SKIP_TEST_CHILD=1", "CI="+c.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.fails || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "no such facility") {
			t.Errorf("CI=%q: err=%v, want failure %v and %q in:\n%s", c.ci, err, c.fails, c.want, out)
		}
	}
}
