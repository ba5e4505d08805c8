package mountprobe

// SetMountprobeMaxStuckForTest sets --mountprobe-max-stuck for the runs
// that follow and returns what restores it.
func SetMountprobeMaxStuckForTest(n int) (restore func()) {
	old := mountprobeOpts.MaxStuck
	mountprobeOpts.MaxStuck = n
	return func() { mountprobeOpts.MaxStuck = old }
}
