package fleet

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A run that dies (its client killed, the laptop closed) cannot remove
// what it created: the ServiceAccounts, their ClusterRoles and
// ClusterRoleBindings, the pods. Its pods end by themselves (their
// activeDeadlineSeconds) and their tokens expire with them; the objects
// carry ExpiresAnnotation, and every fleet call first removes the ones of
// earlier runs whose time has passed.

// sweepExpired deletes the objects of earlier fleet runs in namespace ns
// (and the cluster-scoped ones) whose ExpiresAnnotation has passed, and
// returns what it removed. It never touches an object without both the
// fleet's managed-by label and a parseable, past expiry.
func sweepExpired(ctx context.Context, cs Client, ns string, now time.Time) (removed []string) {
	sel := metav1.ListOptions{LabelSelector: ManagedByLabel + "=" + ManagedBy}
	expired := func(m metav1.ObjectMeta) bool {
		t, err := time.Parse(time.RFC3339, m.Annotations[ExpiresAnnotation])
		return err == nil && now.After(t) && m.Labels[ManagedByLabel] == ManagedBy
	}
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) }
	grace := int64(0)
	if l, err := cs.CoreV1().Pods(ns).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if expired(o.ObjectMeta) && gone(cs.CoreV1().Pods(ns).Delete(ctx, o.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})) {
				removed = append(removed, "pod "+ns+"/"+o.Name)
			}
		}
	}
	if l, err := cs.RbacV1().ClusterRoleBindings().List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if expired(o.ObjectMeta) && gone(cs.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})) {
				removed = append(removed, "clusterrolebinding "+o.Name)
			}
		}
	}
	if l, err := cs.RbacV1().ClusterRoles().List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if expired(o.ObjectMeta) && gone(cs.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})) {
				removed = append(removed, "clusterrole "+o.Name)
			}
		}
	}
	if l, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, sel); err == nil {
		for _, o := range l.Items {
			if expired(o.ObjectMeta) && gone(cs.CoreV1().ServiceAccounts(ns).Delete(ctx, o.Name, metav1.DeleteOptions{})) {
				removed = append(removed, "serviceaccount "+ns+"/"+o.Name)
			}
		}
	}
	return removed
}
