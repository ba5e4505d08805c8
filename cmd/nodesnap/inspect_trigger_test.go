package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
)

// A bundle `nodesnap watch` collected: inspect names its trigger (name,
// time, summary) in the text and in -o json; -v adds the evidence; a
// bundle collected by hand shows no trigger.
func TestInspectShowsTrigger(t *testing.T) {
	fired := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	tr := &bundle.Trigger{Name: "mount-hung", FiredAt: fired, Summary: "mount /var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv-7/mount did not answer statfs within 5s",
		Evidence: []string{"statfs /var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv-7/mount: no answer within 5s (EVIDENCE-LINE)"}}
	p := bundleWithTrigger(t, tr)

	r := runNodesnap(t, time.Minute, nil, "inspect", p)
	if r.code != exitOK {
		t.Fatalf("inspect: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The text is wrapped at 80 columns: compared word by word.
	words := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"trigger: mount-hung, fired 2026-11-21 09:00:00Z: " + tr.Summary, "evidence: 1 line(s) (-v shows them)"} {
		if !strings.Contains(words, want) {
			t.Errorf("inspect does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "EVIDENCE-LINE") {
		t.Errorf("inspect without -v prints the evidence:\n%s", r.stdout)
	}
	if most, _, line := widest(r.stdout, 80); most > 80 {
		t.Errorf("inspect line of %d: %q", most, line)
	}
	r = runNodesnap(t, time.Minute, nil, "inspect", "-v", p)
	if r.code != exitOK || !strings.Contains(r.stdout, "EVIDENCE-LINE") {
		t.Errorf("inspect -v does not print the evidence: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runNodesnap(t, time.Minute, nil, "inspect", "-o", "json", p)
	var res struct {
		Trigger *struct {
			Name     string    `json:"name"`
			FiredAt  time.Time `json:"fired_at"`
			Summary  string    `json:"summary"`
			Evidence []string  `json:"evidence"`
		} `json:"trigger"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != exitOK {
		t.Fatalf("inspect -o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if res.Trigger == nil || res.Trigger.Name != tr.Name || !res.Trigger.FiredAt.Equal(fired) || res.Trigger.Summary != tr.Summary || len(res.Trigger.Evidence) != 1 {
		t.Errorf("inspect -o json: trigger %+v, want %+v", res.Trigger, tr)
	}

	// Collected by hand: no trigger line, no trigger key.
	plain := bundleWithTrigger(t, nil)
	if r := runNodesnap(t, time.Minute, nil, "inspect", plain); r.code != exitOK || strings.Contains(r.stdout, "trigger:") {
		t.Errorf("inspect of a bundle collected by hand: exit %d\n%s", r.code, r.stdout)
	}
	if r := runNodesnap(t, time.Minute, nil, "inspect", "-o", "json", plain); r.code != exitOK || strings.Contains(r.stdout, `"trigger"`) {
		t.Errorf("inspect -o json of a bundle collected by hand names a trigger: exit %d\n%s", r.code, r.stdout)
	}
}

// bundleWithTrigger writes a valid bundle (no files) that tr started; nil
// is a collection run by hand.
func bundleWithTrigger(t *testing.T, tr *bundle.Trigger) string {
	t.Helper()
	now := time.Date(2026, 11, 21, 9, 0, 5, 0, time.UTC)
	cmdline := []string{"nodesnap", "collect"}
	if tr != nil {
		cmdline = []string{"nodesnap", "watch"}
	}
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Tool: bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		CommandLine: cmdline, Host: bundle.Host{Hostname: "n1"}, StartedAt: now, FinishedAt: now, Status: "complete", Trigger: tr,
		Settings:   bundle.Settings{Root: "/", TimeoutSeconds: 120, MaxFileBytes: 64 << 20, MaxBundleBytes: 1 << 30, Concurrency: 4, Compression: bundle.Gzip},
		Collectors: []bundle.CollectorResult{{Name: "host", Status: bundle.StatusOK, Files: []string{}}}, Files: []bundle.FileEntry{},
		Redaction: bundle.RedactionSummary{Rules: map[string]int{}}, HungMounts: []bundle.HungItem{}, Omitted: []bundle.Omitted{}}
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, t.TempDir(), now); err != nil {
		t.Fatal(err)
	}
	return out
}
