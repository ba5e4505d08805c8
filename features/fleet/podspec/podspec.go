// Package podspec is the one definition of nodesnap's pod on a node: the
// Job and the DaemonSet of deploy/kubernetes and the pods `nodesnap fleet
// collect` creates are all built from PodSpec, and the manifests' tests
// compare the YAML with it, so they cannot drift apart.
//
// It depends on k8s.io/api alone, so that the deploy tests can use it
// without client-go.
package podspec

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Names and paths shared by every form of the pod.
const (
	// Namespace and ServiceAccount are those of deploy/kubernetes/rbac.yaml.
	Namespace      = "nodesnap"
	ServiceAccount = "nodesnap"
	// PprofServiceAccount is deploy/kubernetes/rbac-pprof.yaml's: the
	// opt-in identity that may also get nodes/proxy (the pprof dumps).
	PprofServiceAccount = "nodesnap-pprof"
	// RootCAConfigMap is the cluster CA every namespace holds; projected
	// beside the token, it lets the kubelet collector verify a kubelet
	// whose serving certificate the cluster CA signed.
	RootCAConfigMap = "kube-root-ca.crt"
	// NameLabel is on every object nodesnap creates in a cluster.
	NameLabel = "app.kubernetes.io/name"
	AppName   = "nodesnap"

	// Binary is the image's entrypoint (the image holds nothing else).
	Binary = "/usr/local/bin/nodesnap"
	// CollectContainer runs the collection (an init container);
	// HoldContainer keeps the pod up and serves bundle-cat.
	CollectContainer = "collect"
	HoldContainer    = "hold"
	// WatchContainer is the DaemonSet's `nodesnap watch` (docs/watch.md).
	WatchContainer = "watch"
	// WatchPort is the watcher's /metrics and /healthz on the node's
	// loopback.
	WatchPort = 9848
	// OutputDir is where the bundles are in both containers; HostOutputDir
	// is the node's directory mounted there.
	OutputDir     = "/output"
	HostOutputDir = "/var/tmp/nodesnap"
	// TokenExpiration is the life of the service-account token the kubelet
	// requests for the collect container (TokenRequest's minimum); the
	// kubelet renews it before it expires while the pod lives.
	TokenExpiration = 10 * time.Minute
	// TokenDir is where the kubelet collector looks for a pod's token.
	TokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// Options say what differs between the forms of the pod.
type Options struct {
	// Image is the nodesnap image (the manifests carry a placeholder).
	Image string
	// NodeName pins the pod to a node, bypassing the scheduler (the Job and
	// fleet pods); empty for a DaemonSet's pods.
	NodeName string
	// ServiceAccount the pods run as (default ServiceAccount).
	ServiceAccount string
	// CollectTimeout is collect's --timeout (default 2m).
	CollectTimeout time.Duration
	// HoldFor is hold's --for; 0 holds until the pod is deleted.
	HoldFor time.Duration
	// JSONResult makes collect print its result as JSON (--output json):
	// the bundle's name, size and sha256 for `nodesnap fleet` to read.
	JSONResult bool
	// TerminationGrace, when set, is the pod's terminationGracePeriodSeconds.
	TerminationGrace *int64
	// Pprof asks the kubelet for its pprof dumps, which need get on
	// nodes/proxy (PprofRules): only with an identity that has it.
	Pprof bool
}

// CollectArgs is the collect container's command line after the binary.
func CollectArgs(o Options) []string {
	timeout := o.CollectTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	args := []string{
		"collect",
		"--root=/host",
		"--output-dir=" + OutputDir,
		"--host-output-dir=" + HostOutputDir,
		"--keep=3",
		"--timeout=" + durationFlag(timeout),
		"--lock-wait=30s",
		"--exit-zero-if-written",
	}
	if !o.Pprof {
		args = append(args, kubeletPprofOff)
	}
	if o.JSONResult {
		args = append(args, "--output=json")
	}
	return args
}

// kubeletPprofOff is collect's flag that leaves out what nodes/proxy
// gives (the least-privilege role's pods).
const kubeletPprofOff = "--kubelet-pprof=false"

// durationFlag writes d as a person would (2m, 90s, 1h), not 2m0s.
func durationFlag(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func ptr[T any](v T) *T { return &v }

// PodSpec is nodesnap's pod on a node: privileged with the host's PID and
// network namespaces, the node's root read-only at /host, every taint
// tolerated, the collection in an init container and `nodesnap hold`
// keeping the bundle available afterwards. docs/kubernetes.md says why
// each of these is needed.
func PodSpec(o Options) corev1.PodSpec {
	sa := o.ServiceAccount
	if sa == "" {
		sa = ServiceAccount
	}
	holdArgs := []string{"hold"}
	if o.HoldFor > 0 {
		holdArgs = append(holdArgs, "--for="+durationFlag(o.HoldFor))
	}
	spec := corev1.PodSpec{
		NodeName:           o.NodeName,
		ServiceAccountName: sa,
		// The token only where it is used: the kubelet requests a
		// short-lived one for the collect container alone.
		AutomountServiceAccountToken:  ptr(false),
		HostPID:                       true,
		HostNetwork:                   true,
		DNSPolicy:                     corev1.DNSClusterFirstWithHostNet,
		Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		TerminationGracePeriodSeconds: o.TerminationGrace,
		InitContainers: []corev1.Container{{
			Name:            CollectContainer,
			Image:           o.Image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{Binary},
			Args:            CollectArgs(o),
			Env: []corev1.EnvVar{
				{Name: "NODESNAP_UPLOAD_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "nodesnap-upload"}, Key: "url", Optional: ptr(true)}}},
				fieldEnv("NODESNAP_POD_UID", "metadata.uid"),
				fieldEnv("NODESNAP_POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("NODESNAP_POD_NAME", "metadata.name"),
				// The cluster collector reads this Node's view from the API.
				fieldEnv("NODESNAP_NODE", "spec.nodeName"),
			},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr(true), RunAsUser: ptr(int64(0))},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			VolumeMounts: collectMounts(),
		}},
		Containers: []corev1.Container{{
			Name:            HoldContainer,
			Image:           o.Image,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{Binary},
			Args:            holdArgs,
			Env:             []corev1.EnvVar{{Name: "NODESNAP_OUTPUT_DIR", Value: OutputDir}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr(false),
				ReadOnlyRootFilesystem:   ptr(true),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "output", MountPath: OutputDir, ReadOnly: true}},
		}},
		Volumes: []corev1.Volume{
			{Name: "host-root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/", Type: ptr(corev1.HostPathDirectory)}}},
			{Name: "kubelet-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet", Type: ptr(corev1.HostPathDirectory)}}},
			{Name: "output", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: HostOutputDir, Type: ptr(corev1.HostPathDirectoryOrCreate)}}},
			{Name: "kubelet-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
						Path: "token", ExpirationSeconds: ptr(int64(TokenExpiration / time.Second))}},
					{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: RootCAConfigMap},
						Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
						// A cluster that does not publish it still runs the pod.
						Optional: ptr(true)}},
				},
			}}},
		},
	}
	if o.NodeName != "" {
		// A pod of its own, run once.
		spec.RestartPolicy = corev1.RestartPolicyNever
	}
	return spec
}

