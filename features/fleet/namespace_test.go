package fleet

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// terminatingNamespace puts namespace ns in the fake cluster as an
// earlier run's clean-up leaves it: deleted, not gone yet. It goes after
// gets reads of it, or never when gets is 0; it returns how many times it
// was read.
func terminatingNamespace(t *testing.T, s *sim, ns string, gets int) func() int {
	t.Helper()
	now := metav1.Now()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
	if err := s.cs.Tracker().Add(obj); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	s.cs.PrependReactor("get", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() != ns {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		if gets > 0 && n == gets {
			_ = s.cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("namespaces"), "", ns)
		}
		return false, nil, nil
	})
	s.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if got, err := s.cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("namespaces"), "", ns); err == nil &&
			got.(*corev1.Namespace).DeletionTimestamp != nil {
			t.Errorf("a pod was created in namespace %s while it was being deleted", ns)
		}
		return false, nil, nil
	})
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// A run right after another one (explain twice in a row) finds the
// namespace the first one made still being deleted: it waits for it to
// go, makes it again, collects, and removes it again.
func TestNamespaceBeingDeletedIsWaitedFor(t *testing.T) {
	defer func(w, p time.Duration) { namespaceGoneWithin, namespacePoll = w, p }(namespaceGoneWithin, namespacePoll)
	namespaceGoneWithin, namespacePoll = time.Minute, time.Millisecond
	s := newSim(t, map[string]behaviour{"a": healthy}, 512)
	o := s.options(t.TempDir())
	o.Namespace = "nodesnap"
	reads := terminatingNamespace(t, s, o.Namespace, 4)
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("the run after a deleted namespace: %v", err)
	}
	if r := rep.Nodes[0]; r.Status != StatusOK {
		t.Errorf("node a: %s %q, want ok", r.Status, r.Reason)
	}
	if n := reads(); n < 4 {
		t.Errorf("the namespace was read %d times: the run did not wait for it to go", n)
	}
	checkClean(t, s, true)
}

// A namespace that stays being deleted (a finalizer waiting on something
// else) is waited for a bounded time; the run then says what is wrong and
// what to do, and creates nothing.
func TestNamespaceStuckDeletingIsBounded(t *testing.T) {
	defer func(w, p time.Duration) { namespaceGoneWithin, namespacePoll = w, p }(namespaceGoneWithin, namespacePoll)
	namespaceGoneWithin, namespacePoll = 50*time.Millisecond, time.Millisecond
	s := newSim(t, map[string]behaviour{"a": healthy}, 512)
	o := s.options(t.TempDir())
	o.Namespace = "nodesnap"
	terminatingNamespace(t, s, o.Namespace, 0)
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "being deleted") || !strings.Contains(err.Error(), "another namespace") {
		t.Fatalf("err %v; want the namespace named as being deleted, and the way out", err)
	}
	pods, _ := s.cs.CoreV1().Pods(o.Namespace).List(context.Background(), metav1.ListOptions{})
	if len(pods.Items) != 0 {
		t.Errorf("%d pods created in a namespace being deleted", len(pods.Items))
	}
}

// The namespace a run made is not deleted under another run's pods.
func TestNamespaceKeptForAnotherRun(t *testing.T) {
	s := newSim(t, map[string]behaviour{"a": healthy}, 512)
	o := s.options(t.TempDir())
	o.Namespace = "nodesnap"
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nodesnap-other", Namespace: o.Namespace,
		Labels: map[string]string{ManagedByLabel: ManagedBy, RunLabel: "other-run"}}}
	s.cs.PrependReactor("create", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// The other run's pod arrives as soon as the namespace exists.
		if err := s.cs.Tracker().Add(other); err != nil {
			t.Error(err)
		}
		return false, nil, nil
	})
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if _, err := s.cs.CoreV1().Namespaces().Get(context.Background(), o.Namespace, metav1.GetOptions{}); err != nil {
		t.Errorf("the namespace was deleted under another run's pod: %v", err)
	}
}
