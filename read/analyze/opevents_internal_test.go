package analyze

import (
	"strings"
	"testing"
)

// A program's journal line claiming a kernel I/O error is that program's:
// it makes no I/O event (the kernel's signatures get the same rule in
// issue 38); the kernel's own line, and a storage daemon's, do.
func TestForgedKernelIOLineIsNoEvent(t *testing.T) {
	const line = `2026-11-21T09:10:01.000000+0000 node1 %s: blk_update_request: I/O error, dev sdb, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0`
	for _, c := range []struct {
		prefix string
		want   int
	}{{"evil[31337]", 0}, {"kubelet[812]", 0}, {"kernel", 1}, {"multipathd[700]", 1}} {
		x := newLogIndex()
		if err := x.scanLog("journal/node.log", strings.NewReader(strings.Replace(line, "%s", c.prefix, 1)+"\n")); err != nil {
			t.Fatal(err)
		}
		if got := len(x.ops.groups); got != c.want {
			t.Errorf("%s: %d I/O groups, want %d", c.prefix, got, c.want)
		}
	}
}

// The event index is bounded: a log of failures on ever new objects keeps
// at most maxOpGroups groups and counts the rest.
func TestOpIndexBounded(t *testing.T) {
	var b strings.Builder
	for i := range maxOpGroups + 50 {
		b.WriteString(`2026-11-21T09:10:01Z stderr F {"level":"error","msg":"NodeStageVolume failed","volume_id":"vol-`)
		b.WriteString(strings.Repeat("0", 8) + itoa(i))
		b.WriteString(`","error":"boom"}` + "\n")
	}
	x := newLogIndex()
	if err := x.scanLog("csi/podlogs/ns_p/c/0.log", strings.NewReader(b.String())); err != nil {
		t.Fatal(err)
	}
	if len(x.ops.groups) != maxOpGroups || x.ops.overflow != 50 {
		t.Fatalf("%d groups, %d overflow", len(x.ops.groups), x.ops.overflow)
	}
}

func itoa(i int) string {
	s := ""
	for {
		s = string(rune('0'+i%10)) + s
		i /= 10
		if i == 0 {
			return s
		}
	}
}
