package collectors

import (
	"os"

	"github.com/nodesnap/nodesnap/engine/isolate"
)

// MaybeRunHidden runs the hidden internal mode named by os.Args[1], if
// any, and exits. Call it first thing in main, and in TestMain of any test
// binary that runs collectors (the isolation layer re-executes the running
// binary, which in a test is the test binary).
func MaybeRunHidden() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case isolate.ModeCollector:
		isolate.TuneGC()
		os.Exit(ChildMain())
	case isolate.ModeWorker:
		isolate.TuneGC()
		os.Exit(isolate.WorkerMain())
	}
}
