// Package openfiles is the openfiles collector: an lsof built from
// readlink alone (file descriptors with their fdinfo, cwd, root, exe and
// mapped files of every process), aggregated into holders per device and
// per mountpoint, and the kernel threads working on a device. Reads of
// other processes' /proc files run in isolated workers.
//
// Its files are described in docs/bundle.md (openfiles/).
package openfiles
