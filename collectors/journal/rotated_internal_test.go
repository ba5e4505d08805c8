package journal

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/test/skip"
)

func TestParseRotatedName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		seq  int
		date string
		xtra uint64
		gz   bool
	}{
		{"kubelet.log.1", true, 1, "", 0, false},
		{"kubelet.log.2.gz", true, 2, "", 0, true},
		{"kubelet.log.0", true, 0, "", 0, false},
		{"kubelet.log.1234.gz", true, 1234, "", 0, true},
		{"kubelet.log-20261120", true, -1, "20261120", 0, false},
		{"kubelet.log-20261119.gz", true, -1, "20261119", 0, true},
		{"kubelet.log-2026112013", true, -1, "20261120", 13, false},
		{"kubelet.log-20261120-1763600000.gz", true, -1, "20261120", 1763600000, true},
		{"kubelet.log", false, 0, "", 0, false},
		{"kubelet.log.gz", false, 0, "", 0, false},
		{"kubelet.log.", false, 0, "", 0, false},
		{"kubelet.log-", false, 0, "", 0, false},
		{"kubelet.log.12345", false, 0, "", 0, false},
		{"kubelet.log.1.xz", false, 0, "", 0, false},
		{"kubelet.log.1.gz.tmp", false, 0, "", 0, false},
		{"kubelet.log.old", false, 0, "", 0, false},
		{"kubelet.log.-1", false, 0, "", 0, false},
		{"kubelet.log-2026-11-20", false, 0, "", 0, false},
		{"kubelet.log-20261320", false, 0, "", 0, false},
		{"kubelet.log-20261100", false, 0, "", 0, false},
		{"kubelet.log-20261120-", false, 0, "", 0, false},
		{"kubelet.log-2026112013-5", false, 0, "", 0, false},
		{"kubelet.log-20261120-99999999999999999999", false, 0, "", 0, false},
		{"kubelet.logx.1", false, 0, "", 0, false},
		{"kubelet.log.1.gz.gz", false, 0, "", 0, false},
		{"other.log.1", false, 0, "", 0, false},
	} {
		r, ok := parseRotatedName("kubelet.log", c.name)
		if ok != c.ok {
			t.Errorf("%s: ok %v, want %v (%+v)", c.name, ok, c.ok, r)
			continue
		}
		if !ok {
			continue
		}
		if r.Name != c.name || r.Seq != c.seq || r.Date != c.date || r.Extra != c.xtra || r.Gzip != c.gz {
			t.Errorf("%s: %+v", c.name, r)
		}
		if want := strings.TrimSuffix(c.name, ".gz"); r.plain() != want {
			t.Errorf("%s: plain %q, want %q", c.name, r.plain(), want)
		}
	}
}

func TestRotatedOrder(t *testing.T) {
	names := []string{"kubelet.log-20261118.gz", "kubelet.log.10.gz", "kubelet.log.2.gz", "kubelet.log-20261120",
		"kubelet.log.1", "kubelet.log-2026112013.gz", "kubelet.log-20261119.gz", "kubelet.log.3", "kubelet.log.1.gz"}
	var parts []rotatedName
	for _, n := range names {
		r, ok := parseRotatedName("kubelet.log", n)
		if !ok {
			t.Fatalf("%s not parsed", n)
		}
		parts = append(parts, r)
	}
	sort.Slice(parts, func(a, b int) bool { return parts[a].newerThan(parts[b]) })
	var got []string
	for _, p := range parts {
		got = append(got, p.Name)
	}
	want := "kubelet.log.1 kubelet.log.1.gz kubelet.log.2.gz kubelet.log.3 kubelet.log.10.gz " +
		"kubelet.log-2026112013.gz kubelet.log-20261120 kubelet.log-20261119.gz kubelet.log-20261118.gz"
	if strings.Join(got, " ") != want {
		t.Errorf("order:\n%s\nwant:\n%s", strings.Join(got, " "), want)
	}
}

func FuzzParseRotatedName(f *testing.F) {
	for _, s := range []string{"kubelet.log.1", "kubelet.log.2.gz", "kubelet.log-20261120", "kubelet.log-20261120-1.gz",
		"kubelet.log-2026112013", "kubelet.log", "kubelet.log.gz", "x"} {
		f.Add("kubelet.log", s)
	}
	f.Fuzz(func(t *testing.T, base, name string) {
		r, ok := parseRotatedName(base, name)
		if !ok {
			return
		}
		if !strings.HasPrefix(name, base) || name == base || r.Name != name {
			t.Fatalf("parse(%q, %q) = %+v", base, name, r)
		}
		if r.Gzip != strings.HasSuffix(name, ".gz") {
			t.Fatalf("parse(%q, %q): gzip %v", base, name, r.Gzip)
		}
		if (r.Seq >= 0) == (r.Date != "") {
			t.Fatalf("parse(%q, %q): both or neither of seq and date: %+v", base, name, r)
		}
		if r.Date != "" && (len(r.Date) != 8 || !allDigits(r.Date)) {
			t.Fatalf("parse(%q, %q): date %q", base, name, r.Date)
		}
		// The order is a strict one.
		if r.newerThan(r) {
			t.Fatalf("%+v is newer than itself", r)
		}
	})
}

