package analyze

import (
	"fmt"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// The kubelet's own view (incident 003): healthz "[-]syncloop failed", and
// the goroutine dump showing housekeeping stuck in HandlePodCleanups →
// cleanupOrphanedPodDirs, and since when ("goroutine 123 [syscall, 12
// minutes]:"). When a hung mount explains it, the hung-mount finding
// carries this evidence; otherwise it is a finding of its own.

// IDs of this family.
const (
	idSyncloop       = "kubelet-syncloop-unhealthy"
	idHealthz        = "kubelet-healthz-failing"
	idPLEG           = "kubelet-pleg-unhealthy"
	maxGoroutineShow = 3
	maxFrameLines    = 14
)

// What each finding of this file means, for docs/findings.md.
var _ = document(
	RuleDoc{
		ID: "kubelet-syncloop-unhealthy", Severity: "info, warning or critical",
		Title:    "The kubelet's sync loop is stuck",
		Meaning:  "The kubelet's healthz reports `[-]syncloop failed` (critical): its main loop has not run for minutes, so pods are neither started nor cleaned up. When no hung mount explains it, the finding names the goroutines the loop waits on (often pod cleanup stuck on a volume); a goroutine dump showing the kubelet's main goroutine (goroutine 1, which runs its start) in a system call of a stat or mount-point check is a start that never reaches the loop, a warning even when the dump does not say for how long. From the kubelet's log alone it is a warning; and info, lines that may be history, when the healthz collected now says `[+]syncloop ok`, or when the newest line is more than 15 minutes before the collection (plus 14 hours when its zone is unknown) and nothing of the collection's own time (healthz, goroutine dump, a kubelet thread blocked in the kernel) shows the loop stuck. No Pending pod is chained to an info one.",
		Evidence: "`kubelet/healthz.txt`, `kubelet/goroutine-debug2.txt` (the stuck goroutines), the kubelet log.",
		Fix:      "Find what the stuck goroutines wait on (a mount, a runtime call) and fix that; then restart the kubelet (`systemctl restart kubelet`) if the loop does not resume.",
	},
	RuleDoc{
		ID: "kubelet-healthz-failing", Severity: "warning",
		Title:    "Other kubelet health checks failing",
		Meaning:  "The kubelet's `/healthz?verbose` lists its internal checks; these fail. The node is marked NotReady if they keep failing.",
		Evidence: "`kubelet/healthz.txt`: the failing checks.",
		Fix:      "Read the kubelet's log around the time of the bundle (`journal/kubelet.log`) for the failing check's cause.",
	},
	RuleDoc{
		ID: "kubelet-pleg-unhealthy", Severity: "info or warning",
		Title:    "Kubelet PLEG is not healthy",
		Meaning:  "The kubelet logged \"PLEG is not healthy\": its pod lifecycle event generator could not relist containers from the runtime in time, usually because the runtime is slow or stuck. The node goes NotReady if it lasts. A kubelet's first seconds, when PLEG has not relisted yet, are not a finding. Lines all more than 15 minutes before the collection (plus 14 hours when their zone is unknown), with neither the API's Node conditions nor a kubelet thread blocked in the kernel saying so now, are info: they may be history.",
		Evidence: "The kubelet log: the PLEG lines.",
		Fix:      "Check the container runtime (its goroutine dumps in `runtime/`, `crictl ps` on the node); restart it if it does not answer.",
	},
)

// cleanupFuncs are the kubelet functions of pod cleanup.
var cleanupFuncs = []string{"cleanupOrphanedPodDirs", "HandlePodCleanups", "getPodVolumePathListFromDisk"}

// stuckCleanup returns the kubelet's goroutines in pod cleanup: from the
// debug=2 dump when there is one (it says how long), else debug=1.
func (st *state) stuckCleanup() []goroutine {
	var withState, without []goroutine
	for _, d := range st.kubeDumps {
		for _, g := range d.Kept {
			hit := g.stuckInMountCheck()
			for _, fn := range cleanupFuncs {
				hit = hit || g.has(fn)
			}
			switch {
			case !hit:
			case g.State != "":
				withState = append(withState, g)
			default:
				without = append(without, g)
			}
		}
	}
	if len(withState) > 0 {
		return withState
	}
	return without
}

// syncloopBad returns the healthz lines of a failing sync loop.
func (st *state) syncloopBad() []Line {
	var out []Line
	for _, l := range st.healthzBad {
		if strings.Contains(strings.ToLower(l.Text), "syncloop") {
			out = append(out, l)
		}
	}
	return out
}

// syncloopOK returns the healthz line that says the sync loop is healthy
// ("[+]syncloop ok"), or nil.
func (st *state) syncloopOK() *Line {
	for i := range st.healthz {
		t := strings.ToLower(strings.TrimSpace(st.healthz[i].Text))
		if strings.HasPrefix(t, "[+]syncloop") && strings.HasSuffix(t, "ok") {
			return &st.healthz[i]
		}
	}
	return nil
}

func describeGoroutines(gs []goroutine) string {
	var parts []string
	longest := 0
	for _, g := range gs {
		longest = max(longest, g.Minutes)
	}
	for i, g := range gs {
		if i == maxGoroutineShow {
			parts = append(parts, fmt.Sprintf("and %d more", len(gs)-i))
			break
		}
		frames := g.Frames
		where := ""
		for _, fn := range cleanupFuncs {
			for _, f := range frames {
				if strings.Contains(f, fn) && where == "" {
					where = fn
				}
			}
		}
		if where == "" {
			where = "a stat or mount-point check"
		}
		parts = append(parts, fmt.Sprintf("%s in %s (in %s)", g.describe(), where, innermostCall(frames)))
	}
	s := strings.Join(parts, "; ")
	if longest > 0 {
		s += fmt.Sprintf("; stuck for %d minutes", longest)
	}
	return s
}

// innermostCall is the innermost frame worth naming: not the runtime's or
// a syscall wrapper, not an unexported helper (os.Stat, not
// os.statNolog.func1).
func innermostCall(frames []string) string {
	for _, f := range frames {
		if strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "syscall.") || strings.HasPrefix(f, "internal/") ||
			strings.HasPrefix(f, "golang.org/x/sys/") {
			continue
		}
		name := f[strings.LastIndexByte(f, '.')+1:]
		if name == "" || name[0] < 'A' || name[0] > 'Z' {
			continue
		}
		return f
	}
	if len(frames) > 0 {
		return frames[0]
	}
	return "unknown"
}

