package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/testkit"
)

var update = flag.Bool("update", false, "rewrite the golden files of the end-to-end test and docs/bundle.md's generated table")

// The real binary, run against a fixture host root (testdata/root: a
// /proc with four processes, one kubelet thread in D state on FUSE, a
// second mount namespace), produces a bundle whose normalised manifest and
// process listing match the golden files. Run with -update to regenerate
// after an intended change, and review the diff.
func TestGoldenFixtureRoot(t *testing.T) {
	bin := testkit.Binary(t)
	root, err := filepath.Abs("testdata/root")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(bin, "collect", "-q", "--root", root, "--output-dir", out, "--only", "host,processes", "--timeout", "60s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("collect: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	p := bundlePath(t, out)
	if !strings.Contains(filepath.Base(p), "nodesnap-fixture-node-") {
		t.Errorf("bundle name %s does not carry the fixture's hostname", p)
	}
	c := mustValidate(t, p)

	// The fixture kubelet's command line carries a token: it must be gone
	// from every byte, whatever the golden files say.
	for name, b := range c.Files {
		if bytes.Contains(b, []byte("s3cr3t-fixture-token")) {
			t.Errorf("%s holds the fixture's secret token", name)
		}
	}
	compareGolden(t, "testdata/golden/manifest.json", normaliseManifest(t, c.Manifest))
	compareGolden(t, "testdata/golden/ps.txt", c.Files["processes/ps.txt"])
	compareGolden(t, "testdata/golden/tasks.json", c.Files["processes/tasks.json"])
}

var (
	reRootPath = regexp.MustCompile(`"[^"]*/cmd/nodesnap/testdata/root"`)
	reTmpPath  = regexp.MustCompile(`"/tmp/[^"]*"`)
)

// normaliseManifest removes what varies between runs and machines: times,
// durations, the tool's version, the manifest's own checksum, the paths of
// this checkout, and the
// sizes and digests of files whose content depends on the machine (gopsutil
// reads some host facts from sysconf, not the fixture).
func normaliseManifest(t *testing.T, m *bundle.Manifest) []byte {
	t.Helper()
	m.StartedAt, m.FinishedAt = time.Time{}, time.Time{}
	m.DurationSeconds = 0
	m.Tool.Version, m.Tool.GoVersion = "VERSION", "GO"
	for i := range m.Collectors {
		c := &m.Collectors[i]
		c.StartedAt = nil
		c.DurationSeconds = 0
		c.MaxRSSKiB = 0
	}
	m.Resources = nil
	// nodesnap's own pid and namespaces differ on every run.
	if m.Self == nil || m.Self.PID <= 0 {
		t.Errorf("the manifest does not say who nodesnap was: %+v", m.Self)
	}
	m.Self = nil
	// The manifest's own checksum covers the times above: checked by the
	// readers (every test that opens a bundle), recorded here as present.
	if len(m.ManifestSHA256) != 64 {
		t.Errorf("the manifest carries no checksum of its own: %q", m.ManifestSHA256)
	}
	m.ManifestSHA256 = "MANIFEST-SHA256"
	for i := range m.Files {
		f := &m.Files[i]
		if f.Path == "host/summary.json" {
			f.Size, f.SHA256 = 0, "MACHINE-DEPENDENT"
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = reRootPath.ReplaceAll(b, []byte(`"ROOT"`))
	b = reTmpPath.ReplaceAll(b, []byte(`"TMP"`))
	return append(b, '\n')
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from this run (go test ./cmd/nodesnap -run Golden -update to accept):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the first differing lines; enough to see what changed.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			out = append(out, "- "+a, "+ "+b)
			if len(out) > 20 {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
