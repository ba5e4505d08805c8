package s3server

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestStartServesOnLoopbackAndCleansUp: the store takes an object and
// gives it back with its identity, refuses a wrong key, listens on
// loopback, and leaves neither process nor directory behind.
func TestStartServesOnLoopbackAndCleansUp(t *testing.T) {
	var s *Server
	t.Run("serve", func(t *testing.T) {
		s = Start(t, "first-bucket")
		if host, _, _ := net.SplitHostPort(s.Addr); host != "127.0.0.1" {
			t.Fatalf("listening on %s, want loopback", s.Addr)
		}
		ctx := context.Background()
		c := s.Client()
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("first-bucket"), Key: aws.String("k"), Body: strings.NewReader("hello")}); err != nil {
			t.Fatal(err)
		}
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("first-bucket"), Key: aws.String("k")})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if string(b) != "hello" {
			t.Fatalf("got %q", b)
		}
		bad := ClientFor(s.Endpoint, s.AccessKey, "not-the-secret")
		if _, err := bad.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("first-bucket"), Key: aws.String("x"), Body: strings.NewReader("x")}); err == nil {
			t.Fatal("a wrong secret was accepted: the store is not checking signatures")
		}
	})
	if s == nil {
		return
	}
	select {
	case <-s.done:
	default:
		t.Errorf("the server (pid %d) still runs after its test ended", s.cmd.Process.Pid)
	}
	if _, err := net.Dial("tcp", s.Addr); err == nil {
		t.Errorf("%s still accepts connections", s.Addr)
	}
	for _, p := range append(s.sockets, s.Dir) {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left behind", p)
		}
	}
}
