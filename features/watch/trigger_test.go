package watch

import (
	"testing"
	"time"
)

func TestTriggerEpisodes(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		s      int
		active bool
		key    string
		fired  bool // the caller starts a collection on fire
		want   decision
	}
	for _, tc := range []struct {
		name  string
		cfg   TriggerConfig
		steps []step
	}{
		{"holds For, then fires once per episode", TriggerConfig{For: 10 * time.Second, Cooldown: time.Minute}, []step{
			{0, true, "", false, pending}, {5, true, "", false, pending}, {10, true, "", true, fire},
			{20, true, "", false, idle}, {30, false, "", false, idle},
		}},
		{"a condition that clears before For never fires", TriggerConfig{For: 10 * time.Second}, []step{
			{0, true, "", false, pending}, {5, false, "", false, idle}, {6, true, "", false, pending}, {12, false, "", false, idle},
		}},
		{"flapping within the cooldown: one collection", TriggerConfig{Cooldown: time.Hour}, []step{
			{0, true, "", true, fire}, {1, false, "", false, idle}, {2, true, "", false, coolingDown},
			{3, false, "", false, idle}, {4, true, "", false, coolingDown}, {3601, true, "", true, fire},
		}},
		{"a new key is a new episode, after the cooldown", TriggerConfig{Cooldown: 10 * time.Second}, []step{
			{0, true, "/a", true, fire}, {5, true, "/a", false, idle}, {6, true, "/a\x00/b", false, coolingDown},
			{11, true, "/a\x00/b", true, fire}, {12, true, "/a\x00/b", false, idle},
		}},
		{"not started (busy): fires on the next round", TriggerConfig{}, []step{
			{0, true, "", false, fire}, {1, true, "", true, fire}, {2, true, "", false, idle},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &trigger{cfg: tc.cfg}
			for _, s := range tc.steps {
				got := tr.observe(Observation{At: at(s.s), Active: s.active, Key: s.key})
				if got != s.want {
					t.Fatalf("at %ds (active %v, key %q): %v, want %v", s.s, s.active, s.key, got, s.want)
				}
				if s.fired {
					tr.markFired(at(s.s))
				}
			}
		})
	}
}

func TestSuppressedOncePerEpisode(t *testing.T) {
	tr := &trigger{}
	tr.observe(Observation{At: time.Now(), Active: true})
	if !tr.markSuppressed("busy") || tr.markSuppressed("busy") || !tr.markSuppressed("cooldown") {
		t.Fatal("a reason is counted once per episode")
	}
	tr.observe(Observation{At: time.Now()})
	tr.observe(Observation{At: time.Now(), Active: true})
	if !tr.markSuppressed("busy") {
		t.Fatal("a new episode counts again")
	}
}

func TestRateLimit(t *testing.T) {
	var r rateLimit
	t0 := time.Now()
	for i := 0; i < 3; i++ {
		if !r.allow(t0.Add(time.Duration(i)*time.Minute), 3) {
			t.Fatalf("collection %d refused", i)
		}
		r.add(t0.Add(time.Duration(i) * time.Minute))
	}
	if r.allow(t0.Add(59*time.Minute), 3) {
		t.Error("a fourth collection within the hour allowed")
	}
	if !r.allow(t0.Add(61*time.Minute), 3) {
		t.Error("the first collection is over an hour old: allowed again")
	}
}

func TestWindow(t *testing.T) {
	var w window
	t0 := time.Now()
	for i := 0; i < 15; i++ {
		w.add(t0.Add(time.Duration(i)*time.Second), "line")
	}
	if n := w.count(t0.Add(14*time.Second), 5*time.Second); n != 5 {
		t.Errorf("count = %d, want the 5 lines of the last 5 s", n)
	}
	if len(w.lines) != keepLines {
		t.Errorf("kept %d lines, want %d", len(w.lines), keepLines)
	}
	if n := w.count(t0.Add(time.Hour), time.Minute); n != 0 || w.lines != nil {
		t.Errorf("count after an hour = %d, lines %q", n, w.lines)
	}
}
