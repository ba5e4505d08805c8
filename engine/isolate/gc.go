package isolate

import (
	"os"
	"runtime/debug"
)

// GC settings of a collection's processes. A collection run and its children
// live for milliseconds to minutes and keep little live data (files are
// streamed to staging), yet with Go's default (GOGC=100, first cycle at a 4
// MiB heap) a collector reading a few thousand /proc files spends a fifth of
// its CPU in the collector of garbage. Letting the heap grow to five times
// the live data before a cycle cuts that, and a soft memory limit bounds
// what the larger target can cost on a node short of memory.
const (
	gcPercent     = 400
	gcMemoryLimit = 256 << 20
)

// TuneGC applies the collection's GC settings to this process, leaving
// alone whatever the user set with GOGC or GOMEMLIMIT.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(gcMemoryLimit)
	}
}

// LimitMemory lowers this process's soft memory limit to limit bytes for
// a collector whose live data is known to be small beside what the GC
// setting above lets its heap reach (the limit, not the live heap, makes
// its peak), unless the user set GOMEMLIMIT. The limit is soft: a larger
// live heap costs GC time, never a failure.
func LimitMemory(limit int64) {
	if os.Getenv("GOMEMLIMIT") == "" && limit > 0 {
		debug.SetMemoryLimit(limit)
	}
}
