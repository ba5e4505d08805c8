package fleet

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Client is the part of the Kubernetes API a run uses: nodes, pods,
// service accounts and namespaces of core/v1, cluster roles and their
// bindings of rbac/v1. Each method has the signature of client-go's
// typed client, so a kubernetes.Interface (client-go's fake clientset in
// the tests) serves through a thin adapter.
//
// NewClient builds these clients over client-go's REST client with a
// scheme of the two API groups only: client-go's own typed packages
// register every API group in their scheme package, and the binary carried
// all of them (about 14 MB, and pages of every group's type data touched
// at start by every process of a run, collectors included).
type Client interface {
	CoreV1() CoreV1
	RbacV1() RbacV1
}

// CoreV1 is the part of core/v1 a run uses.
type CoreV1 interface {
	Nodes() Resource[*corev1.Node, *corev1.NodeList]
	Namespaces() Resource[*corev1.Namespace, *corev1.NamespaceList]
	ServiceAccounts(namespace string) Resource[*corev1.ServiceAccount, *corev1.ServiceAccountList]
	// Secrets hold a run's upload URLs (fleet collect --to).
	Secrets(namespace string) Resource[*corev1.Secret, *corev1.SecretList]
	Pods(namespace string) Pods
	// RESTClient reaches subresources (exec).
	RESTClient() rest.Interface
}

// RbacV1 is the part of rbac/v1 a run uses.
type RbacV1 interface {
	ClusterRoles() Resource[*rbacv1.ClusterRole, *rbacv1.ClusterRoleList]
	ClusterRoleBindings() Resource[*rbacv1.ClusterRoleBinding, *rbacv1.ClusterRoleBindingList]
}

// Resource is what a run does with one kind of object.
type Resource[T, L runtime.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Pods adds the log subresource and a watch: a run follows its pods
// with one watch, not a request per pod.
type Pods interface {
	Resource[*corev1.Pod, *corev1.PodList]
	GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// kube holds the scheme of the API groups a run uses, built on first use:
// most commands never talk to an API server.
type kube struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	params runtime.ParameterCodec
}

var kubeScheme = sync.OnceValues(func() (*kube, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, rbacv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("registering the Kubernetes API types: %w", err)
		}
	}
	// Status, ListOptions and the other unversioned meta types, as
	// client-go's own scheme registers them.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return &kube{scheme: s, codecs: serializer.NewCodecFactory(s), params: runtime.NewParameterCodec(s)}, nil
})

// NewClient is a Client for a real API server: one HTTP client (and its
// connections) for both API groups.
func NewClient(cfg *rest.Config) (Client, error) {
	k, err := kubeScheme()
	if err != nil {
		return nil, err
	}
	base := *cfg
	if base.UserAgent == "" {
		// Before the transport is built: it is the transport that sends it.
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if base.RateLimiter == nil && base.QPS > 0 {
		// One budget for both API groups' clients: each would otherwise
		// make its own and the run could send twice the rate.
		base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(base.QPS, max(base.Burst, 1))
	}
	counter := &requestCount{}
	base.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{rt: rt, n: counter} })
	cfg = &base
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("the Kubernetes client's HTTP transport: %w", err)
	}
	group := func(gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
		c := *cfg
		c.GroupVersion = &gv
		c.APIPath = apiPath
		c.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(k.scheme, k.codecs).WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(&c, hc)
		if err != nil {
			return nil, fmt.Errorf("a Kubernetes client for %s: %w", gv, err)
		}
		return rc, nil
	}
	core, err := group(corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	rbac, err := group(rbacv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &client{core: coreClient{rc: core, params: k.params}, rbac: rbacClient{rc: rbac, params: k.params}, n: counter}, nil
}

type client struct {
	core coreClient
	rbac rbacClient
	n    *requestCount
}

// Requests is the number of requests sent to the API server so far (a
// watch is one, however long it lasts).
func (c *client) Requests() int64 { return c.n.n.Load() }

// requestCounter is a Client that counts its requests (NewClient's), for
// the report.
type requestCounter interface{ Requests() int64 }

type requestCount struct{ n atomic.Int64 }

// countingTransport counts the requests that reach the API server.
type countingTransport struct {
	rt http.RoundTripper
	n  *requestCount
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.n.Add(1)
	return t.rt.RoundTrip(req)
}

func (c *client) CoreV1() CoreV1 { return c.core }
func (c *client) RbacV1() RbacV1 { return c.rbac }

type coreClient struct {
	rc     rest.Interface
	params runtime.ParameterCodec
}

func (c coreClient) RESTClient() rest.Interface { return c.rc }

func (c coreClient) Nodes() Resource[*corev1.Node, *corev1.NodeList] {
	return newResource[corev1.Node, corev1.NodeList](c.rc, c.params, "", "nodes")
}

func (c coreClient) Namespaces() Resource[*corev1.Namespace, *corev1.NamespaceList] {
	return newResource[corev1.Namespace, corev1.NamespaceList](c.rc, c.params, "", "namespaces")
}

func (c coreClient) ServiceAccounts(ns string) Resource[*corev1.ServiceAccount, *corev1.ServiceAccountList] {
	return newResource[corev1.ServiceAccount, corev1.ServiceAccountList](c.rc, c.params, ns, "serviceaccounts")
}

func (c coreClient) Secrets(ns string) Resource[*corev1.Secret, *corev1.SecretList] {
	return newResource[corev1.Secret, corev1.SecretList](c.rc, c.params, ns, "secrets")
}

func (c coreClient) Pods(ns string) Pods {
	return pods{newResource[corev1.Pod, corev1.PodList](c.rc, c.params, ns, "pods")}
}

type pods struct {
	*resource[corev1.Pod, corev1.PodList]
}

// GetLogs is client-go's: a request for the log subresource.
func (p pods) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return p.rc.Get().Namespace(p.namespace).Name(name).Resource("pods").SubResource("log").VersionedParams(opts, p.params)
}

