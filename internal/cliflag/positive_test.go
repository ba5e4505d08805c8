package cliflag

import "testing"

// A positive size takes what ByteSize takes, except zero.
func TestPositiveSize(t *testing.T) {
	var s PositiveSize
	if err := s.Set("2MiB"); err != nil || s != 2<<20 {
		t.Errorf("Set(2MiB): %v, %d", err, s)
	}
	if s.String() != FormatBytes(2<<20) || s.Type() != "size" {
		t.Errorf("String %q, Type %q", s.String(), s.Type())
	}
	for _, bad := range []string{"0", "0KiB", "-1", "lots"} {
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
	if s != 2<<20 {
		t.Errorf("a refused value changed the size to %d", s)
	}
}
