package analyze

// One log line can match several signatures: a kubelet's
// "UnmountVolume.TearDown failed ... : unlinkat <pod volume dir>: device
// or resource busy" is a volume teardown and also, by its words, the
// "unlinkat ...: device or resource busy" of a runtime removing a
// container's filesystem. Once a finding explains a line, the other
// signatures' hits of that same line are the same event: the finding
// claims them, so no second finding reads the line as something else.

// claimSameLines attaches to f, and claims (claimWhere), every unclaimed
// key of the given signatures that has a hit on one of the lines of k. It
// returns how many keys it claimed.
func (st *state) claimSameLines(f *Finding, k *keyHits, sigs ...string) int {
	lines := map[lineRef]bool{}
	for _, h := range k.hits() {
		lines[lineRef{h.Path, h.Line.N}] = true
	}
	return st.claimWhere(f, func(other *keyHits) bool {
		for _, h := range other.hits() {
			if lines[lineRef{h.Path, h.Line.N}] {
				return true
			}
		}
		return false
	}, sigs...)
}
