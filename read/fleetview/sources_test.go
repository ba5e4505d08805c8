package fleetview_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/fleetview"
)

// Bundles read from elsewhere (an object store) are analysed as they
// stream, and hashed on the way: a bundle whose bytes are not those its
// checksum names, or that has no checksum, is an error of its node and
// none of its findings is reported; the others are grouped as a
// directory's are.
func TestLoadSources(t *testing.T) {
	dir := t.TempDir()
	blobs := map[string][]byte{}
	sums := map[string]string{}
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d"} {
		scenario := "healthy"
		if n == "node-d" {
			scenario = "incident002-rbd-held-in-namespace"
		}
		p := filepath.Join(dir, n+".tar.gz")
		makeBundle(t, scenario, n+".example", "6.1.0", p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		blobs[n], sums[n] = b, hex.EncodeToString(h[:])
	}
	// node-c's bytes were changed after its checksum was taken: the same
	// bundle as node-d's, which has findings node-c must not get.
	blobs["node-c"] = blobs["node-d"]
	var srcs []fleetview.Source
	opened := 0
	for _, n := range []string{"node-a", "node-b", "node-c", "node-d", "node-e"} {
		sum := sums[n]
		srcs = append(srcs, fleetview.Source{Node: n, Bundle: "s3://b/case/run/" + n + ".tar.gz", SHA256: sum,
			Open: func(context.Context) (io.ReadCloser, error) {
				opened++
				if n == "node-e" {
					return nil, errors.New("not found")
				}
				return io.NopCloser(bytes.NewReader(blobs[n])), nil
			}})
	}
	srcs[4].SHA256 = "" // no .sha256 beside it
	v, err := fleetview.LoadSources(context.Background(), "s3://b/case/", srcs, []fleetview.Node{{Name: "node-f", Error: "timeout: …"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]fleetview.Node{}
	for _, n := range v.Nodes {
		byName[n.Name] = n
	}
	for _, n := range []string{"node-a", "node-b", "node-d"} {
		if byName[n].Report == nil || byName[n].Error != "" {
			t.Errorf("%s: not read: %s", n, byName[n].Error)
		}
	}
	if c := byName["node-c"]; c.Report != nil || !strings.Contains(c.Error, fleetview.ErrChecksum.Error()) {
		t.Errorf("node-c (changed bytes): report %v, error %q; want a checksum mismatch and no report", c.Report != nil, c.Error)
	}
	if e := byName["node-e"]; e.Report != nil || !strings.Contains(e.Error, "no valid checksum") {
		t.Errorf("node-e (no checksum): %q", e.Error)
	}
	if opened != 4 {
		t.Errorf("%d bundles opened; a bundle without a checksum is not even opened (want 4)", opened)
	}
	for _, g := range v.Findings {
		if contains(g.Nodes, "node-c") {
			t.Errorf("finding %s names node-c, whose bundle did not match its checksum", g.ID)
		}
	}
	if len(v.Missing) != 1 || v.Missing[0].Name != "node-f" {
		t.Errorf("missing %+v, want node-f", v.Missing)
	}
}

func TestParseChecksum(t *testing.T) {
	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for in, want := range map[string]string{
		sum + "  node-a.tar.gz\n":     sum,
		strings.ToUpper(sum):          sum,
		sum[:63]:                      "",
		"":                            "",
		"zz" + sum[2:] + "  x.tar.gz": "",
		strings.Repeat(" ", 5000):     "",
	} {
		if got := fleetview.ParseChecksum([]byte(in)); got != want {
			t.Errorf("ParseChecksum(%.30q) = %q, want %q", in, got, want)
		}
	}
}

// A .sha256 object is anyone's who can write to the store: whatever it
// holds, ParseChecksum gives a 64-digit lower-case hex or nothing.
func FuzzParseChecksum(f *testing.F) {
	f.Add([]byte("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  node-a.tar.gz\n"))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := fleetview.ParseChecksum(b)
		if got != "" && (len(got) != 64 || strings.Trim(got, "0123456789abcdef") != "") {
			t.Fatalf("ParseChecksum(%q) = %q", b, got)
		}
	})
}

// The output directory of fleet collect --to holds fleet.json alone: its
// nodes are named with where their bundles are, not as failures without
// a word.
func TestLoadStoreRunDirectory(t *testing.T) {
	dir := t.TempDir()
	fj := `{"nodes":[{"node":"node-a","status":"ok","object":"s3://b/case/run/node-a.tar.gz"}]}`
	if err := os.WriteFile(filepath.Join(dir, fleetview.FleetFile), []byte(fj), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := fleetview.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Missing) != 1 || !strings.Contains(v.Missing[0].Error, "s3://b/case/run/node-a.tar.gz") {
		t.Errorf("missing %+v, want node-a named with its object", v.Missing)
	}
}
