// Package supervisortest holds what the collectors' tests share: running
// collectors through the real supervisor and reading the bundle back.
//
// Importing it is all a collector's test package needs: it links every
// collector (collectors/all) and, from its init, serves the hidden child
// modes, so that the supervisor's children (re-executions of the test
// binary) run the collector and its workers; no TestMain is needed.
package supervisortest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	_ "github.com/nodesnap/nodesnap/collectors/all"
	"github.com/nodesnap/nodesnap/engine/supervisor"
)

// init serves the hidden modes when this test binary was re-executed as
// a collector's child or an isolated worker (and exits then). It runs
// after every collector's init (they are imported above), before the
// test package's own: a collector registered by a test's init is not
// served here and needs the test's TestMain to call
// collectors.MaybeRunHidden.
func init() {
	collectors.MaybeRunHidden()
}

// Flags sets a collector's options as the command line would, and
// puts the defaults back when the test ends.
func Flags(t *testing.T, name string, args ...string) {
	t.Helper()
	s, ok := collectors.Lookup(name)
	if !ok {
		t.Fatalf("collector %q is not registered", name)
	}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	s.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("flags %q: %v", args, err)
	}
	t.Cleanup(func() { s.Flags(pflag.NewFlagSet("reset", pflag.ContinueOnError)) })
}

// Bundle is a finished collection, read back.
type Bundle struct {
	*bundle.Contents
	Path     string
	Raw      map[string][]byte // every entry, manifest.json included
	Progress string            // what the run reported as it went
	Res      *bundle.CollectorResult
}

// Collect runs one collector through the real supervisor (children
// are re-executions of this test binary) and reads the bundle back.
func Collect(t *testing.T, name string, common collectors.Common) *Bundle {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var prog strings.Builder
	res, err := supervisor.Run(ctx, supervisor.Options{
		OutputDir: t.TempDir(), Only: []string{name}, Timeout: 90 * time.Second, Common: common,
		Progress: func(p supervisor.Progress) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(&prog, "%s %s %s %s\n", p.Collector, p.Phase, p.Status, p.Error)
		},
	})
	if err != nil {
		t.Fatalf("collect %s: %v", name, err)
	}
	if rep, err := bundle.Validate(ctx, res.Bundle.Path); err != nil || len(rep.Problems) > 0 {
		t.Errorf("bundle does not validate: %v %v", err, rep)
	}
	c, err := bundle.ReadAll(ctx, res.Bundle.Path, 0)
	if err != nil {
		t.Fatalf("reading the bundle: %v", err)
	}
	raw := map[string][]byte{}
	err = bundle.Walk(ctx, res.Bundle.Path, bundle.DefaultLimits, func(e bundle.Entry) error {
		b, err := io.ReadAll(e.Reader)
		raw[e.Name] = b
		return err
	})
	if err != nil {
		t.Fatalf("walking the bundle: %v", err)
	}
	b := &Bundle{Contents: c, Path: res.Bundle.Path, Raw: raw, Progress: prog.String(), Res: c.Manifest.Collector(name)}
	if b.Res == nil {
		t.Fatalf("manifest has no %s collector", name)
	}
	t.Logf("%s: status %s in %.2fs, error %q, notes:\n  %s", name, b.Res.Status, b.Res.DurationSeconds, b.Res.Error, strings.Join(b.Res.Notes, "\n  "))
	return b
}

func (b *Bundle) File(t *testing.T, name string) []byte {
	t.Helper()
	data, ok := b.Files[name]
	if !ok {
		var have []string
		for n := range b.Files {
			have = append(have, n)
		}
		t.Fatalf("bundle has no %s; it has %q", name, have)
	}
	return data
}

func (b *Bundle) Notes() string { return strings.Join(b.Res.Notes, "\n") }

// fileEntry returns the manifest's record of a bundle file.
func (b *Bundle) FileEntry(t *testing.T, name string) bundle.FileEntry {
	t.Helper()
	for _, f := range b.Manifest.Files {
		if f.Path == name {
			return f
		}
	}
	t.Fatalf("manifest lists no %s", name)
	return bundle.FileEntry{}
}

// AssertAbsent fails if secret occurs in any byte of the bundle (every
// file and the manifest) or of the run's progress output.
func AssertAbsent(t *testing.T, b *Bundle, secret string) {
	t.Helper()
	if len(b.Raw) == 0 {
		t.Fatal("no bundle entries to search")
	}
	if _, ok := b.Raw[bundle.ManifestName]; !ok {
		t.Fatal("the manifest was not among the entries searched")
	}
	for name, data := range b.Raw {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%q appears in %s", secret, name)
		}
	}
	if strings.Contains(b.Progress, secret) {
		t.Errorf("%q appears in the progress output", secret)
	}
}