func goroutineEvidence(gs []goroutine, what string) []Evidence {
	byPath := map[string]*Evidence{}
	var order []string
	shown := 0
	for _, g := range gs {
		p := g.Path
		e := byPath[p]
		if e == nil {
			e = &Evidence{Path: p, What: what}
			byPath[p] = e
			order = append(order, p)
		}
		if shown >= maxGoroutineShow {
			e.More++
			continue
		}
		shown++
		lines := g.Lines
		if len(lines) > maxFrameLines {
			lines = lines[:maxFrameLines]
		}
		e.Lines = append(e.Lines, lines...)
	}
	var out []Evidence
	for _, p := range order {
		out = append(out, *byPath[p])
	}
	return out
}

func ruleKubelet(st *state, explained bool) {
	syncBad := st.syncloopBad()
	stuck := st.stuckCleanup()
	start := st.stuckStart()
	if !explained {
		longest := 0
		for _, g := range stuck {
			longest = max(longest, g.Minutes)
		}
		logs := st.logs.sigs[sigSyncLoop]
		if len(syncBad) > 0 || (len(stuck) > 0 && longest >= 2) || len(start) > 0 || (logs != nil && len(logs.unclaimed()) > 0) {
			st.syncloopFinding(syncBad, append(stuck, start...))
		}
	}
	// Other failing health checks.
	var other []Line
	for _, l := range st.healthzBad {
		if !strings.Contains(strings.ToLower(l.Text), "syncloop") {
			other = append(other, l)
		}
	}
	if len(other) > 0 {
		var names []string
		for _, l := range other {
			names = append(names, strings.TrimSpace(l.Text))
		}
		st.add(Finding{
			ID:          idHealthz,
			Subject:     "kubelet",
			Severity:    Warning,
			Title:       "Kubelet health checks failing",
			Summary:     "the kubelet's healthz reports " + listOf(names, 3),
			Explanation: "The kubelet's /healthz?verbose lists each internal check; these fail. The node is marked NotReady if they keep failing.",
			Evidence:    []Evidence{{Path: layout.KubeletHealthzPath, What: "the failing checks", Lines: other}},
			Remediation: []string{"Read the kubelet's log around the time of the bundle (journal/kubelet.log) for the failing check's cause."},
		})
	}
}

