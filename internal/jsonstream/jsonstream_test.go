package jsonstream

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// keysAndCount walks {"k": [..], ...}: the keys, and the elements of the
// arrays, each skipped.
func keysAndCount(doc string) (keys []string, elems int, err error) {
	dec := NewDecoder(strings.NewReader(doc))
	err = WalkObject(dec, func(k string) error {
		keys = append(keys, k)
		return WalkArray(dec, func() error {
			elems++
			return SkipValue(dec)
		})
	})
	if err == nil {
		err = EndOfInput(dec)
	}
	return keys, elems, err
}

func TestWalk(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		keys      int
		elems     int
		malformed bool
	}{
		{"object of arrays", `{"a": [1, {"x": [2, 3]}, "s"], "b": []}`, 2, 3, false},
		{"null object", `null`, 0, 0, false},
		{"null array", `{"a": null}`, 1, 0, false},
		{"not an object", `[1]`, 0, 0, true},
		{"not an array", `{"a": 1}`, 1, 0, true},
		{"data after the document", `{} {}`, 0, 0, true},
		{"too deep", `{"a": [` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `]}`, 1, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys, elems, err := keysAndCount(c.doc)
			if got := errors.Is(err, ErrMalformed); got != c.malformed {
				t.Fatalf("err %v; malformed %v, want %v", err, got, c.malformed)
			}
			if !c.malformed && (len(keys) != c.keys || elems != c.elems) {
				t.Errorf("keys %v, %d elements; want %d keys, %d elements", keys, elems, c.keys, c.elems)
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	if _, _, err := keysAndCount(`{"a": [1, 2`); err == nil {
		t.Fatal("a cut document was read without an error")
	}
}

func FuzzWalk(f *testing.F) {
	f.Add(`{"a": [1, {"x": [2]}], "b": null}`)
	f.Add(`[[[[`)
	f.Fuzz(func(t *testing.T, doc string) {
		_, _, _ = keysAndCount(doc) // must not panic or loop
	})
}

// Compact changes no value: white space inside strings is kept, runs
// outside are cut, and a token past MaxToken is an error.
func TestCompact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"[ 1 ,\n\n\t 2 ]", "[ 1 , 2 ]"},
		{`{"a  b":  "c \"  \\"   }`, `{"a  b": "c \"  \\" }`},
		{"   ", " "},
		{"", ""},
	} {
		b, err := io.ReadAll(Compact(strings.NewReader(c.in)))
		if err != nil || string(b) != c.want {
			t.Errorf("Compact(%q) = %q, %v; want %q", c.in, b, err, c.want)
		}
	}
	long := `["` + strings.Repeat("x", MaxToken+1) + `"]`
	if _, err := io.ReadAll(Compact(strings.NewReader(long))); !errors.Is(err, ErrMalformed) {
		t.Errorf("a token past MaxToken: %v", err)
	}
	num := "[" + strings.Repeat("1", MaxToken+1) + "]"
	if _, err := io.ReadAll(Compact(strings.NewReader(num))); !errors.Is(err, ErrMalformed) {
		t.Errorf("a number past MaxToken: %v", err)
	}
	// Spaces by the hundred MiB cost one pass, no memory.
	dec := NewDecoder(io.MultiReader(strings.NewReader("["), io.LimitReader(spaces{}, 64<<20), strings.NewReader("1]")))
	n := 0
	if err := WalkArray(dec, func() error { n++; return SkipValue(dec) }); err != nil || n != 1 {
		t.Errorf("64 MiB of spaces: %d elements, %v", n, err)
	}
}

type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func BenchmarkWhitespaceRun(b *testing.B) {
	for b.Loop() {
		dec := NewDecoder(io.MultiReader(strings.NewReader("["), io.LimitReader(spaces{}, 32<<20), strings.NewReader("]")))
		if err := WalkArray(dec, func() error { return SkipValue(dec) }); err != nil {
			b.Fatal(err)
		}
	}
}
