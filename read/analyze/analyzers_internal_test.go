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

// A rule sees the findings of what it requires and nothing else; its
// edits of them reach the report, and one that drops findings takes over
// the ones it read. needs hands a rule its requirement's typed result, and
// refuses one it does not require.
func TestAnalyzerFindingsView(t *testing.T) {
	st := newState()
	seen := map[string][]string{}
	look := func(name string, p *pass) {
		for _, f := range p.st.findings {
			seen[name] = append(seen[name], f.ID)
		}
	}
	x := &analyzer{Name: "x", ResultType: reflect.TypeOf(&dirsResult{}), Run: func(p *pass) (any, error) {
		p.Report(Finding{ID: "from-x"})
		return &dirsResult{Huge: []string{"/big"}}, nil
	}}
	y := &analyzer{Name: "y", Run: func(p *pass) (any, error) {
		look("y", p)
		p.Report(Finding{ID: "from-y"})
		return nil, nil
	}}
	var huge []string
	z := &analyzer{Name: "z", Requires: []*analyzer{x}, Run: func(p *pass) (any, error) {
		look("z", p)
		p.st.findings[0].Summary = "edited by z"
		_, err := needs("x", func(_ *state, d *dirsResult) { huge = d.Huge })(p)
		return nil, err
	}}
	w := &analyzer{Name: "w", Requires: []*analyzer{z, y}, Run: func(p *pass) (any, error) {
		look("w", p)
		if len(p.st.findings) == 2 && p.st.findings[1].Summary != "edited by z" {
			t.Errorf("z's edit of x's finding is lost: %q", p.st.findings[1].Summary)
		}
		p.st.findings = p.st.findings[:1]
		return nil, nil
	}}
	lost := &analyzer{Name: "lost", Run: needs("x", func(*state, *dirsResult) {})}
	st.runAnalyzers([]*analyzer{y, x, z, w, lost})
	if len(seen["y"]) != 0 || strings.Join(seen["z"], " ") != "from-x" || strings.Join(seen["w"], " ") != "from-y from-x" {
		t.Errorf("views: %v", seen)
	}
	if strings.Join(huge, " ") != "/big" {
		t.Errorf("z read x's result as %v", huge)
	}
	var ids []string
	for _, f := range st.findings {
		ids = append(ids, f.ID+":"+f.Summary)
	}
	if len(ids) != 2 || ids[0] != "from-y:" || !strings.HasPrefix(ids[1], idInternalError+":rule lost: it reads x") {
		t.Errorf("findings after the run: %q", ids)
	}
}
