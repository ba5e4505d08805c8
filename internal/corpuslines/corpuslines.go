// Package corpuslines hands tests every line of the project's test
// corpus (test/corpus/*/*.txt): the lines the shortcut checks of the
// event parser and of the object extractor compare with the expressions
// the shortcuts stand in for.
package corpuslines

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"
)

// Each calls fn on every line of the corpus under dir (test/corpus, as
// a path from the calling package) and returns how many lines it read.
// fn's line is valid only during the call. A missing corpus or a file
// that cannot be read fails tb, so a check run on no lines cannot pass.
func Each(tb testing.TB, dir string, fn func(line []byte)) int {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.txt"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no corpus files under %s", dir)
	}
	n := 0
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			n++
			fn(sc.Bytes())
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			tb.Fatalf("%s: %v", p, err)
		}
	}
	return n
}
