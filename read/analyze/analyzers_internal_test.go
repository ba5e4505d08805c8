package analyze

import (
	"reflect"
	"strings"
	"testing"
)

// Analyzers run after what they require, each once, in a stable order.
func TestAnalyzerOrder(t *testing.T) {
	a := &analyzer{Name: "a"}
	b := &analyzer{Name: "b", Requires: []*analyzer{a}}
	c := &analyzer{Name: "c", Requires: []*analyzer{a}}
	d := &analyzer{Name: "d", Requires: []*analyzer{c, b}}
	got, err := order([]*analyzer{d, b})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range got {
		names = append(names, x.Name)
	}
	if strings.Join(names, " ") != "a c b d" {
		t.Fatalf("order %v, want a c b d", names)
	}
	a.Requires = []*analyzer{d}
	if _, err := order([]*analyzer{d}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a cycle is not refused: %v", err)
	}
}

// An analyzer gets its requirements' results; one that fails (a panic, an
// error, a result of another type than it declares) is an internal-error
// finding and what requires it does not run, while the rest does.
func TestAnalyzerResultsAndFailures(t *testing.T) {
	st := newState()
	num := &analyzer{Name: "num", ResultType: reflect.TypeOf(0), Run: func(*pass) (any, error) { return 41, nil }}
	var got any
	use := &analyzer{Name: "use", Requires: []*analyzer{num}, Run: func(p *pass) (any, error) {
		got = p.ResultOf[num]
		return nil, nil
	}}
	wrong := &analyzer{Name: "wrong", ResultType: reflect.TypeOf(""), Run: func(*pass) (any, error) { return 1, nil }}
	boom := &analyzer{Name: "boom", Run: func(*pass) (any, error) { panic("bad data") }}
	ran := false
	after := &analyzer{Name: "after", Requires: []*analyzer{boom, wrong}, Run: func(*pass) (any, error) { ran = true; return nil, nil }}
	other := false
	indep := &analyzer{Name: "indep", Run: func(p *pass) (any, error) {
		other = true
		p.Report(Finding{ID: "x", Subject: "y"})
		return nil, nil
	}}
	st.runAnalyzers([]*analyzer{use, after, indep})
	if got != 41 {
		t.Errorf("use got %v, want 41", got)
	}
	if ran {
		t.Error("an analyzer ran after a requirement failed")
	}
	if !other {
		t.Error("an independent analyzer did not run")
	}
	var internal []string
	for _, f := range st.findings {
		if f.ID == idInternalError {
			internal = append(internal, f.Subject+": "+f.Summary)
		}
	}
	if len(internal) != 2 || !strings.Contains(strings.Join(internal, "\n"), "bad data") || !strings.Contains(strings.Join(internal, "\n"), "declared string") {
		t.Errorf("internal errors: %q", internal)
	}
}

// The analysis graph holds the events stage and runs it before the rules
// that read its result.
func TestAnalysisGraph(t *testing.T) {
	list, err := order(analyzers())
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, a := range list {
		pos[a.Name] = i
	}
	for _, n := range []string{"events", "catalogue-logs", "storage-operations", "pods"} {
		if _, ok := pos[n]; !ok {
			t.Fatalf("no analyzer %s in %v", n, pos)
		}
	}
	if !(pos["events"] < pos["catalogue-logs"] && pos["catalogue-logs"] < pos["storage-operations"] && pos["storage-operations"] < pos["pods"]) {
		t.Errorf("order %v", pos)
	}
}
