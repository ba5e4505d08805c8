package analyze

import (
	"fmt"
	"reflect"
	"runtime/debug"

	"github.com/nodesnap/nodesnap/bundle"
)

// Rules declare what they read and what they produce, after golang.org/
// x/tools/go/analysis: an Analyzer names the analyzers whose results it
// needs (Requires) and the type of its own result (ResultType); the
// driver runs each once, after everything it requires, and hands it
// their results. The order is the graph's, not a hand-kept list.
//
// The extraction stage is an analyzer (events: the storage operations'
// events in scope, grouped by operation and object); every rule is one
// too, requiring what it reads (rule.reads in state.go): the rules whose
// findings it reads, the ones that claim log lines before it reads what
// is left unclaimed, the events. There is no other order: any order the
// graph allows gives the same report (TestAnalyzersAnyOrder), and a rule
// sees the findings of what it requires only (viewFor).

// Analyzer is one rule or stage of the analysis.
type analyzer struct {
	Name string
	// Requires are the analyzers whose results Run reads.
	Requires []*analyzer
	// ResultType is the type of Run's result (nil for none).
	ResultType reflect.Type
	Run        func(*pass) (any, error)
}

// pass is one analyzer's run: the state it may read, the results of
// what it requires, and where its findings go.
type pass struct {
	Analyzer *analyzer
	// ResultOf holds the result of every analyzer in Requires.
	ResultOf map[*analyzer]any
	st       *state
}

// Report adds a finding.
func (p *pass) Report(f Finding) { p.st.add(f) }

// order returns the analyzers roots need, each after its requirements,
// in a stable order; an error names a cycle.
func order(roots []*analyzer) ([]*analyzer, error) {
	const (
		visiting = 1
		done     = 2
	)
	mark := map[*analyzer]int{}
	var out []*analyzer
	var visit func(a *analyzer, path []string) error
	visit = func(a *analyzer, path []string) error {
		switch mark[a] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("analyzers require each other in a cycle: %v -> %s", path, a.Name)
		}
		mark[a] = visiting
		for _, r := range a.Requires {
			if err := visit(r, append(path, a.Name)); err != nil {
				return err
			}
		}
		mark[a] = done
		out = append(out, a)
		return nil
	}
	for _, a := range roots {
		if err := visit(a, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// runAnalyzers runs roots and what they require. A panic or an error in
// one analyzer is an internal-error finding; the ones that require it do
// not run, the others do.
//
// An analyzer sees the findings of what it requires, directly or not,
// and of nothing else (st.findings during its run is that view, in the
// graph's stable order): what runs beside it in another order cannot
// change what it reads. What it adds, it owns; a rule that edits the
// findings it reads (the storage operations' and the pods' rules) edits
// their owners' copies, and one that drops some (the pods' rule merges
// findings) takes over the findings it read.
func (st *state) runAnalyzers(roots []*analyzer) {
	list, err := order(roots)
	if err != nil {
		st.internalError("analyzers", err.Error(), "")
		return
	}
	canon := list
	if analyzerOrderHook != nil {
		list = analyzerOrderHook(list)
	}
	// owned holds each analyzer's findings; nil's are the ones made
	// before the analyzers ran (the transients' settling).
	owned := map[*analyzer][]Finding{nil: st.findings}
	results := map[*analyzer]any{}
	failed := map[*analyzer]bool{}
	for _, a := range list {
		p := &pass{Analyzer: a, ResultOf: map[*analyzer]any{}, st: st}
		skip := false
		for _, r := range a.Requires {
			if failed[r] {
				skip = true
			}
			p.ResultOf[r] = results[r]
		}
		if skip {
			failed[a] = true
			continue
		}
		view := st.viewFor(a, canon, owned)
		if signatureHook != nil {
			name := a.Name
			st.logs.touched = func(sig string) { signatureHook(name, sig) }
		}
		res, err := st.runOne(p)
		st.logs.touched = nil
		if err == nil && a.ResultType != nil && res != nil && reflect.TypeOf(res) != a.ResultType {
			err = fmt.Errorf("analyzer %s returned a %T, declared %s", a.Name, res, a.ResultType)
		}
		if err != nil {
			failed[a] = true
			st.internalError(a.Name, err.Error(), "")
		} else {
			results[a] = res
		}
		settle(a, view, st.findings, owned)
	}
	st.findings = nil
	for _, a := range append([]*analyzer{nil}, canon...) {
		st.findings = append(st.findings, owned[a]...)
	}
}

// analyzerOrderHook, set by tests only, reorders the analyzers (a valid
// order still: every analyzer after what it requires).
var analyzerOrderHook func([]*analyzer) []*analyzer

// signatureHook, set by tests only, is told which analyzer reads the
// unclaimed lines of which signature.
var signatureHook func(analyzer, sig string)

// share is one owner's part of a view.
type share struct {
	owner *analyzer
	n     int
}

// viewFor sets st.findings to the findings a may read: the ones made
// before the analyzers, and those of everything it requires, in canon's
// order. It returns whose they are.
func (st *state) viewFor(a *analyzer, canon []*analyzer, owned map[*analyzer][]Finding) []share {
	reads := map[*analyzer]bool{}
	var walk func(*analyzer)
	walk = func(x *analyzer) {
		for _, r := range x.Requires {
			if !reads[r] {
				reads[r] = true
				walk(r)
			}
		}
	}
	walk(a)
	view := []share{{nil, len(owned[nil])}}
	fs := append([]Finding(nil), owned[nil]...)
	for _, b := range canon {
		if reads[b] {
			view = append(view, share{b, len(owned[b])})
			fs = append(fs, owned[b]...)
		}
	}
	st.findings = fs
	return view
}

// settle gives back what an analyzer left in its view: the read findings
// (edited or not) to their owners, the ones it added to it. When it
// dropped some, it owns every finding it read.
func settle(a *analyzer, view []share, out []Finding, owned map[*analyzer][]Finding) {
	n := 0
	for _, s := range view {
		n += s.n
	}
	if len(out) < n {
		for _, s := range view {
			owned[s.owner] = nil
		}
		owned[a] = out
		return
	}
	i := 0
	for _, s := range view {
		owned[s.owner] = out[i : i+s.n : i+s.n]
		i += s.n
	}
	owned[a] = append(owned[a], out[n:]...)
}

// runOne runs one analyzer, a panic turned into an error.
func (st *state) runOne(p *pass) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			st.internalError(p.Analyzer.Name, fmt.Sprintf("stopped with an internal error: %v", r), firstLines(string(debug.Stack()), 16))
			res, err = nil, errPanicked
		}
	}()
	return p.Analyzer.Run(p)
}

