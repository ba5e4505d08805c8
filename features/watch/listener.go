package watch

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// The /metrics and /healthz listener holds under a slowloris: any local
// user can open connections and send a request's header a byte at a time.
// A fixed number of slots closed every connection past the limit, so 100
// such clients kept the scraper and the DaemonSet's liveness probe out
// (19 of 20 scrapes failed). Now a connection past the limit takes the
// slot of one that is waiting, not being answered: the one of the client
// (remote address) that holds the most slots, waiting longest. A scraper
// or a probe sends its request whole at once and is answered at once; a
// client that trickles its header is what waits, so it is what goes. The
// header itself must arrive within metricsHeaderTimeout.

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
	once         sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: l, client: clientOf(c), waitingSince: time.Now()}
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
// the one waiting longest; nil when every slot is answering. l.mu held.
func (l *limitListener) victim() *limitConn {
	held := map[string]int{}
	for c := range l.conns {
		held[c.client]++
	}
	var v *limitConn
	for c := range l.conns {
		if c.waitingSince.IsZero() {
			continue
		}
		if v == nil || held[c.client] > held[v.client] ||
			held[c.client] == held[v.client] && c.waitingSince.Before(v.waitingSince) {
			v = c
		}
	}
	return v
}

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
		c.waitingSince = time.Now()
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
