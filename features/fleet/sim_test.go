package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// behaviour is how a simulated node's kubelet treats the run's pod.
type behaviour int

const (
	healthy       behaviour = iota // collects, complete bundle
	partialBundle                  // collects, partial bundle
	noResources                    // refuses the pod at admission (OutOfcpu)
	noImage                        // cannot pull the image
	slow                           // the collection never ends
	deadKubelet                    // NotReady, never takes the pod on
	collectFails                   // collect exits 1
)

// simNode is a node of the simulated cluster and its bundle: size bytes
// of a seeded pseudo-random stream, generated as it is streamed (never
// held whole).
type simNode struct {
	b    behaviour
	size int64
	sum  string
}

// sim is a fake cluster: client-go's fake clientset with a kubelet that
// sets a pod's status as it is created, and a PodIO that serves each
// node's bundle through "exec".
type sim struct {
	t      testing.TB
	cs     *fake.Clientset
	mu     sync.Mutex
	nodes  map[string]*simNode
	execs  int
	logs   int
	podsOn map[string]string // pod → node
	// onCreate, when set, sees each pod as it is created, after its
	// node's kubelet set its status.
	onCreate func(pod *corev1.Pod, n *simNode)
}

func seedOf(node string) uint64 {
	h := sha256.Sum256([]byte(node))
	return uint64(h[0]) | uint64(h[1])<<8 | uint64(h[2])<<16
}

// bundleStream is the node's bundle bytes.
func bundleStream(node string, size int64) io.Reader {
	return io.LimitReader(&prng{r: rand.New(rand.NewPCG(seedOf(node), 7))}, size)
}

type prng struct{ r *rand.Rand }

func (p *prng) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = byte(p.r.Uint32())
	}
	return len(b), nil
}

func newSim(t testing.TB, nodes map[string]behaviour, size int64) *sim {
	s := &sim{t: t, nodes: map[string]*simNode{}, podsOn: map[string]string{}}
	var objs []runtime.Object
	for name, b := range nodes {
		h := sha256.New()
		if _, err := io.Copy(h, bundleStream(name, size)); err != nil {
			t.Fatal(err)
		}
		s.nodes[name] = &simNode{b: b, size: size, sum: hex.EncodeToString(h.Sum(nil))}
		ready := corev1.ConditionTrue
		if b == deadKubelet {
			ready = corev1.ConditionUnknown
		}
		objs = append(objs, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": poolOf(b)}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready,
				Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status."}}},
		})
	}
	s.cs = fake.NewClientset(objs...)
	s.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		s.mu.Lock()
		n := s.nodes[pod.Spec.NodeName]
		s.podsOn[pod.Name] = pod.Spec.NodeName
		s.mu.Unlock()
		if n != nil {
			kubelet(pod, n.b)
			if s.onCreate != nil {
				s.onCreate(pod, n)
			}
		}
		return false, nil, nil // the tracker stores the pod as changed
	})
	return s
}

func poolOf(b behaviour) string {
	if b == healthy {
		return "good"
	}
	return "other"
}

// kubelet sets the status a node with behaviour b gives the pod.
func kubelet(pod *corev1.Pod, b behaviour) {
	now := metav1.Now()
	st := &pod.Status
	if b == deadKubelet {
		return
	}
	st.StartTime = &now
	collect := corev1.ContainerStatus{Name: podspec.CollectContainer}
	hold := corev1.ContainerStatus{Name: podspec.HoldContainer}
	switch b {
	case healthy, partialBundle:
		st.Phase = corev1.PodRunning
		collect.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: now, FinishedAt: now}
		hold.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
	case noResources:
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "OutOfcpu", "Pod Node didn't have enough resource: cpu, requested: 100, used: 3950, capacity: 4000"
		st.StartTime = nil
		return
	case noImage:
		st.Phase = corev1.PodPending
		collect.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nodesnap:missing"`}
	case slow:
		st.Phase = corev1.PodPending
		collect.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
	case collectFails:
		st.Phase = corev1.PodPending
		collect.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: now, FinishedAt: now}
	}
	st.InitContainerStatuses = []corev1.ContainerStatus{collect}
	st.ContainerStatuses = []corev1.ContainerStatus{hold}
}

func (s *sim) nodeOf(pod string) (string, *simNode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.podsOn[pod], s.nodes[s.podsOn[pod]]
}

// Logs is the collect container's log: collect's JSON result.
func (s *sim) Logs(_ context.Context, _, pod, _ string, _ int64) ([]byte, error) {
	s.mu.Lock()
	s.logs++
	s.mu.Unlock()
	node, n := s.nodeOf(pod)
	if n == nil {
		return nil, fmt.Errorf("no pod %s", pod)
	}
	if n.b == collectFails {
		return []byte("nodesnap: the output directory /output is full\n"), nil
	}
	status, missing := "complete", []string(nil)
	if n.b == partialBundle {
		status, missing = "partial", []string{"journal: timed out after 30s"}
	}
	res, _ := json.MarshalIndent(CollectResult{Path: "/output/nodesnap-" + node + "-20261123T101500Z.tar.gz",
		HostPath: "/var/tmp/nodesnap/nodesnap-" + node + "-20261123T101500Z.tar.gz", Size: n.size, SHA256: n.sum, Status: status, Missing: missing}, "", "  ")
	return append([]byte("nodesnap: note: something on stderr\n"), append(res, '\n')...), nil
}

// Exec streams the node's bundle, as bundle-cat would.
func (s *sim) Exec(ctx context.Context, _, pod, container string, cmd []string, stdout, _ io.Writer) error {
	s.mu.Lock()
	s.execs++
	s.mu.Unlock()
	node, n := s.nodeOf(pod)
	if n == nil || container != podspec.HoldContainer || len(cmd) != 3 || cmd[1] != "bundle-cat" {
		return fmt.Errorf("unexpected exec %v in %s/%s", cmd, pod, container)
	}
	_, err := io.Copy(stdout, bundleStream(node, n.size))
	return err
}

func (s *sim) options(dir string) Options {
	return Options{
		Client: fromClientset(s.cs), PodIO: s, All: true, Image: "nodesnap:test", OutputDir: dir,
		NodeTimeout: 2 * time.Second, NotReadyGrace: 50 * time.Millisecond,
		MaxParallel: 4, Version: "test",
	}
}
