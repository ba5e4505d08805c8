package objstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/nodesnap/nodesnap/test/s3server"
)

const bucket = "bundles"

// standIn writes size random (incompressible) bytes as a bundle's file
// name and returns its path and sha256.
func standIn(t testing.TB, size int64) (string, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "nodesnap-node1-20261207T101500Z.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p, hex.EncodeToString(h.Sum(nil))
}

// storeClient is a Client of the store through the SDK's own environment
// (the server's identity in AWS_ACCESS_KEY_ID..., its endpoint in
// AWS_ENDPOINT_URL_S3), with endpoint, when given, put in front (a proxy).
func storeClient(t *testing.T, s *s3server.Server, endpoint string) *Client {
	t.Helper()
	s.SetEnv(t)
	c, err := NewClient(context.Background(), ClientOptions{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// objectSum downloads the object with the test's own client and hashes it.
func objectSum(t *testing.T, s *s3server.Server, key string) (string, int64) {
	t.Helper()
	out, err := s.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("reading %s back: %v", key, err)
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

func sumObject(t *testing.T, s *s3server.Server, key string) string {
	t.Helper()
	out, err := s.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("reading %s back: %v", key, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return string(b)
}

// TestPutSmallAndMultipart: a small bundle in one PUT and a 40 MiB one in
// 5 MiB parts arrive byte for byte, each with its .sha256 object, and the
// store's own checksum is the one computed here (the whole object's, and
// the composite of the parts').
func TestPutSmallAndMultipart(t *testing.T) {
	s := s3server.Start(t, bucket)
	c := storeClient(t, s, "")
	loc, _ := ParseURL("s3://" + bucket + "/case-1/")
	for _, tc := range []struct {
		size  int64
		parts int
	}{{48 << 10, 0}, {40 << 20, 8}} {
		path, sum := standIn(t, tc.size)
		name := fmt.Sprintf("nodesnap-node1-20261207T10150%dZ.tar.gz", tc.parts)
		res, err := c.Put(context.Background(), loc, name, path, PutOptions{PartSize: 5 << 20, Threshold: 5 << 20})
		if err != nil {
			t.Fatalf("%d bytes: %v", tc.size, err)
		}
		if res.Parts != tc.parts || res.SHA256 != sum || res.Key != "case-1/"+name || res.StoreChecksum == "" {
			t.Errorf("%d bytes: result %+v, want %d parts, sha256 %s, a store checksum", tc.size, res, tc.parts, sum)
		}
		if tc.parts > 0 && !strings.HasSuffix(res.StoreChecksum, "-8") {
			t.Errorf("the store's checksum %q is not a composite of 8 parts", res.StoreChecksum)
		}
		if got, n := objectSum(t, s, res.Key); got != sum || n != tc.size {
			t.Errorf("%d bytes: the object is %d bytes with sha256 %s, want %s", tc.size, n, got, sum)
		}
		if got, want := sumObject(t, s, res.Key+".sha256"), sum+"  "+name+"\n"; got != want {
			t.Errorf("the .sha256 object holds %q, want %q", got, want)
		}
		t.Logf("%d MiB: %d parts, %.2fs", tc.size>>20, res.Parts, res.DurationSeconds)
	}
	objs, err := c.List(context.Background(), loc)
	if err != nil || len(objs) != 4 {
		t.Fatalf("List: %v, %d objects, want 4 (two bundles, two .sha256)", err, len(objs))
	}
	r, err := c.Get(context.Background(), loc, objs[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, r)
	r.Close()
	if n != objs[0].Size {
		t.Errorf("Get read %d bytes of %s, List said %d", n, objs[0].Name, objs[0].Size)
	}
}

// TestCorruptPartRefusedAndSentAgain: one part's body gets one bit
// flipped on the wire; the store refuses it (BadDigest: it checks the
// x-amz-checksum-sha256 of every part), and the next round sends that part
// again, so the object is right.
func TestCorruptPartRefusedAndSentAgain(t *testing.T) {
	s := s3server.Start(t, bucket)
	px := newFaultProxy(t, s.Addr, once(flipByte, isPart(3)))
	c := storeClient(t, s, px.Endpoint())
	path, sum := standIn(t, 20<<20)
	loc := Location{Bucket: bucket, Prefix: "p/"}
	var log bytes.Buffer
	res, err := c.Put(context.Background(), loc, filepath.Base(path), path, PutOptions{PartSize: 5 << 20, Threshold: 5 << 20, Backoff: 10 * time.Millisecond, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(px.answers(), "<Code>BadDigest</Code>") {
		t.Errorf("the store did not answer BadDigest to the damaged part; answers:\n%.2000s", px.answers())
	}
	if res.Rounds != 2 || px.sent(3) != 2*(5<<20) || px.sent(2) != 5<<20 {
		t.Errorf("rounds %d, part 3 sent %d bytes, part 2 %d: want 2 rounds, part 3 twice, part 2 once", res.Rounds, px.sent(3), px.sent(2))
	}
	if got, _ := objectSum(t, s, res.Key); got != sum {
		t.Errorf("the object's sha256 is %s, want %s", got, sum)
	}
}

// TestDroppedConnectionResumes: the connection is cut in the middle of a
// part, and another part's answer is lost after the store took it; the
// next round asks the store (ListParts) and sends only what it lacks: the
// part that was cut, not the one whose answer was lost, and far less than
// the whole bundle again.
func TestDroppedConnectionResumes(t *testing.T) {
	s := s3server.Start(t, bucket)
	cut, lost := once(cutMiddle, isPart(4)), once(dropReply, isPart(6))
	px := newFaultProxy(t, s.Addr, func(m, target string) action {
		if a := cut(m, target); a != pass {
			return a
		}
		return lost(m, target)
	})
	c := storeClient(t, s, px.Endpoint())
	const size, part = 40 << 20, 5 << 20
	path, sum := standIn(t, size)
	loc := Location{Bucket: bucket, Prefix: "p/"}
	var log bytes.Buffer
	res, err := c.Put(context.Background(), loc, filepath.Base(path), path, PutOptions{PartSize: part, Threshold: part, Backoff: 10 * time.Millisecond, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	resent := px.totalSent() - size - int64(len(sum)+len(filepath.Base(path))+3)
	t.Logf("rounds %d, parts reused %d, bytes sent %d of %d, resent %d", res.Rounds, res.PartsReused, px.totalSent(), size, resent)
	if res.Rounds < 2 || res.PartsReused < 7 {
		t.Errorf("rounds %d, parts reused %d: want a second round that reused the 7 parts the store held", res.Rounds, res.PartsReused)
	}
	if px.sent(6) != part {
		t.Errorf("part 6, whose answer was lost after the store took it, was sent %d bytes, want once (%d)", px.sent(6), part)
	}
	if px.sent(4) != part+part/2 {
		t.Errorf("part 4 was sent %d bytes, want half then whole (%d)", px.sent(4), part+part/2)
	}
	if resent <= 0 || resent >= size {
		t.Errorf("%d bytes sent again; want some, and less than the bundle (%d)", resent, size)
	}
	if got, _ := objectSum(t, s, res.Key); got != sum {
		t.Errorf("the object's sha256 is %s, want %s", got, sum)
	}
}

// TestResumesAnInterruptedRunsUpload: a run killed after two parts left
// its multipart upload in the store; the next Put of the same bundle to
// the same key continues it and sends only the rest.
func TestResumesAnInterruptedRunsUpload(t *testing.T) {
	s := s3server.Start(t, bucket)
	px := newFaultProxy(t, s.Addr, nil)
	c := storeClient(t, s, px.Endpoint())
	const size, part = 20 << 20, 5 << 20
	path, sum := standIn(t, size)
	loc := Location{Bucket: bucket, Prefix: "p/"}
	key := loc.Key(filepath.Base(path))
	// The killed run: two parts of four.
	ctx := context.Background()
	mu, err := c.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeComposite})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	for _, p := range plan(size, part)[:2] {
		if err := c.sendPart(ctx, loc, key, aws.ToString(mu.UploadId), f, p, &PutOptions{StallTimeout: time.Minute}, new(atomic.Int64)); err != nil {
			t.Fatal(err)
		}
	}
	before := px.totalSent()
	res, err := c.Put(ctx, loc, filepath.Base(path), path, PutOptions{PartSize: part, Threshold: part})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Resumed || res.PartsReused != 2 || px.totalSent()-before >= size {
		t.Errorf("resumed %v, parts reused %d, %d bytes sent: want the upload continued, 2 parts reused, less than %d sent", res.Resumed, res.PartsReused, px.totalSent()-before, size)
	}
	if got, _ := objectSum(t, s, res.Key); got != sum {
		t.Errorf("the object's sha256 is %s, want %s", got, sum)
	}
}

// TestFailedUploadIsAborted: when every round fails (the bucket's
// credentials are refused mid-way is hard to stage; here every part is
// damaged), the multipart upload is aborted: the store lists none left.
func TestFailedUploadIsAborted(t *testing.T) {
	s := s3server.Start(t, bucket)
	px := newFaultProxy(t, s.Addr, func(m, target string) action {
		if isPart(2)(m, target) {
			return flipByte
		}
		return pass
	})
	c := storeClient(t, s, px.Endpoint())
	path, _ := standIn(t, 10<<20)
	loc := Location{Bucket: bucket, Prefix: "p/"}
	_, err := c.Put(context.Background(), loc, filepath.Base(path), path, PutOptions{PartSize: 5 << 20, Threshold: 5 << 20, Retries: 1, Backoff: 10 * time.Millisecond})
	var se *StoreError
	if err == nil || !errors.As(err, &se) || se.Code != "BadDigest" || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("err = %v, want a BadDigest StoreError saying the upload was aborted", err)
	}
	ups, lerr := s.Client().ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if lerr != nil {
		t.Fatal(lerr)
	}
	if len(ups.Uploads) != 0 {
		t.Errorf("%d multipart uploads left in the store after the failure", len(ups.Uploads))
	}
}

// TestPresignPut: a pre-signed PUT URL lets a plain HTTP client write
// exactly its key.
func TestPresignPut(t *testing.T) {
	s := s3server.Start(t, bucket)
	c := storeClient(t, s, "")
	loc := Location{Bucket: bucket, Prefix: "n/"}
	u, err := c.PresignPut(context.Background(), loc, "x.tar.gz", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader("bundle bytes"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT to the pre-signed URL: %s", resp.Status)
	}
	if got := sumObject(t, s, "n/x.tar.gz"); got != "bundle bytes" {
		t.Errorf("the object holds %q", got)
	}
}

// TestPostPolicyManyKeysOnePrefix: one policy lets two bundles land under
// its prefix, each with its .sha256, and the store refuses a key outside
// the prefix.
func TestPostPolicyManyKeysOnePrefix(t *testing.T) {
	s := s3server.Start(t, bucket)
	c := storeClient(t, s, "")
	loc := Location{Bucket: bucket, Prefix: "timer/node1/"}
	pol, err := c.PresignPost(context.Background(), loc, time.Hour, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	// Through the file, as a timer reads it.
	pf := filepath.Join(t.TempDir(), "policy.json")
	if err := WritePolicy(pf, pol); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(pf); fi.Mode().Perm() != 0o600 {
		t.Errorf("the policy file is %v, want 0600", fi.Mode().Perm())
	}
	pol, err = LoadPolicy(pf)
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, name := range []string{"nodesnap-node1-20261207T101500Z.tar.gz", "nodesnap-node1-20261207T111500Z.tar.gz"} {
		path, sum := standIn(t, 64<<10)
		res, err := PostFile(context.Background(), pol, name, path, PostOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Key != "timer/node1/"+name || res.SumKey != res.Key+".sha256" {
			t.Errorf("result %+v", res)
		}
		if got, _ := objectSum(t, s, res.Key); got != sum {
			t.Errorf("%s: sha256 %s, want %s", name, got, sum)
		}
		sums = append(sums, sum)
	}
	objs, err := c.List(context.Background(), loc)
	if err != nil || len(objs) != 4 {
		t.Fatalf("List: %v, %d objects, want 4", err, len(objs))
	}
	outside := *pol
	outside.KeyPrefix = "elsewhere/"
	path, _ := standIn(t, 1024)
	_, err = PostFile(context.Background(), &outside, "x.tar.gz", path, PostOptions{})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a key outside the policy's prefix: err = %v, want the store's 403", err)
	}
	if _, err := s.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("elsewhere/x.tar.gz")}); err == nil {
		t.Error("the object outside the prefix exists")
	}
}

// TestPutSSE: with SSE AES256, the store says each object (single PUT,
// parts, and the .sha256) is encrypted at rest, and gives the bytes back.
func TestPutSSE(t *testing.T) {
	s := s3server.Start(t, bucket)
	c := storeClient(t, s, "")
	loc := Location{Bucket: bucket, Prefix: "sse/"}
	for _, size := range []int64{48 << 10, 12 << 20} {
		path, sum := standIn(t, size)
		name := fmt.Sprintf("b-%d.tar.gz", size)
		res, err := c.Put(context.Background(), loc, name, path, PutOptions{PartSize: 5 << 20, Threshold: 5 << 20, SSE: SSEAES256})
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		for _, k := range []string{res.Key, res.SumKey} {
			h, err := s.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
			if err != nil {
				t.Fatal(err)
			}
			if h.ServerSideEncryption != types.ServerSideEncryptionAes256 {
				t.Errorf("%s: server-side encryption %q, want AES256", k, h.ServerSideEncryption)
			}
		}
		if got, _ := objectSum(t, s, res.Key); got != sum {
			t.Errorf("%d bytes: sha256 %s, want %s", size, got, sum)
		}
	}
	if _, err := c.Put(context.Background(), loc, "x", "/dev/null", PutOptions{SSE: "rot13"}); err == nil {
		t.Error("an unknown SSE was accepted")
	}
}
