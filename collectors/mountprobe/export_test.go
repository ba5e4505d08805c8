package mountprobe

// SetMountprobeMaxStuckForTest sets --mountprobe-max-stuck for the runs
// that follow and returns what restores it.
func SetMountprobeMaxStuckForTest(n int) (restore func()) {
	old := opts.MaxStuck
	opts.MaxStuck = n
	return func() { opts.MaxStuck = old }
}

// StuckProbesForTest lists the probe workers stuck in D state with a probe
// note, by filesystem (major:minor), as a later run finds them.
func StuckProbesForTest() (map[string][]int, error) {
	v, err := earlierOp(earlierRequest{Proc: "/proc"})
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, e := range v.([]mpEarlier) {
		out[e.Dev] = append(out[e.Dev], e.PID)
	}
	return out, nil
}
