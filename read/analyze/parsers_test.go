package analyze

import (
	"bytes"
	"errors"
	"io"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
)

// cleanupOrphanedPodDirs parks a goroutine under a frame with the kubelet's
// function name, so that the Go runtime's own dump formats can be parsed.
//
//go:noinline
func cleanupOrphanedPodDirs(ready *sync.WaitGroup, stop chan struct{}) {
	ready.Done()
	<-stop
}

// Both goroutine dump formats, as the Go runtime writes them today.
func TestParseGoroutinesRealDumps(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	var ready sync.WaitGroup
	ready.Add(3)
	for i := 0; i < 3; i++ {
		go cleanupOrphanedPodDirs(&ready, stop)
	}
	ready.Wait()
	for _, debug := range []int{1, 2} {
		var buf bytes.Buffer
		if err := pprof.Lookup("goroutine").WriteTo(&buf, debug); err != nil {
			t.Fatal(err)
		}
		d, err := parseGoroutines("kubelet/goroutine.txt", &buf)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range d.Kept {
			if !g.has("cleanupOrphanedPodDirs") {
				continue
			}
			n += g.Count
			if debug == 2 && (g.State != "chan receive" || g.ID == 0 || !strings.HasPrefix(g.Header.Text, "goroutine ")) {
				t.Errorf("debug=2 goroutine %+v", g)
			}
			if debug == 1 && g.State != "" {
				t.Errorf("debug=1 has no state, got %q", g.State)
			}
			if innermostCall(g.Frames) == "unknown" || len(g.Lines) < 2 || g.Lines[0].N < 1 {
				t.Errorf("frames %v lines %v", g.Frames, g.Lines)
			}
		}
		if n != 3 {
			t.Errorf("debug=%d: found %d goroutines in cleanupOrphanedPodDirs, want 3", debug, n)
		}
		if d.Total < 4 {
			t.Errorf("debug=%d: total %d", debug, d.Total)
		}
	}
}

func TestParseGoroutineHeader(t *testing.T) {
	for _, c := range []struct {
		in      string
		id      int
		state   string
		minutes int
	}{
		{"goroutine 412 [syscall, 12 minutes]:", 412, "syscall", 12},
		{"goroutine 7 [semacquire, 1 minute, locked to thread]:", 7, "semacquire", 1},
		{"goroutine 1 [running]:", 1, "running", 0},
		{"goroutine 18 gp=0xc000102a80 m=nil [chan receive, 3 minutes]:", 18, "chan receive", 3},
	} {
		g, ok := parseGoroutineHeader(strings.TrimSuffix(c.in, ":"))
		if !ok || g.ID != c.id || g.State != c.state || g.Minutes != c.minutes {
			t.Errorf("%q: %+v %v", c.in, g, ok)
		}
	}
	if _, ok := parseGoroutineHeader("goroutine x"); ok {
		t.Error("goroutine x parsed")
	}
}

func TestDecodeByteArrays(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"rbd output: [114 98 100 58 32 117 110 109 97 112 32 102 97 105 108 101 100 10]", []string{"rbd: unmap failed"}},
		{"output: [104 105] and Output: [111 107 10]", []string{"hi", "ok"}},
		{"output:[104,105]", []string{"hi"}},
		{"output: [1 2 3 4]", nil},                            // control bytes are not text
		{"output: [104 105 999]", nil},                        // not bytes
		{"output: [104 105", nil},                             // unterminated
		{"output: []", nil},                                   // empty
		{"no array here: [104 105]", nil},                     // not after "output:"
		{"output: [228 184 173 230 150 135]", []string{"中文"}}, // UTF-8 text
	} {
		got := decodeByteArrays([]byte(c.in))
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTokenIn(t *testing.T) {
	for _, c := range []struct {
		s, tok string
		want   bool
	}{
		{"failed to unmap device /dev/rbd3, error", "/dev/rbd3", true},
		{"failed to unmap device /dev/rbd30, error", "/dev/rbd3", false},
		{"pvc-abc-12 mounted", "pvc-abc-1", false},
		{"remove /a/b/mount: device", "/a/b/mount", true},
		{"", "x", false},
		{"x", "", false},
	} {
		if got := tokenIn(c.s, c.tok); got != c.want {
			t.Errorf("tokenIn(%q, %q) = %v", c.s, c.tok, got)
		}
	}
}

func TestLineReaderKeepsNumbersPastLongLines(t *testing.T) {
	in := "a\r\n" + strings.Repeat("x", 1<<20) + "\nb\n\nc"
	lr := newLineReader(strings.NewReader(in))
	var got []string
	for {
		b, n, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		l := keepLine(n, b, cut)
		got = append(got, l.Text[:min(len(l.Text), 3)]+"@"+string(rune('0'+n)))
		if n == 2 && (!l.Truncated || len(l.Text) != maxLineKept) {
			t.Errorf("long line kept as %d bytes, truncated %v", len(l.Text), l.Truncated)
		}
	}
	if strings.Join(got, ",") != "a@1,xxx@2,b@3,@4,c@5" {
		t.Errorf("lines %v", got)
	}
}

func TestPathWithin(t *testing.T) {
	for _, c := range []struct {
		mp, p    string
		prefixed bool
		rest     string
		ok       bool
	}{
		{"/var/lib/kubelet/pods/x", "/var/lib/kubelet/pods/x", false, "", true},
		{"/var/lib/kubelet/pods/x/volumes/a", "/var/lib/kubelet/pods/x", false, "/volumes/a", true},
		{"/var/lib/kubelet/pods/xy", "/var/lib/kubelet/pods/x", false, "", false},
		{"/host/var/lib/kubelet/pods/x", "/var/lib/kubelet/pods/x", false, "", false},
		{"/host/var/lib/kubelet/pods/x", "/var/lib/kubelet/pods/x", true, "", true},
		{"/x", "x", true, "", false},
	} {
		rest, ok := pathWithin(c.mp, c.p, c.prefixed)
		if ok != c.ok || ok && rest != c.rest {
			t.Errorf("pathWithin(%q, %q, %v) = %q %v", c.mp, c.p, c.prefixed, rest, ok)
		}
	}
}
