package fleet

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// The run's pods share one ServiceAccount, ClusterRole and binding named
// as the run, whatever the number of nodes, whose kubelet rules name the
// run's nodes and no other. With Pprof (nodes/proxy, which allows exec
// into a node's pods) each node's pod runs as an identity of its own
// whose role names that node alone: a token taken from one node's pod
// reaches no other kubelet. The pods leave pprof out otherwise.
func TestRunRoles(t *testing.T) {
	for _, pprof := range []bool{false, true} {
		s := newSim(t, map[string]behaviour{"a": healthy, "b": healthy, "c": healthy}, 512)
		var mu sync.Mutex
		roles := map[string]*rbacv1.ClusterRole{}
		bindings := map[string]*rbacv1.ClusterRoleBinding{}
		sas := map[string]bool{}
		pods := map[string]*corev1.Pod{}
		s.cs.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			switch o := a.(k8stesting.CreateAction).GetObject().(type) {
			case *rbacv1.ClusterRole:
				roles[o.Name] = o.DeepCopy()
			case *rbacv1.ClusterRoleBinding:
				bindings[o.Name] = o.DeepCopy()
			case *corev1.ServiceAccount:
				sas[o.Name] = true
			case *corev1.Pod:
				pods[o.Name] = o.DeepCopy()
			}
			return false, nil, nil
		})
		o := s.options(t.TempDir())
		o.Pprof = pprof
		rep, err := Run(context.Background(), o)
		if err != nil || rep.ExitStatus != ExitAllOK {
			t.Fatalf("pprof %v: %v %+v", pprof, err, rep)
		}
		identities := 1
		if pprof {
			identities = 3
		}
		if len(pods) != 3 || len(roles) != identities || len(bindings) != identities || len(sas) != identities {
			t.Fatalf("pprof %v: %d pods, %d service accounts, %d roles, %d bindings; want %d of each identity object",
				pprof, len(pods), len(sas), len(roles), len(bindings), identities)
		}
		for name, p := range pods {
			node := p.Spec.NodeName
			sa, nodes := rep.RunID, []string{"a", "b", "c"}
			if pprof {
				sa, nodes = name, []string{node}
			}
			if p.Spec.ServiceAccountName != sa {
				t.Errorf("pod %s runs as %q, want %q", name, p.Spec.ServiceAccountName, sa)
			}
			b := bindings[sa]
			if b == nil || b.RoleRef.Name != sa || len(b.Subjects) != 1 || b.Subjects[0].Name != sa || !sas[sa] {
				t.Errorf("binding %s %+v does not tie role %s to service account %s", sa, b, sa, sa)
			}
			role := roles[sa]
			if role == nil {
				t.Fatalf("no role %s", sa)
			}
			proxy := false
			for _, r := range role.Rules {
				// The cluster collector's reads (get and list of the
				// node's view through the API, no Secret) cannot be cut
				// to nodes by name; every kubelet subresource is.
				if slices.ContainsFunc(podspec.ClusterRules(), func(c rbacv1.PolicyRule) bool { return reflect.DeepEqual(c, r) }) {
					continue
				}
				if !slices.Equal(r.ResourceNames, nodes) || !slices.Equal(r.Verbs, []string{"get"}) {
					t.Errorf("role %s rule %+v: want get on nodes %v alone", sa, r, nodes)
				}
				proxy = proxy || slices.Contains(r.Resources, "nodes/proxy")
			}
			if proxy != pprof {
				t.Errorf("role %s: nodes/proxy %v with pprof %v", sa, proxy, pprof)
			}
			args := strings.Join(p.Spec.InitContainers[0].Args, " ")
			if strings.Contains(args, "--kubelet-pprof=false") == pprof {
				t.Errorf("pod %s args %q with pprof %v", name, args, pprof)
			}
			if _, err := time.Parse(time.RFC3339, p.Annotations[ExpiresAnnotation]); err != nil {
				t.Errorf("pod %s has no expiry: %v", name, p.Annotations)
			}
		}
		for name, r := range roles {
			if _, err := time.Parse(time.RFC3339, r.Annotations[ExpiresAnnotation]); err != nil || !fleetMade(r.ObjectMeta) {
				t.Errorf("role %s has no expiry or would not be swept as the fleet's: %v %v", name, r.Labels, r.Annotations)
			}
		}
		checkClean(t, s, true)
	}
}

