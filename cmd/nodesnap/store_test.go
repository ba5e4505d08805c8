package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nodesnap/nodesnap/test/s3server"
)

// storeObjects is every key under prefix in the bucket, with its content's
// sha256 (or, for a .sha256 object, its text), read with the test's own
// client.
func storeObjects(t *testing.T, s *s3server.Server, bucket, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	c := s.Client()
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range out.Contents {
		k := aws.ToString(o.Key)
		r, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if strings.HasSuffix(k, ".sha256") {
			got[k] = string(b)
		} else {
			sum := sha256.Sum256(b)
			got[k] = hex.EncodeToString(sum[:])
		}
	}
	return got
}

// checkBundlesInStore: every bundle in dir is in the store under prefix by
// its own name, byte for byte, with its .sha256 beside it holding what
// collect wrote beside it on disk.
func checkBundlesInStore(t *testing.T, s *s3server.Server, dir, prefix string, want int) {
	t.Helper()
	objs := storeObjects(t, s, "bundles", prefix)
	var bundles []string
	for _, e := range readDir(t, dir) {
		if strings.HasPrefix(e, "nodesnap-") && !strings.HasSuffix(e, ".sha256") {
			bundles = append(bundles, e)
		}
	}
	if len(bundles) != want || len(objs) != 2*want {
		keys := make([]string, 0, len(objs))
		for k := range objs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("%d bundles on disk and %d objects in the store (%v); want %d and %d", len(bundles), len(objs), keys, want, 2*want)
	}
	for _, b := range bundles {
		sum, _ := fileSHA256(t, filepath.Join(dir, b))
		if objs[prefix+b] != sum {
			t.Errorf("%s%s: sha256 %q in the store, %s on disk", prefix, b, objs[prefix+b], sum)
		}
		side, err := os.ReadFile(filepath.Join(dir, b+".sha256"))
		if err != nil {
			t.Fatal(err)
		}
		if objs[prefix+b+".sha256"] != string(side) {
			t.Errorf("%s%s.sha256 holds %q, the file beside the bundle %q", prefix, b, objs[prefix+b+".sha256"], side)
		}
	}
}