// errPanicked marks an analyzer whose panic was already reported.
var errPanicked = fmt.Errorf("panicked")

// internalError reports a rule's failure (once for a panic).
func (st *state) internalError(name, msg, stack string) {
	if msg == errPanicked.Error() {
		return
	}
	f := Finding{ID: idInternalError, Severity: Info, Title: "A rule failed", Subject: name,
		Summary:     "rule " + name + ": " + msg,
		Explanation: "This is a bug in nodesnap analyze; the other rules ran. Please report it with the bundle if you can share it."}
	if stack != "" {
		f.Evidence = []Evidence{{Path: bundle.ManifestName, What: stack}}
	}
	st.add(f)
}

// opResult is the events analyzer's result.
type opResult struct {
	// Groups are the failures in scope, by operation and object.
	Groups []*opGroup
}

// eventsAnalyzer is the extraction stage's result for the rules: the
// storage operations' events of every log, set aside when not evidence
// of now, merged by operation and object.
var eventsAnalyzer = &analyzer{
	Name:       "events",
	ResultType: reflect.TypeOf(&opResult{}),
	Run: func(p *pass) (any, error) {
		st := p.st
		st.opGroups = nil
		st.scopeOps(st.scope.kubelet, st.scope.names, st.scope.winStart)
		return &opResult{Groups: st.opGroups}, nil
	},
}

// analyzers returns the rules as a graph: each requires the rules whose
// findings, claimed log lines or state it reads (rules' reads), the
// events stage where it reads the storage operations' events. The
// graph's stable order (order) is the rules list's, which is also the
// order of the findings a rule reads.
func analyzers() []*analyzer {
	byName := map[string]*analyzer{eventsAnalyzer.Name: eventsAnalyzer}
	var roots []*analyzer
	for _, r := range rules {
		a := ruleAnalyzer(r)
		for _, n := range r.reads {
			req := byName[n]
			if req == nil {
				// A rule may read only what the list holds before it.
				panic("analyzer " + r.name + " reads " + n + ", which is not before it in the rules list")
			}
			a.Requires = append(a.Requires, req)
		}
		byName[r.name] = a
		roots = append(roots, a)
	}
	return roots
}

// ruleAnalyzer makes an analyzer of a rule: its own result, or for a
// rule over the state the number of findings it added.
func ruleAnalyzer(r rule) *analyzer {
	if r.analyze != nil {
		return &analyzer{Name: r.name, ResultType: r.result, Run: r.analyze}
	}
	a := &analyzer{Name: r.name, ResultType: reflect.TypeOf(0)}
	a.Run = func(p *pass) (any, error) {
		before := len(p.st.findings)
		r.run(p.st)
		return len(p.st.findings) - before, nil
	}
	return a
}

// needs makes the run of a rule that reads the result (of type R) of the
// analyzer named req, which its reads list.
func needs[R any](req string, run func(*state, R)) func(*pass) (any, error) {
	return func(p *pass) (any, error) {
		for a, res := range p.ResultOf {
			if a.Name == req {
				r, ok := res.(R)
				if !ok {
					return nil, fmt.Errorf("the result of %s is a %T, not what this rule reads", req, res)
				}
				run(p.st, r)
				return nil, nil
			}
		}
		return nil, fmt.Errorf("it reads %s, which it does not require", req)
	}
}

// hungResult is what the hung-mounts rule tells the rules that read it.
type hungResult struct {
	// Devices are the devices its findings name.
	Devices []string
	// KubeletExplained is set when one of them carries the kubelet's
	// stuck goroutines and failing healthz (the kubelet rule then says
	// no more of it).
	KubeletExplained bool
}

func hungMountsPass(p *pass) (any, error) {
	st := p.st
	before := len(st.findings)
	ruleHungMounts(st)
	res := &hungResult{KubeletExplained: st.kubeletExplained}
	for _, f := range st.findings[before:] {
		if f.ID == idHungMount {
			res.Devices = append(res.Devices, f.Subject)
		}
	}
	return res, nil
}

// dirsResult is what the directories rule tells the rules that read it.
type dirsResult struct {
	// Huge are the huge directories it found (and those past ext4's
	// link limit), by path.
	Huge []string
}

func directoriesPass(p *pass) (any, error) {
	st := p.st
	before := len(st.findings)
	ruleDirectories(st)
	res := &dirsResult{}
	for _, f := range st.findings[before:] {
		if f.ID == idHugeDir || f.ID == idNlinkOverflow {
			res.Huge = append(res.Huge, f.Subject)
		}
	}
	return res, nil
}
