// Package s3server starts a real S3-compatible object store for tests:
// SeaweedFS (`weed mini`), built from its module source by build.sh
// (`make s3-server`) into the e2e cache, listening on 127.0.0.1 only, on
// free ports, with its data in a temporary directory and one S3 identity
// it is configured with. The server is killed (its own process group) and
// its directory removed when the test ends.
//
// A test that calls Start is of the binary tier (skipped under -short).
// When the binary is missing it skips here and fails in CI (test/skip's
// Missing): CI builds it before the tests.
package s3server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nodesnap/nodesnap/test/skip"
)

// Version is the SeaweedFS module version build.sh builds.
const Version = "v0.0.0-20261109003541-7506e5f91cd6"

// Region is the region the tests sign for (SeaweedFS accepts any).
const Region = "us-east-1"

// BinaryPath is where build.sh puts the server: $NODESNAP_E2E_CACHE
// (default /var/cache/nodesnap-e2e)/seaweedfs/<Version>/weed.
func BinaryPath() string {
	cache := os.Getenv("NODESNAP_E2E_CACHE")
	if cache == "" {
		cache = "/var/cache/nodesnap-e2e"
	}
	return filepath.Join(cache, "seaweedfs", Version, "weed")
}

// Server is one running store.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT, the S3 API.
	Endpoint string
	// Addr is 127.0.0.1:PORT.
	Addr                 string
	AccessKey, SecretKey string
	Dir                  string
	cmd                  *exec.Cmd
	sockets              []string
	done                 chan struct{}
}

// Env is the environment a client of the store runs with: the identity
// in the SDKs' own variables, the endpoint in AWS_ENDPOINT_URL_S3, and
// no shared config files or instance metadata to wander into.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + Region,
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint,
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// SetEnv sets Env in this process for the test's duration (t.Setenv).
func (s *Server) SetEnv(t *testing.T) {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
}

// Client is an S3 client of the store with the server's identity, for a
// test to look at what arrived (independent of the code under test).
func (s *Server) Client() *s3.Client {
	return ClientFor(s.Endpoint, s.AccessKey, s.SecretKey)
}

// ClientFor is an S3 client of endpoint (path-style) with a static key.
func ClientFor(endpoint, access, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
}

// freePorts reserves n distinct free TCP ports on loopback. Each one and
// the port 10000 above it (SeaweedFS's default gRPC offset, unused here
// since every gRPC port is given) are left for the server to bind.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Start starts a store with the given buckets created and returns when
// its S3 API answers requests signed with its identity.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	skip.Short(t, "starts a SeaweedFS object store (the binary tier)")
	bin := BinaryPath()
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		skip.Missing(t, "no SeaweedFS binary at %s (make s3-server builds it)", bin)
	}
	// A short directory: the server's unix sockets live in it.
	dir, err := os.MkdirTemp("", "s3srv-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: dir, AccessKey: "NODESNAPTEST" + randomHex(4), SecretKey: randomHex(20), done: make(chan struct{})}
	t.Cleanup(func() { s.stop(t) })
	cfg := map[string]any{"identities": []any{map[string]any{
		"name":        "nodesnap-test",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := freePorts(10)
	if err != nil {
		t.Fatalf("finding free ports: %v", err)
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(p[0])
	s.Endpoint = "http://" + s.Addr
	args := []string{"mini",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-s3.port=" + strconv.Itoa(p[0]), "-s3.port.grpc=" + strconv.Itoa(p[1]),
		"-master.port=" + strconv.Itoa(p[2]), "-master.port.grpc=" + strconv.Itoa(p[3]),
		"-filer.port=" + strconv.Itoa(p[4]), "-filer.port.grpc=" + strconv.Itoa(p[5]),
		"-volume.port=" + strconv.Itoa(p[6]), "-volume.port.grpc=" + strconv.Itoa(p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-webdav=false", "-admin.ui=false", "-admin.port.legacy=0",
		"-admin.port=" + strconv.Itoa(p[8]), "-admin.port.grpc=" + strconv.Itoa(p[9]),
		"-master.telemetry=false",
		// As S3 does: a PUT to a bucket that does not exist is refused.
		"-s3.autoCreateBucket=false",
		"-s3.config=" + filepath.Join(dir, "s3.json"),
		"-filer.localSocket=" + filepath.Join(dir, "f.sock"),
		"-s3.localSocket=" + filepath.Join(dir, "s.sock"),
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = []string{"HOME=" + dir, "TMPDIR=" + dir, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	s.cmd = cmd
	// The server makes a unix socket in /tmp for each gRPC port, whatever
	// TMPDIR says; a killed server leaves them.
	for _, kv := range [][2]string{{"s3", "1"}, {"master", "3"}, {"filer", "5"}, {"volume", "7"}, {"admin", "9"}} {
		i, _ := strconv.Atoi(kv[1])
		s.sockets = append(s.sockets, fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%d.sock", kv[0], p[i]))
	}
	go func() { _ = cmd.Wait(); close(s.done) }()

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := s.ready(ctx, buckets); err != nil {
		out, _ := os.ReadFile(filepath.Join(dir, "weed.log"))
		if len(out) > 8000 {
			out = out[len(out)-8000:]
		}
		t.Fatalf("SeaweedFS did not become ready: %v\n%s", err, out)
	}
	return s
}

// ready waits until every bucket exists: the S3 API, the filer behind it
// and a volume to write to all answer.
func (s *Server) ready(ctx context.Context, buckets []string) error {
	c := s.Client()
	var last error
	for {
		select {
		case <-s.done:
			return errors.New("the server exited")
		default:
		}
		last = nil
		for _, b := range buckets {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.CreateBucket(rctx, &s3.CreateBucketInput{Bucket: aws.String(b)})
			if err == nil {
				_, err = c.PutObject(rctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(".ready"), Body: strings.NewReader("ok")})
			}
			if err == nil {
				_, err = c.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String(".ready")})
			}
			cancel()
			if err != nil && !alreadyOwned(err) {
				if code(err) == "InvalidBucketName" {
					return err
				}
				last = err
				break
			}
		}
		if last == nil && len(buckets) > 0 {
			return nil
		}
		if len(buckets) == 0 {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, last = c.ListBuckets(rctx, &s3.ListBucketsInput{})
			cancel()
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last: %v", ctx.Err(), last)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func alreadyOwned(err error) bool {
	return code(err) == "BucketAlreadyOwnedByYou" || code(err) == "BucketAlreadyExists"
}

// code is the S3 error code in err, or "".
func code(err error) string {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// stop kills the server's process group (its own pid's) and removes its
// directory.
func (s *Server) stop(t testing.TB) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Errorf("SeaweedFS (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	}
	for _, p := range s.sockets {
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(p)
		}
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		t.Errorf("removing the store's directory: %v", err)
	}
}
