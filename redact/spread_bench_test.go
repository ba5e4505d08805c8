package redact

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// processCPU is this process's CPU time so far: on a shared machine the
// last pass's benchmarks report it beside the wall time (cpu-MB/s).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, c0 time.Duration, size int64) {
	if d := processCPU() - c0; d > 0 {
		b.ReportMetric(float64(size)*float64(b.N)/d.Seconds()/1e6, "cpu-MB/s")
	}
}

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
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := sp.MaskFile(p); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, c0, int64(len(in)))
	b.ReportMetric(float64(len(sp.Values)), "hashes")
}

// BenchmarkSpreadScanMillionLines: the last pass over the staged
// kubelet.log of the million-line journal benchmark (test/bench/journal.sh's
// lines: one in a thousand with a bearer token, one with an rbd error),
// written through a recording redactor as the journal collector writes
// it, with the hashes that redaction recorded.
func BenchmarkSpreadScanMillionLines(b *testing.B) {
	r := Default()
	key, err := NewSpreadKey()
	if err != nil {
		b.Fatal(err)
	}
	r.RecordMasked(key)
	p := filepath.Join(b.TempDir(), "kubelet.log")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w := r.NewWriter(f)
	bw := bufio.NewWriterSize(w, 64<<10)
	for i := 0; i < 1000000; i++ {
		ts := fmt.Sprintf("2026-12-07T09:%02d:%02d.%06d+0000 node-7 kubelet[2211]: ", (i/60)%60, i%60, i)
		switch i % 1000 {
		case 7:
			fmt.Fprintf(bw, "%sE1121 09:%02d:%02d.%06d    2211 nestedpendingoperations.go:348] Operation for \"{volumeName:kubernetes.io/csi/rbd.csi.ceph.com^0001-0024-%08d podName: nodeName:}\" failed. No retries permitted until (durationBeforeRetry 2m2s). Error: UnmountVolume.TearDown failed: rbd output: [114 98 100 58 32 115 121 115]\n", ts, (i/60)%60, i%60, i, i)
		case 500:
			fmt.Fprintf(bw, "%sI1121 09:%02d:%02d.%06d    2211 round_trippers.go:466] curl -v -XGET -H \"Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlIn0.sig%d\" https://10.0.0.1:6443/api/v1/nodes/node-7\n", ts, (i/60)%60, i%60, i, i)
		default:
			fmt.Fprintf(bw, "%sI1121 09:%02d:%02d.%06d    2211 reconciler_common.go:%d] \"operationExecutor.UnmountVolume started for volume \\\"pvc-%08d\\\"\" pod=\"default/web-%d\"\n", ts, (i/60)%60, i%60, i, 100+i%200, i, i%97)
		}
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	sp := Spread{Key: key, Values: r.Masked()}
	b.SetBytes(st.Size())
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := sp.MaskFile(p); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, c0, st.Size())
	b.ReportMetric(float64(len(sp.Values)), "hashes")
}
