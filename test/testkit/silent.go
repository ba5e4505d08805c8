package testkit

import (
	"net"
	"testing"
)

// SilentListener listens on network and addr ("tcp", "127.0.0.1:0"; "unix",
// a socket path), accepts every connection and never reads nor answers,
// like a kubelet or a runtime stuck on a lock. The listener and the
// connections it holds are closed when the test ends.
func SilentListener(t testing.TB, network, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close() // the test is over: nothing to report
		<-done        // conns is the accepting goroutine's until it ends
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l
}
