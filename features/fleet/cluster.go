package fleet

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodesnap/nodesnap/features/fleet/podspec"
)

// Labels on everything a run creates: the recommended ones, the run's id
// in instance, so that one selector finds all of a run's objects.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "nodesnap-fleet"
	RunLabel       = "app.kubernetes.io/instance"
	// NodeAnnotation on a pod names its node (a node's name can be longer
	// than a label value may be).
	NodeAnnotation = "nodesnap/node"
	// ExpiresAnnotation on everything a run creates says (RFC 3339) when
	// it is past any use: a run whose client died leaves its objects
	// behind, and the next fleet call removes those past this time.
	ExpiresAnnotation = "nodesnap/expires"
)

// runLabels are the labels of every object of a run.
func runLabels(runID string) map[string]string {
	l := podspec.Labels()
	l[ManagedByLabel] = ManagedBy
	l[RunLabel] = runID
	return l
}

// RunSelector selects every object of a run.
func RunSelector(runID string) string {
	return ManagedByLabel + "=" + ManagedBy + "," + RunLabel + "=" + runID
}

// created records what a run created, for its clean-up.
type created struct {
	mu        sync.Mutex
	client    Client
	ns        string
	namespace bool // the namespace itself
	// expires is the run's ExpiresAnnotation.
	expires string
	// identities are the ServiceAccounts the run made, each with its
	// ClusterRole and ClusterRoleBinding of the same name: the run's one
	// (named as the run), or one per node with --kubelet-pprof.
	identities map[string]identity
	pods       map[string]bool
	// secrets are the run's Secrets of upload URLs (fleet collect --to).
	secrets map[string]made
	// forcePods are pods no kubelet took on: a graceful delete would wait
	// for a kubelet that may never answer.
	forcePods map[string]bool
}

// identity is what exists of one ServiceAccount, ClusterRole and
// ClusterRoleBinding of a run: the UID of each (empty: not created), so
// that the clean-up deletes the very object the run made and nothing
// created meanwhile under its name.
type identity struct{ sa, role, binding made }

// made is one object a run created: its UID (empty where the API server
// gave none, as client-go's fake does not).
type made struct {
	ok  bool
	uid types.UID
}

// setup makes the namespace when missing, and the identity every pod of
// the run runs as: with --no-rbac the ServiceAccount of
// deploy/kubernetes/rbac.yaml (rbac-pprof.yaml's with --kubelet-pprof);
// otherwise one ServiceAccount, ClusterRole and ClusterRoleBinding named
// as the run (runIdentity), whatever the number of nodes. It returns ""
// with --kubelet-pprof: each node then gets its own (nodeIdentity).
func setup(ctx context.Context, o *Options, runID string, nodes []string, c *created) (string, error) {
	cs := o.Client
	labels := runLabels(runID)
	got, err := cs.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{})
	if err == nil && got.DeletionTimestamp != nil {
		// An earlier run's clean-up deleted it a moment ago (explain
		// run twice in a row): nothing can be created in it until it is
		// gone, which takes seconds.
		err = waitNamespaceGone(ctx, cs, o.Namespace)
	}
	switch {
	case apierrors.IsNotFound(err) && o.NoRBAC:
		return "", fmt.Errorf("namespace %s does not exist: with --no-rbac it must be created first (nodesnap manifests rbac | kubectl apply -f -), or use another -n", o.Namespace)
	case apierrors.IsNotFound(err):
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: merge(labels, podspec.PodSecurityLabels()),
			Annotations: map[string]string{ExpiresAnnotation: c.expires}}}
		_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			// Another run made it meanwhile: that run's to remove.
		case err != nil:
			return "", fmt.Errorf("creating namespace %s: %w", o.Namespace, err)
		default:
			c.mu.Lock()
			c.namespace = true
			c.mu.Unlock()
		}
	case err != nil:
		return "", fmt.Errorf("reading namespace %s: %w", o.Namespace, err)
	}
	if !o.NoRBAC {
		if o.Pprof || len(nodes) == 0 {
			return "", nil
		}
		return runID, c.makeIdentity(ctx, o, runID, runID, "", nodes)
	}
	sa, file := podspec.ServiceAccount, "deploy/kubernetes/rbac.yaml"
	if o.Pprof {
		sa, file = podspec.PprofServiceAccount, "deploy/kubernetes/rbac-pprof.yaml"
	}
	if _, err := cs.CoreV1().ServiceAccounts(o.Namespace).Get(ctx, sa, metav1.GetOptions{}); err != nil {
		return "", fmt.Errorf("--no-rbac: the service account %s/%s of %s: %w", o.Namespace, sa, file, err)
	}
	return sa, nil
}

