package hostfs_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// BenchmarkReadSmallStat is the processes collector's hottest read: one
// task's stat, thousands of times per run. On the kernel's procfs it is a
// plain open (the tree's kind is asked once per process).
func BenchmarkReadSmallStat(b *testing.B) {
	p := "/proc/" + strconv.Itoa(os.Getpid()) + "/stat"
	var buf [4096]byte
	for i := 0; i < b.N; i++ {
		if _, err := hostfs.ReadSmall(p, buf[:]); err != nil {
			b.Fatal(err)
		}
	}
}