type rbacClient struct {
	rc     rest.Interface
	params runtime.ParameterCodec
}

func (c rbacClient) ClusterRoles() Resource[*rbacv1.ClusterRole, *rbacv1.ClusterRoleList] {
	return newResource[rbacv1.ClusterRole, rbacv1.ClusterRoleList](c.rc, c.params, "", "clusterroles")
}

func (c rbacClient) ClusterRoleBindings() Resource[*rbacv1.ClusterRoleBinding, *rbacv1.ClusterRoleBindingList] {
	return newResource[rbacv1.ClusterRoleBinding, rbacv1.ClusterRoleBindingList](c.rc, c.params, "", "clusterrolebindings")
}

// parameterCodec encodes exec's query parameters.
func parameterCodec() (runtime.ParameterCodec, error) {
	k, err := kubeScheme()
	if err != nil {
		return nil, err
	}
	return k.params, nil
}

// resource is one kind of object's requests, as client-go's generated
// clients make them (package gentype; its fake-client support brings
// managed fields, OpenAPI models and strategic merge patches along).
// T and L are the object and list types; their pointers are what
// Resource's methods take and return.
type resource[T, L any] struct {
	rc        rest.Interface
	params    runtime.ParameterCodec
	namespace string // "" for a cluster-scoped kind
	name      string // the plural resource name
}

// newResource is resource's only constructor: its type parameters check
// that *T and *L are API objects, which resource's methods rely on.
func newResource[T, L any, PT interface {
	*T
	runtime.Object
}, PL interface {
	*L
	runtime.Object
}](rc rest.Interface, params runtime.ParameterCodec, namespace, name string) *resource[T, L] {
	return &resource[T, L]{rc: rc, params: params, namespace: namespace, name: name}
}

func (r *resource[T, L]) req(verb string) *rest.Request {
	return r.rc.Verb(verb).NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name)
}

func (r *resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (*T, error) {
	out := new(T)
	err := r.req("GET").Name(name).VersionedParams(&opts, r.params).Do(ctx).Into(any(out).(runtime.Object))
	return out, err
}

func (r *resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (*L, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	out := new(L)
	err := r.req("GET").VersionedParams(&opts, r.params).Timeout(timeout).Do(ctx).Into(any(out).(runtime.Object))
	return out, err
}

// Watch is client-go's: the list's changes from opts.ResourceVersion on,
// as a stream of events.
func (r *resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return r.req("GET").VersionedParams(&opts, r.params).Timeout(timeout).Watch(ctx)
}

func (r *resource[T, L]) Create(ctx context.Context, obj *T, opts metav1.CreateOptions) (*T, error) {
	out := new(T)
	err := r.req("POST").VersionedParams(&opts, r.params).Body(any(obj).(runtime.Object)).Do(ctx).Into(any(out).(runtime.Object))
	return out, err
}

func (r *resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req("DELETE").Name(name).Body(&opts).Do(ctx).Error()
}
