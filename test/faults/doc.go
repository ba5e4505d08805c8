// Package faults holds nodesnap's fault suite: it runs the real
// binary against hung mounts, hung programs, a kubelet that never answers,
// interrupts at random moments, full and read-only output filesystems, an
// unprivileged user and hostile bundles, and checks every time that the run
// ends within its deadline with a valid bundle (or none), no staging left,
// and no secret leaked.
//
// `make test` runs a fast subset; `make reliability` runs every fault for
// several rounds (NODESNAP_RELIABILITY=full) and prints the summary table
// that docs/reliability.md records.
package faults
