package procfs

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/nodesnap/nodesnap/test/skip"
)

// Memory must stay proportional to the input, whatever the input: nodesnap
// parses files from a sick node, read under a byte cap, and a shape such
// as a megabyte of newlines must not turn into gigabytes of preallocated
// records.
func TestMemoryIsBoundedByInput(t *testing.T) {
	skip.Short(t, "allocates a few hundred MiB in total")
	const size = 1 << 20
	patterns := []string{
		" ", "\\", "-", "\n", " - ", "1 2 3:4 / / rw ", ",", `\040`, "(", ")", "\x00", ":",
		"a:[", "x\n", "1 2 3:4 / / rw - t s o\n", "0-1 rwxp 0 0:0 0 \\012\n", "NSpid:\t1", "\t1",
	}
	parsers := map[string]func(b []byte){
		"mountinfo": func(b []byte) { ParseMountInfo(b) },
		"maps":      func(b []byte) { ParseMaps(b) },
		"stat":      func(b []byte) { ParseStat(b) },
		"status":    func(b []byte) { ParseStatus(b) },
		"fdinfo":    func(b []byte) { ParseFDInfo(b) },
		"cmdline":   func(b []byte) { ParseCmdline(b) },
		"link":      func(b []byte) { ParseLink(string(b)) },
	}
	for _, p := range patterns {
		data := bytes.Repeat([]byte(p), size/len(p))
		if p == "\t1" {
			data = append([]byte("NSpid:"), data...)
		}
		for name, parse := range parsers {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			parse(data)
			runtime.ReadMemStats(&after)
			if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(16*len(data)+1<<16); got > limit {
				t.Errorf("%s on %d bytes of %q allocated %d bytes (%.1fx)", name, len(data), p, got, float64(got)/float64(len(data)))
			}
		}
	}
}
