package analyze

import "math/rand"

// ShuffleAnalyzers makes every analysis run its analyzers in an order
// drawn from rng among those the graph allows (each after what it
// requires); restore puts the stable order back.
func ShuffleAnalyzers(rng *rand.Rand) (restore func()) {
	analyzerOrderHook = func(list []*analyzer) []*analyzer {
		done := map[*analyzer]bool{}
		var out []*analyzer
		for len(out) < len(list) {
			var ready []*analyzer
			for _, a := range list {
				if done[a] {
					continue
				}
				ok := true
				for _, r := range a.Requires {
					ok = ok && done[r]
				}
				if ok {
					ready = append(ready, a)
				}
			}
			a := ready[rng.Intn(len(ready))]
			done[a] = true
			out = append(out, a)
		}
		return out
	}
	return func() { analyzerOrderHook = nil }
}

// WatchSignatures calls fn with the analyzer that reads the unclaimed
// lines of a signature, in the order they run; restore stops it.
func WatchSignatures(fn func(analyzer, sig string)) (restore func()) {
	signatureHook = fn
	return func() { signatureHook = nil }
}

// AnalyzerRequires reports whether the analyzer named a requires the one
// named b, directly or not.
func AnalyzerRequires(a, b string) bool {
	var reach func(x *analyzer) bool
	reach = func(x *analyzer) bool {
		for _, r := range x.Requires {
			if r.Name == b || reach(r) {
				return true
			}
		}
		return false
	}
	for _, x := range analyzers() {
		if x.Name == a {
			return reach(x)
		}
	}
	return false
}
