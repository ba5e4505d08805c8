package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
)

// What a support desk does all day, through the real binary: half-bundles,
// extracted bundles, several bundles, 80 columns.

// fixtureNames lists analyze's fixture scenarios (read/analyze/testdata).
func fixtureNames(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("..", "..", "read", "analyze", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 5 {
		t.Fatalf("only %d fixture scenarios found: %v", len(out), out)
	}
	return out
}

// widest returns the widest line of s in runes, and how many lines are
// wider than width.
func widest(s string, width int) (int, int, string) {
	most, over, line := 0, 0, ""
	for _, l := range strings.Split(s, "\n") {
		n := utf8.RuneCountInString(l)
		if n > width {
			over++
		}
		if n > most {
			most, line = n, l
		}
	}
	return most, over, line
}

// Every fixture scenario, analysed and inspected off a terminal, fits 80
// columns, with and without -v; COLUMNS widens it. -v shows text that the
// default elides. The figures are logged (go test -v -run
// TestReadingFits80Columns ./cmd/nodesnap).
func TestReadingFits80Columns(t *testing.T) {
	totalLines, totalOver := 0, 0
	for _, name := range fixtureNames(t) {
		p := fixtureBundle(t, name)
		for _, args := range [][]string{{"analyze", p}, {"analyze", "-v", p}, {"inspect", p}, {"inspect", "-v", "--files", p}} {
			r := runNodesnap(t, time.Minute, []string{"COLUMNS="}, args...)
			if r.code != exitOK && r.code != exitPartial {
				t.Fatalf("%s %v: exit %d\n%s", name, args, r.code, r.stderr)
			}
			most, over, line := widest(r.stdout, 80)
			totalLines += strings.Count(r.stdout, "\n")
			totalOver += over
			if over > 0 {
				t.Errorf("%s %v: %d line(s) wider than 80 columns, the widest %d: %q", name, args[:len(args)-1], over, most, line)
			}
		}
		r := runNodesnap(t, time.Minute, []string{"COLUMNS=120"}, "analyze", p)
		if most, over, line := widest(r.stdout, 120); over > 0 {
			t.Errorf("%s at COLUMNS=120: widest %d: %q", name, most, line)
		}
	}
	t.Logf("analyze and inspect of %d scenarios: %d lines, %d wider than 80 columns", len(fixtureNames(t)), totalLines, totalOver)

	// Elided by default, whole with -v and in --output json.
	p := fixtureBundle(t, "incident003-cephfs-hung")
	short := runNodesnap(t, time.Minute, nil, "analyze", p)
	full := runNodesnap(t, time.Minute, nil, "analyze", "-v", p)
	if !strings.Contains(short.stdout, "…") || len(full.stdout) <= len(short.stdout) {
		t.Errorf("-v shows nothing more than the default (%d vs %d bytes)", len(full.stdout), len(short.stdout))
	}
}

// A bundle cut short (a half-uploaded attachment) at several offsets:
// analyze gives the findings from before the cut and one that says where it
// ends (exit 3); inspect shows what the manifest says and that it is
// truncated (exit 3); validate says TRUNCATED (exit 3). Cut inside the
// manifest, nothing can be read: exit 1 with the reason.
func TestTruncatedBundleThroughTheBinary(t *testing.T) {
	whole := fixtureBundle(t, "incident003-cephfs-hung")
	data, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	sawFindings := false
	for _, frac := range []float64{0.02, 0.3, 0.6, 0.95} {
		n := int(float64(len(data)) * frac)
		cut := filepath.Join(t.TempDir(), "cut.tar.gz")
		if err := os.WriteFile(cut, data[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		a := runNodesnap(t, time.Minute, nil, "analyze", cut)
		i := runNodesnap(t, time.Minute, nil, "inspect", cut)
		v := runNodesnap(t, time.Minute, nil, "validate", cut)
		if a.code == exitFatal {
			// Cut inside manifest.json: all three say so.
			for _, r := range []runResult{a, i, v} {
				if r.code != exitFatal || !strings.Contains(r.stderr, "truncated") {
					t.Errorf("cut at %d (in the manifest): exit %d\n%s%s", n, r.code, r.stdout, r.stderr)
				}
			}
			continue
		}
		if a.code != exitPartial || !strings.Contains(a.stdout, "bundle-truncated") || !strings.Contains(a.stdout, "bundle truncated ") {
			t.Errorf("analyze, cut at %d of %d: exit %d\n%s%s", n, len(data), a.code, a.stdout, a.stderr)
		}
		if strings.Count(a.stdout, "\n[") > 1 {
			sawFindings = true
		}
		if i.code != exitPartial || !strings.Contains(i.stdout, "TRUNCATED: the bundle is truncated") || !strings.Contains(i.stdout, "COLLECTOR") {
			t.Errorf("inspect, cut at %d: exit %d\n%s%s", n, i.code, i.stdout, i.stderr)
		}
		if v.code != exitPartial || !strings.Contains(v.stdout, cut+": TRUNCATED") {
			t.Errorf("validate, cut at %d: exit %d\n%s%s", n, v.code, v.stdout, v.stderr)
		}
		html := filepath.Join(t.TempDir(), "r.html")
		if r := runNodesnap(t, time.Minute, nil, "report", "--output-file", html, cut); r.code != exitOK {
			t.Errorf("report, cut at %d: exit %d\n%s", n, r.code, r.stderr)
		} else if b, _ := os.ReadFile(html); !strings.Contains(string(b), "bundle-truncated") {
			t.Errorf("report, cut at %d: the page does not say the bundle is truncated", n)
		}
		j := runNodesnap(t, time.Minute, nil, "inspect", "-o", "json", cut)
		var res struct {
			Valid     bool `json:"valid"`
			Truncated *struct {
				Complete int `json:"complete_entries"`
			} `json:"truncated"`
			Manifest *bundle.Manifest `json:"manifest"`
		}
		if err := json.Unmarshal([]byte(j.stdout), &res); err != nil || j.code != exitPartial || res.Valid || res.Truncated == nil || res.Manifest == nil {
			t.Errorf("inspect -o json, cut at %d: exit %d, %v\n%s", n, j.code, err, j.stdout)
		}
	}
	if !sawFindings {
		t.Errorf("no cut kept a finding from before the cut")
	}
}

// extract writes a bundle's files into dir (the manifest too), as tar xzf
// would.
func extract(t *testing.T, p, dir string) {
	t.Helper()
	c, err := bundle.ReadAll(context.Background(), p, 0)
	if err != nil {
		t.Fatal(err)
	}
	// manifest.json as its bytes are: it carries its own checksum.
	_, raw, err := bundle.ReadManifest(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	c.Files[bundle.ManifestName] = raw
	for name, b := range c.Files {
		q := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(q), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(q, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// An extracted bundle is read wherever a bundle file is: analyze, inspect,
// validate, report and diff give what they give for the archive; a
// directory holding one top-level directory is read too; a symbolic link
// in it is refused as in an archive.
func TestExtractedBundleDirectory(t *testing.T) {
	healthy := fixtureBundle(t, "healthy")
	p := fixtureBundle(t, "incident003-cephfs-hung")
	dir := t.TempDir()
	extract(t, p, dir)
	top := t.TempDir()
	extract(t, p, filepath.Join(top, "nodesnap-n1-20261121T090000Z"))

	archive := runNodesnap(t, time.Minute, nil, "analyze", "-o", "json", p)
	for _, d := range []string{dir, top} {
		r := runNodesnap(t, time.Minute, nil, "analyze", "-o", "json", d)
		if r.code != archive.code || ids(t, r.stdout) != ids(t, archive.stdout) {
			t.Errorf("analyze %s: exit %d, findings %s; the archive: exit %d, %s\n%s", d, r.code, ids(t, r.stdout), archive.code, ids(t, archive.stdout), r.stderr)
		}
		if r := runNodesnap(t, time.Minute, nil, "validate", d); r.code != exitOK || !strings.Contains(r.stdout, ": valid (") {
			t.Errorf("validate %s: exit %d\n%s%s", d, r.code, r.stdout, r.stderr)
		}
		if r := runNodesnap(t, time.Minute, nil, "inspect", d); r.code != exitOK || !strings.Contains(r.stdout, "COLLECTOR") {
			t.Errorf("inspect %s: exit %d\n%s%s", d, r.code, r.stdout, r.stderr)
		}
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if r := runNodesnap(t, time.Minute, nil, "report", "--output-file", html, dir); r.code != exitOK {
		t.Errorf("report: exit %d\n%s", r.code, r.stderr)
	} else if b, _ := os.ReadFile(html); !strings.Contains(string(b), "hung-mount") {
		t.Errorf("report of the directory lacks the hung mount")
	}
	if r := runNodesnap(t, time.Minute, nil, "diff", healthy, dir); r.code != exitPartial || !strings.Contains(r.stdout, "hung-mount") {
		t.Errorf("diff healthy → directory: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Refused as an archive would be.
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "host", "evil")); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"analyze", "validate", "inspect"} {
		if r := runNodesnap(t, time.Minute, nil, cmd, dir); r.code != exitFatal || !strings.Contains(r.stderr, "symbolic link") {
			t.Errorf("%s of a directory with a link: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
		}
	}
	if r := runNodesnap(t, time.Minute, nil, "analyze", t.TempDir()); r.code != exitFatal || !strings.Contains(r.stderr, "not an extracted bundle") {
		t.Errorf("an empty directory: exit %d\n%s", r.code, r.stderr)
	}
}

// ids returns the finding IDs of analyze's JSON, sorted and joined.
func ids(t *testing.T, js string) string {
	t.Helper()
	var rep struct {
		Findings []struct{ ID, Subject string } `json:"findings"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		return "(not JSON: " + err.Error() + ")"
	}
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.ID+"/"+f.Subject)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// validate of several bundles: a line each, the worst status.
func TestValidateSeveralBundles(t *testing.T) {
	good := fixtureBundle(t, "healthy")
	other := fixtureBundle(t, "csi-leftovers")
	data, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.tar.gz")
	if err := os.WriteFile(cut, data[:len(data)*3/4], 0o600); err != nil {
		t.Fatal(err)
	}
	r := runNodesnap(t, time.Minute, nil, "validate", good, other)
	if r.code != exitOK || strings.Count(r.stdout, ": valid (") != 2 {
		t.Errorf("two valid: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNodesnap(t, time.Minute, nil, "validate", good, cut, other)
	if r.code != exitPartial || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stdout, cut+": TRUNCATED") {
		t.Errorf("one cut: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	missing := filepath.Join(t.TempDir(), "nope.tar.gz")
	r = runNodesnap(t, time.Minute, nil, "validate", good, missing, cut)
	if r.code != exitFatal || !strings.Contains(r.stdout, missing+": UNREADABLE") || !strings.Contains(r.stderr, "2 of 3 bundles did not validate") {
		t.Errorf("one missing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNodesnap(t, time.Minute, nil, "validate", "-o", "json", good, cut)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var a, b struct {
		Valid     bool `json:"valid"`
		Truncated bool `json:"truncated"`
	}
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &a) != nil || json.Unmarshal([]byte(lines[1]), &b) != nil || !a.Valid || b.Valid || !b.Truncated || r.code != exitPartial {
		t.Errorf("-o json: exit %d\n%s", r.code, r.stdout)
	}
}

// -v shows what inspect's table cuts: the whole error text of a collector.
func TestInspectVerboseAndJSON(t *testing.T) {
	long := "cut by --timeout: " + strings.Repeat("the collector waited on a mount that never answered, ", 6) + "END-OF-ERROR"
	p := bundleWithCollectorError(t, long)
	r := runNodesnap(t, time.Minute, nil, "inspect", p)
	if r.code != exitOK || strings.Contains(r.stdout, "END-OF-ERROR") || !strings.Contains(r.stdout, "…") {
		t.Errorf("inspect: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if most, _, line := widest(r.stdout, 80); most > 80 {
		t.Errorf("inspect line of %d: %q", most, line)
	}
	r = runNodesnap(t, time.Minute, nil, "inspect", "-v", p)
	if r.code != exitOK || !strings.Contains(r.stdout, "END-OF-ERROR") {
		t.Errorf("inspect -v: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if most, _, line := widest(r.stdout, 80); most > 80 {
		t.Errorf("inspect -v line of %d: %q", most, line)
	}
	// The habit of other tools: --json works, and says --output json.
	if r := runNodesnap(t, time.Minute, nil, "inspect", "--json", p); r.code != exitOK || !json.Valid([]byte(r.stdout)) || !strings.Contains(r.stderr, "use --output json") {
		t.Errorf("inspect --json: exit %d\n%s", r.code, r.stderr)
	}
	r = runNodesnap(t, time.Minute, nil, "inspect", "--output", "json", p)
	var res struct {
		Valid    bool `json:"valid"`
		Manifest struct {
			Collectors []struct{ Error string } `json:"collectors"`
		} `json:"manifest"`
		Collectors []struct{ Name string } `json:"collectors"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || !res.Valid || len(res.Manifest.Collectors) != 1 || res.Manifest.Collectors[0].Error != long || len(res.Collectors) != 1 {
		t.Errorf("inspect --output json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
}

// bundleWithCollectorError writes a valid bundle whose one collector
// failed with msg.
func bundleWithCollectorError(t *testing.T, msg string) string {
	t.Helper()
	staging := t.TempDir()
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Tool: bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		CommandLine: []string{"nodesnap", "collect"}, Host: bundle.Host{Hostname: "n1"}, StartedAt: now, FinishedAt: now, Status: "partial",
		Settings:   bundle.Settings{Root: "/", TimeoutSeconds: 120, MaxFileBytes: 64 << 20, MaxBundleBytes: 1 << 30, Concurrency: 4, Compression: bundle.Gzip},
		Collectors: []bundle.CollectorResult{{Name: "journal", Status: bundle.StatusTimeout, Error: msg, Files: []string{}}}, Files: []bundle.FileEntry{},
		Redaction: bundle.RedactionSummary{Rules: map[string]int{}}, HungMounts: []bundle.HungItem{}, Omitted: []bundle.Omitted{}}
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, staging, now); err != nil {
		t.Fatal(err)
	}
	return out
}

// One meaning for -o, one JSON switch, errors as JSON, flag checks: each
// refused before anything is collected.
func TestOutputFlagAndChecks(t *testing.T) {
	p := fixtureBundle(t, "incident003-cephfs-hung")
	for _, args := range [][]string{{"analyze", "-o", "json", p}, {"analyze", "--output=json", p}} {
		r := runNodesnap(t, time.Minute, nil, args...)
		if r.code != exitPartial || !json.Valid([]byte(r.stdout)) || r.stderr != "" {
			t.Errorf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	// The old spelling works and says what to use.
	r := runNodesnap(t, time.Minute, nil, "analyze", "--json", p)
	if r.code != exitPartial || !json.Valid([]byte(r.stdout)) || !strings.Contains(r.stderr, "use --output json") {
		t.Errorf("--json: exit %d\n%s", r.code, r.stderr)
	}

	// collect -o json is the format: the usage error comes as JSON.
	r = runNodesnap(t, time.Minute, nil, "collect", "-o", "json", "--timeout", "0s")
	var je struct {
		Error      string `json:"error"`
		ExitStatus int    `json:"exit_status"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &je); err != nil || r.code != exitUsage || je.ExitStatus != exitUsage || !strings.Contains(je.Error, "--timeout") {
		t.Errorf("collect -o json: exit %d, %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	// collect -o DIR, as documented before: still the directory, with a
	// word on the new spelling.
	r = runNodesnap(t, time.Minute, nil, "collect", "-o", t.TempDir(), "--timeout", "0s")
	if r.code != exitUsage || !strings.Contains(r.stderr, "deprecated: use --output-dir") {
		t.Errorf("collect -o DIR: exit %d\n%s", r.code, r.stderr)
	}
	// report and redact: -o FILE, as documented before, still writes the
	// file, and says --output-file.
	html := filepath.Join(t.TempDir(), "r.html")
	if r := runNodesnap(t, time.Minute, nil, "report", "-o", html, p); r.code != exitOK || !strings.Contains(r.stderr, "use --output-file") {
		t.Errorf("report -o FILE: exit %d\n%s", r.code, r.stderr)
	} else if _, err := os.Stat(html); err != nil {
		t.Errorf("report -o FILE wrote nothing: %v", err)
	}
	clean := filepath.Join(t.TempDir(), "clean.tar.gz")
	if r := runNodesnap(t, time.Minute, nil, "redact", "-o", clean, p); r.code != exitOK || !strings.Contains(r.stderr, "use --output-file") {
		t.Errorf("redact -o FILE: exit %d\n%s", r.code, r.stderr)
	} else if _, err := os.Stat(clean); err != nil {
		t.Errorf("redact -o FILE wrote nothing: %v", err)
	} else {
		// The copy has its checksum file, which sha256sum checks where the pair lies.
		cmd := exec.Command("sha256sum", "-c", filepath.Base(clean)+".sha256")
		cmd.Dir = filepath.Dir(clean)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), ": OK") {
			t.Errorf("sha256sum -c of redact's checksum file: %v\n%s", err, out)
		}
	}
	if r = runNodesnap(t, time.Minute, nil, "collect", "-o", "yaml"); r.code != exitUsage || !strings.Contains(r.stderr, "--output-dir") {
		t.Errorf("collect -o yaml: exit %d\n%s", r.code, r.stderr)
	}
	if r = runNodesnap(t, time.Minute, nil, "analyze", "-o", "json", filepath.Join(t.TempDir(), "missing.tar.gz")); r.code != exitFatal || !json.Valid([]byte(r.stdout)) || !strings.Contains(r.stdout, `"exit_status":1`) {
		t.Errorf("analyze -o json of a missing file: exit %d\n%s", r.code, r.stdout)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"collect", "--concurrency", "0"}, "--concurrency must be at least 1"},
		{[]string{"collect", "--workers", "0"}, "--workers must be at least 1"},
		{[]string{"collect", "--since", "-2h"}, "negative"},
		{[]string{"collect", "--since", "7x"}, "not a duration"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"analyze", "-o", "yaml", p}, "--output must be text or json or html"},
	} {
		r := runNodesnap(t, time.Minute, nil, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s", c.args, r.code, exitUsage, c.want, r.stderr)
		}
	}
	// Days are accepted: the run goes on to the next check.
	if r := runNodesnap(t, time.Minute, nil, "collect", "--since", "7d", "--timeout", "0s"); r.code != exitUsage || !strings.Contains(r.stderr, "--timeout must be positive") {
		t.Errorf("--since 7d: exit %d\n%s", r.code, r.stderr)
	}
}

// Every command's help fits 80 columns and lists only the exit statuses
// the command can return.
func TestHelpFits80ColumnsAndExitStatuses(t *testing.T) {
	cmds := []string{"", "analyze", "collect", "collectors", "diff", "inspect", "validate", "report", "redact", "upload", "hold", "bundle-cat", "version", "docs"}
	most := 0
	for _, c := range cmds {
		args := []string{"--help"}
		if c != "" {
			args = []string{c, "--help"}
		}
		r := runNodesnap(t, time.Minute, nil, args...)
		if r.code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
		w, over, line := widest(r.stdout, 80)
		most = max(most, w)
		if over > 0 {
			t.Errorf("nodesnap %s --help: %d line(s) wider than 80 columns, the widest %d: %q", c, over, w, line)
		}
		switch c {
		case "collect":
			// Sections, in order: general, output, ..., upload, then
			// one per collector.
			last := -1
			for _, sec := range []string{"\nGeneral:\n", "\nOutput:\n", "\nRedaction:\n", "\nUpload:\n", "\nCollector csi:\n", "\nCollector kubelet:\n", "\nFlags:\n"} {
				i := strings.Index(r.stdout, sec)
				if i < 0 || i < last {
					t.Errorf("collect --help: section %q missing or out of order", strings.TrimSpace(sec))
				}
				last = i
			}
		case "analyze":
			for _, doc := range []string{"docs/findings.md", "docs/redaction.md", "docs/bundle.md"} {
				if !strings.Contains(r.stdout, doc) {
					t.Errorf("analyze --help does not point to %s", doc)
				}
			}
		}
		statuses := exitStatusesIn(r.stdout)
		want := map[string]string{"analyze": "0123", "inspect": "0123", "validate": "0123", "diff": "0123", "collect": "012345", "upload": "0125", "report": "0123", "redact": "0123"}[c]
		if want != "" && statuses != want {
			t.Errorf("nodesnap %s --help lists exit statuses %q, want %q", c, statuses, want)
		}
	}
	t.Logf("the widest help line: %d columns", most)
}

// exitStatusesIn returns the statuses of a help's "Exit status:" block.
func exitStatusesIn(help string) string {
	_, block, ok := strings.Cut(help, "Exit status:\n")
	if !ok {
		return ""
	}
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if len(l) > 3 && l[0:2] == "  " && l[2] >= '0' && l[2] <= '9' && l[3] == ' ' {
			out = append(out, l[2:3])
		} else if l != "" && !strings.HasPrefix(l, "   ") {
			break
		}
	}
	return strings.Join(out, "")
}

// Every collector of the registry says what it needs, in `nodesnap
// collectors` and the reference; the list has no collector the registry
// lacks. Its options come with their defaults.
func TestCollectorsListNeedsAndOptions(t *testing.T) {
	infos := collectorInfos()
	seen := map[string]bool{}
	for _, c := range infos {
		seen[c.Name] = true
		if c.Needs == "" {
			t.Errorf("collector %s says nothing of what it needs from the node (Spec.Requires)", c.Name)
		}
	}
	for _, s := range collectors.All() {
		if !s.Hidden && !seen[s.Name] {
			t.Errorf("collector %s is registered but not listed", s.Name)
		}
	}
	r := runNodesnap(t, time.Minute, nil, "collectors")
	for _, want := range []string{"kubelet\n  needs: a credential", "--kubelet-url=https://127.0.0.1:10250", "--journal-reader=auto", "--dirshape-top=20"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("nodesnap collectors lacks %q:\n%s", want, r.stdout)
		}
	}
	if most, over, line := widest(r.stdout, 80); over > 0 {
		t.Errorf("nodesnap collectors: a line of %d: %q", most, line)
	}
	r = runNodesnap(t, time.Minute, nil, "collectors", "-o", "json")
	var got []collectorInfo
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != len(infos) {
		t.Fatalf("collectors -o json: %v\n%s", err, r.stdout)
	}
}

// Shell completion offers collector names (after a comma too) and the
// values of enum flags.
func TestCompletionOffersNamesAndValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "collect", "--only", "host,mo"}, []string{"host,mounts", "host,mountprobe"}},
		{[]string{"__complete", "collect", "--skip", ""}, []string{"journal", "kubelet"}},
		{[]string{"__complete", "collect", "--compression", ""}, []string{"tar.gz", "tar.zst"}},
		{[]string{"__complete", "collect", "--journal-reader", ""}, []string{"native", "journalctl"}},
		{[]string{"__complete", "analyze", "-o", ""}, []string{"text", "json", "html"}},
		{[]string{"__complete", "collect", "--obfuscate", ""}, []string{"hostname"}},
	} {
		r := runNodesnap(t, time.Minute, nil, c.args...)
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v: %q not offered:\n%s", c.args, w, r.stdout)
			}
		}
	}
}
