package watch

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The /metrics and /healthz listener holds under a slowloris: any local
// user can open connections and send a request's header a byte at a time.
// A fixed number of slots closed every connection past the limit, so 100
// such clients kept the scraper and the DaemonSet's liveness probe out
// (19 of 20 scrapes failed). Now a connection past the limit takes the
// slot of one that is waiting on its client, not being answered: the one
// of the client (remote address) that holds the most slots, waiting
// longest. A connection is waiting on its client while no request of its
// is whole (the end of a header read, "\r\n\r\n") and nothing it sent is
// left unread in its socket. A scraper or a probe sends its request whole
// at once and is answered at once, even when the server is slow to read
// it; a client that trickles its header is what waits, so it is what
// goes. The header itself must arrive within metricsHeaderTimeout.

// Bounds of the /metrics server.
const (
	metricsIdleTimeout   = 30 * time.Second
	metricsHeaderTimeout = 2 * time.Second
	maxMetricsConns      = 16
)

// limitListener holds at most max connections: past it, a waiting
// connection is closed to make room (see above), or, when every slot is
// answering a request, the new connection is closed at once. Memory and
// file descriptors do not grow with what connects.
type limitListener struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[*limitConn]struct{}
}

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, max: max, conns: map[*limitConn]struct{}{}}
}

// limitConn is a connection in a slot. waitingSince is when it last
// started waiting for a request (accepted, or its last answer written);
// zero while a request is being answered.
type limitConn struct {
	net.Conn
	l            *limitListener
	client       string
	waitingSince time.Time
	accepted     time.Time
	// whole says a request's header was read whole and not yet answered;
	// tail is the end of what was read, for a "\r\n\r\n" across reads.
	whole bool
	tail  []byte
	once  sync.Once
}

// Read notes when a request's header has been read whole.
func (c *limitConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		buf := append(c.tail, p[:min(n, 4)]...)
		end := bytes.Contains(buf, headerEnd) || bytes.Contains(p[:n], headerEnd)
		c.tail = append(c.tail[:0], p[max(0, n-3):n]...)
		if end {
			c.l.mu.Lock()
			c.whole = true
			c.l.mu.Unlock()
		}
	}
	return n, err
}

var headerEnd = []byte("\r\n\r\n")

// pendingWhole says whether the client has sent a request's header whole
// that is not read yet: it waits on the server, not the server on it.
// The socket is peeked (MSG_PEEK), nothing is taken from it.
func pendingWhole(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var buf [4096]byte
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _, _ = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	return n > 0 && bytes.Contains(buf[:n], headerEnd)
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		lc := &limitConn{Conn: c, l: l, client: clientOf(c), waitingSince: now, accepted: now}
		l.mu.Lock()
		var evict *limitConn
		if len(l.conns) >= l.max {
			evict = l.victim()
		}
		if len(l.conns) < l.max || evict != nil {
			if evict != nil {
				delete(l.conns, evict)
			}
			l.conns[lc] = struct{}{}
			l.mu.Unlock()
			if evict != nil {
				_ = evict.Conn.Close() // its server goroutine sees the close and ends
			}
			return lc, nil
		}
		l.mu.Unlock()
		_ = c.Close() // every slot is answering a request: nothing read or written
	}
}

// victim is the waiting connection of the client holding the most slots,
// the one waiting longest, one accepted at least freshGrace ago first (a
// client may be slow to send what it connected for: its request is not
// yet in the socket); nil when every slot is answering or holds a whole
// request. l.mu held.
func (l *limitListener) victim() *limitConn {
	held := map[string]int{}
	for c := range l.conns {
		held[c.client]++
	}
	now := time.Now()
	var v *limitConn
	better := func(c *limitConn) bool {
		if v == nil {
			return true
		}
		cs, vs := now.Sub(c.accepted) >= freshGrace, now.Sub(v.accepted) >= freshGrace
		switch {
		case cs != vs:
			return cs
		case held[c.client] != held[v.client]:
			return held[c.client] > held[v.client]
		}
		return c.waitingSince.Before(v.waitingSince)
	}
	for c := range l.conns {
		if c.waitingSince.IsZero() || c.whole || pendingWhole(c.Conn) {
			continue
		}
		if better(c) {
			v = c
		}
	}
	return v
}

// freshGrace is how long a new connection is the last to lose its slot.
const freshGrace = 500 * time.Millisecond

// clientOf is the connection's remote host: a client's slots are counted
// together whatever its source port.
func clientOf(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return err
}

// answering marks the connection as answering a request (on), or waiting
// for the next one (off).
func (c *limitConn) answering(on bool) {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if on {
		c.waitingSince = time.Time{}
	} else {
		c.waitingSince, c.whole = time.Now(), false
	}
}

type connKey struct{}

// connContext puts the server's connection in its requests' context, so
// the handler can mark it answering (srv.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitConn); ok {
		return context.WithValue(ctx, connKey{}, lc)
	}
	return ctx
}

// markAnswering wraps h: while it answers, its connection's slot is not
// taken from it.
func markAnswering(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if lc, ok := r.Context().Value(connKey{}).(*limitConn); ok {
			lc.answering(true)
			defer lc.answering(false)
		}
		h.ServeHTTP(rw, r)
	})
}
