package fleet

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassify(t *testing.T) {
	created := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	now := metav1.NewTime(created.Add(5 * time.Second))
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, StartTime: &now, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "collect", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	collected := func(code int32, hold corev1.ContainerState, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, StartTime: &now,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "collect", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: code, StartedAt: now, FinishedAt: metav1.NewTime(now.Add(20 * time.Second))}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "hold", State: hold}}}}
	}
	node := func(st corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: st, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	for _, c := range []struct {
		name      string
		pod       *corev1.Pod
		node      *corev1.Node
		after     time.Duration
		status    Status
		phase     string
		ready     bool
		reason    string
		hint      string
		collected time.Duration
	}{
		{name: "not seen yet", phase: PhasePending},
		{name: "pending, fresh", pod: &corev1.Pod{}, phase: PhasePending},
		{name: "pending on a NotReady node, before the grace", pod: &corev1.Pod{}, node: node(corev1.ConditionUnknown), after: 10 * time.Second, phase: PhasePending},
		{name: "pending on a NotReady node", pod: &corev1.Pod{}, node: node(corev1.ConditionUnknown), after: time.Minute,
			status: StatusNotReady, reason: "Ready=Unknown, NodeStatusUnknown: Kubelet stopped posting"},
		{name: "pending on a node with no Ready condition", pod: &corev1.Pod{}, node: &corev1.Node{}, after: time.Minute,
			status: StatusNotReady, reason: "no kubelet has ever reported"},
		{name: "pending on a Ready node", pod: &corev1.Pod{}, node: node(corev1.ConditionTrue), after: time.Minute, phase: PhasePending},
		{name: "taken on by a NotReady node's kubelet", pod: waiting("PodInitializing", ""), node: node(corev1.ConditionFalse), after: time.Minute, phase: PhasePending},
		{name: "image pull, retried", pod: waiting("ErrImagePull", "rpc error: not found"), phase: PhasePending, hint: "rpc error: not found"},
		{name: "image pull backoff", pod: waiting("ImagePullBackOff", `Back-off pulling image "x"`), status: StatusImagePull, reason: "ImagePullBackOff: Back-off"},
		{name: "image name invalid", pod: waiting("InvalidImageName", ""), status: StatusImagePull},
		{name: "never pull", pod: waiting("ErrImageNeverPull", ""), status: StatusImagePull},
		{name: "config error", pod: waiting("CreateContainerConfigError", "secret not found"), status: StatusFailed, reason: "secret not found"},
		{name: "out of cpu", pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu"}},
			status: StatusUnschedulable, reason: "OutOfcpu: Node didn't"},
		{name: "node selector", pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed"}},
			status: StatusUnschedulable, reason: "NodeAffinity"},
		{name: "unschedulable by the scheduler", pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}},
			status: StatusUnschedulable, reason: "0/3 nodes"},
		{name: "active deadline", pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}}, status: StatusTimeout},
		{name: "evicted", pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			status: StatusFailed, reason: "(Evicted): low on memory"},
		{name: "collecting", pod: &corev1.Pod{Status: corev1.PodStatus{StartTime: &now, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "collect", State: running}}}}, phase: PhaseCollecting},
		{name: "collected, hold starting", pod: collected(0, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, corev1.PodPending),
			phase: PhaseCollecting, collected: 20 * time.Second, hint: "hold container that serves it has not started"},
		{name: "collected, holding", pod: collected(0, running, corev1.PodRunning), phase: PhaseCopying, ready: true, collected: 20 * time.Second},
		{name: "collection failed", pod: collected(1, corev1.ContainerState{}, corev1.PodFailed), status: StatusFailed, reason: "exit status 1"},
		{name: "hold ended", pod: collected(0, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}, corev1.PodSucceeded),
			status: StatusFailed, reason: "before its bundle was copied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := classify(c.pod, c.node, created, created.Add(c.after), 30*time.Second)
			if v.status != c.status || (c.status == "" && v.phase != c.phase) || v.ready != c.ready ||
				!strings.Contains(v.reason, c.reason) || !strings.Contains(v.hint, c.hint) {
				t.Errorf("got status %q phase %q ready %v reason %q hint %q", v.status, v.phase, v.ready, v.reason, v.hint)
			}
			if c.collected > 0 && v.collectEnd.Sub(v.collectStart) != c.collected {
				t.Errorf("collection took %s, want %s", v.collectEnd.Sub(v.collectStart), c.collected)
			}
		})
	}
}

func TestParseCollectResult(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name, log string
		path, err string
	}{
		{name: "only the result", log: `{"path":"/output/nodesnap-n1-20261123T101500Z.tar.gz","size":10,"sha256":"` + sum + `","status":"complete"}`,
			path: "/output/nodesnap-n1-20261123T101500Z.tar.gz"},
		{name: "notes before, blank after", log: "nodesnap: note: x\n{\"path\":\"/o/a.tar.zst\",\"size\":1,\"sha256\":\"" + strings.ToUpper(sum) + "\",\"status\":\"partial\"}\n\n",
			path: "/o/a.tar.zst"},
		{name: "last result wins", log: `{"path":"/o/old.tar.gz","sha256":"` + sum + `"}` + "\n" + `{"path":"/o/new.tar.gz","sha256":"` + sum + `"}`, path: "/o/new.tar.gz"},
		{name: "indented, as collect prints it", log: "nodesnap: note: the bundle is written to /output\n{\n  \"path\": \"/output/nodesnap-n1-20261123T101500Z.tar.gz\",\n  \"size\": 5,\n  \"sha256\": \"" + sum + "\",\n  \"collectors\": {\n    \"host\": \"ok\"\n  },\n  \"exit_status\": 0\n}\n",
			path: "/output/nodesnap-n1-20261123T101500Z.tar.gz"},
		{name: "no result", log: "nodesnap: no space left\n", err: "no result"},
		{name: "empty", log: "", err: "no result"},
		{name: "bad sha", log: `{"path":"/o/a.tar.gz","sha256":"xyz"}`, err: "no valid sha256"},
		{name: "negative size", log: `{"path":"/o/a.tar.gz","size":-1,"sha256":"` + sum + `"}`, err: "negative size"},
		{name: "not a bundle", log: `{"path":"/etc/passwd","sha256":"` + sum + `"}`, err: "names no bundle"},
		{name: "a directory", log: `{"path":"/o/..","sha256":"` + sum + `"}`, err: "names no bundle"},
		{name: "truncated JSON", log: `{"path":"/o/a.tar.gz","sha`, err: "no result"},
		{name: "object inside a line", log: `note {"path":"/o/a.tar.gz","sha256":"` + sum + `"}`, err: "no result"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseCollectResult([]byte(c.log))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || r.Path != c.path || r.SHA256 != sum {
				t.Fatalf("%+v %v; want path %s", r, err, c.path)
			}
		})
	}
}

// The collect container's log is written on the node: whatever it holds,
// the parser returns a result with a plain bundle name and a hex sha256,
// or an error; it never panics.
func FuzzParseCollectResult(f *testing.F) {
	f.Add([]byte(`{"path":"/output/nodesnap-n1-20261123T101500Z.tar.gz","size":10,"sha256":"` + strings.Repeat("0", 64) + `","status":"complete"}`))
	f.Add([]byte("note\n{\"path\":\"/o/../a.tar.gz\",\"sha256\":\"\"}\n{"))
	f.Fuzz(func(t *testing.T, log []byte) {
		r, err := ParseCollectResult(log)
		if err != nil {
			return
		}
		if len(r.SHA256) != 64 || r.Size < 0 || r.Path == "" {
			t.Fatalf("accepted %+v", r)
		}
	})
}
