package storageclients_test

import (
	"testing"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestMain removes the nodesnap binary the end-to-end tests build (the
// hidden child modes are served by supervisortest, which the tests import).
func TestMain(m *testing.M) {
	testkit.Main(m)
}
