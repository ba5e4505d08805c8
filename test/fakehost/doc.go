// Package fakehost is one fake node every collector runs over: a fixture
// tree (testdata/host: /proc with a kubelet thread in D state, /sys,
// /etc, /var/lib/kubelet with a CSI volume, /var/log) given as --root, as
// node_exporter's collector/fixtures and procfs' testdata/fixtures are.
// Its test runs every listed collector through the real supervisor,
// without root and without the network, and compares the bundle's
// listing (each collector's status and the files it wrote; not their
// bytes, which carry times) with testdata/golden.txt: a collector that
// starts reading the real host instead of the root, fails on a plain
// node, or changes what it writes shows up as a diff. Regenerate with
// go test ./test/fakehost -update.
package fakehost