// Run runs a real collection (children are re-runs of this test
// binary), checks that the bundle validates and reads it back.
func Run(t testing.TB, opts supervisor.Options) (*bundle.Contents, time.Duration) {
	t.Helper()
	ctx := context.Background()
	if opts.OutputDir == "" {
		opts.OutputDir = t.TempDir()
	}
	start := time.Now()
	res, err := supervisor.Run(ctx, opts)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("collect %v: %v", opts.Only, err)
	}
	if rep, err := bundle.Validate(ctx, res.Bundle.Path); err != nil {
		var problems []string
		if rep != nil {
			problems = rep.Problems
		}
		t.Fatalf("bundle does not validate: %v %v", err, problems)
	}
	c, err := bundle.ReadAll(ctx, res.Bundle.Path, 0)
	if err != nil {
		t.Fatalf("reading bundle: %v", err)
	}
	return c, elapsed
}

func Decode(t testing.TB, c *bundle.Contents, name string, v any) {
	t.Helper()
	b, ok := c.Files[name]
	if !ok {
		t.Fatalf("bundle has no %s (files: %v)", name, keys(c.Files))
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", name, err)
	}
	expandMounts(t, name, v)
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func FindProbe(rep *layout.MountProbeReport, mountpoint string) *layout.MountProbe {
	for i := range rep.Probes {
		if rep.Probes[i].Mountpoint == mountpoint {
			return &rep.Probes[i]
		}
	}
	return nil
}

func HungTargets(m *bundle.Manifest) map[string]bool {
	out := map[string]bool{}
	for _, h := range m.HungMounts {
		out[h.Target] = true
	}
	return out
}

// MountsCollect runs a real collection of the named collectors, with a
// 3s probe deadline, and returns the bundle, after checking it validates.
func MountsCollect(t *testing.T, timeout time.Duration, only ...string) (*bundle.Contents, time.Duration) {
	t.Helper()
	return Run(t, supervisor.Options{Only: only, Timeout: timeout, Common: collectors.Common{ProbeTimeout: 3 * time.Second}})
}

// MountsDecode decodes a JSON file of the bundle into v.
func MountsDecode(t *testing.T, c *bundle.Contents, name string, v any) {
	t.Helper()
	b, ok := c.Files[name]
	if !ok {
		t.Fatalf("bundle has no %s", name)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", name, err)
	}
	expandMounts(t, name, v)
}

func mountsStatus(t *testing.T, c *bundle.Contents, name string) *bundle.CollectorResult {
	t.Helper()
	r := c.Manifest.Collector(name)
	if r == nil {
		t.Fatalf("manifest has no collector %s", name)
	}
	return r
}

// MountsRequireOK fails unless the collector finished ok. The one
// exception is a maps read of a process that is not the test's (ours),
// whose mmap lock something else on the machine holds: openfiles then
// says partial and names it in hung_items, which is right, and not this
// test's business.
func MountsRequireOK(t *testing.T, c *bundle.Contents, name string, ours ...int) {
	t.Helper()
	r := mountsStatus(t, c, name)
	if r.Status != "ok" && r.Status != "partial" {
		t.Fatalf("%s: status %s (%s), notes %v", name, r.Status, r.Error, r.Notes)
	}
	if r.Status == "partial" && len(r.HungItems) == 0 {
		t.Fatalf("%s: partial without a hung item: %v", name, r.Notes)
	}
	for _, hi := range r.HungItems {
		foreign := name == "openfiles" && strings.HasSuffix(hi.Target, "/maps")
		for _, pid := range ours {
			if strings.Contains(hi.Target, "/"+strconv.Itoa(pid)+"/") {
				foreign = false
			}
		}
		if !foreign {
			t.Errorf("%s: hung item %+v", name, hi)
		}
	}
}

func HasPID(ps []layout.NamespaceProcess, pid int) bool {
	for _, p := range ps {
		if p.PID == pid {
			return true
		}
	}
	return false
}

// expandMounts gives every namespace of a decoded mounts.json its mounts
// (format 2 keeps each distinct table once): tests read it as format 1.
func expandMounts(t testing.TB, name string, v any) {
	t.Helper()
	if rep, ok := v.(*layout.MountsReport); ok {
		if err := layout.ExpandMountTables(rep); err != nil {
			t.Fatalf("decoding %s: %v", name, err)
		}
	}
}
