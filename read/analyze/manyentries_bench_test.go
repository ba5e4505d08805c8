package analyze_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/skip"
)

// withEmptyEntries copies the .tar.gz bundle at p with n empty entries
// (<bundle>/junk/NNNNNNN, listed nowhere) added after its first entry: the shape of
// a hostile or broken bundle at the reader's entry limit's half.
func withEmptyEntries(tb testing.TB, p string, n int) string {
	tb.Helper()
	in, err := os.Open(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		tb.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := filepath.Join(tb.TempDir(), "many.tar.gz")
	f, err := os.Create(out)
	if err != nil {
		tb.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	first := true
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			tb.Fatal(err)
		}
		if first {
			first = false
			mt, top, _ := h.ModTime, strings.TrimSuffix(h.Name, "/"), 0
			if i := strings.IndexByte(top, '/'); i >= 0 {
				top = top[:i]
			}
			for i := 0; i < n; i++ {
				if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s/junk/%07d", top, i), Mode: 0o644, Typeflag: tar.TypeReg, ModTime: mt}); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkAnalyzeEmptyEntries analyses the healthy fixture with 1,000,000
// empty entries added (issue 43: 20 s and 239 MB before), beside the
// fixture alone in the same run: compare the two lines' ns/op.
//
//	go test -run '^$' -bench AnalyzeEmptyEntries -benchtime 1x ./read/analyze/
//
// With NODESNAP_BENCH_EMPTY_BUNDLE=FILE the bundle of 1,000,000 entries is
// copied there.
func BenchmarkAnalyzeEmptyEntries(b *testing.B) {
	base := makeBundle(b, fixture(b, "healthy"), bundle.Gzip)
	for _, n := range []int{0, 100_000, 1_000_000} {
		p := withEmptyEntries(b, base, n)
		// NODESNAP_BENCH_EMPTY_BUNDLE keeps the largest, to time
		// nodesnap analyze and report on it by hand.
		if keep := os.Getenv("NODESNAP_BENCH_EMPTY_BUNDLE"); keep != "" && n == 1_000_000 {
			data, err := os.ReadFile(p)
			if err == nil {
				err = os.WriteFile(keep, data, 0o600)
			}
			if err != nil {
				b.Fatalf("keeping the bundle: %v", err)
			}
		}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("%d entries added: %d files read, %v", n, r.FilesRead, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// TestWriteEmptyEntriesBundle writes, for test/bench/many_entries.sh, the
// healthy fixture's bundle with NODESNAP_BENCH_EMPTY_ENTRIES (default
// 1,000,000) empty entries added to the file NODESNAP_BENCH_EMPTY_BUNDLE,
// and checks that the walk finds every one of them.
func TestWriteEmptyEntriesBundle(t *testing.T) {
	keep := skip.OptIn(t, "NODESNAP_BENCH_EMPTY_BUNDLE", "writing a bundle of many empty entries for the readers' benchmark")
	n := 1_000_000
	if v := os.Getenv("NODESNAP_BENCH_EMPTY_ENTRIES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			t.Fatalf("NODESNAP_BENCH_EMPTY_ENTRIES=%q is not a count", v)
		}
	}
	base := makeBundle(t, fixture(t, "healthy"), bundle.Gzip)
	want := 0
	if err := bundle.Walk(context.Background(), base, bundle.DefaultLimits, func(bundle.Entry) error { want++; return nil }); err != nil {
		t.Fatal(err)
	}
	want += n
	p := withEmptyEntries(t, base, n)
	got := 0
	if err := bundle.Walk(context.Background(), p, bundle.DefaultLimits, func(bundle.Entry) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("the bundle holds %d entries, want %d", got, want)
	}
	data, err := os.ReadFile(p)
	if err == nil {
		err = os.WriteFile(keep, data, 0o644)
	}
	if err != nil {
		t.Fatalf("keeping the bundle: %v", err)
	}
}
