package analyze_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// FuzzAnalyze feeds arbitrary bytes to the whole analysis, archive reading
// included: it must return a report or an error, never panic, and never
// report an internal error.
func FuzzAnalyze(f *testing.F) {
	for _, name := range []string{"healthy", "incident002-rbd-held-in-namespace", "incident003-cephfs-hung", "signatures"} {
		b, err := os.ReadFile(makeBundle(f, fixture(f, name), bundle.Gzip))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0})
	lim := bundle.Limits{MaxEntryBytes: 1 << 20, MaxTotalBytes: 8 << 20, MaxEntries: 1000}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := analyze.Analyze(context.Background(), bytes.NewReader(data), analyze.Options{Limits: lim, Facts: true})
		if err != nil {
			if r != nil {
				t.Fatal("report and error")
			}
			return
		}
		// The facts nodesnap report draws stay within their bounds.
		if r.Facts == nil || len(r.Facts.HeldDevices) > analyze.MaxFactDevices {
			t.Fatalf("facts: %+v", r.Facts)
		}
		for _, d := range r.Facts.HeldDevices {
			if len(d.Namespaces) > analyze.MaxFactNamespaces {
				t.Fatalf("%d namespaces", len(d.Namespaces))
			}
			for _, n := range d.Namespaces {
				if len(n.Holders) > analyze.MaxFactHolders {
					t.Fatalf("%d holders", len(n.Holders))
				}
			}
		}
		for _, fd := range r.Findings {
			if fd.ID == "analyze-internal-error" || strings.Contains(fd.Explanation+fd.Summary, "internal error") {
				t.Fatalf("internal error: %+v", fd)
			}
			for _, e := range fd.Evidence {
				if strings.Contains(e.What, "internal error") {
					t.Fatalf("reader panicked: %s", e.What)
				}
			}
		}
		// Whatever the bundle holds, no line of the text report is
		// wider than asked, elided or wrapped.
		for _, o := range []analyze.TextOptions{{}, {Width: 40, Full: true}} {
			var buf bytes.Buffer
			if err := analyze.WriteTextOptions(&buf, r, o); err != nil {
				t.Fatal(err)
			}
			width := max(o.Width, 80)
			if o.Width > 0 {
				width = o.Width
			}
			for _, l := range strings.Split(buf.String(), "\n") {
				if utf8.RuneCountInString(l) > width {
					t.Fatalf("a line of %d runes at width %d: %q", utf8.RuneCountInString(l), width, l)
				}
			}
		}
		var buf bytes.Buffer
		if err := analyze.WriteJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
	})
}
