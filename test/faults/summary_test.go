package faults

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// printSummary prints, after every test has run, the table
// docs/reliability.md records, and writes it to $NODESNAP_RELIABILITY_OUT.
// It reports; the assertions are in the tests that recorded each outcome.
func printSummary(int) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	type row struct {
		runs, valid, none, leaked, failed int
		overrun                           time.Duration
	}
	rows := map[string]*row{}
	var names []string
	for _, o := range results {
		r := rows[o.fault]
		if r == nil {
			r = &row{}
			rows[o.fault] = r
			names = append(names, o.fault)
		}
		r.runs++
		if o.valid {
			r.valid++
		}
		if o.noBundle {
			r.none++
		}
		r.leaked += o.leaked
		if o.failed {
			r.failed++
		}
		r.overrun = max(r.overrun, o.overrun)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "| fault | runs | bundles valid | no bundle (allowed) | secrets leaked | failed | max wall over deadline |\n|---|---|---|---|---|---|---|\n")
	var tot row
	for _, n := range names {
		r := rows[n]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s |\n", n, r.runs, r.valid, r.none, r.leaked, r.failed, r.overrun.Round(10*time.Millisecond))
		tot.runs += r.runs
		tot.valid += r.valid
		tot.none += r.none
		tot.leaked += r.leaked
		tot.failed += r.failed
		tot.overrun = max(tot.overrun, r.overrun)
	}
	fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | %d | %s |\n", tot.runs, tot.valid, tot.none, tot.leaked, tot.failed, tot.overrun.Round(10*time.Millisecond))
	if len(results) == 0 {
		return
	}
	fmt.Printf("reliability summary:\n%s", b.String())
	if p := os.Getenv("NODESNAP_RELIABILITY_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "writing the reliability summary: %v\n", err)
		}
	}
}
