package isolate

// SetWorkerBoundsForTest sets the items in flight and the abandoned items
// a worker may hold, and returns what restores them.
func SetWorkerBoundsForTest(items, stuck int) (restore func()) {
	oi, os := workerItems, workerStuck
	workerItems, workerStuck = items, stuck
	return func() { workerItems, workerStuck = oi, os }
}
