package analyze_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/skip"
)

// orderBundles are the bundles the order tests read: every fixture, and
// every corpus case unless -short.
func orderBundles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() {
			out["fixture "+d.Name()] = makeBundle(t, fixture(t, d.Name()), bundle.Gzip)
		}
	}
	if !testing.Short() {
		for _, c := range loadCorpus(t) {
			out["corpus "+filepath.Base(c.file)] = corpusBundle(t, c)
		}
	}
	return out
}

func reportJSON(t *testing.T, p string) []byte {
	t.Helper()
	rep, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{Facts: true})
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The rules are ordered by what they declare they read, nothing else:
// any order the graph allows gives a byte-identical report, on every
// fixture and every corpus case. A rule that reads another's findings or
// claimed lines without requiring it changes its report in some order.
func TestAnalyzersAnyOrder(t *testing.T) {
	bundles := orderBundles(t)
	names := make([]string, 0, len(bundles))
	for n := range bundles {
		names = append(names, n)
	}
	sort.Strings(names)
	rng := rand.New(rand.NewSource(39))
	runs := 3
	if testing.Short() {
		runs = 12
	}
	var orders sync.Map
	for _, n := range names {
		want := reportJSON(t, bundles[n])
		for i := 0; i < runs; i++ {
			var seen []string
			restore := analyze.ShuffleAnalyzers(rng)
			stopWatch := analyze.WatchSignatures(func(a, _ string) {
				if len(seen) == 0 || seen[len(seen)-1] != a {
					seen = append(seen, a)
				}
			})
			got := reportJSON(t, bundles[n])
			stopWatch()
			restore()
			orders.Store(strings.Join(seen, " "), true)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: the report differs in another order the graph allows (run %d):\n%s", n, i, partDiff(want, got))
				break
			}
		}
	}
	distinct := 0
	orders.Range(func(any, any) bool { distinct++; return true })
	if distinct < 2 {
		t.Errorf("the shuffled runs read the logs' signatures in %d order(s) only: the shuffle does not shuffle", distinct)
	}
}

// partDiff shows where two reports part.
func partDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-200)
	return fmt.Sprintf("stable order: …%s…\nthis order:   …%s…", a[from:min(len(a), i+200)], b[from:min(len(b), i+200)])
}

// Two rules that read the unclaimed lines of one signature (and claim
// some) are ordered by the graph: the later one requires the earlier,
// directly or not. Checked on every fixture and corpus case, for the
// signatures their logs hold.
func TestAnalyzersClaimOrder(t *testing.T) {
	skip.Short(t, "reads every corpus case")
	bundles := orderBundles(t)
	bad := map[string]bool{}
	touched := 0
	for n, p := range bundles {
		bySig := map[string][]string{}
		stop := analyze.WatchSignatures(func(a, sig string) {
			touched++
			l := bySig[sig]
			if len(l) == 0 || l[len(l)-1] != a {
				bySig[sig] = append(l, a)
			}
		})
		reportJSON(t, p)
		stop()
		for sig, as := range bySig {
			for i, a := range as {
				for _, b := range as[i+1:] {
					if a != b && !analyze.AnalyzerRequires(b, a) {
						bad[fmt.Sprintf("%s reads %s's lines after %s without requiring it (%s)", b, sig, a, n)] = true
					}
				}
			}
		}
	}
	if touched == 0 {
		t.Fatal("no analyzer read a signature's lines: the watch sees nothing")
	}
	var msgs []string
	for m := range bad {
		msgs = append(msgs, m)
	}
	sort.Strings(msgs)
	for _, m := range msgs {
		t.Error(m)
	}
}
