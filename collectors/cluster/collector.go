package cluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
)

func init() {
	collectors.Register(collectors.Spec{
		Name:           layout.DirCluster,
		Description:    "the API server's view of this node: its Node, the pods bound to it, their claims and volumes, VolumeAttachments, CSINode and CSIDrivers, StorageClasses and recent events (never Secrets)",
		Requires:       "a credential for the API server with get/list on the node's view (deploy/kubernetes/rbac.yaml's nodesnap-cluster): the pod's ServiceAccount, --kubeconfig, $KUBECONFIG, or the kubelet's own kubeconfig (root: /etc/kubernetes/kubelet.conf); the server verified against its CA",
		DefaultEnabled: true,
		DefaultTimeout: 30 * time.Second,
		// The kubelet's kubeconfig and the files it names are host paths.
		After:   []string{collectors.MountprobeName},
		Options: &opts,
		Flags:   flags,
		Files:   files,
		Run:     collect,
	})
}

// NodeNameEnv names the node when nodesnap runs in a pod (the manifests
// set it from spec.nodeName).
const NodeNameEnv = "NODESNAP_NODE"

// Options are the cluster collector's flags.
type Options struct {
	Kubeconfig     string        `json:"kubeconfig,omitempty"`
	Context        string        `json:"context,omitempty"`
	NodeName       string        `json:"node_name,omitempty"`
	RequestTimeout time.Duration `json:"request_timeout"`
	// MaxPods, MaxEvents cap what is kept; PageSize is a list's limit.
	MaxPods   int `json:"max_pods"`
	MaxEvents int `json:"max_events"`
	PageSize  int `json:"page_size"`
}

// defaults are the options no flag changed: the one place a default is
// written.
var defaults = Options{RequestTimeout: 5 * time.Second, MaxPods: 1000, MaxEvents: 2000, PageSize: 250}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON.
var opts = defaults

func flags(fs *pflag.FlagSet) {
	opts = defaults
	o := &opts
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "cluster: kubeconfig to read the API server with (a path as nodesnap sees it); default: the pod's service account, then $KUBECONFIG, then the kubelet's own kubeconfig under --root (never admin.conf)")
	fs.StringVar(&o.Context, "kube-context", o.Context, "cluster: the kubeconfig context (default its current one)")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "cluster: this node's name in the cluster (default $"+NodeNameEnv+", the kubelet credential's node, else the hostname)")
	fs.DurationVar(&o.RequestTimeout, "cluster-request-timeout", o.RequestTimeout, "cluster: deadline of each API request")
	fs.IntVar(&o.MaxPods, "cluster-max-pods", o.MaxPods, "cluster: at most this many of the node's pods are kept")
	fs.IntVar(&o.MaxEvents, "cluster-max-events", o.MaxEvents, "cluster: at most this many events are kept")
	fs.IntVar(&o.PageSize, "cluster-page-size", o.PageSize, "cluster: items per page of a list")
}

// run is one collection.
type run struct {
	env  *collectors.Env
	o    Options
	api  *apiClient
	out  layout.ClusterObjects
	gone error // set once the API server stopped answering
	who  string
}

func collect(ctx context.Context, env *collectors.Env) error {
	o := defaults
	if err := env.Options(&o); err != nil {
		return err
	}
	o.RequestTimeout = cmpOr(o.RequestTimeout, defaults.RequestTimeout)
	o.MaxPods = cmpOr(o.MaxPods, defaults.MaxPods)
	o.MaxEvents = cmpOr(o.MaxEvents, defaults.MaxEvents)
	o.PageSize = cmpOr(o.PageSize, defaults.PageSize)

	cred, notes, err := resolveCredential(ctx, env, o)
	for _, n := range notes {
		env.Notef("%s", n)
	}
	if errors.Is(err, errNoCredential) {
		noCredentialRemedy(ctx, env)
		return fmt.Errorf("%w: no credential for the API server (no service-account token, --kubeconfig, $KUBECONFIG or kubelet kubeconfig)", collectors.ErrUnsupported)
	}
	if err != nil {
		return err
	}
	r := &run{env: env, o: o, api: newAPIClient(cred, o.RequestTimeout, o.PageSize)}
	defer r.api.close()
	r.who = cred.identity
	r.out.CollectedAt = time.Now().UTC()
	r.out.SinceSeconds = int64(env.Since / time.Second)
	r.out.NodeName, r.out.NodeNameFrom = nodeName(o, cred)
	env.Notef("API server %s, %s; TLS %s; node %s (%s)", cred.server.Host, cred.source, cred.tlsHow, r.out.NodeName, r.out.NodeNameFrom)

	r.gather(ctx)
	r.fillNil()

	rep := layout.ClusterRequests{Server: cred.server.Host, CredentialSource: cred.source, TLS: cred.tlsHow, Requests: r.api.requests}
	if rep.Requests == nil {
		rep.Requests = []layout.ClusterRequest{}
	}
	werr := env.WriteJSON(layout.ClusterObjectsFile, r.out)
	if err := env.WriteJSON(layout.ClusterRequestsFile, rep); err != nil {
		werr = errors.Join(werr, err)
	}
	if werr != nil {
		return werr
	}
	if r.out.Node == nil && len(r.out.Pods) == 0 {
		return fmt.Errorf("nothing read from the API server: %s", strings.Join(r.out.Missing, "; "))
	}
	return nil
}

