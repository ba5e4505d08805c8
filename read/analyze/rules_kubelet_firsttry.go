package analyze

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// The kubelet's volume operations back off exponentially from 500ms
// (pkg/util/goroutinemap/exponentialbackoff, every release), and each
// failure's line says when it may be retried on the kubelet's monotonic
// clock ("No retries permitted until ... m=+4.300346921
// (durationBeforeRetry 500ms)"): m=+ is the time since the kubelet
// started.
var (
	reKubeletUptime  = regexp.MustCompile(`\bm=\+([0-9]+(?:\.[0-9]+)?)\b`)
	reFirstBackoff   = regexp.MustCompile(`durationBeforeRetry 500ms\b`)
	kubeletStartTime = time.Minute
)

// firstTryAtStart says whether a kubelet operation's only failure was its
// first try in the kubelet's first minute: the kubelet just started, its
// caches and plugins are still filling (a configmap it has not yet got, a
// driver not yet registered), and it retries after 500ms. One such
// failure at the end of the evidence is not yet a failing operation;
// a second failure, a later backoff or an older kubelet is.
func firstTryAtStart(g *opGroup) (string, bool) {
	if !g.kubelet || g.hits == nil || g.hits.Count != 1 {
		return "", false
	}
	hs := g.hits.hits()
	if len(hs) == 0 {
		return "", false
	}
	text := hs[len(hs)-1].Line.Text
	m := reKubeletUptime.FindStringSubmatch(text)
	if m == nil || !reFirstBackoff.MatchString(text) {
		return "", false
	}
	up, err := strconv.ParseFloat(m[1], 64)
	if err != nil || up < 0 || up >= kubeletStartTime.Seconds() {
		return "", false
	}
	return fmt.Sprintf("its one failure was its first try, %s after the kubelet started (m=+%s), retried after 500ms: a kubelet starting often fails a volume once while its caches fill; no later failure is logged",
		(time.Duration(up * float64(time.Second))).Round(time.Second), m[1]), true
}