func TestTailRing(t *testing.T) {
	src := []byte(strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 50))
	for _, limit := range []int{1, 7, 36, 100, 1799, 1800, 5000} {
		for _, piece := range []int{1, 3, 36, 99, 2000} {
			r := tailRing{max: limit}
			for p := src; len(p) > 0; {
				n := min(piece, len(p))
				r.write(p[:n])
				p = p[n:]
			}
			want := src[max(0, len(src)-limit):]
			if got := r.bytes(); !bytes.Equal(got, want) {
				t.Fatalf("max %d piece %d: got %q, want %q", limit, piece, got, want)
			}
		}
	}
}

func writeGzip(t testing.TB, path string, members ...[]byte) {
	t.Helper()
	var b bytes.Buffer
	for _, m := range members {
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(m); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGzipTailOp(t *testing.T) {
	dir := t.TempDir()
	var log bytes.Buffer
	for i := 0; i < 1000; i++ {
		log.WriteString("I1120 10:00:00.000000 line " + strings.Repeat("x", i%17) + "\n")
	}
	p := filepath.Join(dir, "kubelet.log.2.gz")
	writeGzip(t, p, log.Bytes())

	res, err := journalGzipTailOp(journalGzipTailRequest{Path: p, Max: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	r := res.(journalGzipTailResult)
	if !r.Complete || r.Capped || r.Error != "" || r.Inflated != int64(log.Len()) || !bytes.Equal(r.Data, log.Bytes()) {
		t.Fatalf("whole part: complete %v capped %v error %q inflated %d, %d bytes", r.Complete, r.Capped, r.Error, r.Inflated, len(r.Data))
	}
	res, err = journalGzipTailOp(journalGzipTailRequest{Path: p, Max: 1000})
	if err != nil {
		t.Fatal(err)
	}
	r = res.(journalGzipTailResult)
	if !r.Complete || !bytes.Equal(r.Data, log.Bytes()[log.Len()-1000:]) {
		t.Fatalf("tail: complete %v, data %q", r.Complete, r.Data)
	}

	// A damaged file: not gzip at all, or cut short after some data.
	bad := filepath.Join(dir, "bad.gz")
	if err := os.WriteFile(bad, []byte("this is not gzip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := journalGzipTailOp(journalGzipTailRequest{Path: bad, Max: 100}); err == nil || !strings.Contains(err.Error(), "not a readable gzip file") {
		t.Errorf("not gzip: %v", err)
	}
	whole, _ := os.ReadFile(p)
	if err := os.WriteFile(bad, whole[:len(whole)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = journalGzipTailOp(journalGzipTailRequest{Path: bad, Max: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r = res.(journalGzipTailResult); r.Complete || r.Error == "" || r.Inflated == 0 || len(r.Data) != 0 {
		t.Errorf("cut short: %+v", r)
	}
	// Not a regular file.
	if _, err := journalGzipTailOp(journalGzipTailRequest{Path: dir, Max: 100}); err == nil {
		t.Error("a directory was read as gzip")
	}
	if _, err := journalGzipTailOp(journalGzipTailRequest{Path: filepath.Join(dir, "none.gz"), Max: 100}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// A gzip bomb (300 MiB of zeros, as concatenated members) is stopped at the
// decompression cap, with memory bounded by the window, not the input.
func TestGzipTailOpBomb(t *testing.T) {
	skip.Short(t, "decompresses 256 MiB")
	p := filepath.Join(t.TempDir(), "bomb.gz")
	zeros := make([]byte, 10<<20)
	members := make([][]byte, 30)
	for i := range members {
		members[i] = zeros
	}
	writeGzip(t, p, members...)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := journalGzipTailOp(journalGzipTailRequest{Path: p, Max: 1 << 20})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	r := res.(journalGzipTailResult)
	if !r.Capped || r.Complete || r.Inflated != gzipInflateCap || len(r.Data) != 1<<20 {
		t.Fatalf("bomb: capped %v complete %v inflated %d data %d", r.Capped, r.Complete, r.Inflated, len(r.Data))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("decompressing the bomb allocated %d bytes; want it bounded by the window", alloc)
	}
	// Without the cap, the op's own deadline stops it, short of the end.
	res, err = journalGzipTailOp(journalGzipTailRequest{Path: p, Max: 100, MaxInflate: 1 << 40, TimeoutMS: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r = res.(journalGzipTailResult); !r.TimedOut || r.Complete || r.Capped || r.Inflated >= 300<<20 {
		t.Fatalf("deadline: timed out %v complete %v capped %v inflated %d", r.TimedOut, r.Complete, r.Capped, r.Inflated)
	}
	// Exactly at the cap is complete, not capped.
	res, err = journalGzipTailOp(journalGzipTailRequest{Path: p, Max: 100, MaxInflate: 300 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r = res.(journalGzipTailResult); !r.Complete || r.Capped || r.Inflated != 300<<20 {
		t.Fatalf("at the cap: %+v", r)
	}
}
