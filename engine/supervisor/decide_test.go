package supervisor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/test/skip"
)

// What the supervisor decides, tested without children: the manifest it
// builds from collectors' results and the staged files (the size cap,
// incomplete and vanished files, cuts, interrupts), the scheduling of
// collectors past the run's deadline or after an interrupt, and the
// options it accepts.

// testRun is a run of the given collectors that ended with the given
// statuses, as schedule leaves it.
func testRun(t *testing.T, maxBundle int64, status map[string]string) (*run, []*collectors.Spec) {
	t.Helper()
	red, err := collectors.NewRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{
		opts:    Options{Timeout: time.Minute, MaxBundleBytes: maxBundle, Format: bundle.Gzip},
		start:   time.Now(),
		hungSet: map[string]bool{}, facts: map[string]string{"hostname": "node-a"},
		results: map[string]*collectorRun{}, mappings: map[string]string{}, red: red,
		staging: outputdir.StagingDir{Path: "/staging"},
	}
	var specs []*collectors.Spec
	for _, name := range []string{"alpha", "beta"} {
		s := &collectors.Spec{Name: name, DefaultTimeout: time.Second}
		specs = append(specs, s)
		st := status[name]
		if st == "" {
			st = bundle.StatusOK
		}
		r.results[name] = &collectorRun{spec: s, records: map[string]*collectors.FileRecord{},
			res: bundle.CollectorResult{Name: name, Status: st, Files: []string{}}}
	}
	return r, specs
}

// staged is what the output worker found: files of 100 bytes.
func staged(files map[string][]string) outputdir.HashResult {
	h := outputdir.HashResult{Files: map[string][]outputdir.HashedFile{}}
	for c, rels := range files {
		for _, rel := range rels {
			h.Files[c] = append(h.Files[c], outputdir.HashedFile{Rel: rel, Size: 100, SHA256: strings.Repeat("0", 64)})
		}
	}
	return h
}

func record(r *run, c string, rels ...string) {
	for _, rel := range rels {
		r.results[c].records[rel] = &collectors.FileRecord{Path: rel}
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		// Not root, the manifest is partial whatever else happens: the
		// "complete" cases below could not tell anything apart.
		skip.Missing(t, "the supervisor marks every non-root run partial; run the tests as root (CI does)")
	}
}

func collectorOf(m *bundle.Manifest, name string) bundle.CollectorResult {
	for _, c := range m.Collectors {
		if c.Name == name {
			return c
		}
	}
	return bundle.CollectorResult{}
}

