package analyze

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// logMetaLines are lines the log-meta shortcuts must read as the
// expressions do: edge cases, then every line of the corpus.
func logMetaLines(t testing.TB) [][]byte {
	lines := [][]byte{
		[]byte("I1121 09:10:01.123456 1234 kubelet.go:1] x"),
		[]byte("Nov 21 09:10:01 host kubelet[1]: E1121 09:10:01.1 77 reconciler.go:9] x on node n1"),
		[]byte("2024-01-02T03:04:05.6Z stderr F W0102 03:04:05.600000       1 a.go:12] nodeName:\"n-2\""),
		[]byte("xI1121 09:10:01.1 1 a.go:1] not after a blank"),
		[]byte("\tE0101 00:00:00.0\t\t9 f:1] tab"), []byte("E0101 00:00:00.0 9 :1]"), []byte("E0101 00:00:00.0 9 a:1"),
		[]byte("I1 E0101 00:00:00.0 9 a:1] second"), []byte("E0101 E0101 00:00:00.0 9 a:1]"), []byte("F9999 "),
		[]byte("node= x"), []byte("NodeId: \\\"abc\""), []byte("on node"), []byte(`"nodeName":"x"`), []byte("xnode=1 anode=2 node=3"),
		[]byte(`{volumeName:x podName: nodeName:} on node "n1"`), []byte(`"nodeName":"a" node=b`), []byte(`x"nodeName":"a"`), []byte(`nodeName:`),
		[]byte(`anodeName: b on node c`), []byte(`NodeId:  NodeId: \\"d"`), []byte(`nodeNamed node=e`), []byte(`"nodeName"=f`), []byte(`xxon node g`),
		[]byte(`_node=x 9node=y "nodeName":} node=z`), []byte(`"nodeName":`), []byte(`""nodeName":\"h"`), []byte(`-NodeId:\t i`),
		[]byte(""), []byte("E"), []byte("E0101"), []byte("E0101 "),
	}
	_ = filepath.WalkDir("../../test/corpus", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".txt" {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
		return nil
	})
	if len(lines) < 1000 {
		t.Fatalf("only %d lines read: the corpus was not found", len(lines))
	}
	return lines
}

func checkLogMetaShortcuts(t testing.TB, b []byte) {
	if got, want := klogSubmatch(b), reKlog.FindSubmatch(b); !reflect.DeepEqual(got, want) {
		t.Errorf("klogSubmatch(%q) = %q, the expression finds %q", b, got, want)
	}
	if got, want := nodeNamedSubmatch(b), reNodeNamed.FindSubmatch(b); !reflect.DeepEqual(got, want) {
		t.Errorf("nodeNamedSubmatch(%q) = %q, the expression finds %q", b, got, want)
	}
}

// TestLogMetaShortcuts: the shortcuts find what their expressions find.
func TestLogMetaShortcuts(t *testing.T) {
	for _, b := range logMetaLines(t) {
		checkLogMetaShortcuts(t, b)
	}
}

func FuzzLogMetaShortcuts(f *testing.F) {
	for _, b := range logMetaLines(f)[:32] {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkLogMetaShortcuts(t, b) })
}

// BenchmarkLogMetaShortcuts: the shortcuts against their expressions over
// the corpus' lines.
//
//	go test -run '^$' -bench LogMetaShortcuts ./read/analyze
func BenchmarkLogMetaShortcuts(b *testing.B) {
	lines := logMetaLines(b)
	b.Run("expressions", func(b *testing.B) {
		for b.Loop() {
			for _, l := range lines {
				reKlog.FindSubmatch(l)
				reNodeNamed.FindSubmatch(l)
			}
		}
	})
	b.Run("shortcuts", func(b *testing.B) {
		for b.Loop() {
			for _, l := range lines {
				klogSubmatch(l)
				nodeNamedSubmatch(l)
			}
		}
	})
}
