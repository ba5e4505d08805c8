package fleet

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// verdict is what a pod's state (and its node's) says about a node's
// collection at one moment. status set means final; ready means the
// bundle is written and the pod serves it.
type verdict struct {
	phase  string
	status Status
	reason string
	ready  bool
	// hint is the latest transient trouble (an image pull error the kubelet
	// retries, say), kept for the reason if the deadline passes.
	hint string
	// collectFailed: the collect container ended without a bundle; its
	// log says why.
	collectFailed bool
	// acked: the kubelet has taken the pod on (it has a start time or
	// container statuses).
	acked                    bool
	collectStart, collectEnd time.Time
	// message is the collect container's termination message: collect's
	// result, where it is written there (see resultOf).
	message string
}

// Pod failure reasons set by the kubelet when it refuses a pod at
// admission: the node lacks the resources, or the pod's constraints do not
// fit it. With nodeName set the scheduler never sees the pod, so this is
// how "does not fit on the node" shows.
var admissionReasons = map[string]bool{
	"NodeAffinity": true, "NodeName": true, "NodePorts": true, "Taint": true,
	"UnexpectedAdmissionError": true, "InvalidNodeInfo": true, "PodOSNotSupported": true,
	"PodOSSelectorNodeLabelDoesNotMatch": true, "SysctlForbidden": true, "AppArmor": true,
}

// Container waiting reasons that mean the image will not come: final at
// once. ErrImagePull is retried by the kubelet (then ImagePullBackOff), so
// it is only a hint until the backoff.
var imageFinal = map[string]bool{"ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}

// createFailures are waiting reasons that mean the container cannot be
// created as specified (a bad mount, a refused security context).
var createFailures = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// classify reads a pod (nil: not seen yet) and its node (nil: not
// looked at). now and notReadyGrace decide when a pod that no kubelet has
// taken on, on a NotReady node, is given up.
func classify(pod *corev1.Pod, node *corev1.Node, created, now time.Time, notReadyGrace time.Duration) verdict {
	if pod == nil {
		return verdict{phase: PhasePending}
	}
	v := verdict{phase: PhasePending, acked: pod.Status.StartTime != nil || len(pod.Status.InitContainerStatuses) > 0}
	st := pod.Status
	started := false
	for _, cs := range st.InitContainerStatuses {
		if cs.Name != podspec.CollectContainer {
			continue
		}
		switch s := cs.State; {
		case s.Terminated != nil:
			started = true
			v.collectStart, v.collectEnd = s.Terminated.StartedAt.Time, s.Terminated.FinishedAt.Time
			v.message = s.Terminated.Message
			if s.Terminated.ExitCode != 0 {
				v.status, v.collectFailed = StatusFailed, true
				v.reason = fmt.Sprintf("the collection ended with exit status %d%s: no bundle was written", s.Terminated.ExitCode, detail(s.Terminated.Reason, s.Terminated.Message))
				return v
			}
			v.phase = PhaseCollecting
		case s.Running != nil:
			started = true
			v.phase, v.collectStart = PhaseCollecting, s.Running.StartedAt.Time
		case s.Waiting != nil:
			w := s.Waiting
			switch {
			case imageFinal[w.Reason]:
				v.status, v.reason = StatusImagePull, "the node cannot get the image: "+w.Reason+detail("", w.Message)
				return v
			case w.Reason == "ErrImagePull":
				v.hint = "pulling the image failed: " + w.Message
			case createFailures[w.Reason]:
				v.status, v.reason = StatusFailed, "the node cannot start the collect container: "+w.Reason+detail("", w.Message)
				return v
			case w.Reason != "" && w.Reason != "PodInitializing" && w.Reason != "ContainerCreating":
				v.hint = w.Reason + detail("", w.Message)
			}
		}
	}
	if st.Phase == corev1.PodFailed {
		switch {
		case st.Reason == "DeadlineExceeded":
			v.status, v.reason = StatusTimeout, "the pod's active deadline passed"+detail("", st.Message)
		case !started && (admissionReasons[st.Reason] || strings.HasPrefix(st.Reason, "OutOf")):
			v.status, v.reason = StatusUnschedulable, "the node refused the pod: "+st.Reason+detail("", st.Message)
		default:
			v.status, v.reason = StatusFailed, "the pod failed"+detail(st.Reason, st.Message)
		}
		return v
	}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			v.status, v.reason = StatusUnschedulable, "the pod cannot be scheduled: "+c.Message
			return v
		}
	}
	if v.phase == PhaseCollecting && !v.collectEnd.IsZero() {
		for _, cs := range st.ContainerStatuses {
			if cs.Name == podspec.HoldContainer && cs.State.Running != nil {
				v.ready, v.phase = true, PhaseCopying
			}
		}
		if !v.ready {
			v.hint = "the bundle is written; the hold container that serves it has not started"
		}
		if st.Phase == corev1.PodSucceeded {
			v.status, v.reason = StatusFailed, "the pod ended before its bundle was copied (its hold container exited)"
		}
		return v
	}
	if !v.acked && node != nil && now.Sub(created) >= notReadyGrace {
		if ready, why := nodeReady(node); !ready {
			v.status, v.reason = StatusNotReady, fmt.Sprintf("node %s is NotReady (%s) and its kubelet did not take the pod on within %s", node.Name, why, notReadyGrace)
		}
	}
	return v
}

// nodeReady reads a node's Ready condition; a node without one has never
// had a kubelet report for it.
func nodeReady(n *corev1.Node) (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			why := "Ready=" + string(c.Status)
			if c.Reason != "" {
				why += ", " + c.Reason
			}
			if c.Message != "" {
				why += ": " + c.Message
			}
			return false, why
		}
	}
	return false, "no kubelet has ever reported its status"
}

// detail formats an optional reason and message as ": reason: message".
func detail(reason, msg string) string {
	var s string
	if reason != "" {
		s += " (" + reason + ")"
	}
	if msg = strings.TrimSpace(msg); msg != "" {
		s += ": " + msg
	}
	return s
}
