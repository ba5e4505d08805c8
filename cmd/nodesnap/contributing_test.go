package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// contributingExample returns the collector CONTRIBUTING.md shows, the
// first Go block of its "Add a collector" section, and the package it
// declares.
func contributingExample(t *testing.T) (src, pkg string) {
	t.Helper()
	b, err := os.ReadFile("../../CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sect, ok := strings.Cut(string(b), "\n## Add a collector\n")
	if !ok {
		t.Fatal("CONTRIBUTING.md has no section \"Add a collector\"")
	}
	sect, _, _ = strings.Cut(sect, "\n## ")
	_, block, ok := strings.Cut(sect, "\n```go\n")
	if !ok {
		t.Fatal("CONTRIBUTING.md's \"Add a collector\" has no Go block")
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("CONTRIBUTING.md's Go block is not closed")
	}
	m := regexp.MustCompile(`(?m)^package (\w+)$`).FindStringSubmatch(block)
	if m == nil {
		t.Fatal("CONTRIBUTING.md's Go block declares no package")
	}
	return block + "\n", m[1]
}

// The collector CONTRIBUTING.md shows, pasted as written into a new
// package with its one line in collectors/all/all.go, is all nodesnap
// needs: the binary builds, `nodesnap collectors` lists it and `collect
// --only` writes its file. The source tree is left alone (the package and
// the line are laid over it with go build -overlay).
func TestContributingExample(t *testing.T) {
	skip.Short(t, "builds nodesnap with the example collector and runs it")
	src, pkg := contributingExample(t)
	all, err := os.ReadFile("../../collectors/all/all.go")
	if err != nil {
		t.Fatal(err)
	}
	const imp = "import (\n"
	if !bytes.Contains(all, []byte(imp)) {
		t.Fatal("collectors/all/all.go has no import block")
	}
	line := "\t_ \"github.com/nodesnap/nodesnap/collectors/" + pkg + "\"\n"
	all = bytes.Replace(all, []byte(imp), []byte(imp+line), 1)
	bin := testkit.BinaryWith(t, map[string][]byte{
		"collectors/" + pkg + "/collector.go": []byte(src),
		"collectors/all/all.go":               all,
	})

	out, err := exec.Command(bin, "collectors", "-o", "json").Output()
	if err != nil {
		t.Fatalf("nodesnap collectors -o json: %v", err)
	}
	var infos []collectorInfo
	if err := json.Unmarshal(out, &infos); err != nil {
		t.Fatalf("decoding the listing: %v\n%s", err, out)
	}
	var listed bool
	for _, c := range infos {
		listed = listed || c.Name == pkg
	}
	if !listed {
		t.Fatalf("nodesnap collectors does not list %s:\n%s", pkg, out)
	}

	// A host root holding the file the example reads.
	root := t.TempDir()
	conf := "global {\n\tuse_lvmetad = 0\n}\n"
	if err := os.MkdirAll(filepath.Join(root, "etc", "lvm"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "lvm", "lvm.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "collect", "-q", "--root", root, "--output-dir", dir, "--only", pkg, "--timeout", "60s")
	cmd.Env = append(os.Environ(), AllowNonRootEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		// A run as non-root is partial (exit 3) and says so; the
		// collector's own status is checked below.
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitPartial {
			t.Fatalf("collect --only %s: %v\n%s", pkg, err, stderr.String())
		}
	}
	c, err := bundle.ReadAll(context.Background(), bundlePath(t, dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	res := c.Manifest.Collector(pkg)
	if res == nil || res.Status != "ok" {
		t.Fatalf("the manifest's %s: %+v", pkg, res)
	}
	if got := string(c.Files[pkg+"/lvm.conf"]); got != conf {
		t.Errorf("%s/lvm.conf holds %q, want %q", pkg, got, conf)
	}
}
