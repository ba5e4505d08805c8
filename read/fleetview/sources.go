package fleetview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// Source is one bundle to read from somewhere other than a directory (an
// object store): Open streams it, SHA256 is what it must hash to.
type Source struct {
	// Node names the bundle's node; Bundle is where it is (a key, a URL).
	Node, Bundle string
	// SHA256 is the bundle's checksum (hex), from beside it; "" when it
	// has none, which is an error: an unchecked bundle is not read.
	SHA256 string
	Open   func(ctx context.Context) (io.ReadCloser, error)
}

// ErrChecksum: the bytes read are not the bundle its checksum names.
var ErrChecksum = errors.New("checksum mismatch")

// LoadSources analyses every source, parallel at once, each in one
// streaming pass that also hashes it: a bundle whose bytes do not match
// its SHA256 is a node with an error, its analysis dropped (nothing of a
// damaged or substituted bundle is reported as the node's). missing are
// nodes known to have no bundle, with why. where names the whole for
// people (View.Dir).
func LoadSources(ctx context.Context, where string, srcs []Source, missing []Node, parallel int) (*View, error) {
	if len(srcs) == 0 && len(missing) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoBundles, where)
	}
	nodes := make([]Node, len(srcs))
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	for i := range srcs {
		nodes[i] = Node{Name: srcs[i].Node, Bundle: srcs[i].Bundle}
		wg.Add(1)
		sem <- struct{}{}
		go func(n *Node, src Source) {
			defer wg.Done()
			defer func() { <-sem }()
			n.fill(readSource(ctx, src))
		}(&nodes[i], srcs[i])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range nodes {
		if nodes[i].Name == "" {
			nodes[i].Name = nodes[i].Bundle
		}
	}
	return New(where, nodes, missing), nil
}

// readSource analyses one source while hashing it, and reads what the
// analysis left so that the whole is hashed.
func readSource(ctx context.Context, src Source) (*analyze.Report, error) {
	want := strings.ToLower(strings.TrimSpace(src.SHA256))
	if len(want) != 64 || strings.Trim(want, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("%s has no valid checksum beside it (%s.sha256): not read", src.Bundle, src.Bundle)
	}
	rc, err := src.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", src.Bundle, err)
	}
	defer func() { _ = rc.Close() }() // read-only
	h := sha256.New()
	var n int64
	tee := io.TeeReader(rc, writerFunc(func(p []byte) (int, error) {
		n += int64(len(p))
		return h.Write(p)
	}))
	rep, aerr := analyze.Analyze(ctx, tee, analyze.Options{})
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return nil, fmt.Errorf("reading %s after %d bytes: %w", src.Bundle, n, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, fmt.Errorf("%w: %s hashes to %s (%d bytes), its checksum says %s: not read", ErrChecksum, src.Bundle, got, n, want)
	}
	if aerr != nil {
		return nil, aerr
	}
	return rep, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// ParseChecksum reads a .sha256 file's checksum: sha256sum's line
// ("<hex>  <name>"), or the hex alone. It returns "" for anything else.
func ParseChecksum(b []byte) string {
	if len(b) > 4096 {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	sum := strings.ToLower(f[0])
	if len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		return ""
	}
	return sum
}
