package isolate

import (
	"os"
	"runtime/debug"
	"testing"
)

// TuneGC sets the collection's GC policy, unless the user chose their own
// with GOGC or GOMEMLIMIT.
func TestTuneGC(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})

	t.Setenv("GOGC", "123")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetGCPercent(123)
	debug.SetMemoryLimit(1 << 30)
	TuneGC()
	if p := debug.SetGCPercent(123); p != 123 {
		t.Errorf("with GOGC set, TuneGC changed the GC percent to %d", p)
	}
	if l := debug.SetMemoryLimit(-1); l != 1<<30 {
		t.Errorf("with GOMEMLIMIT set, TuneGC changed the memory limit to %d", l)
	}

	os.Unsetenv("GOGC")
	os.Unsetenv("GOMEMLIMIT")
	TuneGC()
	if p := debug.SetGCPercent(-1); p != gcPercent {
		t.Errorf("GC percent %d, want %d", p, gcPercent)
	}
	if l := debug.SetMemoryLimit(-1); l != gcMemoryLimit {
		t.Errorf("memory limit %d, want %d", l, gcMemoryLimit)
	}
}
