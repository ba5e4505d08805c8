package objstore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// action is what the proxy does to one request.
type action int

const (
	pass      action = iota
	flipByte         // flip one byte in the middle of the body
	cutMiddle        // forward half the body, then drop both connections
	dropReply        // forward the whole request, then drop the connection before the answer
)

// faultProxy is a loopback TCP proxy in front of the store that reads the
// HTTP/1.1 requests going through it (their head and Content-Length body)
// and damages the ones decide picks: the faults of a real network, on the
// real wire, between the real client and the real store.
type faultProxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	decide func(method, target string) action

	mu sync.Mutex
	// bodyBytes counts the body bytes forwarded to the store, per
	// partNumber (0 for requests without one), and in all.
	bodyBytes map[int]int64
	total     int64
	replies   bytes.Buffer // what the store answered (the first MiB)
	conns     []net.Conn
}

func newFaultProxy(t *testing.T, target string, decide func(method, target string) action) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, target: target, decide: decide, bodyBytes: map[int]int64{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *faultProxy) Endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go p.conn(c, s)
	}
}

// conn forwards one client connection. Answers go back as they come (and
// are kept for the test); a connection marked to drop its answer is closed
// when the answer starts.
func (p *faultProxy) conn(c, s net.Conn) {
	var dropMu sync.Mutex
	drop := false
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 {
				dropMu.Lock()
				d := drop
				dropMu.Unlock()
				if d && !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 100")) {
					c.Close()
					s.Close()
					return
				}
				p.mu.Lock()
				if p.replies.Len() < 1<<20 {
					p.replies.Write(buf[:n])
				}
				p.mu.Unlock()
				if _, werr := c.Write(buf[:n]); werr != nil {
					s.Close()
					return
				}
			}
			if err != nil {
				c.Close()
				return
			}
		}
	}()
	br := bufio.NewReader(c)
	defer s.Close()
	for {
		head, err := readHead(br)
		if err != nil {
			return
		}
		method, target, cl, chunked := parseHead(head)
		if chunked {
			p.t.Errorf("the proxy got a chunked request (%s %s); it reads Content-Length bodies only", method, target)
			return
		}
		part := partNumber(target)
		act := pass
		if p.decide != nil {
			act = p.decide(method, target)
		}
		if _, err := s.Write(head); err != nil {
			return
		}
		var n int64
		switch act {
		case cutMiddle:
			n, _ = io.CopyN(s, br, cl/2)
			p.count(part, n)
			c.Close()
			return
		case flipByte:
			body := make([]byte, cl)
			if _, err := io.ReadFull(br, body); err != nil {
				return
			}
			body[cl/2] ^= 0x01
			w, _ := s.Write(body)
			n = int64(w)
		default:
			n, err = io.CopyN(s, br, cl)
			if err != nil {
				p.count(part, n)
				return
			}
		}
		p.count(part, n)
		if act == dropReply {
			dropMu.Lock()
			drop = true
			dropMu.Unlock()
		}
	}
}

func (p *faultProxy) count(part int, n int64) {
	p.mu.Lock()
	p.bodyBytes[part] += n
	p.total += n
	p.mu.Unlock()
}

func (p *faultProxy) sent(part int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bodyBytes[part]
}

func (p *faultProxy) totalSent() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

func (p *faultProxy) answers() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.replies.String()
}

// readHead reads a request's head, through the blank line.
func readHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		line, err := br.ReadBytes('\n')
		head = append(head, line...)
		if err != nil {
			return nil, err
		}
		if len(line) <= 2 && strings.TrimSpace(string(line)) == "" {
			return head, nil
		}
		if len(head) > 64<<10 {
			return nil, errors.New("request head too long")
		}
	}
}

func parseHead(head []byte) (method, target string, cl int64, chunked bool) {
	lines := strings.Split(string(head), "\r\n")
	f := strings.Fields(lines[0])
	if len(f) >= 2 {
		method, target = f[0], f[1]
	}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "content-length":
			cl, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		case "transfer-encoding":
			chunked = strings.Contains(strings.ToLower(v), "chunked")
		}
	}
	return method, target, cl, chunked
}

func partNumber(target string) int {
	u, err := url.Parse(target)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(u.Query().Get("partNumber"))
	return n
}

// once returns a decide function that applies act to the first request
// for which match holds, and passes everything else.
func once(act action, match func(method, target string) bool) func(string, string) action {
	var mu sync.Mutex
	done := false
	return func(method, target string) action {
		mu.Lock()
		defer mu.Unlock()
		if !done && match(method, target) {
			done = true
			return act
		}
		return pass
	}
}

func isPart(n int) func(method, target string) bool {
	return func(method, target string) bool { return method == "PUT" && partNumber(target) == n }
}