// Two collections with one configured destination (a timer's) leave two
// objects, each named by its host and time, each with its .sha256; the
// credentials and the endpoint come from the SDK's own variables.
func TestCollectTwiceToS3LeavesTwoObjects(t *testing.T) {
	s := s3server.Start(t, "bundles")
	out := t.TempDir()
	env := append([]string{fastEnv, UploadURLEnv + "=s3://bundles/timer/"}, s.Env()...)
	for i := 0; i < 2; i++ {
		r := runNodesnap(t, 90*time.Second, env, append([]string{"collect", "--output-dir", out}, fastRun...)...)
		if r.code != exitOK {
			t.Fatalf("run %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "Uploaded to s3://bundles/timer/nodesnap-") || !strings.Contains(r.stdout, "the store checked the sha256") {
			t.Errorf("run %d does not say where the bundle went:\n%s", i+1, r.stdout)
		}
		if strings.Contains(r.stdout+r.stderr, s.SecretKey) {
			t.Errorf("run %d printed the secret key", i+1)
		}
	}
	checkBundlesInStore(t, s, out, "timer/", 2)
}

// nodesnap upload s3://bucket/prefix/ BUNDLE (either order), JSON output
// naming the object and its checksum.
func TestUploadCommandToS3(t *testing.T) {
	s := s3server.Start(t, "bundles")
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("collect: exit %d\n%s", r.code, r.stderr)
	}
	p := bundlePath(t, out)
	r = runNodesnap(t, 60*time.Second, s.Env(), "upload", "-o", "json", "s3://bundles/case-7/", p)
	if r.code != exitOK {
		t.Fatalf("upload: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var got struct {
		Upload struct {
			OK  bool   `json:"ok"`
			URL string `json:"url"`
		} `json:"upload"`
		Object struct {
			Key           string `json:"key"`
			SHA256        string `json:"sha256"`
			StoreChecksum string `json:"store_checksum_sha256"`
			SumKey        string `json:"sum_key"`
		} `json:"object"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	sum, _ := fileSHA256(t, p)
	name := filepath.Base(p)
	if !got.Upload.OK || got.Upload.URL != "s3://bundles/case-7/"+name || got.Object.Key != "case-7/"+name || got.Object.SHA256 != sum || got.Object.StoreChecksum == "" || got.Object.SumKey != "case-7/"+name+".sha256" {
		t.Errorf("JSON: %+v", got)
	}
	checkBundlesInStore(t, s, out, "case-7/", 1)
	// A bucket that does not exist, a wrong secret: exit 5, in words,
	// no secret, no query.
	r = runNodesnap(t, 60*time.Second, s.Env(), "upload", p, "s3://no-such-bucket/x/")
	if r.code != exitUploadFailed || !strings.Contains(r.stderr, "the bucket no-such-bucket does not exist") || strings.Contains(r.stderr+r.stdout, s.SecretKey) {
		t.Errorf("to a missing bucket: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("to a missing bucket:\n%s", r.stderr)
	r = runNodesnap(t, 60*time.Second, append(s.Env(), "AWS_SECRET_ACCESS_KEY=wrong-secret-0123456789"), "upload", p, "s3://bundles/x/")
	if r.code != exitUploadFailed || !strings.Contains(r.stderr, "SignatureDoesNotMatch") || strings.Contains(r.stderr+r.stdout, "wrong-secret") || strings.Contains(r.stderr, "?") {
		t.Errorf("with a wrong secret: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("with a wrong secret:\n%s", r.stderr)
	// The http(s)-only flags are refused with s3://, before anything is sent.
	hf := filepath.Join(t.TempDir(), "headers")
	if err := os.WriteFile(hf, []byte("Authorization: Bearer x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runNodesnap(t, 60*time.Second, s.Env(), "upload", "--headers-file", hf, p, "s3://bundles/x/")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--headers-file") {
		t.Errorf("--headers-file with s3://: exit %d\n%s", r.code, r.stderr)
	}
}

// A timer with a POST policy: the policy is minted once (0600), and two
// collections that hold no AWS credential at all post two bundles under
// its prefix.
func TestCollectWithPostPolicy(t *testing.T) {
	s := s3server.Start(t, "bundles")
	pf := filepath.Join(t.TempDir(), "policy.json")
	r := runNodesnap(t, 60*time.Second, s.Env(), "upload-policy", "s3://bundles/nodes/node1/", "--expires", "720h", "--output-file", pf)
	if r.code != exitOK {
		t.Fatalf("upload-policy: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(pf)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("policy file: %v, %v; want mode 0600", fi, err)
	}
	b, _ := os.ReadFile(pf)
	if strings.Contains(string(b), s.SecretKey) {
		t.Fatal("the policy file holds the secret key")
	}
	// No credential, no endpoint: only the policy.
	env := []string{fastEnv, UploadPolicyEnv + "=" + pf, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_ENDPOINT_URL_S3=", "AWS_ENDPOINT_URL=",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"}
	out := t.TempDir()
	for i := 0; i < 2; i++ {
		r := runNodesnap(t, 90*time.Second, env, append([]string{"collect", "--output-dir", out}, fastRun...)...)
		if r.code != exitOK {
			t.Fatalf("run %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, r.code, r.stdout, r.stderr)
		}
	}
	checkBundlesInStore(t, s, out, "nodes/node1/", 2)
	// An existing file is not overwritten.
	r = runNodesnap(t, 60*time.Second, s.Env(), "upload-policy", "s3://bundles/nodes/node1/", "--output-file", pf)
	if r.code != exitUsage {
		t.Errorf("upload-policy over an existing file: exit %d, want %d\n%s", r.code, exitUsage, r.stderr)
	}
}
