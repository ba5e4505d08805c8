// Package cafile reads a PEM file of CA certificates that a user names
// (--ca-file, an upload's or an object store's): bounded in size and in
// time, so a FIFO or a file on a hung mount named by mistake cannot hold
// the process.
package cafile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"
)

// Limit bounds a CA file: a bundle of every public CA is 200 KiB.
const Limit = 4 << 20

// Read returns the content of the PEM file p, read within timeout; it
// must hold at least one certificate.
func Read(p string, timeout time.Duration) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := read(p)
		ch <- result{b, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-t.C:
		// The read goes on in its goroutine until the file answers; its
		// result is dropped.
		return nil, fmt.Errorf("the CA file %s could not be read within %s", p, timeout)
	}
}

func read(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("the CA file: %w", err)
	}
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	b, err := io.ReadAll(io.LimitReader(f, Limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading the CA file %s: %w", p, err)
	}
	if len(b) > Limit {
		return nil, fmt.Errorf("%s is larger than %d MiB: not a CA file", p, Limit>>20)
	}
	if !bytes.Contains(b, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("%s holds no PEM certificate (-----BEGIN CERTIFICATE-----)", p)
	}
	return b, nil
}