func (st *state) syncloopFinding(syncBad []Line, stuck []goroutine) {
	f := Finding{
		ID:       idSyncloop,
		Severity: Critical,
		Title:    "Kubelet sync loop unhealthy",
		Subject:  "kubelet",
	}
	if len(syncBad) == 0 {
		f.Severity = Warning
	}
	// The kubelet's own word at collection time overrules its logs: slow
	// iterations logged earlier, with healthz now saying "[+]syncloop ok"
	// and no cleanup goroutine stuck, are history, not the incident.
	earlier := len(syncBad) == 0 && len(stuck) == 0 && st.syncloopOK() != nil
	// Only log lines, all long before the collection, and nothing of the
	// collection's own time (healthz, goroutine dump, a kubelet thread in
	// the kernel) shows the loop stuck: they may be history.
	var history string
	if !earlier && len(syncBad) == 0 && len(stuck) == 0 && len(st.kubeletInKernel()) == 0 {
		if s := st.logs.sigs[sigSyncLoop]; s != nil {
			if newest, age, old := st.logsHistory(s.unclaimed()); old {
				history = fmt.Sprintf("earlier: the kubelet logged that its sync loop took longer than expected, last %s before this collection; nothing collected now shows it stuck, so these lines may be history", human(age))
				f.Explanation = historyWhy(newest, age, st.syncLoopNowChecked()) + " "
			}
		}
	}
	if earlier || history != "" {
		f.Severity = Info
	}
	switch {
	case history != "":
		f.Summary = history
	case earlier:
		f.Summary = "earlier: the kubelet logged that its sync loop took longer than expected; at collection time its healthz says " + strings.TrimSpace(st.syncloopOK().Text)
	case len(stuck) > 0 && onlyMain(stuck):
		f.Summary = "the kubelet's start is stuck: " + describeGoroutines(stuck) + "; the dump does not say for how long"
	case len(stuck) > 0:
		f.Summary = "the kubelet's pod cleanup is stuck: " + describeGoroutines(stuck)
	case len(syncBad) > 0:
		f.Summary = "the kubelet's healthz says: " + strings.TrimSpace(syncBad[0].Text)
	default:
		f.Summary = "the kubelet logs that its sync loop takes longer than expected"
	}
	f.Explanation += "The kubelet's sync loop starts, updates and cleans up every pod; when one iteration does not return, no pod on the node changes state any more: " +
		"new pods stay Pending/ContainerCreating and deleted ones Terminating. "
	if len(stuck) > 0 && onlyMain(stuck) {
		f.Explanation += startExplanation + st.hungContext()
	} else if len(stuck) > 0 {
		f.Explanation += "The goroutine dump shows it in pod housekeeping (HandlePodCleanups → cleanupOrphanedPodDirs), which stat()s the volume paths of deleted pods: " +
			"a path on a mount that hangs keeps it there forever (incident 003). " + st.hungContext()
	}
	if len(syncBad) > 0 {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.KubeletHealthzPath, What: "the kubelet's failing health check", Lines: syncBad})
	}
	if earlier {
		f.Evidence = append(f.Evidence, Evidence{Path: layout.KubeletHealthzPath, What: "the kubelet's sync loop healthy at collection time", Lines: []Line{*st.syncloopOK()}})
	}
	f.Evidence = append(f.Evidence, goroutineEvidence(stuck, "the kubelet's goroutines in pod cleanup, and for how long")...)
	for i := range st.tasks {
		t := &st.tasks[i]
		if strings.HasPrefix(t.Comm, "kubelet") && t.State == "D" {
			f.Evidence = append(f.Evidence, Evidence{Path: layout.TasksPath, What: "a kubelet thread in D state", Record: t})
		}
	}
	st.claimAll(&f, sigSyncLoop)
	st.claimAll(&f, sigPLEG)
	f.Remediation = []string{
		"Find the path the stuck goroutine touches: list /var/lib/kubelet/pods/*/volumes/* of pods no longer running and stat each with a timeout (timeout 5 stat <path>); the one that hangs is on a dead mount.",
		"Force-unmount that mount (umount -f <path>, then umount -l <path>); the sync loop resumes, or restart the kubelet if it does not.",
	}
	st.add(f)
}
