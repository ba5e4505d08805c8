package roundtrip_test

import (
	"os"
	"testing"

	// Serves the hidden child modes of the collections these tests run.
	_ "github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
)

// TestMain lets the benchmark's child analyse a bundle, and removes the
// bundle the benchmark built.
func TestMain(m *testing.M) {
	if p := os.Getenv(childEnv); p != "" {
		runBenchChild(p)
	}
	code := m.Run()
	if benchBundle.dir != "" {
		_ = os.RemoveAll(benchBundle.dir)
	}
	os.Exit(code)
}