// What a run whose client died left behind is removed by the next run
// once past its expiry; what is not past it, or is not the fleet's, stays:
// an object that carries the fleet's label and a past expiry but that no
// run made (cluster-admin, a system: binding, a name the labels do not
// give) is never deleted.
func TestSweepExpired(t *testing.T) {
	s := newSim(t, map[string]behaviour{"a": healthy}, 512)
	ctx := context.Background()
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	const deadRun = "nodesnap-fleet-deadbeef"
	old, current := podName(deadRun, "node-old"), podName(deadRun, "node-current")
	meta := func(name, node, expires string, ours bool) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: name, Namespace: "nodesnap", Annotations: map[string]string{ExpiresAnnotation: expires, NodeAnnotation: node}, Labels: map[string]string{}}
		if ours {
			m.Labels = runLabels(deadRun)
		}
		return m
	}
	binding := func(m metav1.ObjectMeta, role string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: m, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: m.Name, Namespace: "nodesnap"}}}
	}
	for _, c := range []struct {
		name, node, expires string
		ours                bool
	}{
		{old, "node-old", past, true},
		{current, "node-current", future, true},
		{"foreign", "node-old", past, false},
		// Labelled and expired, but not named as the run names them.
		{"cluster-admin", "node-old", past, true},
		{"system:kube-controller-manager", "node-old", past, true},
		{old + "x", "node-old", past, true},
		// The run's one identity, named as the run; another run's name
		// under this run's label is not this run's.
		{deadRun, "", past, true},
		{"nodesnap-fleet-cafef00d", "", past, true},
	} {
		m := meta(c.name, c.node, c.expires, c.ours)
		if _, err := s.cs.CoreV1().ServiceAccounts("nodesnap").Create(ctx, &corev1.ServiceAccount{ObjectMeta: m}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		m.Namespace = ""
		if _, err := s.cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: m}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding(m, m.Name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Named as a run names them, but the binding grants another role.
	other := meta(podName(deadRun, "node-other"), "node-other", past, true)
	other.Namespace = ""
	if _, err := s.cs.RbacV1().ClusterRoleBindings().Create(ctx, binding(other, "cluster-admin"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The run's Secrets of upload URLs; another run's name under its label
	// is not its own.
	for _, name := range []string{secretName(deadRun, 0), "nodesnap-fleet-cafef00d-upload-0"} {
		if _, err := s.cs.CoreV1().Secrets("nodesnap").Create(ctx, &corev1.Secret{ObjectMeta: meta(name, "", past, true)}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Run(ctx, s.options(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.cs.CoreV1().Secrets("nodesnap").Get(ctx, "nodesnap-fleet-cafef00d-upload-0", metav1.GetOptions{}); err != nil {
		t.Errorf("another run's Secret name under this run's label was removed: %v", err)
	}
	want := []string{"secret nodesnap/" + secretName(deadRun, 0), "clusterrole " + old, "clusterrole " + deadRun, "clusterrolebinding " + old, "clusterrolebinding " + deadRun,
		"serviceaccount nodesnap/" + old, "serviceaccount nodesnap/" + deadRun}
	got := slices.Clone(rep.Swept)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("swept %q, want %q", got, want)
	}
	for _, name := range []string{current, "foreign", "cluster-admin", "system:kube-controller-manager", old + "x", "nodesnap-fleet-cafef00d"} {
		if _, err := s.cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("clusterrole %s removed: %v", name, err)
		}
		if _, err := s.cs.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("clusterrolebinding %s removed: %v", name, err)
		}
		if _, err := s.cs.CoreV1().ServiceAccounts("nodesnap").Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("serviceaccount %s removed: %v", name, err)
		}
	}
	if _, err := s.cs.RbacV1().ClusterRoleBindings().Get(ctx, other.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a binding of another role was removed: %v", err)
	}
	if _, err := s.cs.RbacV1().ClusterRoles().Get(ctx, old, metav1.GetOptions{}); err == nil {
		t.Error("the expired clusterrole is still there")
	}
}
