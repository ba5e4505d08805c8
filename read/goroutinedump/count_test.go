package goroutinedump

import (
	"maps"
	"strconv"
	"strings"
	"testing"
)

func TestCount(t *testing.T) {
	cases := []struct {
		name  string
		dump  string
		total int
		want  map[string]int
	}{
		{"empty", "", 0, map[string]int{}},
		{"first frame outside the standard library", "goroutine 412 [syscall, 12 minutes]:\n" +
			"syscall.Syscall6(0x106, 0xffffffffffffff9c)\n\t/usr/local/go/src/syscall/asm_linux_amd64.s:43 +0x5\n" +
			"os.Stat({0xc000f3c0f0, 0x7c})\n\t/usr/local/go/src/os/stat.go:13 +0x34\n" +
			"k8s.io/kubernetes/pkg/kubelet.(*Kubelet).getPodVolumePathListFromDisk(0xc000a2c000, {0xc000c4e3f0, 0x24})\n\t/x/kubelet_getters.go:393 +0x2a5\n" +
			"created by k8s.io/kubernetes/pkg/kubelet.(*Kubelet).Run in goroutine 1\n\t/x/kubelet.go:1\n\n" +
			"goroutine 1 [chan receive]:\nmain.main()\n\t/x/kubelet.go:41 +0x8c\n",
			2, map[string]int{"k8s.io/kubernetes/pkg/kubelet.(*Kubelet).getPodVolumePathListFromDisk": 1, "main.main": 1}},
		{"standard library only: the top frame", "goroutine 7 [IO wait]:\ninternal/poll.runtime_pollWait(0x7f, 0x72)\n\t/x:1\nnet/http.(*conn).serve(0xc0)\n\t/x:2\n",
			1, map[string]int{"internal/poll.runtime_pollWait": 1}},
		{"no frames, no blank line between", "goroutine 1 [running]:\ngoroutine 2 [running]:\nfoo.io/x.F(...)\n\t/x:1\n",
			2, map[string]int{"(no frames)": 1, "foo.io/x.F": 1}},
		{"not a dump", "hello\n\tworld\n", 0, map[string]int{}},
		{"a line too long is skipped", "goroutine 1 [running]:\n" + strings.Repeat("a", MaxLine+10) + "\nfoo.io/x.F()\n\t/x:1\n",
			1, map[string]int{"foo.io/x.F": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]int{}
			n, err := Count(strings.NewReader(c.dump), got)
			if err != nil || n != c.total || !maps.Equal(got, c.want) {
				t.Errorf("got %d %v, %v; want %d %v", n, got, err, c.total, c.want)
			}
		})
	}
}

func TestCountBounded(t *testing.T) {
	var b strings.Builder
	for i := range MaxFrames + 10 {
		b.WriteString("goroutine 1 [running]:\nfoo.io/x.F" + strconv.Itoa(i) + "()\n\t/x:1\n\n")
	}
	got := map[string]int{}
	if _, err := Count(strings.NewReader(b.String()), got); err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxFrames+1 || got[OtherFrames] != 10 {
		t.Errorf("kept %d frames, over %d (+ %q)", len(got), MaxFrames, OtherFrames)
	}
}

// Counter fed line by line (as analyze feeds it) counts what Count
// counts.
func TestCounterAgreesWithCount(t *testing.T) {
	dump := "goroutine 1 [running]:\nfoo.io/x.F()\n\t/x:1\n\ngoroutine 2 [IO wait]:\nos.Stat(0x1)\n\t/x:2\nk8s.io/k.G(0x2)\n\t/x:3\n"
	want := map[string]int{}
	n, err := Count(strings.NewReader(dump), want)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter(nil)
	for _, l := range strings.Split(strings.TrimSuffix(dump, "\n"), "\n") {
		c.Line(l)
	}
	c.End()
	if c.Total != n || n != 2 || !maps.Equal(c.ByFrame, want) {
		t.Errorf("Counter: %d %v; Count: %d %v", c.Total, c.ByFrame, n, want)
	}
}
