package arch

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nodesnap/nodesnap"

// floors says, for each wing of the module, which wings its non-test
// code may import (a wing always may import itself). A wing is the first
// path element, or the first two under engine/, read/ and features/. The
// order of this table is the order of docs/architecture.md, lowest first.
var floors = []struct {
	wing  string
	below []string
}{
	{"internal", nil},
	{"signatures", nil},
	{"bundle", []string{"internal"}},
	{"redact", []string{"bundle", "internal"}},
	{"engine/isolate", []string{"bundle", "internal"}},
	{"collectors", []string{"engine/isolate", "bundle", "redact", "internal", "signatures"}},
	{"engine/outputdir", []string{"engine/isolate", "bundle", "internal"}},
	{"engine/supervisor", []string{"engine/outputdir", "engine/isolate", "collectors", "bundle", "redact", "internal"}},
	{"read/goroutinedump", []string{"internal"}},
	{"read/events", []string{"signatures"}},
	{"read/analyze", []string{"read/events", "read/goroutinedump", "bundle", "signatures", "internal"}},
	{"read/diff", []string{"read/analyze", "read/goroutinedump", "bundle", "signatures", "internal"}},
	{"read/fleetview", []string{"read/analyze", "read/goroutinedump", "bundle", "signatures", "internal"}},
	{"features/upload", []string{"bundle", "internal"}},
	{"features/objstore", []string{"bundle", "internal"}},
	{"features/fleet", []string{"bundle", "internal"}},
	{"features/report", []string{"read/analyze", "read/diff", "read/fleetview", "read/goroutinedump", "bundle", "signatures", "internal"}},
	{"features/watch", []string{"engine/supervisor", "engine/outputdir", "engine/isolate", "collectors", "bundle", "redact", "signatures", "internal"}},
	{"deploy", nil},
	{"cmd", []string{"deploy", "features/report", "features/watch", "features/fleet", "features/upload", "features/objstore", "read/analyze", "read/diff", "read/fleetview", "read/goroutinedump",
		"engine/supervisor", "engine/outputdir", "engine/isolate", "collectors", "bundle", "redact", "signatures", "internal"}},
	// test/ holds the suites and fixtures: it may use anything.
	{"test", []string{"*"}},
}

// readers are the packages that read a bundle anywhere, offline.
var readers = []string{"read/...", "bundle/...", "signatures", "features/report"}

// collectSide is what a reader must never link: the node-side engine, the
// collectors, the redaction engine, encryption, and a network stack.
var collectSide = []string{
	module + "/engine",
	module + "/collectors",
	module + "/redact",
	"filippo.io/age",
	"github.com/shirou/gopsutil",
	"net/http",
}

func wingOf(pkg string) string {
	rel, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return ""
	}
	parts := strings.Split(rel, "/")
	switch parts[0] {
	case "engine", "read", "features":
		if len(parts) > 1 {
			return path.Join(parts[0], parts[1])
		}
	}
	return parts[0]
}

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	// go test puts the go command that runs it first in PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("finding the go command: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestFloors: no package imports a wing above its own.
func TestFloors(t *testing.T) {
	allowed := map[string][]string{}
	for _, f := range floors {
		allowed[f.wing] = f.below
	}
	lines := goList(t, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	if len(lines) < 40 {
		t.Fatalf("go list listed %d packages; is it run from the module root?", len(lines))
	}
	for _, l := range lines {
		f := strings.Fields(l)
		from := wingOf(f[0])
		below, known := allowed[from]
		if !known {
			t.Errorf("%s is in wing %q, which has no floor here or in docs/architecture.md", f[0], from)
			continue
		}
		for _, imp := range f[1:] {
			to := wingOf(imp)
			if to == "" || to == from || slices.Contains(below, "*") || slices.Contains(below, to) {
				continue
			}
			t.Errorf("%s imports %s: %s may use only %v", f[0], imp, from, below)
		}
	}
}

// TestReadersStayOffline: go list -deps of every reader shows none of the
// collect side, whatever package brings it in.
func TestReadersStayOffline(t *testing.T) {
	lines := goList(t, append([]string{"-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, prefixed(readers)...)...)
	importers := map[string][]string{}
	var deps []string
	for _, l := range lines {
		f := strings.Fields(l)
		deps = append(deps, f[0])
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	if !slices.Contains(deps, module+"/bundle/layout") || !slices.Contains(deps, module+"/read/analyze") {
		t.Fatalf("go list -deps does not list bundle/layout and read/analyze: not the readers' dependencies:\n%s", strings.Join(lines, "\n"))
	}
	for _, d := range deps {
		for _, bad := range collectSide {
			if d == bad || strings.HasPrefix(d, bad+"/") {
				t.Errorf("a reader links %s (imported by %s)", d, strings.Join(importers[d], ", "))
			}
		}
	}
}

// TestReaderTestsStayOffline: a reader's own tests link nothing of the
// collect side either, so that they run anywhere, as any user, and a
// change to the collectors never rebuilds them. Tests that need both
// halves (bundles the real collectors write, read back) live in
// test/roundtrip.
func TestReaderTestsStayOffline(t *testing.T) {
	lines := goList(t, append([]string{"-deps", "-test", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, prefixed(readers)...)...)
	importers := map[string][]string{}
	seen := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		seen[f[0]] = true
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	if !seen[module+"/read/analyze"] {
		t.Fatalf("go list -deps -test does not list read/analyze:\n%s", strings.Join(lines, "\n"))
	}
	for d := range seen {
		name, _, _ := strings.Cut(d, " ")
		// Test fixtures may serve HTTP; the collect side of this module
		// is what the tests must not link.
		for _, bad := range []string{module + "/engine", module + "/collectors", module + "/redact"} {
			if name == bad || strings.HasPrefix(name, bad+"/") {
				t.Errorf("a reader's tests link %s (imported by %s)", d, strings.Join(importers[d], ", "))
			}
		}
	}
}

func prefixed(pkgs []string) []string {
	out := make([]string, len(pkgs))
	for i, p := range pkgs {
		out[i] = "./" + p
	}
	return out
}

// TestPackageDocs: every package with code has a package doc (a collector's
// says what it gathers and where its files are described).
func TestPackageDocs(t *testing.T) {
	for _, l := range goList(t, "-f", `{{if and .GoFiles (not .Doc)}}{{.ImportPath}}{{end}}`, "./...") {
		if l != "" {
			t.Errorf("%s has no package doc", l)
		}
	}
}

// TestNoBareSkip: a test skips only through package test/skip, which says
// why and fails in CI when the machine lacks what CI provides. Nested
// modules (release/, generators) keep their own: they do not import this
// one.
func TestNoBareSkip(t *testing.T) {
	bare := regexp.MustCompile(`\.(Skip|Skipf|SkipNow)\(`)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || rel == "test/skip") {
			return filepath.SkipDir
		}
		if d.IsDir() && p != root {
			// Nested modules (release/, generators) keep their own rules.
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if bare.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				t.Errorf("%s:%d: skips without test/skip (Missing, Short, OptIn or Because): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files; is the walk rooted right?", checked)
	}
}
