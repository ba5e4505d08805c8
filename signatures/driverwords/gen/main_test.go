package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/signatures/driverwords"
)

// A driver tree (a test file standing in for the source, renamed to .go in
// a temporary directory) yields the status errors with their codes, the
// wrapped error and the structured log of the helper the operation calls,
// and nothing of a function no node operation reaches.
func TestExtractDriver(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "fakedriver@v0.1.0", "pkg", "node", "node.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "fakedriver@v0.1.0")
	if err := os.MkdirAll(filepath.Join(dir, "pkg", "node"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg", "node", "node.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	s := source{driver: "fakedriver", version: "v0.1.0", origin: "repo:example/fakedriver", paths: []string{"pkg/node"}}
	got, err := locate(s, root, "go")
	if err != nil || got != dir {
		t.Fatalf("locate: %q, %v; want %q", got, err, dir)
	}
	words, err := extractDriver(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]driverwords.Word{
		"Volume ID missing in request":        {Kind: "status", Code: "InvalidArgument", Func: "NodeStageVolume"},
		"failed to stage volume %s at %s: %v": {Kind: "status", Code: "Internal", Func: "NodeStageVolume"},
		"mount failed":                        {Kind: "log", Level: "error", Func: "formatAndMount"},
		"could not mount %q on %q: %w":        {Kind: "error", Func: "formatAndMount"},
		"device for volume %s not found":      {Kind: "status", Code: "NotFound", Func: "formatAndMount"},
	}
	for _, w := range words {
		if strings.Contains(w.Format, "quota") {
			t.Errorf("kept %q of a function no node operation reaches", w.Format)
		}
		exp, ok := want[w.Format]
		if !ok {
			continue
		}
		delete(want, w.Format)
		if w.Kind != exp.Kind || w.Code != exp.Code || w.Level != exp.Level || w.Func != exp.Func || w.File != "pkg/node/node.go" ||
			len(w.Ops) != 1 || w.Ops[0] != "NodeStageVolume" || w.Driver != "fakedriver" || w.Version != "v0.1.0" {
			t.Errorf("%q: got %+v, want %+v in NodeStageVolume", w.Format, w, exp)
		}
		if w.Format == "mount failed" && strings.Join(w.Args, ",") != `volumeID,volumeID,"target",target` && strings.Join(w.Args, ",") != `"volumeID",volumeID,"target",target` {
			t.Errorf("structured log's args: %q", w.Args)
		}
	}
	for f := range want {
		t.Errorf("%q not extracted", f)
	}
	// A snapshot that is missing is said, not skipped.
	if _, err := locate(source{driver: "absent", version: "v1", origin: "repo:o/absent"}, root, "go"); err == nil {
		t.Error("locate found a snapshot that does not exist")
	}
}

func TestReadSourcesRejects(t *testing.T) {
	for _, in := range []string{"aws-ebs v1.0.0\n", "aws-ebs v1.0.0 github.com/x pkg\n"} {
		if _, err := readSources(strings.NewReader(in)); err == nil {
			t.Errorf("%q: read without an error", in)
		}
	}
	got, err := readSources(strings.NewReader("# c\n\nnfs v4 repo:kubernetes-csi/csi-driver-nfs pkg/nfs pkg/x\n"))
	if err != nil || len(got) != 1 || len(got[0].paths) != 2 {
		t.Errorf("got %+v, %v", got, err)
	}
}
