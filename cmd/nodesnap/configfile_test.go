package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
)

// configFileRun collects the nodeconfig collector of root with args and
// returns the run, its manifest and nodeconfig/files.json.
func configFileRun(t *testing.T, root string, args ...string) (runResult, *bundle.Manifest, map[string][]byte, []map[string]any) {
	t.Helper()
	dir := t.TempDir()
	// Deadlines far above what reading a few MiB takes: a loaded machine
	// must not turn a cut into a timeout.
	r := runNodesnap(t, 4*time.Minute, nil, append([]string{"collect", "--only", "nodeconfig", "--root", root, "--output-dir", dir,
		"--timeout", "3m", "--collector-timeout", "2m", "--probe-timeout", "1m"}, args...)...)
	c := mustValidate(t, bundlePath(t, dir))
	var files []map[string]any
	if err := json.Unmarshal(c.Files["nodeconfig/files.json"], &files); err != nil {
		t.Fatalf("files.json: %v", err)
	}
	return r, c.Manifest, c.Files, files
}

func writeFile(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A --config-file larger than the cap is kept in part and says so: the
// manifest marks it truncated and the run is partial with a note (it was
// cut at 4 MiB with collect saying complete and exit 0).
func TestConfigFileCutSaysSo(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "etc/app/big.conf"), []byte(strings.Repeat("key = value-that-is-not-secret\n", 10<<20/31)))
	r, m, _, _ := configFileRun(t, root, "--config-file", "/etc/app/big.conf")
	if r.code != exitPartial {
		t.Errorf("exit %d, want %d (partial)\n%s", r.code, exitPartial, r.stderr)
	}
	found := false
	for _, f := range m.Files {
		if strings.HasSuffix(f.Path, "files/etc/app/big.conf") {
			found = true
			if !f.Truncated || f.Size > 5<<20 {
				t.Errorf("manifest: %s truncated=%v size %d, want truncated near 4 MiB", f.Path, f.Truncated, f.Size)
			}
		}
	}
	c := collectorByName(t, m, "nodeconfig")
	if !found {
		t.Fatalf("no big.conf in the manifest: nodeconfig %s %q %v", c.Status, c.Error, c.Notes)
	}
	if c.Status != bundle.StatusPartial || !strings.Contains(strings.Join(c.Notes, "\n")+c.Error, "big.conf is larger than 4.0 MiB") {
		t.Errorf("nodeconfig %s %q %v: want partial, the cut said", c.Status, c.Error, c.Notes)
	}
}

// A directory and a glob are taken like sos' copy specs: each file
// recorded in files.json, named by the spec it came from; a directory past
// its bound is cut, said so, and the run partial.
func TestConfigFileDirectoryAndGlob(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"a.conf", "b.conf", "sub/c.conf", "notes.txt"} {
		writeFile(t, filepath.Join(root, "etc/app.d", f), []byte("setting = "+f+"\n"))
	}
	r, _, files, list := configFileRun(t, root, "--config-file", "/etc/app.d")
	if r.code != exitOK {
		t.Errorf("a directory: exit %d\n%s", r.code, r.stderr)
	}
	from := map[string]string{}
	for _, e := range list {
		p, _ := e["path"].(string)
		f, _ := e["from"].(string)
		from[p] = f
	}
	for _, f := range []string{"a.conf", "b.conf", "sub/c.conf", "notes.txt"} {
		p := "/etc/app.d/" + f
		if !strings.Contains(string(files["nodeconfig/files"+p]), "setting = "+f) || from[p] != "--config-file /etc/app.d" {
			t.Errorf("%s: not collected from the directory (files.json from %q)", p, from[p])
		}
	}
	r, _, files, _ = configFileRun(t, root, "--config-file", "/etc/app.d/*.conf")
	if r.code != exitOK || files["nodeconfig/files/etc/app.d/a.conf"] == nil || files["nodeconfig/files/etc/app.d/b.conf"] == nil ||
		files["nodeconfig/files/etc/app.d/notes.txt"] != nil {
		t.Errorf("a glob: exit %d, want a.conf and b.conf only\n%s", r.code, r.stderr)
	}

	many := t.TempDir()
	for i := range 300 {
		writeFile(t, filepath.Join(many, "etc/many", strconv.Itoa(i)+".conf"), []byte("n = "+strconv.Itoa(i)+"\n"))
	}
	r, m, _, list := configFileRun(t, many, "--config-file", "/etc/many")
	c := collectorByName(t, m, "nodeconfig")
	if r.code != exitPartial || c.Status != bundle.StatusPartial || !strings.Contains(strings.Join(c.Notes, "\n")+c.Error, "more than 256 files") {
		t.Errorf("300 files: exit %d, %s %q %v; want partial and the bound said", r.code, c.Status, c.Error, c.Notes)
	}
	if n := len(list); n > 256+len(nodeConfigDefaultsIn(list)) {
		t.Errorf("files.json lists %d files, past the bound", n)
	}
}

// nodeConfigDefaultsIn are the entries of files.json that no spec named.
func nodeConfigDefaultsIn(list []map[string]any) []string {
	var out []string
	for _, e := range list {
		if f, _ := e["from"].(string); f == "" {
			p, _ := e["path"].(string)
			out = append(out, p)
		}
	}
	return out
}
