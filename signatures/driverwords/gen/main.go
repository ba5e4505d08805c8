// Command gen writes signatures/driverwords/words.json, every CSI driver's
// own error wording, from the drivers' source: for each driver of
// sources.txt it parses the Go files of the node service and the helpers
// it calls, and keeps the format of every gRPC status error
// (status.Error/Errorf with its codes.X), every wrapped error
// (fmt.Errorf, errors.New/Errorf/Wrap…) and every error or warning log
// call (klog.Errorf/ErrorS, logr's Error, logrus and zap's Errorf…), with
// the function it is in, the node operations (NodeStageVolume,
// NodePublishVolume…) that reach that function, the file, and the
// expressions of the arguments the format is rendered with. The drivers'
// source is read where it is fetched to (the module cache, or a
// directory of repository snapshots); none of it is kept here.
//
//	go run ./signatures/driverwords/gen -sources signatures/driverwords/sources.txt -src "$DRIVERWORDS_SRC" -out signatures/driverwords/words.json
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/signatures/driverwords"
)

// source is one line of sources.txt.
type source struct {
	driver, version, origin string
	paths                   []string
}

func main() {
	sourcesFile := flag.String("sources", "signatures/driverwords/sources.txt", "the list of drivers: driver version origin path...")
	srcDir := flag.String("src", "", "the directory holding <driver>@<version> snapshots of the drivers the module proxy does not serve")
	out := flag.String("out", "signatures/driverwords/words.json", "the table written")
	goCmd := flag.String("go", "go", "the go command, for `go mod download`")
	flag.Parse()
	if err := run(*sourcesFile, *srcDir, *out, *goCmd); err != nil {
		fmt.Fprintln(os.Stderr, "driverwords:", err)
		os.Exit(1)
	}
}

func run(sourcesFile, srcDir, out, goCmd string) error {
	f, err := os.Open(sourcesFile)
	if err != nil {
		return fmt.Errorf("reading the list of drivers: %w", err)
	}
	srcs, err := readSources(f)
	f.Close()
	if err != nil {
		return err
	}
	t := driverwords.Table{Generated: driverwords.GeneratedHeader}
	for _, s := range srcs {
		dir, err := locate(s, srcDir, goCmd)
		if err != nil {
			return err
		}
		words, err := extractDriver(s, dir)
		if err != nil {
			return err
		}
		t.Sources = append(t.Sources, driverwords.Source{Driver: s.driver, Version: s.version, Origin: s.origin, Paths: s.paths})
		t.Words = append(t.Words, words...)
		fmt.Fprintf(os.Stderr, "%s %s: %d formats\n", s.driver, s.version, len(words))
	}
	b, err := t.Encode()
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	return nil
}

func readSources(r io.Reader) ([]source, error) {
	var out []source
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !(strings.HasPrefix(f[2], "module:") || strings.HasPrefix(f[2], "repo:")) {
			return nil, fmt.Errorf("line %d of the list of drivers: want \"driver version module:<path>|repo:<owner/name> path...\", got %q", n, line)
		}
		out = append(out, source{driver: f[0], version: f[1], origin: f[2], paths: f[3:]})
	}
	return out, sc.Err()
}

// locate is the directory a driver's source is in: the module cache for a
// module the proxy serves, the snapshot under srcDir for a repository.
func locate(s source, srcDir, goCmd string) (string, error) {
	if mod, ok := strings.CutPrefix(s.origin, "module:"); ok {
		cmd := exec.Command(goCmd, "mod", "download", "-json", mod+"@"+s.version)
		cmd.Stderr = os.Stderr
		b, err := cmd.Output()
		var info struct{ Dir, Error string }
		if jerr := json.Unmarshal(b, &info); jerr == nil && info.Error != "" {
			return "", fmt.Errorf("the module proxy did not serve %s@%s: %s", mod, s.version, info.Error)
		}
		if err != nil {
			return "", fmt.Errorf("downloading %s@%s: %w", mod, s.version, err)
		}
		if info.Dir == "" {
			return "", fmt.Errorf("downloading %s@%s: go mod download named no directory", mod, s.version)
		}
		return info.Dir, nil
	}
	if srcDir == "" {
		return "", fmt.Errorf("%s %s comes from a repository snapshot: give -src, the directory holding %s@%s", s.driver, s.version, s.driver, s.version)
	}
	dir := filepath.Join(srcDir, s.driver+"@"+s.version)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("no snapshot of %s at %s: extract its tag %s there (%s)", s.driver, dir, s.version, s.origin)
	}
	return dir, nil
}

// extractDriver reads the Go files under the source's paths of one driver.
func extractDriver(s source, dir string) ([]driverwords.Word, error) {
	var files []string
	for _, p := range s.paths {
		root := filepath.Join(dir, p)
		if _, err := os.Stat(root); err != nil {
			return nil, fmt.Errorf("%s %s: no directory %s in the source: %w", s.driver, s.version, p, err)
		}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); p != root && (n == "testdata" || n == "fake" || n == "vendor" || n == "testing" || n == "mocks") {
					return filepath.SkipDir
				}
				return nil
			}
			n := d.Name()
			if strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && !strings.Contains(n, "windows") && !strings.Contains(n, "mock") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s %s: reading %s: %w", s.driver, s.version, p, err)
		}
	}
	sort.Strings(files)
	x := newExtractor()
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if err := x.parse(f, filepath.ToSlash(rel)); err != nil {
			return nil, fmt.Errorf("%s %s: %w", s.driver, s.version, err)
		}
	}
	words := x.words(s.driver, s.version)
	if len(words) == 0 {
		return nil, errors.New(s.driver + " " + s.version + ": no node operation's error wording found under " + strings.Join(s.paths, " "))
	}
	return words, nil
}
