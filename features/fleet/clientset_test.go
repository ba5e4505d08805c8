package fleet

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fromClientset serves a run from a client-go clientset (the fake one):
// each method of Client has the signature of client-go's typed client,
// only the interfaces they return differ.
func fromClientset(cs kubernetes.Interface) Client { return csClient{cs} }

type csClient struct{ cs kubernetes.Interface }

func (c csClient) CoreV1() CoreV1 { return csCore(c) }
func (c csClient) RbacV1() RbacV1 { return csRbac(c) }

type csCore struct{ cs kubernetes.Interface }

func (c csCore) Nodes() Resource[*corev1.Node, *corev1.NodeList] { return c.cs.CoreV1().Nodes() }
func (c csCore) Namespaces() Resource[*corev1.Namespace, *corev1.NamespaceList] {
	return c.cs.CoreV1().Namespaces()
}
func (c csCore) ServiceAccounts(ns string) Resource[*corev1.ServiceAccount, *corev1.ServiceAccountList] {
	return c.cs.CoreV1().ServiceAccounts(ns)
}
func (c csCore) Secrets(ns string) Resource[*corev1.Secret, *corev1.SecretList] {
	return c.cs.CoreV1().Secrets(ns)
}
func (c csCore) Pods(ns string) Pods        { return c.cs.CoreV1().Pods(ns) }
func (c csCore) RESTClient() rest.Interface { return c.cs.CoreV1().RESTClient() }

type csRbac struct{ cs kubernetes.Interface }

func (r csRbac) ClusterRoles() Resource[*rbacv1.ClusterRole, *rbacv1.ClusterRoleList] {
	return r.cs.RbacV1().ClusterRoles()
}
func (r csRbac) ClusterRoleBindings() Resource[*rbacv1.ClusterRoleBinding, *rbacv1.ClusterRoleBindingList] {
	return r.cs.RbacV1().ClusterRoleBindings()
}