func TestManifestDecisions(t *testing.T) {
	requireRoot(t)
	for _, c := range []struct {
		name      string
		maxBundle int64
		status    map[string]string
		setup     func(r *run, h *outputdir.HashResult)
		wantState string
		// per collector: the status it ends with
		want map[string]string
		// a warning containing this ("" none), an omitted path
		warning, omitted string
		files            int
	}{
		{name: "all ok", maxBundle: 1 << 20, wantState: "complete", want: map[string]string{"alpha": "ok", "beta": "ok"}, files: 4},
		{
			// 4 files of 100 bytes, a cap of 250: the third and fourth
			// are left out, their collector says partial, and so does
			// the bundle, with a warning naming the first one left out.
			name: "size cap", maxBundle: 250, wantState: "partial",
			want:    map[string]string{"alpha": "ok", "beta": "partial"},
			warning: "--max-bundle-size 250 bytes) was reached: 2 file(s) were left out, first beta/a.txt", omitted: "beta/b.txt", files: 2,
		},
		{
			name: "a collector that timed out", maxBundle: 1 << 20, status: map[string]string{"beta": bundle.StatusTimeout},
			wantState: "partial", want: map[string]string{"alpha": "ok", "beta": "timeout"}, files: 4,
		},
		{
			name: "cut by --timeout", maxBundle: 1 << 20, status: map[string]string{"alpha": bundle.StatusTimeout},
			setup:     func(r *run, _ *outputdir.HashResult) { r.results["alpha"].cut = true },
			wantState: "partial", want: map[string]string{"alpha": "timeout", "beta": "ok"},
			warning: "cut by --timeout 1m0s: alpha did not get the time they needed", files: 4,
		},
		{
			name: "interrupted", maxBundle: 1 << 20,
			setup: func(r *run, _ *outputdir.HashResult) {
				r.interrupt = &bundle.Interrupt{Signal: "SIGINT", At: time.Now()}
			},
			wantState: "partial", want: map[string]string{"alpha": "ok", "beta": "ok"}, files: 4,
		},
		{
			// A file the collector reported but that is gone from
			// staging: omitted, and its collector partial.
			name: "vanished file", maxBundle: 1 << 20,
			setup: func(r *run, h *outputdir.HashResult) {
				h.Files["alpha"] = h.Files["alpha"][:1]
			},
			wantState: "partial", want: map[string]string{"alpha": "partial", "beta": "ok"}, omitted: "alpha/b.txt", files: 3,
		},
		{
			name: "staging replaced", maxBundle: 1 << 20,
			setup:     func(_ *run, h *outputdir.HashResult) { h.Replaced = true },
			wantState: "partial", want: map[string]string{"alpha": "ok", "beta": "ok"}, warning: "was removed or replaced during the run", files: 4,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, specs := testRun(t, c.maxBundle, c.status)
			record(r, "alpha", "a.txt", "b.txt")
			record(r, "beta", "a.txt", "b.txt")
			h := staged(map[string][]string{"alpha": {"a.txt", "b.txt"}, "beta": {"a.txt", "b.txt"}})
			if c.setup != nil {
				c.setup(r, &h)
			}
			m := r.manifest(specs, h)
			if m.Status != c.wantState {
				t.Errorf("status %q, want %q", m.Status, c.wantState)
			}
			for name, want := range c.want {
				if got := collectorOf(m, name).Status; got != want {
					t.Errorf("%s: status %q, want %q (error %q)", name, got, want, collectorOf(m, name).Error)
				}
			}
			if len(m.Files) != c.files {
				t.Errorf("%d files in the manifest, want %d", len(m.Files), c.files)
			}
			all := strings.Join(m.Warnings, "\n")
			if c.warning != "" && !strings.Contains(all, c.warning) {
				t.Errorf("warnings %q, want one containing %q", all, c.warning)
			}
			if c.warning == "" && all != "" {
				t.Errorf("unexpected warnings %q", all)
			}
			found := c.omitted == ""
			for _, o := range m.Omitted {
				found = found || o.Path == c.omitted
			}
			if !found {
				t.Errorf("omitted %+v, want %s among them", m.Omitted, c.omitted)
			}
			if m.Host.Hostname != "node-a" {
				t.Errorf("hostname %q, want the collector's fact node-a", m.Host.Hostname)
			}
		})
	}
}

// A staged file the collector never reported (it was killed while writing
// it) is kept, marked incomplete; it does not by itself make the bundle
// partial: the collector's own status says whether it ended well.
func TestManifestIncompleteFile(t *testing.T) {
	requireRoot(t)
	r, specs := testRun(t, 1<<20, map[string]string{"alpha": bundle.StatusTimeout})
	record(r, "alpha", "a.txt")
	m := r.manifest(specs, staged(map[string][]string{"alpha": {"a.txt", "half.txt"}}))
	var half *bundle.FileEntry
	for i := range m.Files {
		if m.Files[i].Path == "alpha/half.txt" {
			half = &m.Files[i]
		}
		if m.Files[i].Path == "alpha/a.txt" && m.Files[i].Incomplete {
			t.Errorf("a reported file is marked incomplete")
		}
	}
	if half == nil || !half.Incomplete {
		t.Fatalf("half.txt: %+v, want it kept and marked incomplete", half)
	}
	if m.Status != "partial" {
		t.Errorf("status %q: the collector timed out", m.Status)
	}
}

