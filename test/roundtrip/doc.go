// Package roundtrip holds the tests that cross both halves of nodesnap:
// bundles written by the real collectors (most on the real kernel, as
// root) read back by the analyzer, and the analyzer's benchmark over a
// large bundle built with the collectors' own index code. The readers'
// own tests import nothing of the collect side; what needs both lives
// here.
package roundtrip
