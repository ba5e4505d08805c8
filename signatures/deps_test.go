package signatures

import (
	"go/build"
	"strings"
	"testing"
)

// TestLeaf: analyze and watch both import the catalogue, so it imports
// nothing of nodesnap (and only the standard library).
func TestLeaf(t *testing.T) {
	p, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
			t.Errorf("signatures imports %s: it must stay a leaf of the standard library", imp)
		}
	}
}
