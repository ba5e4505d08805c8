package objstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// putMultipart uploads f in parts: it continues an upload an interrupted
// run left for the same key (its parts checked against this file's), or
// starts one; each round sends the parts the store does not hold with the
// right checksum; the store checks every part, and the composite of the
// parts' checksums is compared with the one it computes at completion.
func (c *Client) putMultipart(ctx context.Context, loc Location, key string, f *os.File, size int64, o *PutOptions, res *Result) error {
	parts := plan(size, o.PartSize)
	res.Parts = len(parts)
	uploadID := c.findUpload(ctx, loc, key)
	if uploadID != "" {
		res.Resumed = true
		o.logf("continuing the multipart upload an earlier run left for %s", res.URL)
	} else {
		in := &s3.CreateMultipartUploadInput{Bucket: aws.String(loc.Bucket), Key: aws.String(key), ContentType: aws.String(contentType(key)),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeComposite}
		if o.SSE != "" {
			in.ServerSideEncryption = types.ServerSideEncryption(o.SSE)
		}
		if o.KMSKeyID != "" {
			in.SSEKMSKeyId = aws.String(o.KMSKeyID)
		}
		out, err := c.s3.CreateMultipartUpload(ctx, in)
		if err != nil {
			return fmt.Errorf("starting a multipart upload to %s: %w", res.URL, explain(err, loc))
		}
		uploadID = aws.ToString(out.UploadId)
	}
	ask := res.Resumed // a fresh upload holds no part yet
	err := c.rounds(ctx, o, res, func(ctx context.Context) error {
		if ask {
			stored, err := c.listParts(ctx, loc, key, uploadID)
			if err != nil {
				return err
			}
			for _, p := range parts {
				p.etag = ""
				if sp, ok := stored[p.num]; ok && sp.Size != nil && *sp.Size == p.len {
					if err := hashPart(f, p); err != nil {
						return err
					}
					if same, err := storedIsPart(f, p, sp); err != nil {
						return err
					} else if same {
						p.etag = aws.ToString(sp.ETag)
						res.PartsReused++
					}
				}
			}
		}
		ask = true
		return c.sendParts(ctx, loc, key, uploadID, f, parts, o, res)
	})
	if err == nil {
		err = c.complete(ctx, loc, key, uploadID, parts, res)
	}
	if err != nil {
		// Parts nobody will complete cost storage until a lifecycle
		// rule removes them: abort, even after an interrupt.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_, aerr := c.s3.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: aws.String(loc.Bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
		cancel()
		if aerr != nil && apiCode(aerr) != "NoSuchUpload" {
			return fmt.Errorf("uploading to %s: %w; aborting the incomplete multipart upload failed too (%w): a lifecycle rule (AbortIncompleteMultipartUpload) removes its parts", res.URL, explain(err, loc), explain(aerr, loc))
		}
		return fmt.Errorf("uploading to %s: %w; the incomplete multipart upload was aborted", res.URL, explain(err, loc))
	}
	return nil
}

// findUpload is the id of the newest multipart upload in progress for
// exactly key, or "" (also when the credentials may not list uploads).
func (c *Client) findUpload(ctx context.Context, loc Location, key string) string {
	out, err := c.s3.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(loc.Bucket), Prefix: aws.String(key), MaxUploads: aws.Int32(100)})
	if err != nil {
		return ""
	}
	var id string
	var newest time.Time
	for _, u := range out.Uploads {
		if aws.ToString(u.Key) != key || (u.ChecksumAlgorithm != "" && u.ChecksumAlgorithm != types.ChecksumAlgorithmSha256) {
			continue
		}
		if t := aws.ToTime(u.Initiated); id == "" || t.After(newest) {
			id, newest = aws.ToString(u.UploadId), t
		}
	}
	return id
}

// storedIsPart tells whether the part the store holds is p: by its
// sha256 when the store lists one, else by its ETag, the MD5 of a part's
// bytes on S3 and most compatible stores (not under SSE-KMS, where it is
// not sent again only if the sha256 says so).
func storedIsPart(f *os.File, p *part, sp types.Part) (bool, error) {
	if c := aws.ToString(sp.ChecksumSHA256); c != "" {
		return c == p.sum64, nil
	}
	etag := strings.Trim(aws.ToString(sp.ETag), `"`)
	if len(etag) != 32 {
		return false, nil
	}
	h := md5.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, p.off, p.len)); err != nil {
		return false, fmt.Errorf("reading the bundle: %w", err)
	}
	return strings.EqualFold(etag, hex.EncodeToString(h.Sum(nil))), nil
}

