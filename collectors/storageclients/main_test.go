package storageclients_test

import (
	"testing"

	"github.com/nodesnap/nodesnap/collectors"
	_ "github.com/nodesnap/nodesnap/collectors/all"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestMain lets this test binary serve the hidden child modes (the
// isolation layer re-executes the running binary for collectors and
// workers), and removes the nodesnap binary the end-to-end tests build.
func TestMain(m *testing.M) {
	collectors.MaybeRunHidden()
	testkit.Main(m)
}
