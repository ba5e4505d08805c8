package csi_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"testing"
)

// listenerEnv makes this test binary a stand-in for a CSI driver run as a
// host process: it listens on the unix socket the variable names, logs a
// line to stdout and to stderr, and serves until its standard input
// closes (the test holds the other end, so a test that dies takes it
// along).
const listenerEnv = "NODESNAP_TEST_CSI_LISTENER"

// TestMain lets this test binary be the stand-in driver (the hidden child
// modes are served by supervisortest, which the tests import).
func TestMain(m *testing.M) {
	if sock := os.Getenv(listenerEnv); sock != "" {
		os.Exit(serveCSISocket(sock))
	}
	os.Exit(m.Run())
}

func serveCSISocket(sock string) int {
	l, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = l.Close() }()
	fmt.Println("I1123 23:10:00.000000 4242 server.go:101] Listening for connections on address: " + sock)
	fmt.Fprintln(os.Stderr, `I1123 23:10:01.000000 4242 nodeserver.go:263] Volume "vol-host-1" is not published at "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-h/mount", nothing to do.`)
	fmt.Println("READY")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
