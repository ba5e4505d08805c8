//go:build !nofleet

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nodesnap/nodesnap/test/s3server"
)

// fleet analyze s3://bucket/prefix/ reads every bundle under the prefix
// from a real store, each checked against the .sha256 beside it as it
// streams: a bundle replaced in the store after its checksum was written
// is named with a checksum mismatch and its findings are not counted; a
// run's fleet.json names the nodes without a bundle.
func TestFleetAnalyzeStore(t *testing.T) {
	s := s3server.Start(t, "bundles")
	// The store's client with this machine's own CA bundle variable unset:
	// the test store speaks plain http on loopback.
	env := s.Env()
	var bundles []string
	for i := range 3 {
		out := t.TempDir()
		r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out}, fastRun...)...)
		if r.code != exitOK {
			t.Fatalf("collect %d: exit %d\n%s", i, r.code, r.stderr)
		}
		p := bundlePath(t, out)
		// Distinct names, as fleet gives each node's.
		named := filepath.Join(out, []string{"node-a", "node-b", "node-c"}[i]+".tar.gz")
		if err := os.Rename(p, named); err != nil {
			t.Fatal(err)
		}
		bundles = append(bundles, named)
		r = runNodesnap(t, 60*time.Second, env, "upload", "s3://bundles/case/run-1/", named)
		if r.code != exitOK {
			t.Fatalf("upload: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	ctx := context.Background()
	c := s.Client()
	// node-c's object replaced by node-a's bytes, its .sha256 kept.
	a, err := os.ReadFile(bundles[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bundles"), Key: aws.String("case/run-1/node-c.tar.gz"), Body: strings.NewReader(string(a))}); err != nil {
		t.Fatal(err)
	}
	fj := `{"nodes":[{"node":"node-a","status":"ok","object":"s3://bundles/case/run-1/node-a.tar.gz"},{"node":"node-d","status":"timeout","reason":"the per-node deadline passed"}]}`
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bundles"), Key: aws.String("case/run-1/fleet.json"), Body: strings.NewReader(fj)}); err != nil {
		t.Fatal(err)
	}
	r := runNodesnap(t, 2*time.Minute, env, "fleet", "analyze", "-o", "json", "s3://bundles/case/")
	if r.code != exitOK && r.code != exitPartial {
		t.Fatalf("fleet analyze: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var v struct {
		Nodes []struct {
			Node, Error, Bundle string
		} `json:"nodes"`
		Missing []struct {
			Node string `json:"node"`
		} `json:"missing"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	got := map[string]string{}
	for _, n := range v.Nodes {
		got[n.Node] = n.Error
	}
	if len(got) != 3 || got["node-a"] != "" || got["node-b"] != "" || !strings.Contains(got["node-c"], "checksum mismatch") {
		t.Errorf("nodes %+v: want node-a and node-b read, node-c a checksum mismatch", v.Nodes)
	}
	if len(v.Missing) != 1 || v.Missing[0].Node != "node-d" {
		t.Errorf("missing %+v, want node-d from fleet.json", v.Missing)
	}
	if strings.Contains(r.stdout+r.stderr, s.SecretKey) {
		t.Error("fleet analyze printed the secret key")
	}
}
