package analyze

// A kubelet whose start blocks on a filesystem never reaches its sync
// loop. Its main goroutine (goroutine 1 of every Go program) runs the
// start-up and, once the kubelet runs, waits in a channel receive or a
// select until the process ends; a dump showing it inside a syscall under
// a stat or statfs call is a start waiting on a mount (cadvisor's
// GetGlobalFsInfo statfs()es every mount, and one that hangs holds the
// start forever). A traceback printed on a signal need not say for how
// long, so no minutes are required here, unlike for the housekeeping
// goroutines of stuckCleanup.

// mainGoroutineID is the ID a Go runtime gives the main goroutine.
const mainGoroutineID = 1

// startExplanation says what a stuck main goroutine means.
const startExplanation = "The goroutine dump shows the kubelet's main goroutine, which runs its start-up, blocked in a system call of a stat or mount-point check: " +
	"a filesystem that does not answer (a hung NFS or FUSE mount) holds the start there, so the kubelet never reaches its sync loop. "

// stuckStart returns the kubelet's main goroutine when a dump shows it in
// a syscall under a stat or mount-point check without a minute count
// (with one, stuckCleanup has it already).
func (st *state) stuckStart() []goroutine {
	var out []goroutine
	for _, d := range st.kubeDumps {
		for _, g := range d.Kept {
			if g.ID == mainGoroutineID && g.State == "syscall" && g.Minutes < 1 && g.inMountCheck() {
				out = append(out, g)
			}
		}
	}
	return out
}

// onlyMain says whether every goroutine is a main goroutine.
func onlyMain(gs []goroutine) bool {
	for _, g := range gs {
		if g.ID != mainGoroutineID {
			return false
		}
	}
	return len(gs) > 0
}