// Labels are those of every object of the manifests.
func Labels() map[string]string { return map[string]string{NameLabel: AppName} }

// Job is deploy/kubernetes/job.yaml for a node (the manifest has the
// placeholder NODE_NAME): one pod pinned to the node, held for an hour.
func Job(image, node string) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "nodesnap-" + node, Namespace: Namespace, Labels: Labels()},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr(int32(0)),
			ActiveDeadlineSeconds:   ptr(int64(4500)),
			TTLSecondsAfterFinished: ptr(int32(600)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: Labels()},
				Spec:       PodSpec(Options{Image: image, NodeName: node, HoldFor: time.Hour}),
			},
		},
	}
}

// DaemonSet is deploy/kubernetes/daemonset.yaml: a pod on every node, each
// collecting once and holding until deleted.
func DaemonSet(image string) *appsv1.DaemonSet {
	maxUnavailable := intstr.FromString("100%")
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "nodesnap", Namespace: Namespace, Labels: Labels()},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: Labels()},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: Labels()},
				Spec:       daemonSetPodSpec(image),
			},
		},
	}
}

// daemonSetPodSpec is PodSpec with `nodesnap watch` beside hold: the first
// bundle stays as a baseline for `nodesnap diff`, and the watcher collects
// again, into the same directory, when an incident starts.
func daemonSetPodSpec(image string) corev1.PodSpec {
	spec := PodSpec(Options{Image: image, TerminationGrace: ptr(int64(30))})
	collect := spec.InitContainers[0]
	watch := corev1.Container{
		Name:            WatchContainer,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{Binary},
		Args: []string{"watch", "--root=/host", "--output-dir=" + OutputDir, "--keep=3",
			"--listen=127.0.0.1:" + strconv.Itoa(WatchPort), "--",
			"--host-output-dir=" + HostOutputDir, "--timeout=2m", "--lock-wait=30s", kubeletPprofOff},
		// The collections it starts are collect's: the same environment.
		Env:             collect.Env,
		SecurityContext: collect.SecurityContext,
		LivenessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: "127.0.0.1", Path: "/healthz", Port: intstr.FromInt32(WatchPort)}},
			PeriodSeconds:    30,
			FailureThreshold: 4,
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
		// The kubelet token too: its collections read the kubelet's API
		// as collect's do. It is the least-privilege role's (no
		// nodes/proxy), and its collections leave pprof out: the one
		// long-running container holds nothing it does not use.
		VolumeMounts: collectMounts(),
	}
	spec.Containers = append([]corev1.Container{watch}, spec.Containers...)
	return spec
}

