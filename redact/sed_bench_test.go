package redact

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/skip"
)

// sedPatterns are the main built-in rules written as sed substitutions: what
// an operator would run on a log by hand.
var sedPatterns = []string{
	`s/([Aa]uthorization:[[:space:]]*(Bearer|Basic)[[:space:]]+)[^[:space:]"]+/\1[REDACTED]/g`,
	`s/([Bb]earer[[:space:]]+)[A-Za-z0-9._~+\/-]{8,}=*/\1[REDACTED]/g`,
	`s/((password|passwd|secret|token)[[:space:]]*[=:][[:space:]]*"?)[^[:space:]",;]+/\1[REDACTED]/Ig`,
	`s/("(password|secret|token|value)"[[:space:]]*:[[:space:]]*")[^"]*/\1[REDACTED]/Ig`,
	`s/eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+/[REDACTED]/g`,
	`s/(AKIA|ASIA)[A-Z0-9]{16}/[REDACTED]/g`,
	`s/(:\/\/[^:\/@[:space:]]+:)[^@\/[:space:]]+@/\1[REDACTED]@/g`,
	`s/(key[[:space:]]*=[[:space:]]*)AQ[A-Za-z0-9+\/]{20,}={0,2}/\1[REDACTED]/g`,
}

// BenchmarkRedactVsSed (issue 7): the Writer, on one core, against GNU sed
// running the main patterns over the same NODESNAP_SED_MIB MiB (default
// 500) of mixed log text from a file in the page cache. It reports both
// throughputs and their ratio; `-benchtime 1x` is enough.
func BenchmarkRedactVsSed(b *testing.B) { benchVsSed(b, mixedLog(32<<20)) }

// BenchmarkRedactVsSedDense: the same on secret-dense text, a secret on
// about one line in four (issue 18: still at least 3× sed).
func BenchmarkRedactVsSedDense(b *testing.B) { benchVsSed(b, mixedLogEvery(32<<20, 4)) }

func benchVsSed(b *testing.B, chunk []byte) {
	sed, err := exec.LookPath("sed")
	if err != nil {
		skip.Missing(b, "sed is not installed")
	}
	mib := 500
	if v, err := strconv.Atoi(os.Getenv("NODESNAP_SED_MIB")); err == nil && v > 0 {
		mib = v
	}
	path := filepath.Join(b.TempDir(), "mixed.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	for written := 0; written < mib<<20; written += len(chunk) {
		f.Write(chunk)
	}
	f.Close()
	st, _ := os.Stat(path)
	size := st.Size()
	args := []string{"-E"}
	for _, p := range sedPatterns {
		args = append(args, "-e", p)
	}
	args = append(args, path)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	r := Default()
	b.SetBytes(size)
	b.ResetTimer()
	var ours, theirs time.Duration
	for i := 0; i < b.N; i++ {
		// Warm the cache for both.
		in, _ := os.ReadFile(path)
		start := time.Now()
		w := r.NewWriter(io.Discard)
		for p := in; len(p) > 0; {
			n := min(32<<10, len(p))
			w.Write(p[:n])
			p = p[n:]
		}
		w.Close()
		ours += time.Since(start)
		in = nil
		start = time.Now()
		cmd := exec.Command(sed, args...)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &errb
		if err := cmd.Run(); err != nil {
			b.Fatalf("sed: %v %s", err, errb.String())
		}
		theirs += time.Since(start)
	}
	mbs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbs(ours), "nodesnap-MiB/s")
	b.ReportMetric(mbs(theirs), "sed-MiB/s")
	b.ReportMetric(ours.Seconds()/theirs.Seconds(), "time-ratio")
}
