package corpuslines

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEach(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "x.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "y.log"), []byte("skipped\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	n := Each(t, dir, func(line []byte) { got = append(got, string(line)) })
	if n != 2 || len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("Each = %d, %q; want 2, [one two]", n, got)
	}
}

func TestEachRealCorpus(t *testing.T) {
	if n := Each(t, filepath.Join("..", "..", "test", "corpus"), func([]byte) {}); n < 1000 {
		t.Fatalf("only %d corpus lines", n)
	}
}
