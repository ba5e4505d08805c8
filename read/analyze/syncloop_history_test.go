package analyze_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Sync-loop and PLEG lines of the kubelet's log, in a bundle that holds
// nothing of the collection's own time about the loop (no healthz, no
// goroutine dump: a run without the kubelet's credentials). Lines all
// long before the collection may be history: info, and no Pending pod is
// chained to them. Recent lines, lines whose zone is unknown and could be
// recent, and old lines beside current evidence (a kubelet thread blocked
// in the kernel, a failing healthz, the API's Node condition) stay the
// incident. "Old" is measured from the manifest's collection time
// (2026-11-21T09:18:14Z in these bundles), not from the fixture.
func TestSyncLoopLinesMayBeHistory(t *testing.T) {
	collected := time.Date(2026, 11, 21, 9, 18, 14, 0, time.UTC)
	zoned := func(ago time.Duration, msg string) string {
		at := collected.Add(-ago)
		return at.Format("2006-01-02T15:04:05.000000-0700") + " node1 kubelet[812]: E" + at.Format("0102 15:04:05.000000") + "     812 kubelet.go:2513] " + msg + "\n"
	}
	unzoned := func(ago time.Duration, msg string) string {
		at := collected.Add(-ago)
		return at.Format("Jan 02 15:04:05") + " node1 kubelet[812]: E" + at.Format("0102 15:04:05.000000") + "     812 kubelet.go:2513] " + msg + "\n"
	}
	const slow = `"Housekeeping took longer than expected" err="sync Loop took longer than expected" expected="1s" actual="12.1s"`
	const pleg = `"Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m4.3s ago; threshold is 3m0s"`
	stuckThread := []byte(`[{"pid":812,"tid":812,"ppid":1,"comm":"kubelet","state":"S","start_ticks":1000,"uid":0,"cmdline":["/usr/bin/kubelet"]},` +
		`{"pid":812,"tid":845,"ppid":1,"comm":"kubelet","state":"D","wchan":"ceph_mdsc_do_request","start_ticks":1000,"uid":0,"stack":["[<0>] ceph_mdsc_do_request+0x1a4/0x280 [ceph]","[<0>] vfs_statx+0x8f/0x160"]}]`)
	calmThreads := []byte(`[{"pid":812,"tid":812,"ppid":1,"comm":"kubelet","state":"S","wchan":"futex_wait_queue","start_ticks":1000,"uid":0,"cmdline":["/usr/bin/kubelet"]}]`)
	nodeSaysPLEG := func(t *testing.T) []byte {
		var o map[string]any
		if err := json.Unmarshal(fixture(t, "cluster")["003-v1.24.json"], &o); err != nil {
			t.Fatal(err)
		}
		node := o["node"].(map[string]any)
		status := node["status"].(map[string]any)
		status["conditions"] = []any{map[string]any{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
			"message": "container runtime is down, PLEG is not healthy: pleg was last seen active 5m0s ago; threshold is 3m0s"}}
		b, _ := json.Marshal(o)
		return b
	}
	cases := []struct {
		name    string
		id      string
		log     string
		extra   func(t *testing.T) map[string][]byte
		want    analyze.Severity
		summary string
		// chained: the API's Pending pod shop/db-0 is chained to it.
		chained bool
	}{
		{"sync loop lines 2 h old, nothing now", "kubelet-syncloop-unhealthy", zoned(2*time.Hour, slow) + zoned(130*time.Minute, slow), nil,
			analyze.Info, "may be history", false},
		{"sync loop lines 20 min old, the kubelet idle now", "kubelet-syncloop-unhealthy", zoned(20*time.Minute, slow),
			func(*testing.T) map[string][]byte { return map[string][]byte{layout.TasksPath: calmThreads} },
			analyze.Info, "last 20m before this collection", false},
		{"sync loop lines 3 min old", "kubelet-syncloop-unhealthy", zoned(2*time.Hour, slow) + zoned(3*time.Minute, slow), nil,
			analyze.Warning, "takes longer than expected", true},
		{"sync loop lines 2 h old, a kubelet thread in the kernel now", "kubelet-syncloop-unhealthy", zoned(2*time.Hour, slow),
			func(*testing.T) map[string][]byte { return map[string][]byte{layout.TasksPath: stuckThread} },
			analyze.Warning, "takes longer than expected", true},
		{"sync loop lines 2 h old, healthz failing now", "kubelet-syncloop-unhealthy", zoned(2*time.Hour, slow),
			func(*testing.T) map[string][]byte {
				return map[string][]byte{layout.KubeletHealthzPath: []byte("[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n")}
			},
			analyze.Critical, "syncloop failed", true},
		{"sync loop lines 2 h old in an unknown zone", "kubelet-syncloop-unhealthy", unzoned(2*time.Hour, slow), nil,
			analyze.Warning, "takes longer than expected", true},
		{"sync loop lines 2 days old in an unknown zone", "kubelet-syncloop-unhealthy", unzoned(48*time.Hour, slow), nil,
			analyze.Info, "may be history", false},
		{"PLEG lines 2 h old, nothing now", "kubelet-pleg-unhealthy", zoned(2*time.Hour, pleg), nil,
			analyze.Info, "may be history", false},
		{"PLEG lines 1 min old", "kubelet-pleg-unhealthy", zoned(time.Minute, pleg), nil,
			analyze.Warning, "PLEG is not healthy", true},
		{"PLEG lines 2 h old, the API's Node says PLEG now", "kubelet-pleg-unhealthy", zoned(2*time.Hour, pleg),
			func(t *testing.T) map[string][]byte {
				return map[string][]byte{layout.ClusterObjectsPath: nodeSaysPLEG(t)}
			},
			analyze.Warning, "PLEG is not healthy", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{
				"host/summary.json":   []byte(`{"hostname":"node1"}`),
				"journal/kubelet.log": []byte(tc.log),
				// The API's view: db-0 Pending 40 min on this node.
				layout.ClusterObjectsPath: fixture(t, "cluster")["003-v1.24.json"],
			}
			if tc.extra != nil {
				for k, v := range tc.extra(t) {
					files[k] = v
				}
			}
			r := analyzeFiles(t, files)
			f := only(t, r, tc.id)
			if f.Severity != tc.want || !strings.Contains(f.Summary, tc.summary) {
				t.Errorf("severity %s summary %q; want %s and %q", f.Severity, f.Summary, tc.want, tc.summary)
			}
			if f.Severity == analyze.Info {
				if f.Impact == analyze.ImpactSyncLoop {
					t.Errorf("lines that may be history ranked as what stops the sync loop now")
				}
				wantIn(t, "explanation", f.Explanation, "may be history", "before this collection", "nothing collected now shows it still so")
			}
			p, ok := r.PodByName("shop", "db-0")
			if !ok {
				t.Fatalf("no report of the Pending pod shop/db-0\n%s", dump(r))
			}
			chained := false
			for _, l := range p.Chain {
				chained = chained || l.Finding == tc.id
			}
			if chained != tc.chained {
				t.Errorf("shop/db-0 chained to %s: %v, want %v (chain %+v)", tc.id, chained, tc.chained, p.Chain)
			}
		})
	}
}
