// Package arch keeps the module's architecture true: its test reads the
// import graph with go list and checks the floors drawn in
// docs/architecture.md. Each wing may import only the wings below it (no
// import runs back up), and the read side (read/..., bundle/...,
// signatures, features/report) links nothing of the collect side, not
// even through another package.
package arch
