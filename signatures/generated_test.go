package signatures

import (
	"strings"
	"testing"
)

// variants are the classes with Needs whose Words are the same as a base
// class's: a format of the base renders, with the variant's error, into a
// line of the variant.
func variants(base *Class, f Format) []*Class {
	var out []*Class
	for i := range compiledClasses {
		cc := &compiledClasses[i]
		if len(cc.c.Needs) > 0 && cc.c != base && cc.matches([]byte(f.Format), false) {
			out = append(out, cc.c)
		}
	}
	return out
}

// wantObject is the object a line of a format must name: the class's key
// kind, when the rendered line carries it.
func wantObject(c *Class, line string) (kind KeyKind, want []string) {
	switch c.Key {
	case KeyPod:
		if strings.Contains(line, SamplePodUID) {
			return KeyPod, []string{SamplePodUID}
		}
	case KeyVolume:
		if strings.Contains(line, SampleUniqueName) {
			return KeyVolume, []string{SampleUniqueName}
		}
		if strings.Contains(line, SampleVolume) {
			return KeyVolume, []string{SampleVolume}
		}
	case KeyDevice:
		for _, o := range []string{SampleDevice, SampleUniqueName, SampleVolume} {
			if strings.Contains(line, o) {
				return KeyDevice, []string{SampleDevice, SampleUniqueName, SampleVolume}
			}
		}
	case KeyPath:
		if strings.Contains(line, SamplePodPath) || strings.Contains(line, SampleStaging) {
			return KeyPath, []string{SamplePodPath, SampleStaging}
		}
	}
	return KeyNone, nil
}

// TestGeneratedLines renders every catalogued format of every version in
// every log format and checks the line falls in its class (not another)
// and that its key is the object the line names. It reports the pass rate.
func TestGeneratedLines(t *testing.T) {
	if len(Formats) == 0 {
		t.Fatal("the generated table is empty: run make signatures")
	}
	total, pass := 0, 0
	for _, f := range Formats {
		base := ByID(f.Class)
		if base == nil {
			t.Errorf("format %q: class %q is not in the catalogue", f.Format, f.Class)
			continue
		}
		for _, as := range append([]*Class{base}, variants(base, f)...) {
			for _, form := range Forms {
				line, ok := Render(f, as, form)
				if !ok {
					continue
				}
				total++
				ms := MatchLine([]byte(line))
				var got []Match
				for i := range ms {
					if !ByID(ms[i].ID).Independent {
						got = append(got, ms[i])
					}
				}
				switch {
				case len(got) == 0:
					t.Errorf("%s %s %s (%s): no class matches\n  %s", f.Source, f.Versions, as.ID, form, line)
					continue
				case len(got) > 1 || got[0].ID != as.ID:
					t.Errorf("%s %s: want %s alone, got %+v (%s)\n  %s", f.Source, f.Versions, as.ID, ids(got), form, line)
					continue
				}
				if kind, want := wantObject(as, line); kind != KeyNone {
					okKey := false
					for _, w := range want {
						okKey = okKey || got[0].Key == w
					}
					if !okKey {
						t.Errorf("%s %s %s (%s): key %q, want one of %q\n  %s", f.Source, f.Versions, as.ID, form, got[0].Key, want, line)
						continue
					}
				}
				pass++
			}
		}
	}
	t.Logf("generated lines: %d of %d matched their class with their object (%.1f %%)", pass, total, 100*float64(pass)/float64(total))
}