// listParts is every part the store holds of the upload, by number.
func (c *Client) listParts(ctx context.Context, loc Location, key, uploadID string) (map[int32]types.Part, error) {
	stored := map[int32]types.Part{}
	p := s3.NewListPartsPaginator(c.s3, &s3.ListPartsInput{Bucket: aws.String(loc.Bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("asking the store which parts it holds: %w", err)
		}
		for _, sp := range page.Parts {
			stored[aws.ToInt32(sp.PartNumber)] = sp
		}
		if len(stored) > maxParts {
			break
		}
	}
	return stored, nil
}

// sendParts sends every part without an ETag, Concurrency at a time, and
// returns the first error (the other parts still finish).
func (c *Client) sendParts(ctx context.Context, loc Location, key, uploadID string, f *os.File, parts []*part, o *PutOptions, res *Result) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sent  atomic.Int64
	)
	sem := make(chan struct{}, o.Concurrency)
	for _, p := range parts {
		if p.etag != "" {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			res.BytesSent += sent.Load()
			return context.Cause(ctx)
		}
		mu.Lock()
		stop := first != nil && !retryable(first)
		mu.Unlock()
		if stop {
			<-sem
			break
		}
		wg.Add(1)
		go func(p *part) {
			defer wg.Done()
			defer func() { <-sem }()
			err := c.sendPart(ctx, loc, key, uploadID, f, p, o, &sent)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("part %d: %w", p.num, err)
				}
				mu.Unlock()
			}
		}(p)
	}
	wg.Wait()
	res.BytesSent += sent.Load()
	return first
}

func (c *Client) sendPart(ctx context.Context, loc Location, key, uploadID string, f *os.File, p *part, o *PutOptions, sent *atomic.Int64) error {
	if err := hashPart(f, p); err != nil {
		return err
	}
	body := &progressReader{r: io.NewSectionReader(f, p.off, p.len)}
	sctx, stop := stallWatch(ctx, body, o.StallTimeout, o.PartTimeout)
	defer stop()
	in := &s3.UploadPartInput{Bucket: aws.String(loc.Bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		PartNumber: aws.Int32(p.num), Body: body, ContentLength: aws.Int64(p.len),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: aws.String(p.sum64)}
	out, err := c.s3.UploadPart(sctx, in, unsignedPayload, noRetry)
	sent.Add(body.n.Load())
	if err != nil {
		if errors.Is(context.Cause(sctx), errStalled) {
			return fmt.Errorf("nothing sent or received for %s: %w", o.StallTimeout, errStalled)
		}
		return err
	}
	if got := aws.ToString(out.ChecksumSHA256); got != "" && got != p.sum64 {
		return fmt.Errorf("the store computed sha256 %s for part %d, not %s", got, p.num, p.sum64)
	}
	p.etag = aws.ToString(out.ETag)
	return nil
}

// complete asks the store to join the parts, each named with its
// checksum (which the store checks again), and compares the composite
// checksum it computes with the one computed here.
func (c *Client) complete(ctx context.Context, loc Location, key, uploadID string, parts []*part, res *Result) error {
	done := make([]types.CompletedPart, 0, len(parts))
	for _, p := range parts {
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(p.num), ETag: aws.String(p.etag), ChecksumSHA256: aws.String(p.sum64)})
	}
	sort.Slice(done, func(i, j int) bool { return *done[i].PartNumber < *done[j].PartNumber })
	out, err := c.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(loc.Bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		return fmt.Errorf("completing the multipart upload: %w", err)
	}
	res.StoreChecksum = aws.ToString(out.ChecksumSHA256)
	if want := compositeSum(parts); res.StoreChecksum != "" && res.StoreChecksum != want {
		return fmt.Errorf("the store's checksum of the joined parts is %s, not %s: a part is not what was sent", res.StoreChecksum, want)
	}
	return nil
}

var errStalled = errors.New("the transfer stalled")

// progressReader counts what was read from it (sent) and when.
type progressReader struct {
	r    io.Reader
	n    atomic.Int64
	last atomic.Int64 // unix nanoseconds of the last read
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.n.Add(int64(n))
		p.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// Seek lets the SDK rewind the body (it is a section of the file).
func (p *progressReader) Seek(off int64, whence int) (int64, error) {
	s, ok := p.r.(io.Seeker)
	if !ok {
		return 0, errors.New("not seekable")
	}
	return s.Seek(off, whence)
}

// stallWatch is ctx, cancelled when body moves no byte for timeout (a
// peer that stopped reading: the socket's buffer is full), or after limit
// when it is not 0.
func stallWatch(ctx context.Context, body *progressReader, timeout, limit time.Duration) (context.Context, func()) {
	var cancelLimit context.CancelFunc = func() {}
	if limit > 0 {
		ctx, cancelLimit = context.WithTimeout(ctx, limit)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	body.last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(min(timeout/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if time.Since(time.Unix(0, body.last.Load())) > timeout && body.n.Load() < 1<<62 {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	return sctx, func() { close(done); cancel(nil); cancelLimit() }
}
