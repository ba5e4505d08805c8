package redact

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkWriterRecording: BenchmarkWriter as a collection runs it, with
// every masked value recorded as hashes for the bundle-wide pass.
func BenchmarkWriterRecording(b *testing.B) {
	r := Default()
	key, err := NewSpreadKey()
	if err != nil {
		b.Fatal(err)
	}
	r.RecordMasked(key)
	benchWriter(b, r)
}

// BenchmarkWriterDenseRecording: the same on secret-dense text.
func BenchmarkWriterDenseRecording(b *testing.B) {
	r := Default()
	key, err := NewSpreadKey()
	if err != nil {
		b.Fatal(err)
	}
	r.RecordMasked(key)
	benchWriterOn(b, r, denseText())
}

// BenchmarkSpreadScan: the last pass over a staged file of mixed log
// text, looking for the values the dense text's redaction recorded
// (thousands of hashes), none of which is in the file.
func BenchmarkSpreadScan(b *testing.B) {
	r := Default()
	key, err := NewSpreadKey()
	if err != nil {
		b.Fatal(err)
	}
	r.RecordMasked(key)
	_, _ = r.String(string(denseText()[:4<<20]))
	sp := Spread{Key: key, Values: r.Masked()}
	in := benchText()
	p := filepath.Join(b.TempDir(), "staged.log")
	if err := os.WriteFile(p, in, 0o600); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(sp.Values)), "hashes")
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := sp.MaskFile(p); err != nil {
			b.Fatal(err)
		}
	}
}
