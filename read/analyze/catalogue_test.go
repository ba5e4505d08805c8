package analyze_test

import (
	"bytes"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/findings.md from the catalogue")

// findingIDs returns every finding ID the package's code declares: the
// string constants named id... (one per ID, by convention of the rule
// files).
func findingIDs(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "id") || len(name.Name) < 3 || name.Name[2] < 'A' || name.Name[2] > 'Z' || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					seen[s] = true
				}
			}
			return true
		})
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	if len(out) < 30 {
		t.Fatalf("only %d finding IDs found in the code: %v", len(out), out)
	}
	return out
}

// Every finding ID of the code is documented (meaning, evidence, fix), and
// nothing else is: adding a rule without its RuleDoc fails here.
func TestCatalogueDocumentsEveryFinding(t *testing.T) {
	docs := map[string]analyze.RuleDoc{}
	for _, d := range analyze.Catalogue() {
		docs[d.ID] = d
		if d.Severity == "" || d.Title == "" || len(d.Meaning) < 40 || d.Evidence == "" || d.Fix == "" {
			t.Errorf("%s is documented only in part: %+v", d.ID, d)
		}
	}
	ids := findingIDs(t)
	for _, id := range ids {
		if _, ok := docs[id]; !ok {
			t.Errorf("finding %s has no RuleDoc next to its rule (document(RuleDoc{...}))", id)
		}
		delete(docs, id)
	}
	for id := range docs {
		t.Errorf("RuleDoc %s documents no finding the code declares", id)
	}
}

// docs/findings.md is what the catalogue writes: regenerate it with
// go test ./read/analyze -run TestFindingsDocUpToDate -update.
func TestFindingsDocUpToDate(t *testing.T) {
	var b bytes.Buffer
	if err := analyze.WriteFindingsDoc(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join("..", "..", "docs", "findings.md")
	if *updateDocs {
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test ./read/analyze -run TestFindingsDocUpToDate -update writes it)", err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Errorf("docs/findings.md is out of date: go test ./read/analyze -run TestFindingsDocUpToDate -update")
	}
	for _, id := range findingIDs(t) {
		if !bytes.Contains(got, []byte("\n## "+id+"\n")) {
			t.Errorf("docs/findings.md has no section for %s", id)
		}
	}
}