// Past the run's deadline (--timeout minus the writing reserve), a
// collector is not started: it is skipped, says "cut by --timeout", and
// counts as evidence lost.
func TestScheduleAfterDeadline(t *testing.T) {
	r, specs := testRun(t, 1<<20, nil)
	r.opts.Concurrency = 2
	r.collectD = time.Now().Add(-time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.stopCtx = ctx
	r.schedule(specs)
	for _, s := range specs {
		cr := r.results[s.Name]
		if cr.res.Status != bundle.StatusSkipped || !cr.cut || !strings.HasPrefix(cr.res.Error, "cut by --timeout") {
			t.Errorf("%s: status %q cut %v error %q; want skipped, cut by --timeout", s.Name, cr.res.Status, cr.cut, cr.res.Error)
		}
	}
}

// After an interrupt, collectors not yet started are skipped, and say so
// with the signal's name, not as a hang or a cut.
func TestScheduleInterrupted(t *testing.T) {
	r, specs := testRun(t, 1<<20, nil)
	r.opts.Concurrency = 1
	r.collectD = time.Now().Add(time.Hour)
	r.interrupt = &bundle.Interrupt{Signal: "SIGTERM", At: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.stopCtx = ctx
	r.schedule(specs)
	for _, s := range specs {
		cr := r.results[s.Name]
		if cr.res.Status != bundle.StatusSkipped || cr.cut || cr.res.Error != "collection was interrupted by SIGTERM before it could start" {
			t.Errorf("%s: status %q cut %v error %q", s.Name, cr.res.Status, cr.cut, cr.res.Error)
		}
	}
}

// cutShort decides whether the global deadline, not the collector, ended
// a clamped collector.
func TestCutShort(t *testing.T) {
	t0 := time.Now()
	for _, c := range []struct {
		name            string
		deadline, ended time.Duration
		want            bool
	}{
		{"left less than a second", 500 * time.Millisecond, 100 * time.Millisecond, true},
		{"ended at the deadline", 10 * time.Second, 10 * time.Second, true},
		{"ended just before it", 10 * time.Second, 9900 * time.Millisecond, true},
		{"ended well before it", 10 * time.Second, 3 * time.Second, false},
	} {
		if got := cutShort(t0, t0.Add(c.deadline), t0.Add(c.ended)); got != c.want {
			t.Errorf("%s: cutShort = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidateOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		want string // "" valid
	}{
		{"defaults", Options{}, ""},
		{"case id and label", Options{CaseID: "01234567", Label: "db_upgrade-2"}, ""},
		{"negative timeout", Options{Timeout: -time.Second}, "--timeout"},
		{"unknown format", Options{Format: "zip"}, "unknown bundle format"},
		{"relative root", Options{Common: collectors.Common{Root: "host"}}, "--root must be an absolute path"},
		{"case id with a slash", Options{CaseID: "../x"}, "--case-id"},
		{"label with a space", Options{Label: "db upgrade"}, "--label"},
		{"label like a case id", Options{Label: "case-1"}, "must not start with \"case-\""},
		{"not a key", Options{EncryptTo: []string{"hunter2"}}, "not an age"},
		{"a secret key", Options{EncryptTo: []string{"AGE-SECRET-KEY-1QQQ"}}, "not a secret key"},
		{"encrypted output file without .age", Options{EncryptTo: []string{testRecipient}, OutputFile: "/x/b.tar.gz"}, "must end in .age"},
		{"encrypted", Options{EncryptTo: []string{testRecipient}}, ""},
	} {
		err := c.o.Validate()
		var ue *UsageError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want a usage error containing %q", c.name, err, c.want)
		}
	}
	// Validate fills in the defaults, and a second call changes nothing.
	o := Options{}
	if err := o.Validate(); err != nil || o.Timeout != DefaultTimeout || o.Format != bundle.Gzip || o.Common.Proc != "/proc" {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	again := o
	if err := again.Validate(); err != nil || again.Timeout != o.Timeout || again.Common.Proc != o.Common.Proc {
		t.Errorf("a second Validate changed the options: %+v", again)
	}
}

// testRecipient is an age X25519 public key (its secret key is not kept).
const testRecipient = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
