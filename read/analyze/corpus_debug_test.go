package analyze_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/skip"
)

func TestCorpusDebugOne(t *testing.T) {
	f := skip.OptIn(t, "CORPUS_ONE", "one corpus case, for debugging")
	b, err := os.ReadFile(filepath.Join(corpusDir(t), f))
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCorpusCase(f, b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analyze.AnalyzeFile(context.Background(), corpusBundle(t, c), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(dump(rep))
}
