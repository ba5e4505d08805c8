package driverwords

import (
	"bytes"
	"strings"
	"testing"
)

// The committed table is well formed and whole: it decodes with its
// header, every word belongs to a listed driver, and it covers the
// drivers it says it was extracted from.
func TestGeneratedTableWellFormed(t *testing.T) {
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Sources) < 8 {
		t.Errorf("the table lists %d drivers, want at least 8", len(tab.Sources))
	}
	perDriver := map[string]int{}
	statusCodes := map[string]int{}
	for _, w := range tab.Words {
		perDriver[w.Driver]++
		if w.Kind == "status" && w.Code != "" {
			statusCodes[w.Driver]++
		}
		for _, op := range w.Ops {
			if !strings.HasPrefix(op, "Node") {
				t.Errorf("%s %s: operation %q is not a node operation", w.Driver, w.Func, op)
			}
		}
	}
	for _, s := range tab.Sources {
		if perDriver[s.Driver] == 0 || statusCodes[s.Driver] == 0 {
			t.Errorf("%s %s: %d formats, %d gRPC status errors with a code; the extraction lost the driver", s.Driver, s.Version, perDriver[s.Driver], statusCodes[s.Driver])
		}
	}
	// Encoding what was read gives the file back: the committed file is
	// the generator's output, not an edit of it.
	b, err := tab.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, wordsJSON) {
		t.Error("words.json is not what the generator writes for its own content: regenerate it (make driver-words) rather than editing it")
	}
}

func TestDecodeRejects(t *testing.T) {
	for name, in := range map[string]string{
		"not json":       `{"generated":`,
		"no header":      `{"generated":"x","sources":[],"words":[]}`,
		"unknown field":  `{"generated":"` + GeneratedHeader + `","sources":[],"words":[],"extra":1}`,
		"foreign driver": `{"generated":"` + GeneratedHeader + `","sources":[{"driver":"a","version":"v1","origin":"repo:o/a"}],"words":[{"driver":"b","version":"v1","ops":["NodeStageVolume"],"func":"f","file":"f.go","kind":"status","format":"x"}]}`,
		"bad kind":       `{"generated":"` + GeneratedHeader + `","sources":[{"driver":"a","version":"v1","origin":"repo:o/a"}],"words":[{"driver":"a","version":"v1","ops":["NodeStageVolume"],"func":"f","file":"f.go","kind":"print","format":"x"}]}`,
		"no operation":   `{"generated":"` + GeneratedHeader + `","sources":[{"driver":"a","version":"v1","origin":"repo:o/a"}],"words":[{"driver":"a","version":"v1","func":"f","file":"f.go","kind":"log","format":"x"}]}`,
	} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}
