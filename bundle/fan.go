package bundle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// A WalkFunc walks a bundle's entries as Walk does: fn sees each entry in
// archive order, and what fn leaves unread is skipped.
type WalkFunc func(fn func(Entry) error) error

// Fan walks the bundle at p once and hands every entry to each consumer,
// as if each had walked it with Walk alone: a reader that needs several
// passes (validate, analyze, its own index) decompresses the archive once.
// Each consumer runs in its own goroutine and is given a WalkFunc, which
// it calls once; an error its fn returns ends its walk alone, converted as
// Walk converts it, and the others go on. What the archive itself does
// wrong (unsafe, truncated) ends every walk with Walk's error. Fan returns
// each consumer's error, in order.
func Fan(ctx context.Context, p string, lim Limits, consumers ...func(WalkFunc) error) []error {
	type consumer struct {
		entries chan Entry
		ack     chan struct{}
	}
	cs := make([]consumer, len(consumers))
	errs := make([]error, len(consumers))
	var walkErr error
	var wg sync.WaitGroup
	for i, run := range consumers {
		c := consumer{entries: make(chan Entry), ack: make(chan struct{})}
		cs[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			walked := false
			errs[i] = run(func(fn func(Entry) error) error {
				if walked {
					return errors.New("bundle.Fan: a consumer walked twice")
				}
				walked = true
				var failed error
				failedAt := ""
				for e := range c.entries {
					pr := e.Reader.(*io.PipeReader)
					if failed != nil {
						_ = pr.CloseWithError(errConsumerDone)
						c.ack <- struct{}{}
						continue
					}
					if ferr := fn(e); ferr != nil {
						// Walk would stop here; the others go on, so this
						// walk waits for the archive's verdict on the entry.
						failed, failedAt = ferr, e.Name
						_ = pr.CloseWithError(errConsumerDone)
					} else {
						_, _ = io.Copy(io.Discard, pr) // as Walk drains; a read error is the archive's, in walkErr
					}
					c.ack <- struct{}{}
				}
				if failed == nil {
					return walkErr
				}
				// The archive's own end comes before whatever fn made of
				// it, as in Walk.
				var te *TruncatedError
				if errors.As(walkErr, &te) && te.Entry == failedAt {
					return te
				}
				return convertWalkErr(failed)
			})
			if !walked {
				go drain(c.entries, c.ack)
			}
		}()
	}
	buf := make([]byte, 64<<10) // one for the walk: an entry's bytes are passed on before the next
	walkErr = Walk(ctx, p, lim, func(e Entry) error {
		pws := make([]*io.PipeWriter, len(cs))
		for i, c := range cs {
			pr, pw := io.Pipe()
			pws[i] = pw
			c.entries <- Entry{Name: e.Name, Size: e.Size, Reader: pr}
		}
		var rerr error
		for rerr == nil {
			var n int
			n, rerr = e.Reader.Read(buf)
			for i, pw := range pws {
				if pw != nil && n > 0 {
					if _, err := pw.Write(buf[:n]); err != nil {
						pws[i] = nil // this consumer is done with the entry
					}
				}
			}
		}
		if errors.Is(rerr, io.EOF) {
			rerr = nil
		}
		for i, pw := range pws {
			if pw != nil {
				_ = pw.CloseWithError(rerr)
			}
			<-cs[i].ack
		}
		return rerr
	})
	for _, c := range cs {
		close(c.entries)
	}
	wg.Wait()
	return errs
}

// errConsumerDone closes the pipe of a consumer whose fn failed.
var errConsumerDone = errors.New("consumer stopped")

// drain takes the entries of a consumer that stopped, so the walk goes on
// for the others.
func drain(entries chan Entry, ack chan struct{}) {
	for e := range entries {
		_ = e.Reader.(*io.PipeReader).CloseWithError(errConsumerDone)
		ack <- struct{}{}
	}
}

// convertWalkErr is what Walk returns for an error of its fn.
func convertWalkErr(err error) error {
	var ue *userError
	switch {
	case errors.As(err, &ue):
		return ue.err
	case errors.Is(err, ErrUnsafe), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	var te *TruncatedError
	if errors.As(err, &te) {
		return te
	}
	return fmt.Errorf("%w: %w", ErrUnsafe, cleanArchiveErr(err))
}
