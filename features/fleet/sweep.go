package fleet

import (
	"context"
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A run that dies (its client killed, the laptop closed) cannot remove
// what it created: the ServiceAccounts, their ClusterRoles and
// ClusterRoleBindings, the pods. Its pods end by themselves (their
// activeDeadlineSeconds) and their tokens expire with them; the objects
// carry ExpiresAnnotation, and every fleet call first removes the ones of
// earlier runs whose time has passed. A run's RBAC objects are named as
// the run (one set for all its nodes), a pod as the run and its node.

// sweepExpired deletes the objects of earlier fleet runs in namespace ns
// (and the cluster-scoped ones) whose ExpiresAnnotation has passed, and
// returns what it removed. Labels and annotations are what anyone allowed
// to edit an object can set: a ClusterRole cluster-admin and a
// ClusterRoleBinding system:kube-controller-manager given the fleet's
// label and a past expiry were deleted by the next run. So an object is
// swept only when it proves to be one a fleet run made (fleetMade): its
// name, which no one can change once the object exists, is the one a run
// gives the node its annotation names (podName: the run's id, the node's
// name and a hash of it), its run id is one newRunID makes, and it is no
// built-in object. A label on an existing object cannot make it match;
// an object created under a fleet name by someone else is only theirs to
// lose.
func sweepExpired(ctx context.Context, cs Client, ns string, now time.Time) (removed []string) {
	sel := metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + ManagedBy}
	expired := func(m metav1.ObjectMeta) bool {
		t, err := time.Parse(time.RFC3339, m.Annotations[ExpiresAnnotation])
		return err == nil && now.After(t) && fleetMade(m)
	}
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) }
	grace := int64(0)
	if l, err := cs.CoreV1().Pods(ns).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if expired(o.ObjectMeta) && gone(cs.CoreV1().Pods(ns).Delete(ctx, o.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &o.UID}})) {
				removed = append(removed, "pod "+ns+"/"+o.Name)
			}
		}
	}
	if l, err := cs.CoreV1().Secrets(ns).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if expired(o.ObjectMeta) && gone(cs.CoreV1().Secrets(ns).Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.UID}})) {
				removed = append(removed, "secret "+ns+"/"+o.Name)
			}
		}
	}
	if l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, sel); err == nil {
		for _, o := range l.Items {
			// A run's binding binds its role of the same name to its
			// service account of the same name, and nothing else.
			mine := o.RoleRef.Kind == "ClusterRole" && o.RoleRef.Name == o.Name && len(o.Subjects) == 1 &&
				o.Subjects[0].Kind == "ServiceAccount" && o.Subjects[0].Name == o.Name && o.Subjects[0].Namespace == ns
			if mine && expired(o.ObjectMeta) && gone(cs.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.UID}})) {
				removed = append(removed, "clusterrolebinding "+o.Name)
			}
		}
	}
	if l, err := cs.RbacV1().ClusterRoles().List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if o.AggregationRule == nil && expired(o.ObjectMeta) && gone(cs.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.UID}})) {
				removed = append(removed, "clusterrole "+o.Name)
			}
		}
	}
	if l, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if expired(o.ObjectMeta) && gone(cs.CoreV1().ServiceAccounts(ns).Delete(ctx, o.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &o.UID}})) {
				removed = append(removed, "serviceaccount "+ns+"/"+o.Name)
			}
		}
	}
	return removed
}

// runIDPattern is what newRunID makes.
var runIDPattern = regexp.MustCompile(`^nodesnap-fleet-[0-9a-f]{8}$`)

// fleetMade says whether an object's metadata proves it one a fleet run
// made (see sweepExpired): the fleet's label, a run id newRunID would
// make, and a name that run gives: the run's id itself (its one
// ServiceAccount, ClusterRole and binding), or the name it gives the node
// its annotation names (a pod; a node's own identity with
// --kubelet-pprof); never a system: object, one the API server bootstraps
// or reconciles, or one in a kube- namespace.
func fleetMade(m metav1.ObjectMeta) bool {
	run, node := m.Labels[RunLabel], m.Annotations[NodeAnnotation]
	switch {
	case m.Labels[ManagedByLabel] != ManagedBy, !runIDPattern.MatchString(run), builtIn(m):
		return false
	}
	if sm := secretNamePattern.FindStringSubmatch(m.Name); sm != nil {
		return sm[1] == run // its Secrets of upload URLs
	}
	return m.Name == run || (node != "" && m.Name == podName(run, node))
}

// builtIn says whether an object is one Kubernetes itself makes or owns.
func builtIn(m metav1.ObjectMeta) bool {
	return strings.HasPrefix(m.Name, "system:") || strings.HasPrefix(m.Namespace, "kube-") ||
		m.Labels["kubernetes.io/bootstrapping"] != "" || m.Annotations["rbac.authorization.kubernetes.io/autoupdate"] != "" ||
		len(m.OwnerReferences) > 0
}
