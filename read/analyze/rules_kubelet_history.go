package analyze

import (
	"fmt"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/signatures"
)

// Sync-loop and PLEG lines of the kubelet's log are evidence of its state
// at collection time only while they are recent, or while the collection
// itself shows the loop stuck. A run without the kubelet's credentials
// (no goroutine dump, often no healthz) that finds only such lines, all
// long before the collection, says they may be history rather than
// calling the node's pods blocked.

// historyAfter is how long before the collection the newest sync-loop
// line must be to be called possible history: well past the kubelet's own
// 2-3 minute thresholds (syncloop healthz, PLEG relist), so a loop that
// complains every few minutes is never mistaken for one that recovered.
const historyAfter = 15 * time.Minute

// widestUTCOffset bounds the error of a log time whose zone is unknown (a
// syslog or klog stamp, read as UTC): UTC+14 to UTC-12.
const widestUTCOffset = 14 * time.Hour

// logsHistory says whether lines are all long before the collection: the
// newest of them and its age. Not history when a line carries no time,
// when the bundle has no collection time, or when the lines are recent
// enough that an unknown zone could make them current.
func (st *state) logsHistory(ks []*keyHits) (newest time.Time, age time.Duration, ok bool) {
	if st.manifest == nil || st.manifest.StartedAt.IsZero() || len(ks) == 0 {
		return time.Time{}, 0, false
	}
	zoned := true
	for _, k := range ks {
		if k.Newest.IsZero() {
			return time.Time{}, 0, false
		}
		if k.Newest.After(newest) {
			newest = k.Newest
		}
		zoned = zoned && k.origin.Zoned
	}
	age = st.manifest.StartedAt.Sub(newest)
	limit := historyAfter
	if !zoned {
		limit += widestUTCOffset
	}
	return newest, age, age > limit
}

// kubeletInKernel returns the kubelet's threads the collection found
// blocked in the kernel: in uninterruptible sleep, or with a kernel stack
// recorded (the processes collector records it for tasks waiting in a
// filesystem's code).
func (st *state) kubeletInKernel() []string {
	var out []string
	for i := range st.tasks {
		t := &st.tasks[i]
		if (t.State == "D" || len(t.Stack) > 0) && st.isKubeletTask(t) {
			out = append(out, fmt.Sprintf("%d (state %s, wchan %s)", t.TID, t.State, orUnknown(t.Wchan)))
		}
	}
	return out
}

// nodeSaysPLEG: the API's Node object (collected now) carries a condition
// whose message is the PLEG complaint.
func (st *state) nodeSaysPLEG() bool {
	if st.cluster == nil || st.cluster.Node == nil {
		return false
	}
	for _, c := range st.cluster.Node.Status.Conditions {
		if strings.Contains(c.Message, "PLEG is not healthy") {
			return true
		}
	}
	return false
}

// syncLoopNowChecked says what the bundle holds of the collection's own
// time about the sync loop, none of which shows it stuck (the caller
// checked), and what it lacks.
func (st *state) syncLoopNowChecked() string {
	var out []string
	if len(st.healthz) > 0 {
		out = append(out, "the kubelet's healthz does not say the sync loop failed")
	} else {
		out = append(out, "no healthz was collected")
	}
	if len(st.kubeDumps) > 0 {
		out = append(out, "its goroutine dump shows no pod cleanup stuck")
	} else {
		out = append(out, "no goroutine dump was collected (it needs a kubelet credential allowed its pprof endpoints)")
	}
	if st.tasksSeen {
		out = append(out, "no kubelet thread is blocked in the kernel")
	} else {
		out = append(out, "no process list was collected to show a kubelet thread blocked in the kernel")
	}
	return strings.Join(out, "; ")
}

// historyWhy is the sentence that says why lines may be history; checked
// lists the evidence of the collection's own time that is absent.
func historyWhy(newest time.Time, age time.Duration, checked string) string {
	return fmt.Sprintf("The newest of these lines is from %s, %s before this collection, and nothing collected now shows it still so: %s. "+
		"They may be history, an episode that ended. A kubelet stuck since then need not log again, though: its healthz or its goroutine dump, collected now, would tell.",
		newest.UTC().Format(time.RFC3339), human(age), checked)
}

// plegFindings reports "PLEG is not healthy" lines, as possible history
// when they are all long before the collection and nothing collected now
// shows the kubelet stuck.
func (st *state) plegFindings() {
	current := st.nodeSaysPLEG() || len(st.kubeletInKernel()) > 0
	st.eachUnclaimed(sigPLEG, idPLEG, func(k *keyHits) {
		kind := signatures.KeyNone
		if c := signatures.ByID(sigPLEG); c != nil {
			kind = c.Key
		}
		f := Finding{ID: idPLEG, Severity: Warning, Title: "Kubelet PLEG is not healthy", Subject: st.subject(k, kind),
			Summary: fmt.Sprintf("the kubelet reports \"PLEG is not healthy\" (%s)", plural(k.Count, "time", "times")),
			Explanation: "The pod lifecycle event generator relists containers through the runtime; when a relist does not finish (the runtime hangs inspecting a container on a dead mount, " +
				"kubernetes#61117, or is overloaded), the node goes NotReady.",
			Evidence:    k.evidence(sigWhat[sigPLEG]),
			Remediation: []string{"Check the runtime: crictl ps and crictl inspect of each container with a timeout; a hanging one points at its mounts. Read the runtime's goroutine dump in this bundle."}}
		if newest, age, old := st.logsHistory([]*keyHits{k}); old && !current {
			f.Severity = Info
			f.Summary = fmt.Sprintf("earlier: the kubelet reported \"PLEG is not healthy\" (%s), last %s before this collection; these lines may be history", plural(k.Count, "time", "times"), human(age))
			checked := "the API's Node conditions do not say so"
			if st.cluster == nil || st.cluster.Node == nil {
				checked = "no Node object from the API was collected"
			}
			if st.tasksSeen {
				checked += "; no kubelet thread is blocked in the kernel"
			} else {
				checked += "; no process list was collected"
			}
			f.Explanation += " " + historyWhy(newest, age, checked)
		}
		st.add(f)
	})
}