// nodeIdentity makes one node's ServiceAccount (named name, as its pod),
// and a ClusterRole and ClusterRoleBinding of the same name that let it
// get that node's kubelet subresources and nodes/proxy, and no other
// node's: with --kubelet-pprof, whose nodes/proxy allows exec into every
// pod of a node, a token taken from one node's pod reaches no other
// kubelet. That costs three objects per node; without it the run has one
// identity for all its nodes (runIdentity).
func (c *created) nodeIdentity(ctx context.Context, o *Options, runID, node, name string) error {
	return c.makeIdentity(ctx, o, runID, name, node, []string{node})
}

// makeIdentity creates a ServiceAccount, ClusterRole and ClusterRoleBinding
// named name whose role gets the kubelet subresources of nodes (and
// nodes/proxy with --kubelet-pprof) and no other node's, and what the
// cluster collector reads through the API (get and list, no Secret).
// node, when set, is the one node the objects are for (their
// NodeAnnotation).
func (c *created) makeIdentity(ctx context.Context, o *Options, runID, name, node string, nodes []string) error {
	cs := o.Client
	meta := metav1.ObjectMeta{Name: name, Labels: runLabels(runID),
		Annotations: map[string]string{ExpiresAnnotation: c.expires}}
	if node != "" {
		meta.Annotations[NodeAnnotation] = node
	}
	c.mu.Lock()
	done := c.identities[name]
	c.mu.Unlock()
	if done.binding.ok {
		return nil
	}
	record := func(f func(*identity)) {
		c.mu.Lock()
		id := c.identities[name]
		f(&id)
		c.identities[name] = id
		c.mu.Unlock()
	}
	who := "the run's"
	if node != "" {
		who = "the node's"
	}
	sameta := meta
	sameta.Namespace = o.Namespace
	sa, err := cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: sameta}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating %s service account %s/%s: %w", who, o.Namespace, name, err)
	}
	record(func(id *identity) { id.sa = made{true, sa.UID} })
	rules := append(nodeRules(podspec.KubeletRules(""), nodes), podspec.ClusterRules()...)
	if o.Pprof {
		rules = append(rules, nodeRules(podspec.PprofRules(""), nodes)...)
	}
	role, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating %s ClusterRole %s (get on nodes/pods, nodes/healthz, nodes/configz, nodes/metrics, nodes/stats of the run's nodes; or use --no-rbac after nodesnap manifests rbac | kubectl apply -f -): %w", who, name, err)
	}
	record(func(id *identity) { id.role = made{true, role.UID} })
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: o.Namespace}},
	}
	b, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating %s ClusterRoleBinding %s: %w", who, name, err)
	}
	record(func(id *identity) { id.binding = made{true, b.UID} })
	return nil
}

// nodeRules limits rules to the named nodes.
func nodeRules(rules []rbacv1.PolicyRule, nodes []string) []rbacv1.PolicyRule {
	for i := range rules {
		rules[i].ResourceNames = append([]string(nil), nodes...)
	}
	return rules
}

func merge(a, b map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

func (c *created) addPod(name string) {
	c.mu.Lock()
	c.pods[name] = true
	c.mu.Unlock()
}

// setForce records whether a pod is one no kubelet has taken on.
func (c *created) setForce(name string, force bool) {
	c.mu.Lock()
	if force {
		c.forcePods[name] = true
	} else {
		delete(c.forcePods, name)
	}
	c.mu.Unlock()
}

// deletePod deletes one pod of the run now (its node is done). A pod no
// kubelet took on is removed at once (grace 0); the others get a second
// (nodesnap hold ends on SIGTERM).
func (c *created) deletePod(ctx context.Context, name string) {
	c.mu.Lock()
	force := c.forcePods[name]
	c.mu.Unlock()
	grace := int64(1)
	if force {
		grace = 0
	}
	err := c.client.CoreV1().Pods(c.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err == nil || apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.pods, name)
		c.mu.Unlock()
	}
}

