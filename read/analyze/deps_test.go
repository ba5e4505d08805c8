package analyze_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nodesnap/nodesnap/"

// forbiddenDeps are what the offline analyzer must never link: the
// collection engine and what only it needs. analyze reads a bundle on any
// machine; it decodes the records of bundle/layout.
var forbiddenDeps = []string{
	module + "collectors",
	module + "engine",
	module + "redact",
	"github.com/shirou/gopsutil",
	"github.com/spf13/pflag",
	"github.com/spf13/cobra",
	"net/http",
}

// allowedOwn are the only packages of this module analyze may depend on:
// bundle (reading archives, the manifest), bundle/layout (the records and
// file names), goroutinedump (counting goroutines by frame, standard
// library only), procfs (the parsers of the raw /proc copies in a bundle),
// and what bundle itself needs (the manifest's schema), internal/textfit
// (fitting text to the terminal), internal/jsonstream (walking big JSON
// files a record at a time), signatures (the log-signature catalogue,
// a leaf shared with watch) and internal/termsafe (escaping what a bundle
// says before a terminal sees it).
var allowedOwn = []string{"read/analyze", "read/events", "bundle", "bundle/layout", "bundle/schema", "read/goroutinedump", "internal/procfs", "signatures", "internal/textfit", "internal/jsonstream", "internal/termsafe"}

// TestDependencies keeps analyze a reader of bundles: a new import that
// pulls in the collection engine or an HTTP stack fails here, naming the
// package that brought it in.
func TestDependencies(t *testing.T) {
	// go test puts the go command that runs it first in PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("finding the go command: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, ".").Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	importers := map[string][]string{}
	var deps []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		deps = append(deps, f[0])
		for _, imp := range f[1:] {
			importers[imp] = append(importers[imp], f[0])
		}
	}
	if !slices.Contains(deps, module+"bundle/layout") {
		t.Fatalf("go list -deps does not list bundle/layout: the test is not reading analyze's dependencies:\n%s", out)
	}
	for _, d := range deps {
		forbidden := slices.ContainsFunc(forbiddenDeps, func(bad string) bool { return d == bad || strings.HasPrefix(d, bad+"/") })
		if forbidden {
			t.Errorf("analyze depends on %s (imported by %s); the offline analyzer must not link it", d, strings.Join(importers[d], ", "))
		} else if own, ok := strings.CutPrefix(d, module); ok && !slices.Contains(allowedOwn, own) {
			t.Errorf("analyze depends on %s (imported by %s); analyze may use only %s of this module", d, strings.Join(importers[d], ", "), strings.Join(allowedOwn, ", "))
		}
	}
}
