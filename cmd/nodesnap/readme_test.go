package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeFirstCommandsFromAnyDirectory: the README opens with the two
// commands a newcomer needs, a collection with defaults and the tests, and
// says both work from any directory of the clone. Each is run from a
// directory other than the clone's top — the collection with --help
// appended (a real one needs root and takes the machine's state), make
// with -n — and must succeed.
func TestReadmeFirstCommandsFromAnyDirectory(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed for README's test command: %v", err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := firstShellBlock(string(readme))
	if len(cmds) < 2 {
		t.Fatalf("README's first sh block holds %d commands, want the collection and the tests: %q", len(cmds), cmds)
	}
	collect, tests := cmds[0], cmds[1]
	if !strings.HasPrefix(collect, "go run ") || !strings.HasSuffix(collect, " collect") {
		t.Fatalf("README's first command is not a `go run … collect`: %q", collect)
	}
	if !strings.HasPrefix(tests, "make ") || !strings.HasSuffix(tests, " test") {
		t.Fatalf("README's second command is not `make … test`: %q", tests)
	}
	for _, dir := range []string{"../../docs/reference", "../../read/analyze/testdata"} {
		for _, c := range []string{collect + " --help", "make -n" + strings.TrimPrefix(tests, "make")} {
			cmd := exec.Command("sh", "-c", c)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("README's %q from %s: %v\n%s", c, filepath.Clean(dir), err, out)
			}
		}
	}
}

// firstShellBlock returns the commands of the first ```sh block of a
// markdown text, each without its trailing comment.
func firstShellBlock(md string) []string {
	_, rest, ok := strings.Cut(md, "```sh\n")
	if !ok {
		return nil
	}
	block, _, _ := strings.Cut(rest, "```")
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}
