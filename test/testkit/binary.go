package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/skip"
)

const binDirPrefix = "nodesnap-testkit-bin-"

var binary struct {
	once    sync.Once
	path    string
	dir     string
	err     error
	missing bool // err is a missing facility (no go tool), not a build failure
}

// Binary builds ./cmd/nodesnap of this module once per test binary
// (CGO_ENABLED=0 go build -o <tmp>/nodesnap, like the release build) and
// returns the path of the executable, for end-to-end tests. The module
// root is found by walking up from the working directory to go.mod.
// A build failure fails every test that calls Binary, with the compiler's
// output.
//
// The executable lives in a directory under os.TempDir() named after the
// test binary's pid. Main removes it when the tests finish; directories
// left by test binaries that exited without Main are removed by the next
// call of Binary.
//
// A test that calls Binary is of the binary tier: it is skipped under
// go test -short, which runs the pure and fixture tests only.
func Binary(t testing.TB) string {
	t.Helper()
	skip.Short(t, "builds and runs the nodesnap binary (the binary tier)")
	binary.once.Do(buildBinary)
	if binary.missing {
		missing(t, "%v", binary.err)
	}
	if binary.err != nil {
		t.Fatalf("testkit.Binary: %v", binary.err)
	}
	return binary.path
}

// Main runs the tests of a package and then removes what testkit made for
// the whole test binary (the directory of Binary). Use it as
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
func Main(m *testing.M) { MainThen(m, nil) }

// MainThen is Main with a function run after the tests (given their exit
// code) and before the cleanup, for a report over the whole test binary.
func MainThen(m *testing.M, after func(code int)) {
	code := m.Run()
	if after != nil {
		after(code)
	}
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

func buildBinary() {
	goTool, err := findGo()
	if err != nil {
		binary.err, binary.missing = err, true
		return
	}
	root, err := ModuleRoot()
	if err != nil {
		binary.err = err
		return
	}
	sweepStaleBinDirs()
	binary.path, binary.dir, binary.err = buildCommand(goTool, root)
}

// buildCommand builds root/cmd/nodesnap into a new directory under
// os.TempDir() and returns the executable and the directory.
func buildCommand(goTool, root string) (exe, dir string, err error) {
	pkg := filepath.Join(root, "cmd", "nodesnap")
	if !hasGoFiles(pkg) {
		return "", "", fmt.Errorf("%s has no Go files yet: the nodesnap command has not been written, so end-to-end tests cannot run", pkg)
	}
	dir, err = os.MkdirTemp("", binDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", "", err
	}
	exe = filepath.Join(dir, "nodesnap")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", exe, "./cmd/nodesnap")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("go build ./cmd/nodesnap in %s: %v\n%s", root, err, b)
	}
	return exe, dir, nil
}

// ModuleRoot returns the directory holding go.mod, found by walking up
// from the working directory (the package directory under go test).
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no go.mod in %s or any parent", wd)
		}
	}
}

func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	//lint:ignore SA1019 fallback when go is not in $PATH (e.g. sudo's secure_path)
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p, nil
	}
	return "", errors.New("Binary needs the go tool, which is neither in $PATH nor in GOROOT")
}

func hasGoFiles(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// sweepStaleBinDirs removes Binary directories of test binaries that are
// no longer running.
func sweepStaleBinDirs() {
	tmp := os.TempDir()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), binDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

// BinaryWith builds ./cmd/nodesnap with files laid over the source tree
// (go build -overlay: module-relative path → contents; a path may name a
// file or a package that does not exist), into a directory of the test,
// and returns the executable. The source tree is not touched, so tests
// may build several variants side by side.
func BinaryWith(t testing.TB, files map[string][]byte) string {
	t.Helper()
	skip.Short(t, "builds and runs a nodesnap binary (the binary tier)")
	goTool, err := findGo()
	if err != nil {
		missing(t, "%v", err)
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	replace := map[string]string{}
	for rel, data := range files {
		p := filepath.Join(dir, "overlay", strconv.Itoa(len(replace))+"-"+filepath.Base(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(root, filepath.FromSlash(rel))] = p
	}
	overlay, err := json.Marshal(struct{ Replace map[string]string }{replace})
	if err != nil {
		t.Fatal(err)
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "nodesnap")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-overlay", ov, "-o", exe, "./cmd/nodesnap")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -overlay ./cmd/nodesnap: %v\n%s", err, b)
	}
	return exe
}
