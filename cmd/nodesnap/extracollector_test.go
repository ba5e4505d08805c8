package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/collectors"
)

// A collector registered only in this test binary, and only in the
// nodesnap process a test starts with NODESNAP_TEST_EXTRA_COLLECTOR=1
// (the other tests compare listings with docs/reference): a new collector
// is its own package plus one line, and the command layer lists it with
// what it needs, its options and its completions without knowing it.
func init() {
	if os.Getenv("NODESNAP_TEST_EXTRA_COLLECTOR") != "1" {
		return
	}
	var depth int
	collectors.Register(collectors.Spec{
		Name:           "test-extra",
		Description:    "a collector that only a test registers",
		Requires:       "root: the test's own /proc/self files",
		DefaultTimeout: 2 * time.Second,
		After:          []string{collectors.MountprobeName},
		Files:          []collectors.FileDoc{{Name: "nothing.txt", Holds: "nothing: it writes no file"}},
		Flags: func(fs *pflag.FlagSet) {
			fs.IntVar(&depth, "test-extra-depth", 3, "test-extra: how deep")
		},
		Run: func(context.Context, *collectors.Env) error { return nil },
	})
}

func TestCollectorRegisteredInATestIsListed(t *testing.T) {
	r := runNodesnap(t, time.Minute, []string{"NODESNAP_TEST_EXTRA_COLLECTOR=1"}, "collectors", "-o", "json")
	if r.code != exitOK {
		t.Fatalf("nodesnap collectors -o json: exit %d\n%s", r.code, r.stderr)
	}
	var infos []collectorInfo
	if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil {
		t.Fatalf("decoding the listing: %v\n%s", err, r.stdout)
	}
	var got *collectorInfo
	for i := range infos {
		if infos[i].Name == "test-extra" {
			got = &infos[i]
		}
	}
	if got == nil {
		t.Fatalf("test-extra is not in the listing:\n%s", r.stdout)
	}
	if got.Needs != "root: the test's own /proc/self files" || got.Gathers != "a collector that only a test registers" || got.DefaultEnabled || got.Timeout != "2s" {
		t.Errorf("test-extra listed as %+v", *got)
	}
	if len(got.Options) != 1 || got.Options[0].Flag != "--test-extra-depth" || got.Options[0].Default != "3" || got.Options[0].Usage != "how deep" {
		t.Errorf("test-extra's options: %+v", got.Options)
	}
	// Without the variable the same binary lists no such collector.
	r = runNodesnap(t, time.Minute, nil, "collectors", "-o", "json")
	infos = nil
	if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil {
		t.Fatalf("decoding the listing: %v", err)
	}
	for _, c := range infos {
		if c.Name == "test-extra" {
			t.Errorf("test-extra listed without NODESNAP_TEST_EXTRA_COLLECTOR")
		}
	}
}