func cmpOr[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// nodeName says which Node this is, and how it is known.
func nodeName(o Options, c *credential) (string, string) {
	if o.NodeName != "" {
		return o.NodeName, "--node-name"
	}
	if n := strings.TrimSpace(os.Getenv(NodeNameEnv)); n != "" {
		return n, "$" + NodeNameEnv
	}
	if n, ok := strings.CutPrefix(c.identity, "system:node:"); ok && n != "" {
		return n, "the kubelet credential's identity"
	}
	h, err := os.Hostname()
	if err != nil {
		return "", "unknown"
	}
	// The kubelet lowercases the hostname for its node name.
	return strings.ToLower(h), "the hostname"
}

// missing records something not read and makes the collector partial.
func (r *run) missing(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.out.Missing = append(r.out.Missing, s)
	r.env.Partialf("%s", s)
}

// failed words a request's failure; it also notes an API server that
// stopped answering, after which no more requests are made.
func (r *run) failed(what string, err error) {
	switch {
	case isStatus(err, http.StatusForbidden):
		who := "nodesnap's identity"
		if r.who != "" {
			who = r.who
		}
		r.missing("%s: %s lacks permission (%v); deploy/kubernetes/rbac.yaml's nodesnap-cluster ClusterRole grants exactly what this collector reads", what, who, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "connection refused"):
		if r.gone == nil {
			r.gone = err
			r.missing("%s: %v; nothing more was asked of the API server", what, err)
		}
	default:
		r.missing("%s: %v", what, err)
	}
}

// skip reports whether requests must stop (API gone, deadline passed).
func (r *run) skip(what string) bool {
	if r.gone != nil {
		r.out.Missing = append(r.out.Missing, what+": not asked (the API server stopped answering)")
		return true
	}
	return false
}

func (r *run) gather(ctx context.Context) {
	node := r.out.NodeName
	esc := url.PathEscape
	var n layout.KubeNode
	if err := r.api.getOne(ctx, "nodes", "/api/v1/nodes/"+esc(node), &n); err != nil {
		if isStatus(err, http.StatusNotFound) {
			r.missing("the Node %q does not exist (its name came from %s): pass --node-name", node, r.out.NodeNameFrom)
		} else {
			r.failed("the Node "+node, err)
		}
	} else {
		n.Status.ImagesCount = len(n.Status.Images)
		n.Status.Images = nil
		r.out.Node = &n
	}
	if r.skip("pods") {
		return
	}
	q := url.Values{"fieldSelector": {"spec.nodeName=" + node}}
	_, trunc, err := list(ctx, r.api, "pods", "/api/v1/pods", q, r.o.MaxPods, func(p layout.KubePod) bool {
		r.out.Pods = append(r.out.Pods, p)
		return true
	})
	if err != nil {
		r.failed("the pods bound to "+node, err)
	}
	if trunc {
		r.missing("pods: only the first %d of this node's pods were kept (--cluster-max-pods)", r.o.MaxPods)
	}
	sort.Slice(r.out.Pods, func(i, j int) bool {
		a, b := r.out.Pods[i].Metadata, r.out.Pods[j].Metadata
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	r.volumes(ctx)
	r.attachments(ctx)
	r.csi(ctx)
	r.events(ctx)
}

// volumes reads the claims the pods use and the volumes bound to them.
func (r *run) volumes(ctx context.Context) {
	type claim struct{ ns, name string }
	var claims []claim
	seen := map[claim]bool{}
	for _, p := range r.out.Pods {
		for _, v := range p.Spec.Volumes {
			c := claim{ns: p.Metadata.Namespace}
			switch {
			case v.PersistentVolumeClaim != nil:
				c.name = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil:
				// A generic ephemeral volume's claim is <pod>-<volume>.
				c.name = p.Metadata.Name + "-" + v.Name
			default:
				continue
			}
			if c.name != "" && !seen[c] {
				seen[c] = true
				claims = append(claims, c)
			}
		}
	}
	pvs := map[string]bool{}
	for _, c := range claims {
		if r.skip("the claim " + c.ns + "/" + c.name) {
			return
		}
		var pvc layout.KubePVC
		err := r.api.getOne(ctx, "persistentvolumeclaims", "/api/v1/namespaces/"+url.PathEscape(c.ns)+"/persistentvolumeclaims/"+url.PathEscape(c.name), &pvc)
		if err != nil {
			r.failed("the claim "+c.ns+"/"+c.name, err)
			continue
		}
		r.out.PVCs = append(r.out.PVCs, pvc)
		if v := pvc.Spec.VolumeName; v != "" && !pvs[v] {
			pvs[v] = true
			if r.skip("the volume " + v) {
				return
			}
			var pv layout.KubePV
			if err := r.api.getOne(ctx, "persistentvolumes", "/api/v1/persistentvolumes/"+url.PathEscape(v), &pv); err != nil {
				r.failed("the volume "+v, err)
				continue
			}
			r.out.PVs = append(r.out.PVs, pv)
		}
	}
	classes := map[string]bool{}
	for _, pvc := range r.out.PVCs {
		if sc := pvc.Spec.StorageClassName; sc != nil && *sc != "" {
			classes[*sc] = true
		}
	}
	for _, pv := range r.out.PVs {
		if pv.Spec.StorageClassName != "" {
			classes[pv.Spec.StorageClassName] = true
		}
	}
	for _, sc := range sortedKeys(classes) {
		if r.skip("the StorageClass " + sc) {
			return
		}
		var c layout.KubeStorageClass
		if err := r.api.getOne(ctx, "storageclasses", "/apis/storage.k8s.io/v1/storageclasses/"+url.PathEscape(sc), &c); err != nil {
			r.failed("the StorageClass "+sc, err)
			continue
		}
		r.out.StorageClasses = append(r.out.StorageClasses, c)
	}
}

// maxAttachmentPages bounds the scan of the cluster's VolumeAttachments
// (the API has no field selector on spec.nodeName).
const maxAttachmentPages = 40

// attachments reads this node's VolumeAttachments: a list of all of
// them, kept when spec.nodeName is this node; where listing is not
// allowed (the kubelet's own identity may only get those of its node),
// each CSI volume's attachment by its name.
func (r *run) attachments(ctx context.Context) {
	if r.skip("volumeattachments") {
		return
	}
	node := r.out.NodeName
	_, _, err := list(ctx, r.api, "volumeattachments", "/apis/storage.k8s.io/v1/volumeattachments", nil, r.o.MaxPods*4, func(va layout.KubeVolumeAttachment) bool {
		if va.Spec.NodeName != node {
			return false
		}
		r.out.VolumeAttachments = append(r.out.VolumeAttachments, va)
		return true
	})
	if err == nil {
		return
	}
	if !isStatus(err, http.StatusForbidden) {
		r.failed("the VolumeAttachments", err)
		return
	}
	r.out.Missing = append(r.out.Missing, "VolumeAttachments could not be listed (403): only those of the pods' CSI volumes were read, by name")
	for _, pv := range r.out.PVs {
		if pv.Spec.CSI == nil || r.skip("the VolumeAttachment of "+pv.Metadata.Name) {
			continue
		}
		var va layout.KubeVolumeAttachment
		name := AttachmentName(pv.Spec.CSI.VolumeHandle, pv.Spec.CSI.Driver, node)
		err := r.api.getOne(ctx, "volumeattachments", "/apis/storage.k8s.io/v1/volumeattachments/"+name, &va)
		switch {
		case err == nil:
			r.out.VolumeAttachments = append(r.out.VolumeAttachments, va)
		case isStatus(err, http.StatusNotFound):
			// Not attached (or the driver needs no attach).
		default:
			r.failed("the VolumeAttachment of "+pv.Metadata.Name, err)
		}
	}
}

// csi reads this node's CSINode and the CSIDrivers it or the volumes name.
func (r *run) csi(ctx context.Context) {
	if r.skip("the CSINode") {
		return
	}
	drivers := map[string]bool{}
	var cn layout.KubeCSINode
	err := r.api.getOne(ctx, "csinodes", "/apis/storage.k8s.io/v1/csinodes/"+url.PathEscape(r.out.NodeName), &cn)
	switch {
	case err == nil:
		r.out.CSINode = &cn
		for _, d := range cn.Spec.Drivers {
			drivers[d.Name] = true
		}
	case isStatus(err, http.StatusNotFound):
		r.env.Notef("this node has no CSINode object (no CSI driver registered)")
	default:
		r.failed("the CSINode "+r.out.NodeName, err)
	}
	for _, pv := range r.out.PVs {
		if pv.Spec.CSI != nil {
			drivers[pv.Spec.CSI.Driver] = true
		}
	}
	for _, p := range r.out.Pods {
		for _, v := range p.Spec.Volumes {
			if v.CSI != nil {
				drivers[v.CSI.Driver] = true
			}
		}
	}
	for _, d := range sortedKeys(drivers) {
		if r.skip("the CSIDriver " + d) {
			return
		}
		var cd layout.KubeCSIDriver
		err := r.api.getOne(ctx, "csidrivers", "/apis/storage.k8s.io/v1/csidrivers/"+url.PathEscape(d), &cd)
		switch {
		case err == nil:
			r.out.CSIDrivers = append(r.out.CSIDrivers, cd)
		case isStatus(err, http.StatusNotFound):
			r.out.Missing = append(r.out.Missing, "no CSIDriver object for "+d+" (its attach and mount behaviour are the defaults)")
		default:
			r.failed("the CSIDriver "+d, err)
		}
	}
}

// events reads the events about the node and its pods within --since.
func (r *run) events(ctx context.Context) {
	var since time.Time
	if r.env.Since > 0 {
		since = r.out.CollectedAt.Add(-r.env.Since)
	}
	keep := func(e layout.KubeEvent) bool {
		if !since.IsZero() {
			if t := e.Last(); !t.IsZero() && t.Before(since) {
				return false
			}
		}
		r.out.Events = append(r.out.Events, e)
		return true
	}
	if r.skip("events") {
		return
	}
	left := r.o.MaxEvents
	q := url.Values{"fieldSelector": {"involvedObject.kind=Node,involvedObject.name=" + r.out.NodeName}}
	n, trunc, err := list(ctx, r.api, "events", "/api/v1/events", q, left, keep)
	if err != nil {
		r.failed("the events about the node", err)
		if isStatus(err, http.StatusForbidden) {
			return
		}
	}
	left -= n
	uids := map[string]bool{}
	var nss []string
	for _, p := range r.out.Pods {
		uids[p.Metadata.UID] = true
		if !slices.Contains(nss, p.Metadata.Namespace) {
			nss = append(nss, p.Metadata.Namespace)
		}
	}
	sort.Strings(nss)
	for _, ns := range nss {
		if left <= 0 {
			trunc = true
			break
		}
		if r.skip("the events of namespace " + ns) {
			return
		}
		q := url.Values{"fieldSelector": {"involvedObject.kind=Pod"}}
		n, t, err := list(ctx, r.api, "events", "/api/v1/namespaces/"+url.PathEscape(ns)+"/events", q, left, func(e layout.KubeEvent) bool {
			if !uids[e.InvolvedObject.UID] {
				return false
			}
			return keep(e)
		})
		left -= n
		trunc = trunc || t
		if err != nil {
			r.failed("the events of namespace "+ns, err)
		}
	}
	if trunc {
		r.missing("events: only %d were kept (--cluster-max-events)", r.o.MaxEvents)
	}
	sort.SliceStable(r.out.Events, func(i, j int) bool { return r.out.Events[i].Last().Before(r.out.Events[j].Last()) })
}

// fillNil makes the lists [] rather than null in the record.
func (r *run) fillNil() {
	o := &r.out
	if o.Pods == nil {
		o.Pods = []layout.KubePod{}
	}
	if o.PVCs == nil {
		o.PVCs = []layout.KubePVC{}
	}
	if o.PVs == nil {
		o.PVs = []layout.KubePV{}
	}
	if o.VolumeAttachments == nil {
		o.VolumeAttachments = []layout.KubeVolumeAttachment{}
	}
	if o.CSIDrivers == nil {
		o.CSIDrivers = []layout.KubeCSIDriver{}
	}
	if o.StorageClasses == nil {
		o.StorageClasses = []layout.KubeStorageClass{}
	}
	if o.Events == nil {
		o.Events = []layout.KubeEvent{}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// AttachmentName is the name the attach/detach controller gives a CSI
// volume's VolumeAttachment on a node: "csi-" and the hex sha256 of the
// volume handle, the driver and the node's name, concatenated.
func AttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}