// cleanup deletes everything the run created and waits for its pods to be
// gone, until ctx ends; it returns what is still there.
func (c *created) cleanup(ctx context.Context, runID string) []string {
	cs := c.client
	c.mu.Lock()
	pods := make([]string, 0, len(c.pods))
	for p := range c.pods {
		pods = append(pods, p)
	}
	c.mu.Unlock()
	for _, p := range pods {
		c.deletePod(ctx, p)
	}
	// Pods of the run this process lost track of (a create whose answer
	// never came): the label finds them.
	if list, err := cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: RunSelector(runID)}); err == nil {
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				c.deletePod(ctx, p.Name)
			}
		}
	}
	// The pods first, then the service account and the namespace: a pod
	// being deleted still uses its token.
	left := c.waitPodsGone(ctx, runID)
	c.mu.Lock()
	defer c.mu.Unlock()
	// By name and UID: the object this run made, never one made since
	// under its name.
	del := func(m made) metav1.DeleteOptions {
		if m.uid == "" {
			return metav1.DeleteOptions{}
		}
		return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &m.uid}}
	}
	// A conflict is a precondition that failed: the object of that name
	// is another one, and the run's is gone.
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) }
	for name, id := range c.identities {
		if id.binding.ok && !gone(cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, del(id.binding))) {
			left = append(left, "clusterrolebinding "+name)
		}
		if id.role.ok && !gone(cs.RbacV1().ClusterRoles().Delete(ctx, name, del(id.role))) {
			left = append(left, "clusterrole "+name)
		}
		if id.sa.ok && !gone(cs.CoreV1().ServiceAccounts(c.ns).Delete(ctx, name, del(id.sa))) {
			left = append(left, "serviceaccount "+c.ns+"/"+name)
		}
	}
	for name, m := range c.secrets {
		if !gone(cs.CoreV1().Secrets(c.ns).Delete(ctx, name, del(m))) {
			left = append(left, "secret "+c.ns+"/"+name)
		}
	}
	if c.namespace && !othersIn(ctx, cs, c.ns, runID) && !nsGone(cs.CoreV1().Namespaces().Delete(ctx, c.ns, metav1.DeleteOptions{})) {
		left = append(left, "namespace "+c.ns)
	}
	sort.Strings(left)
	return left
}

func nsGone(err error) bool { return err == nil || apierrors.IsNotFound(err) }

// waitPodsGone waits until no pod of the run is left, or ctx ends; it
// returns the pods still there.
func (c *created) waitPodsGone(ctx context.Context, runID string) []string {
	for {
		list, err := c.client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: RunSelector(runID)})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return []string{"pods labelled " + RunSelector(runID) + " in " + c.ns + " (listing them failed: " + err.Error() + ")"}
			}
			var left []string
			for _, p := range list.Items {
				left = append(left, "pod "+c.ns+"/"+p.Name)
			}
			return left
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// namespaceGoneWithin bounds the wait for a namespace being deleted, and
// namespacePoll is how often it is looked at meanwhile. An empty
// namespace goes in seconds; one that stays longer has a finalizer that
// waits on something else, which no run should wait out.
var (
	namespaceGoneWithin = 2 * time.Minute
	namespacePoll       = time.Second
)

// waitNamespaceGone waits until namespace ns, being deleted, is gone: it
// returns the API's NotFound then, so that the caller creates it again.
func waitNamespaceGone(ctx context.Context, cs Client, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, namespaceGoneWithin)
	defer cancel()
	for {
		got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return err
		case err != nil && ctx.Err() == nil:
			return err
		case err == nil && got.DeletionTimestamp == nil:
			return nil // made again meanwhile, by another run
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s is being deleted (an earlier run's clean-up) and is still there after %s: wait for it to go (kubectl get namespace %s), or collect in another namespace", ns, namespaceGoneWithin, ns)
		case <-time.After(namespacePoll):
		}
	}
}

// othersIn reports whether pods of another run are in namespace ns: the
// namespace is theirs too, and deleting it would end their collection.
func othersIn(ctx context.Context, cs Client, ns, runID string) bool {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + ManagedBy + "," + RunLabel + "!=" + runID})
	return err == nil && len(l.Items) > 0
}
