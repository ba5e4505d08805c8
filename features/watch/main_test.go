package watch

import (
	"os"
	"testing"

	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestMain lets this test binary serve the watcher's worker processes (the
// isolation layer re-executes the running binary), and removes the
// nodesnap binary the end-to-end tests build.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == isolate.ModeWorker {
		os.Exit(isolate.WorkerMain())
	}
	testkit.Main(m)
}
