package isolate

import (
	"reflect"
	"testing"
	"time"
)

type wireInner struct {
	Name  string            `json:"name"`
	Tags  map[string]string `json:"tags,omitempty"`
	Bytes []byte            `json:"bytes,omitempty"`
}

type wireSample struct {
	Path   string         `json:"path"`
	Paths  []string       `json:"paths,omitempty"`
	Arr    [2]string      `json:"arr"`
	Ptr    *wireInner     `json:"ptr,omitempty"`
	Items  []wireInner    `json:"items,omitempty"`
	ByPath map[string]int `json:"by_path,omitempty"`
	Any    any            `json:"any,omitempty"`
	When   time.Time      `json:"when"`
	hidden string         //nolint:unused // an unexported field the wire form must skip
}

func TestWireRoundTrip(t *testing.T) {
	bad := "/mnt/caf\xe9/\xff\xfe"
	cases := map[string]wireSample{
		"plain":                  {Path: "/var/lib/kubelet", Paths: []string{"a", "b"}},
		"invalid utf-8 field":    {Path: bad},
		"invalid in a slice":     {Paths: []string{"ok", bad}},
		"invalid in an array":    {Arr: [2]string{bad, "ok"}},
		"through a pointer":      {Ptr: &wireInner{Name: bad, Tags: map[string]string{bad: bad}}},
		"in a slice of structs":  {Items: []wireInner{{Name: "x"}, {Name: bad, Bytes: []byte{0xff}}}},
		"map key":                {ByPath: map[string]int{bad: 1, "ok": 2}},
		"starts with the marker": {Path: wireMarker + "abc", Paths: []string{wireMarker}},
		"a lone marker byte run": {Path: "\xf4\x8f\xbf"},
		"valid non-ASCII":        {Path: "/mnt/café/日本"},
		"interface":              {Any: map[string]any{"k": bad}},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			orig := in
			if in.Ptr != nil {
				cp := *in.Ptr
				orig.Ptr = &cp
			}
			raw, err := MarshalWire(in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, orig) {
				t.Fatalf("MarshalWire changed its argument")
			}
			var out wireSample
			if err := UnmarshalWire(raw, &out); err != nil {
				t.Fatal(err)
			}
			out.When = in.When
			if !reflect.DeepEqual(out, in) {
				t.Errorf("round trip:\n got %#v\nwant %#v\nwire %s", out, in, raw)
			}
		})
	}
}

// A bare string, not in a struct, keeps its bytes too.
func TestWireTopLevelString(t *testing.T) {
	raw, _ := MarshalWire("\xff")
	var s string
	if err := UnmarshalWire(raw, &s); err != nil || s != "\xff" {
		t.Errorf("top-level string: %q %v", s, err)
	}
}

func FuzzWireString(f *testing.F) {
	for _, s := range []string{"", "/mnt/x", "caf\xe9", wireMarker, wireMarker + "AAAA", "\xf4\x8f\xbf\xbe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := wireSample{Path: s, Paths: []string{s}, ByPath: map[string]int{s: 1}}
		raw, err := MarshalWire(in)
		if err != nil {
			t.Fatal(err)
		}
		var out wireSample
		if err := UnmarshalWire(raw, &out); err != nil {
			t.Fatal(err)
		}
		if out.Path != s || out.Paths[0] != s || out.ByPath[s] != 1 {
			t.Fatalf("%q came back as %q", s, out.Path)
		}
		// Any string a peer may send decodes without panicking.
		_ = unwireString(s)
	})
}
