package analyze

// One log line can match several signatures: a kubelet's
// "UnmountVolume.TearDown failed ... : unlinkat <pod volume dir>: device
// or resource busy" is a volume teardown and also, by its words, the
// "unlinkat ...: device or resource busy" of a runtime removing a
// container's filesystem. Once a finding explains a line, the other
// signatures' hits of that same line are the same event: the finding
// claims them, so no second finding reads the line as something else.

// lineAt is where a log line is: its file and line number.
type lineAt struct {
	path string
	n    int
}

// claimSameLines attaches to f, and claims, every unclaimed key of the
// given signatures that has a hit on one of the lines of k. It returns how
// many keys it claimed.
func (st *state) claimSameLines(f *Finding, k *keyHits, sigs ...string) int {
	lines := map[lineAt]bool{}
	for _, h := range k.hits() {
		lines[lineAt{h.Path, h.Line.N}] = true
	}
	n := 0
	for _, id := range sigs {
		s := st.logs.sigs[id]
		if s == nil {
			continue
		}
		for _, other := range s.unclaimed() {
			for _, h := range other.hits() {
				if lines[lineAt{h.Path, h.Line.N}] {
					other.claimed = true
					n++
					f.addEvidence(other.evidence(sigWhat[id])...)
					break
				}
			}
		}
	}
	return n
}