// KubeletRules is the least-privilege role of the kubelet collector: get
// on the Node subresources the kubelet authorizes its read endpoints as
// (KEP-2862, on by default from Kubernetes 1.33: /pods nodes/pods,
// /healthz nodes/healthz, /configz nodes/configz; /metrics nodes/metrics,
// /stats nodes/stats). No nodes/proxy: see PprofRules. node, when not
// empty, limits the rules to that node's kubelet (a fleet run's pod).
func KubeletRules(node string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"nodes/pods", "nodes/healthz", "nodes/configz", "nodes/metrics", "nodes/stats"},
		ResourceNames: names(node),
		Verbs:         []string{"get"},
	}}
}

// PprofRules is the opt-in for the kubelet's pprof dumps (goroutines,
// heap, CPU), which the kubelet authorizes as get nodes/proxy only. That
// permission is not read-only: the kubelet authorizes its WebSocket
// exec, attach and port-forward as get too, so its holder can run
// commands in every pod of the node (every node, without a node name).
func PprofRules(node string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"nodes/proxy"},
		ResourceNames: names(node),
		Verbs:         []string{"get"},
	}}
}

func names(node string) []string {
	if node == "" {
		return nil
	}
	return []string{node}
}

// ClusterRules are what the cluster collector needs: get and list on
// exactly the objects it reads of the node's view (the Node, the pods bound
// to it, their claims and volumes, events, VolumeAttachments, CSINodes,
// CSIDrivers, StorageClasses). No Secret, no ConfigMap, no write.
func ClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods", "persistentvolumeclaims", "persistentvolumes", "events"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattachments", "csinodes", "csidrivers", "storageclasses"}, Verbs: []string{"get", "list"}},
	}
}

// PodSecurityLabels let Pod Security Admission admit nodesnap's pods in a
// namespace (and only there).
func PodSecurityLabels() map[string]string {
	return map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
		"pod-security.kubernetes.io/warn":    "privileged",
		"pod-security.kubernetes.io/audit":   "privileged",
	}
}

// collectMounts are the volume mounts of a container that collects: the
// host's root read-only, the kubelet's directory with its mounts
// propagated, the output directory and the kubelet token. The collect
// container and the watch container share them.
func collectMounts() []corev1.VolumeMount {
	hostToContainer := corev1.MountPropagationHostToContainer
	return []corev1.VolumeMount{
		{Name: "host-root", MountPath: "/host", ReadOnly: true},
		{Name: "kubelet-dir", MountPath: "/host/var/lib/kubelet", ReadOnly: true, MountPropagation: &hostToContainer},
		{Name: "output", MountPath: OutputDir},
		{Name: "kubelet-token", MountPath: TokenDir, ReadOnly: true},
	}
}
